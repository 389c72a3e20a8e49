'use strict'
// The model behind every preview (terminal and HTML): for each chosen example, every token of
// its full row with its label, whether truncation drops it, and the padding its batch adds.

const { pieceDescriber } = require('./pieces')

const IGNORE = -100

/** Runs `fn` with console.warn muted: the CLI reports prefix-mismatch warnings itself. */
async function withoutConsoleWarn(fn) {
  const warn = console.warn
  console.warn = () => {}
  try {
    return await fn()
  } finally {
    console.warn = warn
  }
}

/**
 * One example as a list of tokens. `row` is the example's row of a real collated batch
 * (truncated, padded), `full` its untruncated `tokenizeExample` result.
 */
function exampleView(index, full, row, maxSeqLength, describe) {
  const length = full.inputIds.length
  const dropped = Math.max(0, length - maxSeqLength)
  const kept = length - dropped
  const tokens = []
  for (let p = 0; p < length; p++) {
    const id = full.inputIds[p]
    const { text, special } = describe(id)
    if (p < dropped) {
      tokens.push({ id, label: full.labels[p], text, special, state: 'dropped' })
    } else {
      // The collated row is what the trainer receives; its labels are the truth after truncation.
      const label = row.labels[p - dropped]
      if (row.inputIds[p - dropped] !== id) {
        throw new Error(`example ${index}: collated row differs from tokenizeExample at position ${p}`)
      }
      tokens.push({ id, label, text, special, state: 'kept' })
    }
  }
  const padding = row.inputIds.length - kept
  const trained = tokens.filter((t) => t.state === 'kept' && t.label !== IGNORE).length
  return {
    index,
    length,
    kept,
    dropped,
    padding,
    padId: padding > 0 ? row.inputIds[kept] : null,
    trained,
    truncated: dropped > 0,
    warning: full.warning ?? null,
    tokens,
  }
}

/**
 * Views of the examples at `indices`, collated `batchSize` at a time in the given order so the
 * padding shown is the padding those rows would get together. Examples are collated by index,
 * so an example a mix's epoch leaves out (a weight's fraction draws) is shown too.
 */
async function buildViews(ds, tokenizer, indices, { maxSeqLength, batchSize }) {
  const describe = pieceDescriber(tokenizer)
  const views = []
  for (let start = 0; start < indices.length; start += batchSize) {
    const group = indices.slice(start, start + batchSize)
    const batch = await withoutConsoleWarn(() => ds._collateExamples(group))
    const [, width] = batch.shape
    for (let r = 0; r < group.length; r++) {
      const full = await ds.tokenizeExample(group[r])
      const row = {
        inputIds: batch.inputIds.subarray(r * width, (r + 1) * width),
        labels: batch.labels.subarray(r * width, (r + 1) * width),
      }
      views.push({ ...exampleView(group[r], full, row, maxSeqLength, describe), batch: start / batchSize })
    }
  }
  return views
}

/**
 * The first `count` rows of the epoch's batch plan (`batches()` under the dataset's batching),
 * each with the views of the examples it holds, in row order. A view's row is its slice of the
 * batch row; the last one also holds the row's padding.
 */
async function buildPlanRows(ds, tokenizer, { maxSeqLength, batchSize, count }) {
  const describe = pieceDescriber(tokenizer)
  const rows = []
  await withoutConsoleWarn(async () => {
    let b = 0
    for await (const batch of ds.batches(batchSize)) {
      const [n, width] = batch.shape
      for (let r = 0; r < n && rows.length < count; r++) {
        const examples = []
        let at = r * width
        const end = (r + 1) * width
        while (at < end) {
          const example = batch.exampleIds ? batch.exampleIds[at] : examples.length === 0 ? batch.indices[r] : -1
          if (example < 0) break
          const full = await ds.tokenizeExample(example)
          const kept = Math.min(full.inputIds.length, maxSeqLength)
          examples.push({ example, full, from: at, to: at + kept })
          at += kept
        }
        const views = examples.map((e, k) => {
          const to = k === examples.length - 1 ? end : e.to
          const row = { inputIds: batch.inputIds.subarray(e.from, to), labels: batch.labels.subarray(e.from, to) }
          return { ...exampleView(e.example, e.full, row, maxSeqLength, describe), batch: b }
        })
        const tokens = views.reduce((sum, v) => sum + v.kept, 0)
        rows.push({ batch: b, row: r, width, tokens, padding: width - tokens, packed: batch.exampleIds != null, examples: views })
      }
      if (rows.length >= count) break
      b++
    }
  })
  return rows
}

/** How a token is shown: cut by truncation, or in the batch with or without loss. */
function kindOf(token) {
  if (token.state === 'dropped') return 'dropped'
  return token.label === IGNORE ? 'masked' : 'trained'
}

module.exports = { buildViews, buildPlanRows, kindOf, IGNORE }
