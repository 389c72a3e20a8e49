'use strict'
// The preview as one self-contained HTML page: inline CSS, no scripts or network resources.
// Every token is a focusable span carrying its id and label (data attributes); hovering or
// focusing it shows them in a tooltip drawn by CSS alone.

const { IGNORE, kindOf } = require('./view')
const { exampleHints, percent } = require('./render-text')

function escapeHtml(text) {
  return text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c])
}

// The page around the examples.
const PAGE_CSS = `
body { font: 14px/1.5 system-ui, sans-serif; margin: 2em; color: #222; background: #fafafa; }
h1 { font-size: 1.3em; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: 0 1em; }
dl.meta dt { font-weight: 600; }
.legend span.tok { margin-right: 1em; }
`

// One example's section and its tokens; the data report draws its previews with it too.
const EXAMPLE_CSS = `section.example { background: #fff; border: 1px solid #ddd; border-radius: 6px; padding: 1em; margin: 1em 0; }
section.example h2 { font-size: 1.05em; margin: 0 0 .3em; }
.summary { color: #555; margin-bottom: .6em; }
.warning { color: #a15c00; }
.hint { color: #0a4f8f; }
.tokens { font: 13px/1.9 ui-monospace, monospace; white-space: pre-wrap; word-break: break-all; }
.tok { border-radius: 3px; padding: 1px 0; position: relative; }
.tok:nth-child(even) { filter: brightness(0.93); }
.tok:hover, .tok:focus { outline: 2px solid #333; }
.tok[data-tip]:hover::after, .tok[data-tip]:focus::after {
  content: attr(data-tip); position: absolute; left: 0; top: 100%; z-index: 1; white-space: pre;
  font: 12px/1.4 system-ui, sans-serif; background: #222; color: #fff; padding: 2px 6px; border-radius: 3px;
}
.trained { background: #c8f0c8; color: #063; }
.masked { background: #eee; color: #999; }
.special { font-weight: 700; color: #a0a; }
.dropped { text-decoration: line-through; background: #fde0e0; color: #a66; }
.pad { background: #f4f4f4; color: #bbb; font-style: italic; }
.cut { color: #d00; font-weight: 700; }
`

function tokenSpan(token) {
  const classes = ['tok', kindOf(token)]
  if (token.special) classes.push('special')
  const label = token.label === IGNORE ? '-100' : String(token.label)
  const state = token.state === 'dropped' ? ', dropped by truncation' : ''
  const title = `id ${token.id} · label ${label}${state}`
  const text = token.text.replace(/\n/g, '↵\n')
  return (
    `<span class="${classes.join(' ')}" tabindex="0" data-id="${token.id}" data-label="${label}" ` +
    `data-tip="${escapeHtml(title)}">${escapeHtml(text)}</span>`
  )
}

/**
 * One example as a section with anchor `example-<index>`: its summary, warning and hints, then
 * every token. `note` is HTML placed under the summary (the report says there why it shows the
 * example).
 */
function exampleSection(view, note = '') {
  const spans = view.tokens.map((token, k) => {
    const cut = view.dropped > 0 && k === view.dropped ? '<span class="cut" title="truncation point">✂</span>' : ''
    return cut + tokenSpan(token)
  })
  if (view.padding > 0) {
    spans.push(
      `<span class="pad" data-id="${view.padId}" data-label="-100" data-count="${view.padding}" ` +
        `title="padding: id ${view.padId} · label -100 × ${view.padding}">&lt;pad ×${view.padding}&gt;</span>`,
    )
  }
  const truncated = view.truncated ? `yes, first ${view.dropped} dropped` : 'no'
  return `<section class="example" id="example-${view.index}" data-index="${view.index}">
<h2>Example ${view.index} <small>(batch ${view.batch})</small></h2>
<div class="summary">tokens <b>${view.length}</b> · trained <b>${view.trained}</b> of ${view.kept} kept (${percent(view.trained, view.kept)}) · truncated <b>${truncated}</b> · padding <b>${view.padding}</b> · warning <b>${view.warning ? 'prefix-mismatch' : 'none'}</b></div>
${note}${view.warning ? `<div class="warning">${escapeHtml(view.warning)}</div>\n` : ''}${exampleHints(view).map((h) => `<div class="hint">→ ${escapeHtml(h)}</div>\n`).join('')}<div class="tokens">${spans.join('')}</div>
</section>`
}

// What the token styles mean; shown above the examples.
const LEGEND = `<div class="legend" id="legend"><b>Legend:</b>
<span class="tok trained">trained (label = id)</span>
<span class="tok masked">masked (label -100)</span>
<span class="tok masked special">special token</span>
<span class="tok dropped">dropped by truncation</span>
<span class="cut">✂ truncation point</span>
<span class="pad">&lt;pad ×N&gt; padding</span>
<span>↵ newline · hover or focus (Tab) a token for its id and label</span>
</div>`

/** The whole page; `meta` is `[[name, value], ...]` shown above the examples. */
function renderHtml(views, { title, meta }) {
  const metaRows = meta.map(([k, v]) => `<dt>${escapeHtml(k)}</dt><dd>${escapeHtml(String(v))}</dd>`).join('\n')
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>${escapeHtml(title)}</title>
<style>${PAGE_CSS}${EXAMPLE_CSS}</style>
</head>
<body>
<h1>${escapeHtml(title)}</h1>
<dl class="meta">
${metaRows}
</dl>
${LEGEND}
${views.map((view) => exampleSection(view)).join('\n')}
</body>
</html>
`
}

module.exports = { renderHtml, escapeHtml, exampleSection, EXAMPLE_CSS, LEGEND }
