// Datasets over a tokenizer of another library (an object with the reference's five methods, as
// MLX Node's Qwen3Tokenizer): the same batches as ours for every setting when it answers as ours,
// its own answers used when they differ, and the errors of a tokenizer that breaks the contract.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { afterAll, afterEach, describe, expect, it, vi } from 'vitest'

import { SFTDataset, createSFTDataset, exportSFTParquet, loadSFTDataset } from '../lib/index.js'
import type { SFTBatch, SFTDatasetConfig } from '../lib/index.js'
import { foreignTokenizer, tokenizer } from './helpers'

const work = mkdtempSync(join(tmpdir(), 'sft-foreign-'))
afterAll(() => rmSync(work, { recursive: true, force: true }))
afterEach(() => vi.restoreAllMocks())

const qwen3 = tokenizer('qwen3')

const turn = (q: string, a: string) => [
  { role: 'user', content: q },
  { role: 'assistant', content: a },
]
const conversations = Array.from({ length: 23 }, (_, i) => ({
  messages: [
    ...(i % 3 === 0 ? [{ role: 'system', content: 'Be brief.' }] : []),
    ...turn(`question ${i}`, `answer ${'x'.repeat(i % 7)}`),
    ...(i % 2 === 0 ? turn('and then?', `<think>\nhm ${i}\n</think>\n\nthen ${i}`) : []),
  ],
}))
const promptCompletions = Array.from({ length: 17 }, (_, i) => ({
  prompt: [{ role: 'user', content: `say ${i}` }],
  completion: { role: 'assistant', content: `${i} `.repeat(1 + (i % 5)) },
}))

async function collect(batches: AsyncGenerator<SFTBatch>) {
  const out: Array<{ shape: number[]; inputIds: number[]; labels: number[]; positionIds?: number[] }> = []
  for await (const b of batches) {
    out.push({
      shape: b.shape,
      inputIds: Array.from(b.inputIds),
      labels: Array.from(b.labels),
      ...(b.positionIds ? { positionIds: Array.from(b.positionIds) } : {}),
    })
  }
  return out
}

const settings: Array<[string, SFTDatasetConfig]> = [
  ['the defaults', {}],
  ['completionOnly', { completionOnly: true }],
  ['a short maxSeqLength', { completionOnly: true, maxSeqLength: 24 }],
  ['thinking on', { completionOnly: true, enableThinking: true }],
  ['a seed', { seed: 7 }],
  ['newline overrides', { completionOnly: true, specialTokenIds: { newlineTokens: [198, 271] } }],
  ['lengthGrouped', { batching: 'lengthGrouped' }],
  ['tokenBudget', { completionOnly: true, batching: 'tokenBudget', maxBatchTokens: 96 }],
  ['packed', { completionOnly: true, batching: 'packed', maxSeqLength: 64, maxBatchTokens: 128 }],
  ['a shard', { shard: { rank: 1, worldSize: 2 } }],
  ['dropUntrainable', { completionOnly: true, maxSeqLength: 16, dropUntrainable: true }],
  ['padToMultipleOf', { padToMultipleOf: 8 }],
]

describe('a foreign tokenizer that answers as ours gives our batches', () => {
  for (const [name, config] of settings) {
    for (const [format, examples] of [
      ['conversations', conversations],
      ['prompt-completion', promptCompletions],
    ] as const) {
      it(`${format}, ${name}: batches of two epochs, order, length, report and batching stats`, async () => {
        const ours = createSFTDataset(examples, qwen3, config)
        const theirs = createSFTDataset(examples, foreignTokenizer(qwen3), config)
        await theirs.ready()
        expect(theirs.length).toBe(ours.length)
        for (const epoch of [0, 1]) {
          ours.shuffleForEpoch(epoch)
          theirs.shuffleForEpoch(epoch)
          expect(Array.from(theirs.order())).toEqual(Array.from(ours.order()))
          expect(theirs.numBatches(4)).toBe(ours.numBatches(4))
          expect(await collect(theirs.batches(4))).toEqual(await collect(ours.batches(4)))
        }
        // Silent losses are found in the render, which a foreign tokenizer keeps to itself.
        const withoutLosses = (r: Awaited<ReturnType<typeof ours.report>>) => ({
          ...r,
          examples: r.examples.map((e) => ({ ...e, silentLosses: [] })),
          totals: { ...r.totals, silentLosses: {} },
        })
        expect(withoutLosses(await theirs.report())).toEqual(withoutLosses(await ours.report()))
        expect(await theirs.batchingStats(4)).toEqual(await ours.batchingStats(4))
        const row = await theirs.tokenizeExample(3)
        expect(row).toEqual(await ours.tokenizeExample(3))
      })
    }
  }

  it('loadSFTDataset reads the file natively and renders every record through the tokenizer before it resolves', async () => {
    const file = join(work, 'conv.jsonl')
    writeFileSync(file, conversations.map((c) => JSON.stringify(c)).join('\n') + '\n')
    const foreign = foreignTokenizer(qwen3)
    const theirs = await loadSFTDataset(file, foreign, { completionOnly: true, limit: 20, allowedRoot: work })
    expect(foreign.calls.length).toBe(20)
    const ours = await loadSFTDataset(file, qwen3, { completionOnly: true, limit: 20, allowedRoot: work })
    expect(await collect(theirs.batches(3))).toEqual(await collect(ours.batches(3)))
    const summary = await theirs.summary()
    const expected = await ours.summary()
    expect(summary.tokens).toEqual(expected.tokens)
    expect(summary.lengths).toEqual(expected.lengths)
    expect(summary.examples).toBe(20)
  })

  it('a ShareGPT file read with format auto reaches the tokenizer converted', async () => {
    const file = join(work, 'sharegpt.jsonl')
    const records = [0, 1, 2].map((i) => ({ conversations: [{ from: 'human', value: `q${i}` }, { from: 'gpt', value: `a${i}` }] }))
    writeFileSync(file, records.map((r) => JSON.stringify(r)).join('\n'))
    const foreign = foreignTokenizer(qwen3)
    const theirs = await loadSFTDataset(file, foreign, { format: 'auto', allowedRoot: work })
    expect(foreign.calls[0].args[0]).toEqual(turn('q0', 'a0'))
    const ours = await loadSFTDataset(file, qwen3, { format: 'auto', allowedRoot: work })
    expect(await collect(theirs.batches(2))).toEqual(await collect(ours.batches(2)))
  })

  it('new SFTDataset takes it too, and its instances are SFTDatasets', async () => {
    const ds = new SFTDataset(conversations, foreignTokenizer(qwen3), { completionOnly: true })
    expect(ds).toBeInstanceOf(SFTDataset)
    expect(ds.format).toBe('conversation')
    const ours = new SFTDataset(conversations, qwen3, { completionOnly: true })
    expect(await ds.collateBatch([0, 5, 9])).toEqual(await ours.collateBatch([0, 5, 9]))
  })

  it('exportSFTParquet writes the same rows', async () => {
    const file = join(work, 'pc.jsonl')
    writeFileSync(file, promptCompletions.map((c) => JSON.stringify(c)).join('\n'))
    const a = await exportSFTParquet(file, foreignTokenizer(qwen3), join(work, 'a.parquet'), { allowedRoot: work })
    const b = await exportSFTParquet(file, qwen3, join(work, 'b.parquet'), { allowedRoot: work })
    expect({ ...a, file: '' }).toEqual({ ...b, file: '' })
    expect(a.tokens).toBeGreaterThan(0)
  })
})

describe('the calls a foreign tokenizer receives', () => {
  it("are the reference's: the prompt with a generation prompt, then the whole example without, tools null, enableThinking a boolean", async () => {
    const foreign = foreignTokenizer(qwen3)
    const ds = createSFTDataset(promptCompletions.slice(0, 1), foreign, { enableThinking: true })
    await ds.ready()
    const { prompt, completion } = promptCompletions[0]
    expect(foreign.calls.map((c) => c.args)).toEqual([
      [prompt, true, null, true],
      [[...prompt, completion], false, null, true],
    ])
    const conv = foreignTokenizer(qwen3)
    await createSFTDataset(conversations.slice(0, 1), conv).ready()
    expect(conv.calls.map((c) => c.args)).toEqual([[conversations[0].messages, false, null, false]])
  })

  it("pass reasoningEffort in position seven, MLX Node's, and an example's tools with tools: 'example'", async () => {
    const foreign = foreignTokenizer(qwen3)
    const tools = [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: {} } } }]
    const example = { messages: turn('q', 'a'), tools: JSON.stringify(tools) }
    await createSFTDataset([example], foreign, { reasoningEffort: 'high', tools: 'example' }).ready()
    expect(foreign.calls[0].args).toEqual([example.messages, false, tools, false, undefined, undefined, 'high'])
  })

  it('run concurrently, and each example is rendered once for every epoch', async () => {
    const foreign = foreignTokenizer(qwen3)
    const ds = createSFTDataset(conversations, foreign)
    for (const epoch of [0, 1, 2]) {
      ds.shuffleForEpoch(epoch)
      await collect(ds.batches(4))
    }
    expect(foreign.calls.length).toBe(conversations.length)
    expect(Math.max(...foreign.calls.map((c) => c.inFlight))).toBeGreaterThan(1)
  })
})

describe("the dataset uses the foreign tokenizer's answers, not ours", () => {
  // Renders as ours, then appends a token of its own; pads with its own pad id and names its
  // own ChatML tokens.
  function different() {
    const inner = foreignTokenizer(qwen3)
    return {
      ...inner,
      async applyChatTemplate(...args: unknown[]) {
        const ids = await inner.applyChatTemplate(...args)
        return [...ids, 42]
      },
      getPadTokenId: () => 7,
      getImStartToken: () => '<start>',
      tokenToId: (token: string) => (token === '<start>' ? 151644 : qwen3.tokenToId(token)),
    }
  }

  it('ids, padding and the ChatML scan follow its methods', async () => {
    const examples = [{ messages: turn('a long question here', 'b') }, { messages: turn('q', 'answer') }]
    const ours = await createSFTDataset(examples, qwen3, { completionOnly: true }).collateBatch([0, 1])
    const theirs = await createSFTDataset(examples, different(), { completionOnly: true }).collateBatch([0, 1])
    const width = ours.shape[1]
    expect(theirs.shape).toEqual([2, width + 1])
    const row = (b: SFTBatch, r: number, w: number) => Array.from(b.inputIds.subarray(r * w, (r + 1) * w))
    expect(row(theirs, 0, width + 1)).toEqual([...row(ours, 0, width), 42])
    const shortRow = row(theirs, 1, width + 1)
    expect(shortRow[shortRow.length - 1]).toBe(7)
    expect(Array.from(theirs.labels).filter((l) => l !== -100).length).toBeGreaterThan(0)
  })

  it('a tokenizer whose ChatML tokens are not in its vocabulary fails as the reference does', () => {
    const broken = { ...foreignTokenizer(qwen3), tokenToId: () => null }
    expect(() => createSFTDataset(conversations, broken)).toThrow(
      expect.objectContaining({
        code: 'UNSUPPORTED_TOKENIZER',
        message:
          'Tokenizer does not have required special tokens for ChatML format. Got im_start=null, im_end=null. This tokenizer may not be compatible with ChatML format.',
      }),
    )
  })
})

describe('a foreign tokenizer that breaks the contract', () => {
  it('an error it raises keeps its message and names the example, where the row is used', async () => {
    const inner = foreignTokenizer(qwen3)
    const throwing = {
      ...inner,
      applyChatTemplate: async (messages: Array<{ content: string }>, ...rest: unknown[]) => {
        if (messages[0].content === 'question 4') throw new Error('template exploded')
        return inner.applyChatTemplate(messages, ...rest)
      },
    }
    const ds = createSFTDataset(conversations.slice(0, 6), throwing)
    expect((await ds.collateBatch([0, 1])).shape[0]).toBe(2)
    await expect(ds.collateBatch([3, 4])).rejects.toMatchObject({
      code: 'TEMPLATE_RENDER',
      message: 'SFT example 4: template exploded',
    })
    const file = join(work, 'throws.jsonl')
    writeFileSync(file, conversations.slice(0, 6).map((c) => JSON.stringify(c)).join('\n'))
    await expect(loadSFTDataset(file, throwing, { allowedRoot: work })).rejects.toMatchObject({
      code: 'TEMPLATE_RENDER',
      message: `${file}: SFT example 4: template exploded`,
    })
  })

  it('a render that is not token ids fails every row with INVALID_ARGUMENT naming the example', async () => {
    for (const [value, shown] of [
      ['<|im_start|>text', 'the string "<|im_start|>text"'],
      [[1, -2], 'an array'],
      [{ ids: [1] }, 'an object'],
    ] as const) {
      const bad = { ...foreignTokenizer(qwen3), applyChatTemplate: async () => value }
      const ds = createSFTDataset(conversations.slice(0, 2), bad)
      await expect(ds.collateBatch([0])).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: `SFT example 0: tokenizer.applyChatTemplate resolved to ${shown}, expected token ids (a Uint32Array, an Int32Array or an array of integers in [0, 2^32))`,
      })
    }
  })

  it('ids as an Int32Array or a plain array are taken', async () => {
    const inner = foreignTokenizer(qwen3)
    for (const convert of [(ids: Uint32Array) => Int32Array.from(ids), (ids: Uint32Array) => Array.from(ids)]) {
      const other = { ...inner, applyChatTemplate: async (...a: unknown[]) => convert(await inner.applyChatTemplate(...a)) }
      expect(await createSFTDataset(conversations, other).collateBatch([2])).toEqual(await createSFTDataset(conversations, qwen3).collateBatch([2]))
    }
  })

  it('a lookup method that throws or answers the wrong type is INVALID_ARGUMENT naming the call', () => {
    const inner = foreignTokenizer(qwen3)
    const cases: Array<[object, string]> = [
      [{ getPadTokenId: () => { throw new Error('no pad') } }, 'createSFTDataset: tokenizer.getPadTokenId() threw: no pad'],
      [{ getPadTokenId: () => -1 }, 'createSFTDataset: tokenizer.getPadTokenId() returned number -1, expected a token id (an integer in [0, 2^32))'],
      [{ getImEndToken: () => 5 }, 'createSFTDataset: tokenizer.getImEndToken() returned number 5, expected a string'],
      [{ tokenToId: () => 'x' }, 'createSFTDataset: tokenizer.tokenToId("<|im_start|>") returned the string "x", expected a token id or null'],
    ]
    for (const [override, message] of cases) {
      expect(() => createSFTDataset(conversations, { ...inner, ...override })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT', message }))
    }
  })

  it('settings that need our renderer are INVALID_ARGUMENT naming the alternative', async () => {
    const foreign = foreignTokenizer(qwen3)
    const instead = "use a Tokenizer of sft-dataset (Tokenizer.fromPretrained, with renderAs: 'mlx-node' to render as MLX Node does)"
    for (const [config, setting] of [
      [{ completionOnly: true, maskingStrategy: 'spans' }, "maskingStrategy 'spans'"],
      [{ completionOnly: true, maskingStrategy: 'generation' }, "maskingStrategy 'generation'"],
      [{ sanitizeControlTokens: true }, 'sanitizeControlTokens'],
      [{ truncation: 'turns' }, "truncation 'turns'"],
      [{ renderAs: 'mlx-node' }, 'renderAs'],
    ] as const) {
      expect(() => createSFTDataset(conversations, foreign, config as SFTDatasetConfig)).toThrow(
        expect.objectContaining({
          code: 'INVALID_ARGUMENT',
          message: `${setting} needs the chat template rendered by sft-dataset, and this tokenizer renders its own; ${instead}`,
        }),
      )
    }
    const file = join(work, 'cache.jsonl')
    writeFileSync(file, JSON.stringify(conversations[0]))
    await expect(loadSFTDataset(file, foreign, { cache: join(work, 'cache'), allowedRoot: work })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringMatching(/^loadSFTDataset: the token cache needs a Tokenizer of sft-dataset/),
    })
  })

  it('numBatches of a plan before the rows are rendered says to await ready()', async () => {
    const ds = createSFTDataset(conversations, foreignTokenizer(qwen3), { batching: 'tokenBudget' })
    expect(() => ds.numBatches(4)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('await dataset.ready()') }))
    await ds.ready()
    expect(ds.numBatches(4)).toBe(createSFTDataset(conversations, qwen3, { batching: 'tokenBudget' }).numBatches(4))
  })
})
