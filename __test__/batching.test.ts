// Batching strategies through the public API: every example's exact row (truncated as the
// reference truncates it) is found once per epoch from `indices` / `exampleIds`, plans are
// deterministic and change with the epoch, `numBatches` is exact, budgets hold, packed rows
// restart positions and mask each example's first label, and shards cover the epoch.
import { readFileSync, readdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'

import { createSFTDataset, loadSFTDataset, type SFTBatch, type SFTDataset } from '../lib/index.js'
import { requireShared, sharedParity, tokenizer } from './helpers'

type Batching = 'reference' | 'lengthGrouped' | 'tokenBudget' | 'packed'
type CodedError = Error & { code?: string }

const IGNORE = -100
const realData = join(sharedParity, 'real', 'data')
const realFiles = readdirSync(requireShared(realData)).filter((f) => f.endsWith('.jsonl')).sort()

beforeEach(() => {
  vi.spyOn(console, 'warn').mockImplementation(() => {})
})
afterEach(() => vi.restoreAllMocks())

interface Row {
  ids: Int32Array
  labels: Int32Array
}

/** Every example's full row, then cut as the reference cuts it (its last `maxSeqLength` tokens). */
async function truncatedRows(ds: SFTDataset, maxSeqLength: number): Promise<Row[]> {
  const rows: Row[] = []
  for (let i = 0; i < ds.length; i++) {
    const full = await ds.tokenizeExample(i)
    const from = Math.max(0, full.inputIds.length - maxSeqLength)
    rows.push({ ids: full.inputIds.slice(from), labels: full.labels.slice(from) })
  }
  return rows
}

async function epoch(ds: SFTDataset, batchSize: number): Promise<SFTBatch[]> {
  const out: SFTBatch[] = []
  for await (const b of ds.batches(batchSize)) out.push(b)
  return out
}

/** The examples of every batch row: one per row, or each run of `exampleIds` in a packed row. */
function examplesOf(b: SFTBatch): number[][] {
  const [rows, width] = b.shape
  const out: number[][] = []
  for (let r = 0; r < rows; r++) {
    if (b.exampleIds == null) {
      out.push([b.indices![r]])
      continue
    }
    const runs: number[] = []
    for (let p = 0; p < width; p++) {
      const e = b.exampleIds[r * width + p]
      if (e >= 0 && (p === 0 || b.exampleIds[r * width + p - 1] !== e || b.positionIds![r * width + p] === 0)) runs.push(e)
    }
    out.push(runs)
  }
  return out
}

/**
 * Checks every batch against the rows, and returns how often each example was seen and what the
 * epoch computed (rows x padded length).
 */
function checkEpoch(batches: SFTBatch[], rows: Row[], opts: { packed: boolean; padId: number; multiple: number }) {
  const seen = new Array<number>(rows.length).fill(0)
  let computed = 0
  for (const b of batches) {
    const [n, width] = b.shape
    computed += n * width
    expect(width % opts.multiple).toBe(0)
    expect(b.indices).toBeInstanceOf(Uint32Array)
    expect(b.indices!.length).toBe(n)
    let longest = 0
    for (let r = 0; r < n; r++) {
      const examples = opts.packed ? examplesOf(b)[r] : [b.indices![r]]
      expect(examples[0]).toBe(b.indices![r])
      let at = r * width
      for (const e of examples) {
        seen[e]++
        const want = rows[e]
        expect(b.inputIds.subarray(at, at + want.ids.length)).toEqual(want.ids)
        const labels = Int32Array.from(want.labels)
        if (opts.packed) {
          labels[0] = IGNORE
          expect(b.positionIds!.subarray(at, at + want.ids.length)).toEqual(Int32Array.from(want.ids, (_, k) => k))
          expect(b.exampleIds!.subarray(at, at + want.ids.length)).toEqual(new Int32Array(want.ids.length).fill(e))
        }
        expect(b.labels.subarray(at, at + want.ids.length)).toEqual(labels)
        at += want.ids.length
      }
      longest = Math.max(longest, at - r * width)
      expect(b.inputIds.subarray(at, (r + 1) * width)).toEqual(new Int32Array((r + 1) * width - at).fill(opts.padId))
      expect(b.labels.subarray(at, (r + 1) * width)).toEqual(new Int32Array((r + 1) * width - at).fill(IGNORE))
      if (opts.packed) expect(b.exampleIds!.subarray(at, (r + 1) * width)).toEqual(new Int32Array((r + 1) * width - at).fill(-1))
    }
    expect(width).toBe(Math.ceil(longest / opts.multiple) * opts.multiple)
    if (!opts.packed) {
      expect(b.positionIds ?? null).toBeNull()
      expect(b.exampleIds ?? null).toBeNull()
    }
  }
  return { seen, computed }
}

function orderOfIndices(batches: SFTBatch[]): number[] {
  return batches.flatMap((b) => Array.from(b.indices!))
}

describe('batching strategies on the real data', () => {
  const maxSeqLength = 1024
  const batchSize = 8
  for (const file of realFiles) {
    it(`${file}: every strategy yields every example's exact row once, within its budget`, async () => {
      const tok = tokenizer('qwen3')
      const path = join(realData, file)
      const base = { completionOnly: true, maxSeqLength, allowedRoot: dirname(path) }
      const reference = await loadSFTDataset(path, tok, base)
      const rows = await truncatedRows(reference, maxSeqLength)
      const padId = tok.getPadTokenId()
      reference.shuffleForEpoch(1)
      const stats = await reference.batchingStats(batchSize, { maxBatchTokens: 2048, padToMultipleOf: 8 })
      expect(stats.map((s) => s.batching)).toEqual(['reference', 'lengthGrouped', 'tokenBudget', 'packed'])
      const tokens = rows.reduce((n, r) => n + r.ids.length, 0)
      for (const batching of ['lengthGrouped', 'tokenBudget', 'packed'] as Batching[]) {
        const config = { ...base, batching, maxBatchTokens: 2048, padToMultipleOf: 8 }
        const ds = await loadSFTDataset(path, tok, config)
        ds.shuffleForEpoch(1)
        const batches = await epoch(ds, batchSize)
        expect(batches.length).toBe(ds.numBatches(batchSize))
        const { seen, computed } = checkEpoch(batches, rows, { packed: batching === 'packed', padId, multiple: 8 })
        expect(seen.every((c) => c === 1)).toBe(true)
        for (const b of batches) {
          expect(b.shape[0]).toBeLessThanOrEqual(batchSize)
          if (batching === 'tokenBudget' && b.shape[0] > 1) expect(b.shape[0] * b.shape[1]).toBeLessThanOrEqual(2048)
          if (batching === 'packed') expect(b.shape[1]).toBeLessThanOrEqual(2048)
        }
        // The side-by-side figures describe exactly these batches.
        const s = stats.find((x) => x.batching === batching)!
        expect(s.batches).toBe(batches.length)
        expect(s.computedTokens).toBe(computed)
        expect(s.tokens).toBe(tokens)
        expect(s.paddingShare).toBeCloseTo((computed - tokens) / computed, 12)
        // Length grouping and packing both waste less than the reference's batches.
        expect(s.computedTokens).toBeLessThan(stats[0].computedTokens)
      }
    })
  }
})

/** Prompt-completion examples of random lengths (a seeded generator, so failures replay). */
function randomExamples(n: number, seed: number, maxWords: number) {
  let state = seed
  const next = () => {
    state = (state * 1103515245 + 12345) % 2147483648
    return state / 2147483648
  }
  const words = ['alpha', 'beta', 'gamma', 'delta', 'kappa', 'lambda', 'sigma', 'omega', '7', '42', 'é', '漢字', '🙂']
  const text = (count: number) => Array.from({ length: count }, () => words[Math.floor(next() * words.length)]).join(' ')
  return Array.from({ length: n }, () => ({
    prompt: [{ role: 'user', content: text(1 + Math.floor(next() * maxWords)) }],
    completion: { role: 'assistant', content: text(1 + Math.floor(next() * maxWords)) },
  }))
}

describe('batching strategies on random lengths', () => {
  const tok = tokenizer('qwen3')
  const examples = randomExamples(203, 5, 120)
  const maxSeqLength = 160
  const base = { completionOnly: true, maxSeqLength }
  let rows: Row[]

  beforeEach(async () => {
    rows ??= await truncatedRows(createSFTDataset(examples, tok, base), maxSeqLength)
  })

  for (const [batching, maxBatchTokens, batchSize] of [
    ['lengthGrouped', undefined, 4],
    ['tokenBudget', 300, 6],
    ['packed', undefined, 3],
    ['packed', 500, 2],
  ] as Array<[Batching, number | undefined, number]>) {
    it(`${batching} (maxBatchTokens ${maxBatchTokens}, batch size ${batchSize}): coverage, determinism, epochs differ`, async () => {
      const config = { ...base, batching, maxBatchTokens }
      const a = createSFTDataset(examples, tok, config)
      const b = createSFTDataset(examples, tok, config)
      const orders: string[] = []
      for (const e of [0, 1, 2]) {
        a.shuffleForEpoch(e)
        b.shuffleForEpoch(e)
        const batches = await epoch(a, batchSize)
        expect(batches.length).toBe(a.numBatches(batchSize))
        const { seen } = checkEpoch(batches, rows, { packed: batching === 'packed', padId: tok.getPadTokenId(), multiple: 1 })
        expect(seen.every((c) => c === 1)).toBe(true)
        const budget = maxBatchTokens ?? maxSeqLength
        for (const batch of batches) {
          if (batching === 'tokenBudget' && batch.shape[0] > 1) expect(batch.shape[0] * batch.shape[1]).toBeLessThanOrEqual(budget)
          if (batching === 'packed') expect(batch.shape[1]).toBeLessThanOrEqual(budget)
        }
        // Another dataset (another process would do the same) plans the same epoch identically.
        const again = await epoch(b, batchSize)
        expect(again.map((x) => Array.from(x.inputIds))).toEqual(batches.map((x) => Array.from(x.inputIds)))
        orders.push(JSON.stringify(batches.map(examplesOf)))
      }
      expect(new Set(orders).size).toBe(3)
    })
  }

  it('lengthGrouped sorts each mega-batch: batches hold neighbours in length', async () => {
    const ds = createSFTDataset(examples, tok, { ...base, batching: 'lengthGrouped' })
    ds.shuffleForEpoch(0)
    const batches = await epoch(ds, 4)
    // One mega-batch (50 x 4 rows) plus the last 3: inside each batch the rows ascend in length.
    for (const b of batches) {
      const lengths = Array.from(b.indices!, (e) => rows[e].ids.length)
      expect(lengths).toEqual([...lengths].sort((x, y) => x - y))
    }
    expect(batches.map((b) => b.shape[0]).sort()).toEqual([...new Array(50).fill(4), 3].sort())
  })

  it('padToMultipleOf rounds every padded length up, also for the reference batching', async () => {
    const ds = createSFTDataset(examples, tok, { ...base, padToMultipleOf: 32 })
    expect(ds.numBatches(8)).toBe(Math.ceil(203 / 8))
    const batches = await epoch(ds, 8)
    for (const b of batches) {
      expect(b.shape[1] % 32).toBe(0)
      expect(b.indices ?? null).toBeNull()
    }
    const plain = await epoch(createSFTDataset(examples, tok, base), 8)
    plain.forEach((p, k) => {
      const [n, w] = p.shape
      const W = batches[k].shape[1]
      for (let r = 0; r < n; r++) {
        expect(batches[k].inputIds.subarray(r * W, r * W + w)).toEqual(p.inputIds.subarray(r * w, (r + 1) * w))
        expect(batches[k].labels.subarray(r * W, r * W + w)).toEqual(p.labels.subarray(r * w, (r + 1) * w))
      }
    })
  })

  it("'reference' given explicitly is the default, batch for batch", async () => {
    const explicit = createSFTDataset(examples, tok, { ...base, batching: 'reference' })
    const implicit = createSFTDataset(examples, tok, base)
    explicit.shuffleForEpoch(3)
    implicit.shuffleForEpoch(3)
    const a = await epoch(explicit, 8)
    const b = await epoch(implicit, 8)
    expect(a.map((x) => Array.from(x.inputIds))).toEqual(b.map((x) => Array.from(x.inputIds)))
    expect(a.every((x) => x.indices == null && x.positionIds == null)).toBe(true)
  })

  it('batches of built rows are copies each in an ArrayBuffer of its own, equal to collateBatch', async () => {
    // Every row is built by the first epoch, so the second copies on the JS thread.
    for (const batching of ['reference', 'packed'] as Batching[]) {
      const ds = createSFTDataset(examples, tok, { ...base, batching })
      ds.shuffleForEpoch(1)
      await epoch(ds, 8)
      const first = await epoch(ds, 8)
      const arrays = first.flatMap((b) => [b.inputIds, b.labels, b.positionIds, b.exampleIds, b.indices].filter((a) => a != null))
      expect(new Set(arrays.map((a) => a.buffer)).size).toBe(arrays.length)
      for (const a of arrays) {
        expect(a.byteOffset).toBe(0)
        expect(a.buffer.byteLength).toBe(a.byteLength)
      }
      if (batching === 'reference') {
        for (let k = 0; k < first.length; k++) {
          const positions = Array.from({ length: first[k].shape[0] }, (_, i) => 8 * k + i)
          const direct = await ds.collateBatch(positions)
          expect(Array.from(first[k].inputIds)).toEqual(Array.from(direct.inputIds))
          expect(Array.from(first[k].labels)).toEqual(Array.from(direct.labels))
          expect(first[k].shape).toEqual(direct.shape)
        }
      }
      // Writing into a batch, or handing its memory to another thread, leaves the rows intact.
      const snapshot = first.map((b) => Array.from(b.inputIds))
      first[0].inputIds.fill(-7)
      const { port1, port2 } = new MessageChannel()
      port1.postMessage(first[1].labels, [first[1].labels.buffer])
      port1.close()
      port2.close()
      expect(first[1].labels.length).toBe(0)
      const again = await epoch(ds, 8)
      expect(again.map((b) => Array.from(b.inputIds))).toEqual(snapshot)
    }
  })

  for (const batching of ['reference', 'lengthGrouped', 'tokenBudget', 'packed'] as Batching[]) {
    it(`${batching}: ranks split every batch evenly and together cover the epoch`, async () => {
      for (const worldSize of [2, 4]) {
        const seen = new Array<number>(examples.length).fill(0)
        const counts: number[] = []
        const perRank: SFTBatch[][] = []
        for (let rank = 0; rank < worldSize; rank++) {
          const ds = createSFTDataset(examples, tok, { ...base, batching, maxBatchTokens: 320, shard: { rank, worldSize } })
          ds.shuffleForEpoch(2)
          const batches = await epoch(ds, 8)
          expect(batches.length).toBe(ds.numBatches(8))
          counts.push(batches.length)
          perRank.push(batches)
          const { seen: mine } = checkEpoch(batches, rows, { packed: batching === 'packed', padId: tok.getPadTokenId(), multiple: 1 })
          mine.forEach((c, e) => (seen[e] += c))
        }
        expect(new Set(counts).size).toBe(1)
        for (let k = 0; k < counts[0]; k++) {
          expect(new Set(perRank.map((r) => r[k].shape[0])).size).toBe(1)
        }
        expect(seen.every((c) => c >= 1 && c <= 2)).toBe(true)
        // Duplicates only fill the last batches: fewer than worldSize rows repeat.
        if (batching !== 'packed') expect(seen.filter((c) => c === 2).length).toBeLessThan(worldSize)
      }
    })
  }
})

describe('batching settings are checked', () => {
  const tok = tokenizer('qwen3')
  const examples = randomExamples(10, 1, 10)
  const code = (fn: () => unknown) => {
    try {
      fn()
    } catch (e) {
      return [(e as CodedError).code, (e as Error).message]
    }
    return null
  }

  it('rejects unknown strategies, bad numbers and impossible combinations with INVALID_ARGUMENT', async () => {
    expect(code(() => createSFTDataset(examples, tok, { batching: 'sorted' as Batching }))).toEqual([
      'INVALID_ARGUMENT',
      "batching must be one of 'reference', 'lengthGrouped', 'tokenBudget', 'packed', got 'sorted'",
    ])
    expect(code(() => createSFTDataset(examples, tok, { padToMultipleOf: 0 }))).toEqual([
      'INVALID_ARGUMENT',
      'padToMultipleOf must be an integer from 1 to 4294967295, got 0',
    ])
    expect(code(() => createSFTDataset(examples, tok, { maxBatchTokens: 1.5 }))).toEqual([
      'INVALID_ARGUMENT',
      'maxBatchTokens must be an integer from 1 to 4294967295, got 1.5',
    ])
    expect(code(() => createSFTDataset(examples, tok, { batching: 'packed', maxSeqLength: 512, maxBatchTokens: 256 }))).toEqual([
      'INVALID_ARGUMENT',
      "maxBatchTokens (256) must be at least maxSeqLength (512) with batching 'packed': every truncated row must fit in a packed row",
    ])
    expect(code(() => createSFTDataset(examples, tok, { shard: { rank: 2, worldSize: 2 } }))).toEqual([
      'INVALID_ARGUMENT',
      'shard.rank must be an integer in [0, 2), got 2',
    ])
    const sharded = createSFTDataset(examples, tok, { shard: { rank: 0, worldSize: 4 } })
    expect(code(() => sharded.numBatches(6))).toEqual(['INVALID_ARGUMENT', 'batchSize (6) must be a multiple of shard.worldSize (4)'])
    await expect(sharded.batches(6).next()).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' })
    await expect(
      loadSFTDataset(join(__dirname, 'fixtures', 'parity', 'edge', 'pc_edge.jsonl'), tok, { batching: 'packed', maxBatchTokens: 10 }),
    ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' })
  })

  it('a row that fails to build fails the batch that holds it, naming the example', async () => {
    const bad = [...examples.slice(0, 3), { prompt: [{ role: 'user', content: 'x' }], completion: { role: 'assistant', content: 5 } }]
    const ds = createSFTDataset(bad as never, tok, { batching: 'packed' })
    const messages: string[] = []
    const it = ds.batches(8)
    await it.next().catch((e: CodedError) => messages.push(`${e.code}`))
    expect(messages.length).toBe(1)
  })
})

describe('examples on disk as the CLI and trainers read them', () => {
  it('lengthGrouped through loadSFTDataset equals createSFTDataset on the same lines', async () => {
    const file = join(__dirname, 'fixtures', 'parity', 'edge', 'conv_edge.jsonl')
    const tok = tokenizer('qwen3')
    const lines = readFileSync(file, 'utf8')
      .split(/\r?\n/)
      .filter((l) => l.trim())
      .map((l) => JSON.parse(l))
    const config = { batching: 'lengthGrouped' as const, completionOnly: true, maxSeqLength: 64 }
    const created = createSFTDataset(lines, tok, config)
    const loaded = await loadSFTDataset(file, tok, { ...config, allowedRoot: dirname(file) })
    created.shuffleForEpoch(4)
    loaded.shuffleForEpoch(4)
    const a = await epoch(created, 3)
    const b = await epoch(loaded, 3)
    expect(orderOfIndices(a)).toEqual(orderOfIndices(b))
    expect(a.map((x) => Array.from(x.labels))).toEqual(b.map((x) => Array.from(x.labels)))
  })
})
