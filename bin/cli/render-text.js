'use strict'
// Terminal rendering of preview views: ANSI colours on a TTY, plain markers otherwise.

const { kindOf } = require('./view')

const ESC = '\x1b['
const RESET = `${ESC}0m`

// Two shades per kind, alternating token by token, so token boundaries stay visible without
// separator characters cluttering the text.
const STYLE = {
  trained: [`${ESC}1;38;5;231;48;5;22m`, `${ESC}1;38;5;231;48;5;28m`],
  masked: [`${ESC}38;5;246;48;5;235m`, `${ESC}38;5;246;48;5;238m`],
  dropped: [`${ESC}9;38;5;131m`, `${ESC}9;38;5;95m`],
  special: `${ESC}1;38;5;213m`,
  pad: `${ESC}3;38;5;240m`,
  cut: `${ESC}1;38;5;196m`,
}

const PLAIN = {
  trainedOpen: '[[',
  trainedClose: ']]',
  droppedOpen: '~~',
  droppedClose: '~~',
  specialOpen: '⟦',
  specialClose: '⟧',
  // Not '|': it would make `<`, `tools`, `>` read as the special token `<|tools|>`.
  boundary: '·',
  cut: '✂',
}

function visible(text) {
  return text.replace(/\t/g, '→').replace(/\r/g, '␍').replace(/\n/g, '↵\n')
}

function percent(part, whole) {
  return whole === 0 ? '0.0%' : `${((100 * part) / whole).toFixed(1)}%`
}

function legend(color) {
  if (color) {
    return [
      'legend:',
      `${STYLE.trained[0]}trained${RESET}${STYLE.trained[1]} tokens${RESET} (label = token id)`,
      `${STYLE.masked[0]}masked${RESET}${STYLE.masked[1]} tokens${RESET} (label -100)`,
      `${STYLE.special}special${RESET} token`,
      `${STYLE.dropped[0]}dropped${RESET} by truncation`,
      `${STYLE.cut}✂${RESET} truncation point`,
      `${STYLE.pad}<pad ×N>${RESET} padding`,
      '↵ newline',
    ].join('  ')
  }
  return [
    'legend:',
    '[[…]] trained (label = token id);',
    'unmarked: masked (label -100);',
    '⟦…⟧ special token;',
    '· token boundary;',
    '↵ newline;',
    '~~…~~ dropped by truncation;',
    '✂ truncation point;',
    '<pad ×N> padding',
  ].join(' ')
}

function summaryLine(view) {
  return [
    `example ${view.index} (batch ${view.batch})`,
    `tokens ${view.length}`,
    `trained ${view.trained} of ${view.kept} kept (${percent(view.trained, view.kept)})`,
    `truncated ${view.truncated ? `yes, first ${view.dropped} dropped` : 'no'}`,
    `padding ${view.padding}`,
    `warning ${view.warning ? 'prefix-mismatch' : 'none'}`,
  ].join(' · ')
}

function plainBody(view) {
  let out = ''
  let current = null
  let atLineStart = true
  const close = () => {
    if (current === 'trained') out += PLAIN.trainedClose
    if (current === 'dropped') out += PLAIN.droppedClose
  }
  view.tokens.forEach((token, k) => {
    const kind = kindOf(token)
    if (kind !== current) {
      close()
      if (k === view.dropped && view.dropped > 0) out += `${PLAIN.cut} `
      if (kind === 'trained') out += PLAIN.trainedOpen
      if (kind === 'dropped') out += PLAIN.droppedOpen
      current = kind
    } else if (!atLineStart) {
      out += PLAIN.boundary
    }
    const text = visible(token.text)
    out += token.special ? PLAIN.specialOpen + text + PLAIN.specialClose : text
    atLineStart = text.endsWith('\n')
  })
  close()
  if (view.padding > 0) out += ` <pad ×${view.padding}>`
  return out
}

function colorBody(view) {
  let out = ''
  view.tokens.forEach((token, k) => {
    if (token.state === 'kept' && view.dropped > 0 && k === view.dropped) out += `${STYLE.cut}✂${RESET}`
    const style = STYLE[kindOf(token)][k % 2] + (token.special ? STYLE.special : '')
    // Reset before each newline so a background colour never runs to the edge of the terminal.
    const parts = visible(token.text).split('\n')
    out += parts.map((p) => (p === '' ? '' : style + p + RESET)).join('\n')
  })
  if (view.padding > 0) out += ` ${STYLE.pad}<pad ×${view.padding}>${RESET}`
  return out
}

/** One example: its summary line, its warning if any, then its tokens, indented. */
/** What to do about the problems one example shows: the options that change them. */
function exampleHints(view) {
  const hints = []
  if (view.truncated) hints.push('truncated: raise --max-seq-length, or --truncation turns to drop whole oldest turns')
  if (view.trained === 0) hints.push('no trained token: nothing here carries loss; --drop-untrainable skips such rows')
  return hints
}

function renderExample(view, { color }) {
  const body = (color ? colorBody(view) : plainBody(view))
    .split('\n')
    .map((line) => `  ${line}`)
    .join('\n')
  const lines = [summaryLine(view)]
  if (view.warning) lines.push(`  warning: ${view.warning}`)
  for (const hint of exampleHints(view)) lines.push(`  → ${hint}`)
  lines.push(body)
  return lines.join('\n')
}

/**
 * One row of the batch plan: a header, then each example it holds; in a packed row a rule marks
 * where the next example starts (position ids restart at 0 and its first label is -100).
 */
function renderPlanRow(row, { color }) {
  const what = row.packed ? `packed row ${row.row} of batch ${row.batch}` : `row ${row.row} of batch ${row.batch}`
  const examples = row.examples.map((v) => v.index).join(', ')
  const lines = [
    `${what}: ${row.examples.length} example${row.examples.length === 1 ? '' : 's'} (${examples}) · ${row.tokens} tokens · padding ${row.padding} of ${row.width}`,
  ]
  row.examples.forEach((view, k) => {
    if (row.packed) lines.push(`  ── example ${view.index}${k === 0 ? '' : ' starts here'}: position ids 0–${view.kept - 1}, first label masked ──`)
    lines.push(
      renderExample(view, { color })
        .split('\n')
        .map((line) => `  ${line}`)
        .join('\n'),
    )
  })
  return lines.join('\n')
}

module.exports = { renderExample, exampleHints, renderPlanRow, legend, percent }
