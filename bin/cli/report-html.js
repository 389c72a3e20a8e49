'use strict'
// The data report as one self-contained HTML page: what a dataset looks like to the trainer
// (lengths, what is trained, how it batches, what is wrong with it), read before GPU hours are
// spent. Everything is inline (CSS, SVG); the page runs no script and loads nothing, and its
// Content-Security-Policy keeps it so even if markup from the data ever slipped past escaping.

const path = require('node:path')
const { escapeHtml, exampleSection, EXAMPLE_CSS, LEGEND } = require('./render-html')
const { percent } = require('./render-text')
const { histogramChart, stackedBarChart, formatCount } = require('./svg-charts')

// Message kinds in the order a conversation shows them, with the words the page uses.
const KIND_NAMES = {
  system: 'system',
  user: 'user',
  assistant: 'assistant content',
  reasoning: 'reasoning',
  toolCalls: 'tool calls',
  toolResults: 'tool results',
  otherRoles: 'other roles',
  markup: 'template markup',
}

const SEVERITIES = ['error', 'warning', 'info']

/** A share in [0, 1] as a percentage with one decimal (0.087 → 8.7%). */
function share(value) {
  return percent(value, 1)
}

/** A size in bytes as people read it, with the exact count for comparing two files. */
function formatBytes(bytes) {
  const units = ['bytes', 'KiB', 'MiB', 'GiB', 'TiB']
  let value = bytes
  let unit = 0
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024
    unit++
  }
  const exact = `${formatCount(bytes)} bytes`
  return unit === 0 ? exact : `${value.toFixed(1)} ${units[unit]} (${exact})`
}

// Span masking settings: unset, they take these values under 'spans' and mean nothing otherwise.
const SPANS_DEFAULTS = { trainOnRoles: 'assistant', trainOnTurnEnd: 'true', reasoning: 'train' }

/** `specialTokenIds`: each override given, or that the tokenizer's own ids are used. */
function specialTokenIdsValue(ids) {
  const given = Object.entries(ids).filter(([, v]) => v !== null && v !== undefined && !(Array.isArray(v) && v.length === 0))
  if (given.length === 0) return 'from the tokenizer'
  return given.map(([name, v]) => `${name} ${Array.isArray(v) ? v.join(', ') : v}`).join(' · ')
}

/**
 * A setting's value as a reader says it, the same way in every report so two compare line by
 * line: lists joined with commas, renames (`columns`, `roles`) as `from → to`, and an unset
 * setting as the default it takes (`defaults`: the ones only the data and tokenizer decide, such
 * as `maskingStrategy`).
 */
function settingValue(value, name, settings = {}, defaults = {}) {
  if (value === undefined || value === null) {
    if (defaults[name] !== undefined) return `${defaults[name]} (default)`
    if (name === 'maskingStrategy') return 'reference for a tokenizer with ChatML tokens, else spans (default)'
    if (name in SPANS_DEFAULTS) {
      const masking = settings.maskingStrategy ?? defaults.maskingStrategy
      if (masking === 'spans') return `${SPANS_DEFAULTS[name]} (default)`
      if (masking != null) return `not used (${masking} masking)`
      return `${SPANS_DEFAULTS[name]} under spans masking (default)`
    }
    return '—'
  }
  if (typeof value === 'string') return value
  if (typeof value === 'number' || typeof value === 'boolean') return String(value)
  if (name === 'specialTokenIds') return specialTokenIdsValue(value)
  if (Array.isArray(value)) {
    if (value.length === 0) return 'none'
    if (value.every((v) => Array.isArray(v) && v.length === 2)) return value.map(([from, to]) => `${from} → ${to}`).join(', ')
    if (value.every((v) => typeof v !== 'object' || v === null)) return value.join(', ')
  }
  if (typeof value === 'object' && !Array.isArray(value)) {
    const entries = Object.entries(value)
    if (entries.length === 0) return 'none'
    if (entries.every(([, v]) => typeof v !== 'object' || v === null)) return entries.map(([k, v]) => `${k} → ${v}`).join(', ')
  }
  return JSON.stringify(value)
}

/** `n thing` or `n things`, the count with separators. */
function plural(n, word) {
  return `${formatCount(n)} ${word}${n === 1 ? '' : 's'}`
}

/** A definition list from `[[term, value], ...]`; values are text, escaped here. */
function definitionList(cls, pairs) {
  const items = pairs.map(([term, value]) => `<div><dt>${escapeHtml(term)}</dt><dd>${escapeHtml(String(value))}</dd></div>`)
  return `<dl class="${cls}">\n${items.join('\n')}\n</dl>`
}

/**
 * A chart in a figure: a caption and a legend of swatches (`[[cls, words], ...]`) above it. The
 * legend is HTML, not SVG, so it stays readable and wraps on a phone.
 */
function figure(chart, caption, legend) {
  const swatches = legend.map(([cls, words]) => `<span class="key"><span class="swatch ${cls}"></span>${escapeHtml(words)}</span>`)
  return `<figure>
<figcaption><b>${escapeHtml(caption)}</b> <span class="keys">${swatches.join(' ')}</span></figcaption>
${chart}
</figure>`
}

/**
 * A table from a header row and body rows of cells (HTML); `rowClass` may mark a row. A table of
 * class `cards` becomes one card per row on a narrow screen, each cell under its column's name
 * (`data-label`), so that long text wraps by words across the width rather than in a column.
 */
function table(head, rows, rowClass = () => '', tableClass = '') {
  const body = rows.map((cells, k) => {
    const cls = rowClass(k)
    const cell = tableClass === 'cards' ? (c, i) => `<td data-label="${escapeHtml(head[i])}">${c}</td>` : (c) => `<td>${c}</td>`
    return `<tr${cls ? ` class="${cls}"` : ''}>${cells.map(cell).join('')}</tr>`
  })
  return `<div class="scroll"><table${tableClass ? ` class="${tableClass}"` : ''}>
<thead><tr>${head.map((h) => `<th scope="col">${escapeHtml(h)}</th>`).join('')}</tr></thead>
<tbody>
${body.join('\n')}
</tbody>
</table></div>`
}

/** The page title: the one given, else named after the data file or files. */
function titleOf(report) {
  if (report.title) return report.title
  if (report.file) return `Data report: ${path.basename(report.file.path)}`
  const sources = report.summary?.sources
  return sources ? `Data report: ${sources.map((s) => path.basename(s.path)).join(' + ')}` : 'Data report'
}

/** Where the data came from: one file with its size and hash, or a mix's files counted. */
function sourceMeta(file, sources) {
  if (file) return [['data file', file.path], ['size', formatBytes(file.bytes)], ['BLAKE3', file.blake3], ['file format', file.fileFormat]]
  if (sources) return [['data files', `${sources.length}, mixed by weight (see Sources)`]]
  return [['data file', 'none (examples given in memory)']]
}

/**
 * Where the data came from and every choice that shaped its rows: file, hash, tokenizer,
 * template and settings, laid out the same way in every report so two can be compared.
 */
function headerSection(report) {
  const { file, tokenizer, summary } = report
  const template = summary.template.family
    ? `${summary.template.family} (fingerprint ${summary.template.fingerprint})`
    : `unknown family, fingerprint ${summary.template.fingerprint}`
  const meta = [
    ...sourceMeta(file, summary.sources),
    ['tokenizer', tokenizer.description.includes(tokenizer.path) ? tokenizer.description : `${tokenizer.description} · ${tokenizer.path}`],
    ['chat template', template],
    ['record format', summary.format],
    ['examples', `${formatCount(summary.examples)} (${formatCount(summary.rows)} take part, ${formatCount(summary.examples - summary.rows)} dropped)`],
  ]
  const settings = Object.entries(summary.settings).map(([name, value]) => [name, settingValue(value, name, summary.settings, report.defaults)])
  return `<header>
<h1>${escapeHtml(titleOf(report))}</h1>
${definitionList('meta', meta)}
<h2 class="minor">Settings</h2>
${settings.length ? definitionList('settings', settings) : '<p>No settings recorded.</p>'}
</header>`
}

/** The length histogram's bins and where the row limit falls, as a chart. */
function lengthChart(lengths) {
  const bins = lengths.histogram
  const limit = lengths.maxSeqLength
  // The last bin may hold a long tail (from the 99th percentile to the longest example): it is
  // drawn as wide as the others, and its tooltip and the text alternative give its range.
  const width = bins.length ? bins[0].to - bins[0].from + 1 : 1
  const drawnTo = (b) => Math.min(b.to + 1, b.from + width)
  const end = bins.length ? drawnTo(bins[bins.length - 1]) : limit + 1
  // A limit far past the longest example would squeeze every bar to the left; it is pinned to
  // the right edge instead, and its label says so.
  const beyond = limit + 1 > 2 * end
  const hi = beyond ? end : Math.max(end, limit + 1)
  const label = beyond ? `max seq length ${formatCount(limit)} →` : `max seq length ${formatCount(limit)}`
  const counts = bins.map((b) => `${formatCount(b.from)}–${formatCount(b.to)}: ${formatCount(b.count)}`).join('; ')
  return histogramChart({
    id: 'chart-lengths',
    title: 'Example lengths in tokens',
    desc: `Histogram of ${plural(bins.reduce((s, b) => s + b.count, 0), 'example')} by length in tokens, ${bins.length} bins (tokens: examples): ${counts}. ` +
      `A vertical line marks max seq length ${formatCount(limit)}; ${plural(lengths.truncated, 'example')} (${share(lengths.truncatedShare)}) are longer and truncated.`,
    bins: bins.map((b) => ({
      x0: b.from,
      x1: drawnTo(b),
      count: b.count,
      cls: b.from > limit ? 'bar over' : 'bar',
      tip: `${formatCount(b.from)}–${formatCount(b.to)} tokens: ${plural(b.count, 'example')}`,
    })),
    domain: [Math.min(0, bins.length ? bins[0].from : 0), hi],
    xTitle: 'tokens per example',
    yTitle: 'examples',
    marker: { at: Math.min(limit + 1, hi), label },
    shadeFrom: limit + 1,
  })
}

/** Example lengths against the row limit: how many examples lose tokens, and how many. */
function lengthsSection(summary) {
  const { tokens, lengths } = summary
  const limit = formatCount(lengths.maxSeqLength)
  const stats = [
    ['shortest', formatCount(tokens.min)], ['median', formatCount(tokens.median)], ['95th percentile', formatCount(tokens.p95)],
    ['longest', formatCount(tokens.max)], ['mean', tokens.mean.toLocaleString('en-US', { maximumFractionDigits: 1 })],
    ['all tokens', formatCount(tokens.total)], ['kept', formatCount(tokens.kept)], ['trained', `${formatCount(tokens.trained)} (${percent(tokens.trained, tokens.kept)})`],
  ]
  const dropped = lengths.droppedTooLong > 0 ? ` ${plural(lengths.droppedTooLong, 'example')} too long to keep are dropped.` : ''
  return `<section id="lengths">
<h2>Lengths</h2>
${definitionList('stats', stats)}
${figure(lengthChart(lengths), 'Examples by length', [['bar', 'examples'], ['over', `all longer than ${limit}: truncated`], ['shade', `past max seq length ${limit}`]])}
<p class="verdict"><b>${share(lengths.truncatedShare)}</b> of examples are truncated: ${plural(lengths.truncated, 'example')} longer than max seq length ${limit} lose ${plural(lengths.tokensCut, 'token')} in all.${dropped}</p>
</section>`
}

/** The per-example trained share as a histogram over 0–100 %. */
function shareChart(trainedShare) {
  const bins = trainedShare.histogram
  const counts = bins.map((b) => `${share(b.from)}–${share(b.to)}: ${formatCount(b.count)}`).join('; ')
  return histogramChart({
    id: 'chart-trained-share',
    title: 'Share of each example’s kept tokens that are trained',
    desc: `Histogram of examples by the share of their kept tokens that carry loss, 10 bins (share: examples): ${counts}. ${plural(trainedShare.noneTrained, 'example')} have no trained token.`,
    bins: bins.map((b) => ({ x0: b.from, x1: b.to, count: b.count, cls: 'bar trained', tip: `${share(b.from)}–${share(b.to)} trained: ${plural(b.count, 'example')}` })),
    domain: [0, 1],
    xTicks: [0, 0.2, 0.4, 0.6, 0.8, 1],
    xFormat: (v) => `${Math.round(v * 100)}%`,
    xTitle: 'trained share of kept tokens',
    yTitle: 'examples',
  })
}

/** The words for a message kind; a kind this page does not know yet goes by its own name. */
function kindName(kind) {
  return KIND_NAMES[kind] ?? kind
}

/** Tokens of each message kind, trained and not, as stacked bars; `from` says which examples were counted. */
function kindsChart(kinds, from) {
  const rank = (kind) => (kind in KIND_NAMES ? Object.keys(KIND_NAMES).indexOf(kind) : Infinity)
  const parts = [...kinds.parts].sort((a, b) => rank(a.kind) - rank(b.kind))
  const said = parts.map((p) => `${kindName(p.kind)} ${plural(p.tokens, 'token')}, ${percent(p.trained, p.tokens)} trained`).join('; ')
  return stackedBarChart({
    id: 'chart-kinds',
    title: 'Trained and untrained tokens by message kind',
    desc: `Tokens by message kind, ${from}: ${said}.`,
    rows: parts.map((p) => ({
      label: kindName(p.kind),
      parts: [
        { value: p.trained, cls: 'seg trained', tip: `${kindName(p.kind)}: ${plural(p.trained, 'trained token')}` },
        { value: p.tokens - p.trained, cls: 'seg untrained', tip: `${kindName(p.kind)}: ${plural(p.tokens - p.trained, 'untrained token')}` },
      ],
      note: `${percent(p.trained, p.tokens)} trained`,
    })),
    xTitle: 'tokens',
  })
}

/** Which part of the data carries loss: per example, and per message kind where known. */
function trainedSection(summary) {
  const { trainedShare, kinds } = summary
  const perExample = figure(shareChart(trainedShare), 'Per example', [['trained', `examples; ${formatCount(trainedShare.noneTrained)} with no trained token`]])
  let perKind
  if (!kinds) {
    perKind = '<p class="unavailable">The breakdown by message kind is unavailable for this data (its template’s spans could not be attributed to messages).</p>'
  } else {
    const sampled = kinds.sampled < summary.examples ? `from ${plural(kinds.sampled, 'sampled example')}` : `from all ${plural(kinds.sampled, 'example')}`
    const attributed = kinds.attributed < kinds.sampled ? ` (${formatCount(kinds.attributed)} of them attributed)` : ''
    perKind = figure(kindsChart(kinds, sampled), `By message kind, ${sampled}${attributed}`, [['trained', 'trained'], ['untrained', 'not trained']])
  }
  return `<section id="trained">
<h2>Trained share</h2>
<p>${formatCount(summary.tokens.trained)} of ${formatCount(summary.tokens.kept)} kept tokens are trained (<b>${percent(summary.tokens.trained, summary.tokens.kept)}</b>).</p>
<div class="pair">
${perExample}
${perKind}
</div>
</section>`
}

/** A strategy's name with the chosen one marked, as the chart and the table show it. */
function strategyName(strategy, chosen) {
  return strategy.batching === chosen ? `${strategy.batching} ★ chosen` : strategy.batching
}

/** Tokens computed against tokens used, per batching strategy, as stacked bars. */
function batchingChart(batching) {
  const said = batching.strategies.map((s) => `${strategyName(s, batching.chosen)}: ${formatCount(s.tokens)} used of ${formatCount(s.computedTokens)} computed, ${share(s.paddingShare)} padding`).join('; ')
  return stackedBarChart({
    id: 'chart-batching',
    title: 'Tokens computed and tokens used per batching strategy',
    desc: `Tokens the trainer computes per epoch, split into real tokens and padding, for each batching strategy: ${said}.`,
    rows: batching.strategies.map((s) => ({
      label: strategyName(s, batching.chosen),
      cls: s.batching === batching.chosen ? 'chosen' : '',
      parts: [
        { value: s.tokens, cls: 'seg used', tip: `${s.batching}: ${plural(s.tokens, 'token')} used` },
        { value: s.computedTokens - s.tokens, cls: 'seg padding', tip: `${s.batching}: ${plural(s.computedTokens - s.tokens, 'padding token')}` },
      ],
      note: `${share(s.paddingShare)} padding`,
    })),
    xTitle: 'tokens computed per epoch',
  })
}

/** What each batching strategy would cost, the chosen one marked, as a chart and a table. */
function batchingSection(batching) {
  const rows = batching.strategies.map((s) => [
    escapeHtml(strategyName(s, batching.chosen)), formatCount(s.batches), formatCount(s.rows), formatCount(s.tokens), formatCount(s.computedTokens), share(s.paddingShare),
  ])
  const chosen = (k) => (batching.strategies[k].batching === batching.chosen ? 'chosen' : '')
  return `<section id="batching">
<h2>Batching</h2>
<p>Batch size ${formatCount(batching.batchSize)} · max batch tokens ${formatCount(batching.maxBatchTokens)} · pad to a multiple of ${formatCount(batching.padToMultipleOf)} · chosen: <b>${escapeHtml(batching.chosen)}</b></p>
${figure(batchingChart(batching), 'Tokens per epoch by batching strategy', [['used', 'tokens used'], ['padding', 'padding']])}
${table(['strategy', 'batches', 'rows', 'tokens used', 'tokens computed', 'padding'], rows, chosen)}
</section>`
}

/**
 * The files of a mix: each one's weight, examples, the rows that take part and their appearances
 * per epoch, and the tokens trained (each row once), with the size and hash that identify it.
 */
function sourcesSection(sources) {
  if (!sources) return ''
  const rows = sources.map((s) => [
    `<span title="${escapeHtml(`${formatBytes(s.bytes)} · BLAKE3 ${s.blake3} · ${s.fileFormat}`)}">${escapeHtml(s.path)}</span>`,
    escapeHtml(String(s.weight)),
    escapeHtml(s.format),
    formatCount(s.examples),
    formatCount(s.rows),
    formatCount(s.perEpoch),
    formatCount(s.trainedTokens),
  ])
  const perEpoch = sources.reduce((n, s) => n + s.perEpoch, 0)
  return `<section id="sources">
<h2>Sources</h2>
<p>${plural(sources.length, 'file')} mixed by weight: the integer part of a weight repeats every row of its file per epoch, the fraction draws that share of them anew each epoch; ${plural(perEpoch, 'row')} per epoch in all.</p>
${table(['path', 'weight', 'format', 'examples', 'rows', 'per epoch', 'trained tokens'], rows, () => '', 'cards')}
</section>
`
}

/** An example a finding names, linked to its preview when the page has one. */
function exampleLink(ref, previewed) {
  const at = ref.line !== undefined ? `line ${formatCount(ref.line)}` : ref.row !== undefined ? `row ${formatCount(ref.row)}` : ''
  // In a mix the line or row is of the file the example came from, so the file is named.
  const file = ref.file ? escapeHtml(path.basename(ref.file)) : ''
  const where = file && at ? ` (${file} ${at})` : file || at ? ` (${file || at})` : ''
  const name = `example ${ref.example}`
  return previewed.has(ref.example) ? `<a href="#example-${ref.example}">${name}</a>${where}` : `${name}${where}`
}

/** Every finding with its first examples, each linking to its preview further down. */
function findingsSection(findings, previewed) {
  if (findings.length === 0) {
    return '<section id="findings">\n<h2>Findings</h2>\n<p class="none">No findings.</p>\n</section>'
  }
  const rows = findings.map((f) => {
    const more = f.count > f.examples.length ? ` and ${formatCount(f.count - f.examples.length)} more` : ''
    const severity = SEVERITIES.includes(f.severity) ? f.severity : 'info'
    return [
      `<code>${escapeHtml(f.code)}</code>`,
      `<span class="sev ${severity}">${escapeHtml(f.severity)}</span>`,
      formatCount(f.count),
      escapeHtml(f.description),
      f.examples.map((ref) => exampleLink(ref, previewed)).join(', ') + more,
    ]
  })
  const tally = SEVERITIES.map((s) => [s, findings.filter((f) => f.severity === s).length]).filter(([, n]) => n > 0)
  return `<section id="findings">
<h2>Findings</h2>
<p>${tally.map(([s, n]) => plural(n, s === 'info' ? 'info finding' : s)).join(' · ')}</p>
${table(['code', 'severity', 'count', 'description', 'first examples'], rows, () => '', 'cards')}
</section>`
}

/** The previews of the examples the findings name, tokens drawn as `preview --html` draws them. */
function previewsSection(previews, findings) {
  if (previews.length === 0) return ''
  const sections = previews.map((view) => {
    const codes = findings.filter((f) => f.examples.some((ref) => ref.example === view.index)).map((f) => `<code>${escapeHtml(f.code)}</code>`)
    const note = `<p class="why">${codes.length ? `Shown for ${codes.join(', ')}. ` : ''}<a href="#findings">Back to findings ↑</a></p>\n`
    return exampleSection(view, note)
  })
  return `<section id="examples">
<h2>Examples</h2>
${LEGEND}
${sections.join('\n')}
</section>`
}

// Light colours by default, dark ones when the reader's system asks for them; charts take theirs
// from these variables through classes, and their text from currentColor.
const CSS = `
:root { color-scheme: light dark; --bg: #f7f7f8; --fg: #1c1d21; --muted: #5b5e66; --panel: #fff; --border: #d9dade;
  --link: #0b5cad; --bar: #4f7fbf; --over: #d0573a; --shade: rgba(208, 87, 58, .13); --trained: #2f8f5b; --untrained: #b8bcc6;
  --used: #4f7fbf; --padding: #e0a33a; --grid: rgba(120, 120, 130, .28); --error: #b3261e; --warning: #9a5b00; --info: #0b5cad; }
@media (prefers-color-scheme: dark) {
  :root { --bg: #17181b; --fg: #e4e5e9; --muted: #a3a6ae; --panel: #212226; --border: #3a3c42; --link: #7fb4ff; --bar: #6f9de0;
    --over: #f08a6c; --shade: rgba(240, 138, 108, .16); --trained: #4cc384; --untrained: #5d616b; --used: #6f9de0; --padding: #e8b255;
    --grid: rgba(180, 180, 190, .22); --error: #ff8a80; --warning: #f2b64f; --info: #7fb4ff; }
  section.example { background: var(--panel); border-color: var(--border); }
  .tok.trained { background: #1e4d33; color: #c4f2d4; }
  .tok.masked { background: #2c2e33; color: #9a9ea8; }
  .tok.dropped { background: #4d2426; color: #f0a8a8; }
  .tok.special { color: #e69ae6; }
  .pad { background: #26272b; color: #7d808a; }
  .summary { color: var(--muted); }
  .warning { color: var(--warning); }
  .hint { color: var(--info); }
  .tok:hover, .tok:focus { outline-color: var(--fg); }
}
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg); font: 15px/1.5 system-ui, sans-serif; }
main { max-width: 1060px; margin: 0 auto; padding: 1em 16px 3em; }
a { color: var(--link); }
h1 { font-size: 1.45em; margin: .2em 0 .6em; overflow-wrap: anywhere; }
h2 { font-size: 1.2em; margin: 1.8em 0 .5em; border-bottom: 1px solid var(--border); padding-bottom: .2em; }
h2.minor { font-size: 1em; border: 0; margin: 1em 0 .3em; }
nav { margin: 1em 0; display: flex; flex-wrap: wrap; gap: .3em 1.2em; }
dl { margin: 0; }
dl.meta { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: .15em 1em; }
dl.meta div { display: contents; }
dl.meta dt, dl.stats dt { font-weight: 600; }
dd { margin: 0; overflow-wrap: anywhere; }
dl.settings { display: grid; grid-template-columns: repeat(auto-fill, minmax(min(100%, 15em), 1fr)); gap: .2em 1.2em; font-size: .93em; }
dl.settings div { display: flex; gap: .5em; justify-content: space-between; border-bottom: 1px dotted var(--border); }
dl.settings dt { color: var(--muted); }
dl.settings dd { font-family: ui-monospace, monospace; text-align: right; }
dl.stats { display: grid; grid-template-columns: repeat(auto-fill, minmax(min(100%, 8.5em), 1fr)); gap: .3em 1em; margin-bottom: 1em; }
dl.stats div { display: block; background: var(--panel); border: 1px solid var(--border); border-radius: 6px; padding: .3em .6em; }
dl.stats dt { font-weight: 400; color: var(--muted); font-size: .85em; }
dl.stats dd { font-size: 1.1em; font-weight: 600; }
figure { margin: .8em 0; max-width: 640px; background: var(--panel); border: 1px solid var(--border); border-radius: 6px; padding: .6em; min-width: 0; }
figcaption { color: var(--muted); font-size: .9em; margin-bottom: .4em; }
figcaption b { color: var(--fg); margin-right: .6em; }
.pair { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(100%, 420px), 1fr)); gap: 0 1em; }
.pair figure { max-width: none; }
svg.chart { display: block; width: 100%; height: auto; overflow: visible; }
svg.chart .tick { fill: var(--muted); }
svg.chart .axis-title, svg.chart .row-label { fill: currentColor; }
svg.chart .row-note { fill: var(--muted); }
svg.chart .chosen .row-label, svg.chart .chosen .row-note { font-weight: 700; fill: currentColor; }
svg.chart .grid { stroke: var(--grid); }
svg.chart .axis { stroke: var(--muted); }
svg.chart .marker line { stroke: var(--over); stroke-width: 2; stroke-dasharray: 6 3; }
svg.chart .marker-label { fill: var(--over); font-weight: 700; }
.bar, .swatch.bar { fill: var(--bar); background: var(--bar); }
.bar.over, .swatch.over { fill: var(--over); background: var(--over); }
.shade, .swatch.shade { fill: var(--shade); background: var(--shade); }
.bar.trained, .seg.trained, .swatch.trained { fill: var(--trained); background: var(--trained); }
.seg.untrained, .swatch.untrained { fill: var(--untrained); background: var(--untrained); }
.seg.used, .swatch.used { fill: var(--used); background: var(--used); }
.seg.padding, .swatch.padding { fill: var(--padding); background: var(--padding); }
.keys { display: inline-flex; flex-wrap: wrap; gap: .2em 1em; margin-right: .8em; }
.swatch { display: inline-block; width: .9em; height: .9em; border-radius: 2px; vertical-align: -.1em; margin-right: .3em; border: 1px solid var(--border); }
.verdict { font-size: 1.02em; }
.unavailable, .none { color: var(--muted); font-style: italic; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; width: 100%; background: var(--panel); font-size: .93em; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid var(--border); padding: .35em .6em; text-align: left; vertical-align: top; }
tr.chosen td { font-weight: 700; }
.sev { font-weight: 700; }
.sev.error { color: var(--error); }
.sev.warning { color: var(--warning); }
.sev.info { color: var(--info); }
.legend { line-height: 2; }
.legend span.tok { margin-right: 1em; }
.why { margin: 0 0 .6em; }
#examples .tokens { max-height: 24em; overflow: auto; border-top: 1px solid var(--border); padding-top: .3em; }
@media (max-width: 600px) {
  main { padding: .6em 10px 2em; }
  figure { padding: .4em .2em; }
  table.cards, table.cards tbody, table.cards tr, table.cards td { display: block; width: 100%; }
  table.cards thead { display: none; }
  table.cards tr { border: 1px solid var(--border); border-radius: 6px; margin-bottom: .6em; padding: .3em .6em; }
  table.cards td { border: 0; padding: .15em 0; overflow-wrap: anywhere; }
  table.cards td::before { content: attr(data-label) ": "; color: var(--muted); font-size: .9em; }
}
`

/** The whole report page for a `report --json` object. */
function renderReport(report) {
  const { summary } = report
  const previewed = new Set(report.previews.map((view) => view.index))
  const title = titleOf(report)
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>${escapeHtml(title)}</title>
<style>${EXAMPLE_CSS}${CSS}</style>
</head>
<body>
<main>
${headerSection(report)}
<nav aria-label="Sections">${summary.sources ? '<a href="#sources">Sources</a>' : ''}<a href="#lengths">Lengths</a><a href="#trained">Trained share</a><a href="#batching">Batching</a><a href="#findings">Findings</a>${report.previews.length ? '<a href="#examples">Examples</a>' : ''}</nav>
${sourcesSection(summary.sources)}${lengthsSection(summary)}
${trainedSection(summary)}
${batchingSection(summary.batching)}
${findingsSection(summary.findings, previewed)}
${previewsSection(report.previews, summary.findings)}
</main>
</body>
</html>
`
}

module.exports = { renderReport, formatBytes, settingValue }
