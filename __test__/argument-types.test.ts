// A JS value of the wrong type, passed to any export, gives this library's INVALID_ARGUMENT error
// naming the function, never napi's own status codes; functions that return a Promise reject,
// they never throw.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

import * as lib from '../lib/index.js'
import { ASYNC } from '../lib/arguments.js'
import { repoRoot, tokenizer, tokenizerDir } from './helpers'

type CodedError = Error & { code: string }

const tok = tokenizer('qwen3')
const examples = [
  { prompt: [{ role: 'user', content: 'a' }], completion: { role: 'assistant', content: 'b' } },
] as lib.SFTExample[]
const ds = lib.createSFTDataset(examples, tok)
const wrong = (value: unknown) => value as never

const STRING = 'Failed to convert JavaScript value `Number 5 ` into rust type `String`'
const ARRAY = 'Failed to get Array length'
const f64 = 'Failed to convert napi value String into rust type `f64`'
const IDS = 'Value is none of these types `TypedArray<i32>`, `TypedArray<u32>`, `Array<T>`, '
const IDS_EXPECTED = 'an Int32Array, a Uint32Array or an array of numbers'

// [call, sync or async, exact message or its start]
const cases: Array<[string, () => unknown, 'sync' | 'async', string]> = [
  ['Tokenizer.fromPretrained', () => lib.Tokenizer.fromPretrained(wrong(5)), 'async', `Tokenizer.fromPretrained: an argument has the wrong type, expected a string: ${STRING}`],
  ['Tokenizer.fromPretrainedSync', () => lib.Tokenizer.fromPretrainedSync(wrong(5)), 'sync', `Tokenizer.fromPretrainedSync: an argument has the wrong type, expected a string: ${STRING}`],
  ['Tokenizer.encode', () => tok.encode(wrong(5)), 'async', `Tokenizer.encode: an argument has the wrong type, expected a string: ${STRING}`],
  ['Tokenizer.encodeSync', () => tok.encodeSync(wrong(5)), 'sync', `Tokenizer.encodeSync: an argument has the wrong type, expected a string: ${STRING}`],
  ['Tokenizer.encodeBatch', () => tok.encodeBatch(wrong('x')), 'async', `Tokenizer.encodeBatch: an argument has the wrong type, expected an array: ${ARRAY}`],
  ['Tokenizer.decode', () => tok.decode(wrong('x')), 'async', `Tokenizer.decode: an argument has the wrong type, expected ${IDS_EXPECTED}: ${IDS}`],
  ['Tokenizer.decodeSync', () => tok.decodeSync(wrong('x')), 'sync', `Tokenizer.decodeSync: an argument has the wrong type, expected ${IDS_EXPECTED}: ${IDS}`],
  ['Tokenizer.decodeBatch', () => tok.decodeBatch(wrong('x')), 'async', `Tokenizer.decodeBatch: an argument has the wrong type, expected an array: ${ARRAY}`],
  ['Tokenizer.applyChatTemplate', () => tok.applyChatTemplate(wrong('x')), 'async', `Tokenizer.applyChatTemplate: an argument has the wrong type, expected an array: ${ARRAY}`],
  ['Tokenizer.applyChatTemplateSync', () => tok.applyChatTemplateSync(wrong('x')), 'sync', `Tokenizer.applyChatTemplateSync: an argument has the wrong type, expected an array: ${ARRAY}`],
  ['Tokenizer.renderChatTemplate', () => tok.renderChatTemplate(wrong('x')), 'sync', `Tokenizer.renderChatTemplate: an argument has the wrong type, expected an array: ${ARRAY}`],
  ['Tokenizer.idToToken', () => tok.idToToken(wrong('x')), 'sync', 'Tokenizer.idToToken: an argument has the wrong type, expected a number: Failed to convert napi value String into rust type `u32`'],
  ['Tokenizer.tokenToId', () => tok.tokenToId(wrong(5)), 'sync', `Tokenizer.tokenToId: an argument has the wrong type, expected a string: ${STRING}`],
  ['SFTDataset.shuffleForEpoch', () => ds.shuffleForEpoch(wrong('x')), 'sync', `SFTDataset.shuffleForEpoch: an argument has the wrong type, expected a number: ${f64}`],
  ['SFTDataset.collateBatch', () => ds.collateBatch(wrong('x')), 'async', `SFTDataset.collateBatch: an argument has the wrong type, expected an array: ${ARRAY}`],
  ['SFTDataset.tokenizeExample', () => ds.tokenizeExample(wrong('x')), 'async', `SFTDataset.tokenizeExample: an argument has the wrong type, expected a number: ${f64}`],
  ['SFTDataset.summary', () => ds.summary(wrong({ batchSize: 'x' })), 'async', `SFTDataset.summary: an argument has the wrong type, expected a number: ${f64} on SummaryOptions.batchSize`],
  ['SFTDataset.numBatches', () => ds.numBatches(wrong('x')), 'sync', `SFTDataset.numBatches: an argument has the wrong type, expected a number: ${f64}`],
  ['SFTDataset.batches', () => ds.batches(wrong('x')).next(), 'async', `SFTDataset._checkBatchSize: an argument has the wrong type, expected a number: ${f64}`],
  ['new SFTDataset', () => new lib.SFTDataset(wrong('x'), tok), 'sync', `new SFTDataset: examples is not an array of examples: ${ARRAY}`],
  // An option of the wrong type is named, with the type it takes and the value given.
  ['createSFTDataset', () => lib.createSFTDataset(examples, tok, wrong({ maxSeqLength: '512' })), 'sync', 'createSFTDataset: option maxSeqLength must be a number, got a string ("512")'],
  ['loadSFTDataset (path)', () => lib.loadSFTDataset(wrong(5), tok), 'async', 'loadSFTDataset: path must be a string or a list of sources, got number'],
  ['loadSFTDataset (config)', () => lib.loadSFTDataset(join(repoRoot, 'examples', 'sample.jsonl'), tok, wrong({ maxSeqLength: '512' })), 'async', 'loadSFTDataset: option maxSeqLength must be a number, got a string ("512")'],
  ['loadSFTDataset (cache)', () => lib.loadSFTDataset(join(repoRoot, 'examples', 'sample.jsonl'), tok, wrong({ cache: 5 })), 'async', 'loadSFTDataset: option cache must be a string or an object, got a number (5)'],
  ['validateSFTFile', () => lib.validateSFTFile(wrong(5)), 'async', `validateSFTFile: an argument has the wrong type, expected a string: ${STRING}`],
  ['validateSFTFile (config)', () => lib.validateSFTFile(join(repoRoot, 'examples', 'sample.jsonl'), tok, wrong({ completionOnly: 1 })), 'async', "validateSFTFile: option completionOnly must be true, false or 'auto', got a number (1)"],
  ['exportSFTParquet (options)', () => lib.exportSFTParquet(join(repoRoot, 'examples', 'sample.jsonl'), tok, join(repoRoot, 'never.parquet'), {}, wrong({ batchSize: '8' })), 'async', 'exportSFTParquet: option batchSize must be a number, got a string ("8")'],
  ['createMasksFromResponseStart', () => lib.createMasksFromResponseStart(wrong('x'), 0), 'sync', `createMasksFromResponseStart: an argument has the wrong type, expected ${IDS_EXPECTED}: ${IDS}`],
  ['validateMasks', () => lib.validateMasks(wrong('x'), [1]), 'sync', `validateMasks: an argument has the wrong type, expected ${IDS_EXPECTED}: ${IDS}`],
  ['fixHistoricalMasks', () => lib.fixHistoricalMasks([1], [1], wrong({}), []), 'async', 'fixHistoricalMasks: an argument is not valid: Failed to recover `JsTokenizer` type from napi value'],
  ['tokenizeConversationForTrainer', () => lib.tokenizeConversationForTrainer(tok, wrong('x')), 'async', `tokenizeConversationForTrainer: an argument has the wrong type, expected an array: ${ARRAY}`],
  ['tokenizeConversationForTrainerSync', () => lib.tokenizeConversationForTrainerSync(tok, wrong('x')), 'sync', `tokenizeConversationForTrainerSync: an argument has the wrong type, expected an array: ${ARRAY}`],
  ['tokenizeForTrainer', () => lib.tokenizeForTrainer(tok, wrong('x')), 'async', `tokenizeForTrainer: an argument has the wrong type, expected an array: ${ARRAY}`],
  ['tokenizeForTrainerSync', () => lib.tokenizeForTrainerSync(wrong({}), []), 'sync', 'tokenizeForTrainerSync: an argument is not valid: Failed to recover `JsTokenizer` type from napi value'],
  ['tokenizeForTrainerBatch', () => lib.tokenizeForTrainerBatch(tok, wrong('x')), 'async', `tokenizeForTrainerBatch: an argument has the wrong type, expected an array: ${ARRAY}`],
  ['tokenizeForTrainerBatchSync', () => lib.tokenizeForTrainerBatchSync(tok, wrong('x')), 'sync', `tokenizeForTrainerBatchSync: an argument has the wrong type, expected an array: ${ARRAY}`],
  ['packDistillation', () => lib.packDistillation(wrong('x'), [], wrong({})), 'sync', `packDistillation: an argument has the wrong type, expected an array: ${ARRAY}`],
  ['planDistillationRequests', () => lib.planDistillationRequests(Symbol('s'), null, null), 'sync', 'planDistillationRequests: an argument is not valid: JS symbols cannot be represented as a serde_json::Value'],
  ['checkDistillationReplies', () => lib.checkDistillationReplies(wrong('x'), []), 'sync', `checkDistillationReplies: an argument has the wrong type, expected an array: ${ARRAY}`],
  ['getAllowedRoot', () => lib.getAllowedRoot(wrong({ allowedRoot: 5 })), 'sync', `getAllowedRoot: an argument has the wrong type, expected a string: ${STRING} on PathValidationOptions.allowedRoot`],
  ['validatePathContainment', () => lib.validatePathContainment(wrong(5), '/'), 'sync', `validatePathContainment: an argument has the wrong type, expected a string: ${STRING}`],
  ['resolveAndValidatePath', () => lib.resolveAndValidatePath(wrong(5), '/'), 'sync', `resolveAndValidatePath: an argument has the wrong type, expected a string: ${STRING}`],
]

describe('wrong JS types', () => {
  it.each(cases)('%s', async (_, call, kind, message) => {
    let result: unknown
    let error: unknown
    try {
      result = call()
    } catch (e) {
      error = e
    }
    if (kind === 'async') {
      expect(error).toBeUndefined()
      expect(result).toBeInstanceOf(Promise)
      error = await (result as Promise<unknown>).then(
        () => undefined,
        (e: unknown) => e,
      )
    }
    expect(error).toBeInstanceOf(Error)
    expect((error as CodedError).code).toBe('INVALID_ARGUMENT')
    expect((error as CodedError).message).toBe(message)
  })

  it('a guarded method still belongs to its class and keeps its name', () => {
    expect(lib.Tokenizer.prototype.encodeSync.name).toBe('encodeSync')
    expect(lib.Tokenizer.fromPretrained.name).toBe('fromPretrained')
    expect(ds).toBeInstanceOf(lib.SFTDataset)
    expect(lib.Qwen3Tokenizer).toBe(lib.Tokenizer)
    expect(Array.from(tok.encodeSync('hello'))).toEqual([14990])
  })

  it('every function and method index.d.ts declares as returning a Promise is in the async list', () => {
    const dts = readFileSync(join(repoRoot, 'index.d.ts'), 'utf8')
    const found = new Set<string>()
    let owner = ''
    for (const line of dts.split('\n')) {
      const cls = /^export declare class (\w+)/.exec(line)
      if (cls) owner = cls[1]
      if (line.startsWith('}')) owner = ''
      const fn = /^export declare function (\w+)\(.*\): Promise</.exec(line)
      if (fn) found.add(fn[1])
      const method = /^  (?:static )?(\w+)\(.*\): Promise</.exec(line)
      if (method && owner) found.add(`${owner}.${method[1]}`)
    }
    expect([...found].sort()).toEqual([...ASYNC].sort())
  })

  it('a wrong type inside a tokenizer directory argument still loads nothing', () => {
    const e = (() => {
      try {
        lib.Tokenizer.fromPretrainedSync(tokenizerDir('qwen3'), wrong({ engine: 5 }))
      } catch (err) {
        return err as CodedError
      }
      throw new Error('expected a throw')
    })()
    expect(e.code).toBe('INVALID_ARGUMENT')
    expect(e.message).toMatch(/^Tokenizer\.fromPretrainedSync: an argument has the wrong type, expected a string: /)
  })
})

// createSFTDataset converts its examples a slice at a time (example 0, then 8, 16, 32 and 64 at
// most: examples 1-8, 9-24, 25-56, 57-120, 121-184...) and starts building rows while it
// converts: the errors and the rows must be those of one whole conversion.
describe('createSFTDataset over many examples', () => {
  const pc = (i: number) => ({ prompt: [{ role: 'user', content: `q${i}` }], completion: { role: 'assistant', content: `a${i}` } })
  const many = (n: number) => Array.from({ length: n }, (_, i) => pc(i)) as unknown[]
  const thrown = (f: () => unknown) => {
    try {
      f()
    } catch (err) {
      return err as CodedError
    }
    throw new Error('expected a throw')
  }

  it('a late conversion error wins over an earlier format error and over a bad config', () => {
    const examples = many(200)
    examples[70] = { messages: [{ role: 'user', content: 'x' }, { role: 'assistant', content: 'y' }] }
    examples[150] = { prompt: [{ role: 'user', content: () => 1 }], completion: { role: 'assistant', content: 'b' } }
    const conversion = thrown(() => lib.createSFTDataset(wrong(examples), tok))
    expect(conversion.code).toBe('INVALID_ARGUMENT')
    expect(conversion.message).toBe('createSFTDataset: examples is not an array of examples: prompt[0].content is a function')
    const withBadConfig = thrown(() => lib.createSFTDataset(wrong(examples), tok, wrong({ batching: 'nope' })))
    expect(withBadConfig.message).toBe(conversion.message)
  })

  it('a format error past the first slice names its example, after the config is checked', () => {
    const examples = many(200)
    examples[130] = { messages: [{ role: 'user', content: 'x' }, { role: 'assistant', content: 'y' }] }
    const e = thrown(() => lib.createSFTDataset(wrong(examples), tok))
    expect(e.code).toBe('INVALID_EXAMPLE')
    expect(e.message).toBe('Inconsistent SFT data format: example 0 is prompt-completion, example 130 is conversation')
    const config = thrown(() => lib.createSFTDataset(wrong(examples), tok, wrong({ batching: 'nope' })))
    expect(config.code).toBe('INVALID_ARGUMENT')
    expect(config.message).toMatch(/batching/)
  })

  it('gives every example the row a dataset of that example alone gives, across slices', async () => {
    const examples = many(150) as lib.SFTExample[]
    const ds = lib.createSFTDataset(examples, tok, { completionOnly: true })
    const rows: Array<{ ids: number[]; labels: number[] }> = []
    for await (const b of ds.batches(50)) {
      const [count, width] = b.shape
      for (let r = 0; r < count; r++) {
        rows.push({
          ids: Array.from(b.inputIds.subarray(r * width, (r + 1) * width)),
          labels: Array.from(b.labels.subarray(r * width, (r + 1) * width)),
        })
      }
    }
    expect(rows.length).toBe(150)
    for (const i of [0, 1, 8, 9, 24, 25, 56, 57, 63, 64, 120, 121, 149]) {
      const alone = await lib.createSFTDataset([examples[i]], tok, { completionOnly: true }).collateBatch([0])
      const n = alone.shape[1]
      expect(rows[i].ids.slice(0, n), `example ${i}`).toEqual(Array.from(alone.inputIds))
      expect(rows[i].labels.slice(0, n), `example ${i}`).toEqual(Array.from(alone.labels))
      expect(rows[i].ids.slice(n).every((id) => id === tok.getPadTokenId())).toBe(true)
      expect(rows[i].labels.slice(n).every((l) => l === -100)).toBe(true)
    }
  })
})

// Strings are read with one napi call when their UTF-8 text fits a 16 KiB buffer, and with a
// length query first otherwise: every length across that edge, with characters of every UTF-8
// width ending there, must arrive whole (lone surrogates as U+FFFD, as JSON text would carry).
describe('JS strings reach the template whole', () => {
  const user = (rendered: string) => rendered.split('<|im_start|>user\n')[1].split('<|im_end|>')[0]
  it('at every length around the one-call buffer, with 1- to 4-byte characters at its edge', () => {
    const edge = 16 * 1024
    let checked = 0
    for (const tail of ['a', 'é', '€', '😀', '\ud800', 'a\udc00b']) {
      for (let bytes = edge - 12; bytes <= edge + 6; bytes++) {
        const s = 'x'.repeat(bytes - Buffer.byteLength(tail.toWellFormed())) + tail
        const rendered = tok.renderChatTemplate([{ role: 'user', content: s }], { enableThinking: false })
        expect(user(rendered), `${bytes} bytes ending in ${JSON.stringify(tail)}`).toBe(s.toWellFormed())
        checked++
      }
    }
    expect(checked).toBe(6 * 19)
    const long = '€'.repeat(40_000)
    expect(user(tok.renderChatTemplate([{ role: 'user', content: long }], { enableThinking: false }))).toBe(long)
  })
})
