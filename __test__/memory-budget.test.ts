// memoryBudget: a load whose rows would exceed it writes them to a file as it builds them and maps
// them, and everything a trainer reads (batches of every strategy, shards, report, summary,
// export, the CLI) is what a load that keeps its rows in memory gives. Measured in child
// processes on a generated file: the rows' own accounting (`SFTDataset.memory`) on every
// platform and, on Linux, the process's anonymous memory (`RssAnon`), which the rows of an
// unbounded load grow and those of a bounded one do not (mapped rows are file pages, which the
// OS reclaims). No portable limit on anonymous memory exists for a Node child (`ulimit -v`
// counts V8's address-space reservations), so the comparison is the limit. Killed loads leave
// nothing behind that a later load trusts.
import { spawn, spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

import { createSFTDataset, listTokenCache, loadSFTDataset } from '../lib/index.js'
import type { SFTDataset } from '../lib/index.js'
import { repoRoot, tokenizer, tokenizerDir } from './helpers'

const scratch = mkdtempSync(join(tmpdir(), 'sft-memory-'))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))
const tok = tokenizer('qwen3')
const MB = 1 << 20

const WORDS = 'the quick brown fox jumps over a lazy dog while seven wizards quietly hex bold jackdaws under amber skies'.split(' ')

/** `mb` MB of unique prompt-completion records of 200 common words each, numbered. */
function generate(name: string, mb: number): string {
  const file = join(scratch, name)
  const lines: string[] = []
  let size = 0
  for (let i = 0; size < mb * MB; i++) {
    const words: string[] = []
    for (let k = 0; k < 200; k++) words.push(WORDS[(i * 7 + k * 13 + ((k * k) % 11)) % WORDS.length] + (k % 17 === 0 ? ` ${i}.` : ''))
    const text = words.join(' ')
    const line = JSON.stringify({ prompt: [{ role: 'user', content: `question ${i}: ${text.slice(0, 120)}` }], completion: { role: 'assistant', content: text } })
    lines.push(line)
    size += line.length + 1
  }
  writeFileSync(file, lines.join('\n') + '\n')
  return file
}

const small = generate('small.jsonl', 2)
const large = generate('large.jsonl', 40)

// Loads a file in a process of its own and prints what the rows take, the growth of its anonymous
// memory during the load (Linux), and a digest of one epoch's batches and order.
const childScript = join(scratch, 'child.js')
writeFileSync(
  childScript,
  `'use strict'
const { createHash } = require('node:crypto')
const fs = require('node:fs')
const path = require('node:path')
const lib = require(${JSON.stringify(join(repoRoot, 'lib'))})
function anon() {
  if (process.platform !== 'linux') return null
  const m = /RssAnon:\\s+(\\d+) kB/.exec(fs.readFileSync('/proc/self/status', 'utf8'))
  return Number(m[1]) * 1024
}
;(async () => {
  const [file, optionsJson] = process.argv.slice(2)
  const tok = await lib.Tokenizer.fromPretrained(${JSON.stringify(tokenizerDir('qwen3'))})
  const options = { allowedRoot: path.dirname(file), ...JSON.parse(optionsJson) }
  if (options.progress) {
    delete options.progress
    let told = false
    options.onProgress = () => { if (!told) { told = true; console.log('loading') } }
  }
  const before = anon()
  let peak = before
  const sampler = setInterval(() => { peak = Math.max(peak, anon()) }, 2)
  const ds = await lib.loadSFTDataset(file, tok, options)
  clearInterval(sampler)
  peak = Math.max(peak, anon())
  const hash = createHash('sha256')
  ds.shuffleForEpoch(1)
  hash.update(Buffer.from(ds.order().buffer))
  for await (const b of ds.batches(8)) {
    hash.update(JSON.stringify(b.shape))
    hash.update(Buffer.from(b.inputIds.buffer, b.inputIds.byteOffset, b.inputIds.byteLength))
    hash.update(Buffer.from(b.labels.buffer, b.labels.byteOffset, b.labels.byteLength))
  }
  const anonGrowth = before === null ? null : peak - before
  console.log(JSON.stringify({ length: ds.length, memory: ds.memory, cache: ds.cache, anonGrowth, digest: hash.digest('hex') }))
})().catch((e) => { console.error(e.code, e.message); process.exit(1) })
`,
)

interface ChildResult {
  length: number
  memory: { rows: string; residentBytes: number; mappedBytes: number; budget: number; peakBytes: number }
  cache: { status: string; file: string } | null
  anonGrowth: number | null
  digest: string
}

/** The child's environment: its own temporary directory, and an allocator that returns freed
 * memory at once, so that the resident size follows what is in use. */
function childEnv(tmp: string) {
  return { ...process.env, TMPDIR: tmp, TMP: tmp, TEMP: tmp, MIMALLOC_PURGE_DELAY: '0' }
}

function freshDir(name: string): string {
  const dir = join(scratch, name)
  mkdirSync(dir, { recursive: true })
  return dir
}

function loadInChild(file: string, options: Record<string, unknown>, tmp = freshDir('tmp')): ChildResult {
  const r = spawnSync(process.execPath, [childScript, file, JSON.stringify(options)], { env: childEnv(tmp), encoding: 'utf8' })
  if (r.status !== 0) throw new Error(`child failed (${r.status}): ${r.stderr}`)
  return JSON.parse(r.stdout.trim().split('\n').pop()!)
}

describe('a large load within a small budget', () => {
  const budget = 4 * MB
  let unbounded: ChildResult
  let bounded: ChildResult
  beforeAll(() => {
    unbounded = loadInChild(large, {})
    bounded = loadInChild(large, { memoryBudget: budget }, freshDir('tmp-bounded'))
  })

  it('gives the batches and the order of a load in memory', () => {
    expect(bounded.length).toBe(unbounded.length)
    expect(bounded.length).toBeGreaterThan(25_000)
    expect(bounded.digest).toBe(unbounded.digest)
  })

  it('keeps its rows in memory within the budget and maps the rest', () => {
    const rowBytes = unbounded.memory.residentBytes
    // About 4 bytes a token: the file's 40 MB of words are about 10 million tokens.
    expect(rowBytes).toBeGreaterThan(30 * MB)
    expect(unbounded.memory).toEqual({ rows: 'memory', residentBytes: rowBytes, mappedBytes: 0, budget: 1 << 30, peakBytes: unbounded.memory.peakBytes })
    expect(unbounded.memory.peakBytes).toBe(rowBytes)
    expect(bounded.memory.rows).toBe('mapped')
    expect(bounded.memory.budget).toBe(budget)
    expect(bounded.memory.peakBytes).toBeGreaterThan(budget / 2)
    expect(bounded.memory.peakBytes).toBeLessThanOrEqual(budget)
    // What stays resident is the blocks' bookkeeping and their decoded rare rows.
    expect(bounded.memory.residentBytes).toBeLessThan(MB)
    expect(bounded.memory.mappedBytes).toBeGreaterThan(0.98 * rowBytes)
    expect(bounded.memory.mappedBytes).toBeLessThanOrEqual(rowBytes)
  })

  it("grows the process's anonymous memory by far less than its rows (Linux)", () => {
    expect(bounded.anonGrowth === null).toBe(process.platform !== 'linux')
    if (bounded.anonGrowth === null || unbounded.anonGrowth === null) return
    const rowBytes = unbounded.memory.residentBytes
    expect(unbounded.anonGrowth).toBeGreaterThan(rowBytes)
    expect(bounded.anonGrowth).toBeLessThan(unbounded.anonGrowth - rowBytes / 2)
  })

  it('leaves no file in the temporary directory', () => {
    expect(readdirSync(join(scratch, 'tmp-bounded'))).toEqual([])
  })
})

/** Everything a trainer reads from a dataset, under its batching. */
async function observe(ds: SFTDataset) {
  const epochs = []
  for (const epoch of [0, 3]) {
    ds.shuffleForEpoch(epoch)
    const batches = []
    for await (const b of ds.batches(8)) {
      batches.push({
        shape: b.shape,
        ids: createHash('sha256').update(b.inputIds).digest('hex'),
        labels: createHash('sha256').update(b.labels).digest('hex'),
        indices: b.indices && Array.from(b.indices),
        positions: b.positionIds && createHash('sha256').update(b.positionIds).digest('hex'),
        examples: b.exampleIds && createHash('sha256').update(b.exampleIds).digest('hex'),
      })
    }
    epochs.push({ order: Array.from(ds.order()), batches })
  }
  const example = await ds.tokenizeExample(17)
  return {
    length: ds.length,
    epochs,
    example: { ids: Array.from(example.inputIds), labels: Array.from(example.labels) },
    stats: await ds.batchingStats(8),
  }
}

describe('mapped rows read as rows in memory', () => {
  const base = { allowedRoot: scratch, completionOnly: true, maxSeqLength: 300 }
  const settings: Array<Record<string, unknown>> = [
    { batching: 'reference' },
    { batching: 'lengthGrouped' },
    { batching: 'tokenBudget', maxBatchTokens: 1200 },
    { batching: 'packed', maxBatchTokens: 600 },
    { batching: 'packed', maxBatchTokens: 600, shard: { rank: 1, worldSize: 2 } },
    { truncation: 'turns', dropUntrainable: true, maskingStrategy: 'spans' },
  ]
  for (const s of settings) {
    it(`batches, order, examples and batching figures: ${JSON.stringify(s)}`, async () => {
      const inMemory = await loadSFTDataset(small, tok, { ...base, ...s })
      const mapped = await loadSFTDataset(small, tok, { ...base, ...s, memoryBudget: 0 })
      expect(inMemory.memory.rows).toBe('memory')
      expect(mapped.memory.rows).toBe('mapped')
      expect(mapped.memory.peakBytes).toBe(0)
      expect(await observe(mapped)).toEqual(await observe(inMemory))
    })
  }

  it('report, summary and both Parquet exports', async () => {
    const inMemory = await loadSFTDataset(small, tok, base)
    const mapped = await loadSFTDataset(small, tok, { ...base, memoryBudget: 0 })
    expect(await mapped.report()).toEqual(await inMemory.report())
    expect(await mapped.summary({ sample: 50 })).toEqual(await inMemory.summary({ sample: 50 }))
    for (const options of [undefined, { batchSize: 8 }]) {
      const files = [join(scratch, 'memory.parquet'), join(scratch, 'mapped.parquet')]
      const written = [await inMemory.exportParquet(files[0], options), await mapped.exportParquet(files[1], options)]
      expect({ ...written[1], file: '' }).toEqual({ ...written[0], file: '' })
      expect(readFileSync(files[1]).equals(readFileSync(files[0]))).toBe(true)
    }
  })

  it('the CLI takes --memory-budget', () => {
    const bin = join(repoRoot, 'bin', 'sft-dataset.js')
    const run = (...args: string[]) => spawnSync(process.execPath, [bin, ...args], { env: { ...process.env, MLX_NODE_DATA_ROOT: scratch }, encoding: 'utf8' })
    const outs = [join(scratch, 'cli-memory.parquet'), join(scratch, 'cli-mapped.parquet')]
    const common = ['export', small, '--completion-only', '--quiet', '--out']
    expect(run(...common, outs[0]).status).toBe(0)
    expect(run(...common, outs[1], '--memory-budget', '0').status).toBe(0)
    expect(readFileSync(outs[1]).equals(readFileSync(outs[0]))).toBe(true)
    const bad = run('stats', small, '--memory-budget', 'lots')
    expect(bad.status).toBe(2)
    expect(bad.stderr).toContain('--memory-budget must be a number of bytes or like 500M, 20G, got "lots"')
    const validate = run('validate', small, '--memory-budget', '1G')
    expect(validate.status).toBe(2)
    expect(validate.stderr).toContain('--memory-budget applies only to preview, stats, export and report')
  })
})

describe('memoryBudget is checked', () => {
  for (const value of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53]) {
    it(`${value}`, async () => {
      const e = await loadSFTDataset(small, tok, { allowedRoot: scratch, memoryBudget: value }).catch((e) => e)
      expect(e.code).toBe('INVALID_ARGUMENT')
      expect(e.message).toBe(`memoryBudget must be an integer number of bytes from 0 to 9007199254740991, got ${value}`)
    })
  }

  it('a string', async () => {
    const e = await loadSFTDataset(small, tok, { allowedRoot: scratch, memoryBudget: '1G' as unknown as number }).catch((e) => e)
    expect(e.code).toBe('INVALID_ARGUMENT')
    expect(e.message).toBe('loadSFTDataset: option memoryBudget must be a number, got a string ("1G")')
  })

  it('a dataset made from examples warns that it takes none', async () => {
    const warnings: string[] = []
    const listener = (w: Error) => void warnings.push(w.message)
    process.on('warning', listener)
    const example = { messages: [{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'yo' }] }
    const ds = createSFTDataset([example], tok, { memoryBudget: 0 } as never)
    await new Promise((resolve) => setTimeout(resolve, 20))
    process.off('warning', listener)
    expect(warnings).toEqual(['[SFT Dataset] UNKNOWN_OPTION: createSFTDataset: unknown option "memoryBudget" (an option of loadSFTDataset only); it is ignored'])
    expect(ds.memory.rows).toBe('memory')
    expect(ds.memory.mappedBytes).toBe(0)
    expect(ds.memory.budget).toBe(undefined)
  })
})

describe('rows written to disk never outlive their load', () => {
  /** Starts a load in a child, kills it once rows have gone to disk, and waits for its end. */
  async function killMidLoad(options: Record<string, unknown>, tmp: string) {
    const child = spawn(process.execPath, [childScript, large, JSON.stringify({ ...options, progress: true })], { env: childEnv(tmp) })
    let out = ''
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (d) => {
        out += d
        if (out.includes('loading')) resolve()
      })
      child.on('exit', () => reject(new Error(`the load ended before it was killed: ${out}`)))
    })
    const ended = new Promise((resolve) => child.on('exit', resolve))
    child.kill('SIGKILL')
    await ended
    // Killed before it printed its figures.
    expect(out).toBe('loading\n')
  }

  it('a killed load leaves nothing in the temporary directory', async () => {
    const tmp = freshDir('tmp-killed')
    await killMidLoad({ memoryBudget: 0 }, tmp)
    expect(readdirSync(tmp)).toEqual([])
  })

  it("a killed load leaves no entry in the cache; the next load builds it", async () => {
    const tmp = freshDir('tmp-killed-cache')
    const cache = freshDir('cache-killed')
    await killMidLoad({ memoryBudget: 0, cache }, tmp)
    expect(readdirSync(cache).filter((f) => f.endsWith('.sftrows'))).toEqual([])
    const listed = listTokenCache(cache)
    expect(listed.map((e) => e.problem)).toEqual(['an unfinished write'])
    const reloaded = loadInChild(large, { memoryBudget: 0, cache }, tmp)
    expect(reloaded.cache).toMatchObject({ status: 'stored' })
    const hit = loadInChild(large, { memoryBudget: 0, cache }, tmp)
    expect(hit.cache).toMatchObject({ status: 'hit' })
    expect(hit.digest).toBe(reloaded.digest)
    expect(hit.memory.mappedBytes).toBe(reloaded.memory.mappedBytes)
    expect(readdirSync(tmp)).toEqual([])
    expect(existsSync(hit.cache!.file)).toBe(true)
  })
})
