#!/usr/bin/env node
'use strict'
// The renderers table: for Qwen3 (a direct renderer) and the families whose templates render
// through their render plan (Qwen3.5, the family MLX Node trains, and GPT-OSS), rendered as
// transformers renders and as MLX Node's tokenizer renders:
// - the renderer in use;
// - render MB/s on one core: renderChatTemplate over the conversation file, in a child process
//   with RAYON_NUM_THREADS=1, median of rounds, less the same calls through a template that
//   prints nothing (what converting the messages from JS costs);
// - epoch 1 / encodeBatch on all cores, for a prompt-completion and a conversation file: per
//   round encodeBatch, the epoch (loadSFTDataset with completionOnly and every batches(8)),
//   encodeBatch again; each epoch's throughput against the geometric mean of the two encodeBatch
//   runs around it; the median over the rounds. encodeBatch encodes the same examples' full
//   renders.
// Then the TRL collection as a whole (bench/templates.js): the total render time of its fixed
// conversation set through every template, by the plan.
//
//   npm run bench -- --renderers [--rounds 9] [--models qwen3,qwen3.5,gptoss] [--no-collection]

const { execFileSync } = require('node:child_process')
const { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { parseArgs } = require('node:util')

const lib = require('../lib')
const { largest, median, modelFolder, readJsonl } = require('./data.js')

const RENDERINGS = ['transformers', 'mlx-node']
const LABELS = { qwen3: 'Qwen3', 'qwen3.5': 'Qwen3.5', gptoss: 'GPT-OSS' }
const seconds = (t0) => Number(process.hrtime.bigint() - t0) / 1e9

/** The full render of each example: what encodeBatch is given. */
function fullTexts(tok, examples) {
  return examples.map((ex) => tok.renderChatTemplate('prompt' in ex ? [...ex.prompt, ex.completion] : ex.messages, {}))
}

/** A model folder beside `dir` with its tokenizer and a template that prints nothing. */
function silentFolder(dir, work) {
  const silent = path.join(work, 'silent')
  mkdirSync(silent, { recursive: true })
  copyFileSync(path.join(dir, 'tokenizer.json'), path.join(silent, 'tokenizer.json'))
  const config = JSON.parse(readFileSync(path.join(dir, 'tokenizer_config.json'), 'utf8'))
  delete config.chat_template
  writeFileSync(path.join(silent, 'tokenizer_config.json'), JSON.stringify(config))
  writeFileSync(path.join(silent, 'chat_template.jinja'), "{{ '' }}")
  return silent
}

/**
 * In a child on one thread: the render MB/s of renderChatTemplate over `file`, median of
 * `rounds`, with the calls themselves (converting the messages from JS, timed through a template
 * that prints nothing) taken out.
 */
async function renderWorker(dir, renderAs, file, rounds) {
  const work = mkdtempSync(path.join(os.tmpdir(), 'sft-render-worker-'))
  try {
    const tok = await lib.Tokenizer.fromPretrained(dir, { renderAs })
    const silent = await lib.Tokenizer.fromPretrained(silentFolder(dir, work), { renderAs })
    const examples = readJsonl(file)
    const bytes = fullTexts(tok, examples).reduce((n, t) => n + Buffer.byteLength(t), 0)
    const timed = (t) => {
      const t0 = process.hrtime.bigint()
      fullTexts(t, examples)
      return seconds(t0)
    }
    const [full, calls] = [[], []]
    for (let i = 0; i < rounds; i++) {
      full.push(timed(tok))
      calls.push(timed(silent))
    }
    const render = Math.max(median(full) - median(calls), 1e-9)
    process.stdout.write(JSON.stringify({ mbPerSec: bytes / 1e6 / render, renderer: tok.renderer }))
  } finally {
    rmSync(work, { recursive: true, force: true })
  }
}

function renderInChild(dir, renderAs, file, rounds) {
  const args = [__filename, '--render-worker', '--dir', dir, '--render-as', renderAs, '--data', file, '--rounds', String(rounds)]
  const out = execFileSync(process.execPath, args, { env: { ...process.env, RAYON_NUM_THREADS: '1' }, encoding: 'utf8' })
  return JSON.parse(out)
}

/** Epoch 1 against encodeBatch on all cores: the median of the paired ratios of `rounds`. */
async function epochRatio(tok, file, rounds) {
  const texts = fullTexts(tok, readJsonl(file))
  const encode = async () => {
    const t0 = process.hrtime.bigint()
    await tok.encodeBatch(texts, false)
    return seconds(t0)
  }
  const epoch = async () => {
    const t0 = process.hrtime.bigint()
    const ds = await lib.loadSFTDataset(file, tok, { allowedRoot: path.dirname(file), completionOnly: true })
    for await (const batch of ds.batches(8)) void batch
    return seconds(t0)
  }
  await encode()
  await epoch()
  const ratios = []
  let before = await encode()
  for (let i = 0; i < rounds; i++) {
    global.gc?.()
    const e = await epoch()
    const after = await encode()
    ratios.push(Math.sqrt(before * after) / e)
    before = after
  }
  return median(ratios)
}

async function run(argv = process.argv.slice(2)) {
  const { values } = parseArgs({
    args: argv,
    options: {
      rounds: { type: 'string', default: '9' },
      models: { type: 'string', default: 'qwen3,qwen3.5,gptoss' },
      'no-collection': { type: 'boolean', default: false },
      'render-worker': { type: 'boolean', default: false },
      dir: { type: 'string' },
      'render-as': { type: 'string' },
      data: { type: 'string' },
    },
  })
  const rounds = Number(values.rounds)
  if (!Number.isInteger(rounds) || rounds < 1) throw new Error(`--rounds must be a positive integer, got ${values.rounds}`)
  if (values['render-worker']) return renderWorker(values.dir, values['render-as'], values.data, rounds)
  const pcFile = largest('pc_alpaca') ?? largest('pc_')
  const convFile = largest('conv_fastchat') ?? largest('conv_')
  if (!pcFile || !convFile) throw new Error('no data: the real files of ../shared/parity/real/data are needed')
  const work = mkdtempSync(path.join(os.tmpdir(), 'sft-renderers-'))
  // The data's findings (duplicate examples, ...) are printed once per load: not figures.
  const listeners = process.listeners('warning')
  process.removeAllListeners('warning')
  process.on('warning', () => {})
  try {
    console.log(`\n## Renderers: render MB/s on one core and epoch 1 / encodeBatch on all cores (${os.cpus().length}), median of ${rounds} rounds`)
    console.log(`| model | rendered as | renderer | render MB/s, 1 core (${path.basename(convFile)}) | epoch 1 / encodeBatch, ${path.basename(pcFile)} | epoch 1 / encodeBatch, ${path.basename(convFile)} |`)
    console.log('|---|---|---|---:|---:|---:|')
    for (const model of values.models.split(',')) {
      const dir = modelFolder(model, work)
      for (const renderAs of RENDERINGS) {
        const tok = await lib.Tokenizer.fromPretrained(dir, { renderAs })
        const render = renderInChild(dir, renderAs, convFile, rounds)
        const pc = await epochRatio(tok, pcFile, rounds)
        const conv = await epochRatio(tok, convFile, rounds)
        console.log(`| ${LABELS[model] ?? model} | ${renderAs} | ${render.renderer} | ${render.mbPerSec.toFixed(1)} | ${pc.toFixed(2)} | ${conv.toFixed(2)} |`)
      }
    }
  } finally {
    process.removeAllListeners('warning')
    for (const listener of listeners) process.on('warning', listener)
    rmSync(work, { recursive: true, force: true })
  }
  if (!values['no-collection']) await require('./templates.js').run([])
}

module.exports = { run }
if (require.main === module) {
  run().catch((e) => {
    console.error(e)
    process.exit(1)
  })
}
