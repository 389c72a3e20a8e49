// The Tokenizer through the public API: template goldens from Python transformers (text and
// ids), both engines, special tokens, and error codes.
import { readFileSync, mkdtempSync, writeFileSync, copyFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

import { Qwen3Tokenizer, Tokenizer, createSFTDataset } from '../lib/index.js'
import { fixtures, tokenizer, tokenizerDir } from './helpers'

type Family = 'qwen3' | 'llama3_1' | 'gemma3' | 'deepseek_v3'
interface Case {
  name: string
  messages: any[]
  tools: any[] | null
  addGenerationPrompt: boolean
  enableThinking: boolean | null
  templateKwargs?: Record<string, unknown>
  text?: string
  ids?: number[]
  error?: string
  errorType?: string
}

function casesOf(family: Family): Case[] {
  return JSON.parse(readFileSync(join(fixtures, 'templates', `${family}.json`), 'utf8')).cases
}

// JSON.parse turns Python's 1.0 into 1, which tojson then prints as "1": such cases are checked
// by the Rust golden test (tests/template_goldens.rs), which keeps float spelling.
const jsSafe = (c: Case) => c.text === undefined || !/\d\.0\b|\de[+-]\d/.test(c.text)
// transformers 4.57 renders null-valued message keys (as `None`); 5.x and this library drop them.
// Those cases are replayed from 5.x goldens in render-diff.test.ts.
const noNullKeys = (c: Case) => !c.messages.some((m) => m !== null && typeof m === 'object' && Object.values(m).includes(null))

describe.each(['qwen3', 'llama3_1', 'gemma3', 'deepseek_v3'] as Family[])('%s chat template', (family) => {
  const tok = tokenizer(family)
  const cases = casesOf(family).filter(jsSafe).filter(noNullKeys)
  it('has goldens', () => expect(cases.length).toBeGreaterThanOrEqual(150))
  it('renders every golden to the same text and ids as transformers', async () => {
    for (const c of cases) {
      const opts = {
        addGenerationPrompt: c.addGenerationPrompt,
        tools: c.tools ?? undefined,
        enableThinking: c.enableThinking ?? undefined,
        templateKwargs: c.templateKwargs,
      }
      if (c.error !== undefined) {
        expect(() => tok.renderChatTemplate(c.messages, opts), c.name).toThrow()
        if (c.errorType === 'TemplateError') {
          expect(() => tok.renderChatTemplate(c.messages, opts), c.name).toThrow(c.error)
        }
        continue
      }
      expect(tok.renderChatTemplate(c.messages, opts), c.name).toBe(c.text)
      if (c.templateKwargs === undefined) {
        const ids = await tok.applyChatTemplate(c.messages, c.addGenerationPrompt, c.tools, c.enableThinking)
        expect(Array.from(ids), c.name).toEqual(c.ids)
      }
    }
  })
})

describe('Qwen3 tokenizer', () => {
  const tok = tokenizer('qwen3')
  it('is also exported as Qwen3Tokenizer', () => expect(Qwen3Tokenizer).toBe(Tokenizer))
  it('reads special tokens from tokenizer_config.json', () => {
    expect(tok.getPadTokenId()).toBe(151643)
    expect(tok.getEosTokenId()).toBe(151645)
    expect(tok.getBosTokenId()).toBeNull()
    expect(tok.getImStartToken()).toBe('<|im_start|>')
    expect(tok.getImEndToken()).toBe('<|im_end|>')
    expect(tok.getEndoftextToken()).toBe('<|endoftext|>')
    expect(tok.vocabSize()).toBe(151669)
  })
  it('looks tokens up raw: "\\n" is not in the byte-level vocabulary', () => {
    expect(tok.tokenToId('\n')).toBeNull()
    expect(tok.tokenToId('Ċ')).toBe(198)
    expect(tok.tokenToId('<|im_start|>')).toBe(151644)
    expect(tok.idToToken(151645)).toBe('<|im_end|>')
  })
  it('encodes, batches and decodes', async () => {
    expect(Array.from(await tok.encode('<|im_start|>user\nhi'))).toEqual([151644, 872, 198, 6023])
    expect(Array.from(tok.encodeSync('Hello world', false))).toEqual([9707, 1879])
    const batch = await tok.encodeBatch(['Hello world', 'hi'], false)
    expect(batch.map((a) => Array.from(a))).toEqual([[9707, 1879], [6023]])
    expect(await tok.decode(new Uint32Array([9707, 1879]))).toBe('Hello world')
    expect(tok.decodeSync(new Uint32Array([151644, 6023]), true)).toBe('hi')
    expect(await tok.decodeBatch([new Uint32Array([6023])])).toEqual(['hi'])
  })
  it('reads a text argument as UTF-8 alike in encode, encodeSync and encodeBatch', async () => {
    // Each sizes its buffer from the UTF-16 length (encodeBatch writes every text into one
    // buffer, one after another). Lone surrogates become U+FFFD in all three.
    const texts = ['', 'a', 'é', '中文', '😀x😀', 'a\uD800b', '\uDFFF', '\uD83D', `${'é'.repeat(3000)}😀`, 'x'.repeat(70000)]
    const batch = (await tok.encodeBatch(texts, false)).map((a) => Array.from(a))
    for (const [k, text] of texts.entries()) {
      expect(Array.from(tok.encodeSync(text, false))).toEqual(batch[k])
      expect(Array.from(await tok.encode(text, false))).toEqual(batch[k])
    }
    expect(batch[5]).toEqual(Array.from(tok.encodeSync('a\uFFFDb', false)))
    expect(batch[2]).toEqual([963])
    expect(await tok.encodeBatch([], false)).toEqual([])
    // An element that is not a string, or a hole, is refused as napi refuses it.
    for (const bad of [['a', 5], ['a', , 'b']]) {
      await expect(tok.encodeBatch(bad as string[], false)).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: expect.stringMatching(/^Tokenizer\.encodeBatch: an argument has the wrong type, expected a string: /),
      })
    }
  })
  it('encodes a batch into one flat array with the offsets of each text', async () => {
    const texts = ['Hello world', '', 'hi', '中文 😀', 'a\uD800b']
    const each = await tok.encodeBatch(texts, false)
    const flat = await tok.encodeBatchFlat(texts, false)
    expect(flat.ids).toBeInstanceOf(Uint32Array)
    expect(flat.offsets).toBeInstanceOf(Uint32Array)
    expect(Array.from(flat.offsets)).toEqual([0, 2, 2, 3, 5, 8])
    expect(Array.from(flat.ids)).toEqual(each.flatMap((a) => Array.from(a)))
    for (const [k, ids] of each.entries()) {
      expect(Array.from(flat.ids.subarray(flat.offsets[k], flat.offsets[k + 1]))).toEqual(Array.from(ids))
    }
    expect(Array.from(flat.ids.subarray(0, 2))).toEqual([9707, 1879])
    // Special tokens by default, as encodeBatch.
    expect(Array.from((await tok.encodeBatchFlat(['hi'])).ids)).toEqual(Array.from((await tok.encodeBatch(['hi']))[0]))
    const empty = await tok.encodeBatchFlat([])
    expect([Array.from(empty.ids), Array.from(empty.offsets)]).toEqual([[], [0]])
    // Megabytes of texts (the arguments are read in blocks of up to a megabyte, the widest
    // texts three bytes a UTF-16 unit): every text as encodeSync gives it, wherever a block ends.
    const many = Array.from({ length: 900 }, (_, k) => (k % 3 === 0 ? '中文 ' : k % 3 === 1 ? 'word ' : '😀 ').repeat(200 + k))
    const manyFlat = await tok.encodeBatchFlat(many, false)
    const manyEach = await tok.encodeBatch(many, false)
    expect(manyFlat.offsets.length).toBe(many.length + 1)
    for (const k of [0, 1, 2, 299, 300, 301, 598, 599, 600, 899]) {
      const want = Array.from(tok.encodeSync(many[k], false))
      expect(Array.from(manyFlat.ids.subarray(manyFlat.offsets[k], manyFlat.offsets[k + 1]))).toEqual(want)
      expect(Array.from(manyEach[k])).toEqual(want)
    }
    expect(manyFlat.ids.length).toBe(manyEach.reduce((n, a) => n + a.length, 0))
    // The ids are V8's own memory: transferring them moves them.
    const moved = structuredClone(manyFlat.ids.buffer, { transfer: [manyFlat.ids.buffer] })
    expect([manyFlat.ids.length, moved.byteLength]).toEqual([0, manyEach.reduce((n, a) => n + a.length, 0) * 4])
    await expect(tok.encodeBatchFlat(['a', 5] as unknown as string[])).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringMatching(/^Tokenizer\.encodeBatchFlat: an argument has the wrong type, expected a string: /),
    })
  })
  it('encodes a few short texts on the calling thread, as the worker threads encode them', async () => {
    // Up to 64 texts of 2,048 UTF-16 units in all take the calling thread; one more text, or
    // one more unit, takes the worker threads. Both give every text the ids encodeSync gives it.
    const words = ['Hello world, ', '你好，世界 ', '😀 ok ', 'tab\there ']
    const few = Array.from({ length: 64 }, (_, k) => words[k % 4].padEnd(32, 'x'))
    expect(few.reduce((n, t) => n + t.length, 0)).toBe(2048)
    for (const texts of [few, [...few, 'y'], [few[0] + 'y', ...few.slice(1)], ['hi'], []]) {
      const pending = tok.encodeBatch(texts, false)
      const pendingFlat = tok.encodeBatchFlat(texts, false)
      expect([pending, pendingFlat].every((p) => p instanceof Promise)).toBe(true)
      const [each, flat] = [await pending, await pendingFlat]
      const want = texts.map((t) => Array.from(tok.encodeSync(t, false)))
      expect(each.map((a) => Array.from(a))).toEqual(want)
      expect(Array.from(flat.ids)).toEqual(want.flat())
      expect(Array.from(flat.offsets)).toEqual([0, ...want.map((_, k) => want.slice(0, k + 1).flat().length)])
    }
    expect(Array.from((await tok.encodeBatch(['hi']))[0])).toEqual([6023])
    // Called on something that is not a tokenizer, either way: a rejected Promise, not a throw.
    for (const texts of [['a'], Array(65).fill('abcd')]) {
      for (const method of [Tokenizer.prototype.encodeBatch, Tokenizer.prototype.encodeBatchFlat]) {
        const pending = method.call({}, texts)
        expect(pending).toBeInstanceOf(Promise)
        await expect(pending).rejects.toThrow(/Illegal invocation/)
      }
    }
  })
  it('encodes by the tokenizer it is called on, frozen or not, and refuses a handle of no tokenizer', async () => {
    // encodeSync reaches the native tokenizer by a number (lib/index.js): alternating
    // tokenizers of two vocabularies, and fresh ones, keep their own ids.
    const text = 'Hello world, 你好'
    const llama = Tokenizer.fromPretrainedSync(tokenizerDir('llama3_1'))
    const qwen = Object.freeze(Tokenizer.fromPretrainedSync(tokenizerDir('qwen3')))
    for (let k = 0; k < 3; k++) {
      expect(Array.from(qwen.encodeSync(text, false))).toEqual([9707, 1879, 11, 220, 108386])
      expect(Array.from(llama.encodeSync(text, false))).toEqual([9906, 1917, 11, 118195, 53901])
      expect(Array.from(tok.encodeSync(text, false))).toEqual(Array.from(await tok.encode(text, false)))
    }
    expect(qwen._handle()).not.toBe(llama._handle())
    expect(Array.from(Tokenizer._encodeSyncByHandle(llama._handle(), text, false))).toEqual([9906, 1917, 11, 118195, 53901])
    expect(() => Tokenizer._encodeSyncByHandle(0, text)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT', message: 'no live tokenizer has the handle 0' }))
    // As any native method called on another object.
    expect(() => Tokenizer.prototype.encodeSync.call({}, text)).toThrow(new TypeError('Illegal invocation'))
  })
  it('decodes the Int32Array rows that batches hand out, Uint32Array and number[]', async () => {
    const ds = createSFTDataset([{ prompt: [{ role: 'user', content: 'hi' }], completion: { role: 'assistant', content: 'Hello world' } }], tok, { completionOnly: true })
    const batch = await ds.collateBatch([0])
    expect(batch.inputIds).toBeInstanceOf(Int32Array)
    const rendered = '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHello world<|im_end|>\n'
    expect(await tok.decode(batch.inputIds)).toBe(rendered)
    expect(tok.decodeSync(batch.inputIds)).toBe(rendered)
    expect(tok.decodeSync(Array.from(batch.inputIds))).toBe(rendered)
    expect(await tok.decodeBatch([batch.inputIds, [9707, 1879], new Uint32Array([6023])])).toEqual([rendered, 'Hello world', 'hi'])
    // The trained tokens of the row: the ids whose label is not -100.
    const trained = batch.inputIds.filter((_, k) => batch.labels[k] !== -100)
    expect(tok.decodeSync(trained)).toBe('Hello world<|im_end|>\n')
  })
  it('rejects a negative or fractional id naming its position', async () => {
    const labels = Int32Array.from([9707, -100, 1879])
    expect(() => tok.decodeSync(labels)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT', message: 'Tokenizer.decodeSync: tokenIds[1] = -100 is not a token id' }))
    await expect(tok.decode([1, 2.5])).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: 'Tokenizer.decode: tokenIds[1] = 2.5 is not a token id' })
    await expect(tok.decodeBatch([[1], [2, -1]])).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: 'Tokenizer.decodeBatch: tokenIdsBatch[1][1] = -1 is not a token id' })
  })
  it('applies the template with a generation prompt by default', () => {
    const ids = tok.applyChatTemplateSync([{ role: 'user', content: 'Hello!' }])
    expect(Array.from(ids)).toEqual([151644, 872, 198, 9707, 0, 151645, 198, 151644, 77091, 198])
  })
  it('accepts camelCase message keys', () => {
    const camel = tok.renderChatTemplate([
      { role: 'user', content: 'q' },
      { role: 'assistant', content: '', toolCalls: [{ name: 'f', arguments: '{"a": 1}' }] },
    ])
    expect(camel).toBe(
      '<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call><|im_end|>\n',
    )
  })
  it('parses tool parameters.properties given as a JSON string', () => {
    const tools = [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: '{"x": {"type": "string"}}' } } }]
    const text = tok.renderChatTemplate([{ role: 'user', content: 'q' }], { tools })
    expect(text).toContain('{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "string"}}}}}')
  })
  it('continues a final message', () => {
    const text = tok.renderChatTemplate(
      [
        { role: 'user', content: 'q' },
        { role: 'assistant', content: 'The answer is' },
      ],
      { continueFinalMessage: true },
    )
    expect(text.endsWith('The answer is')).toBe(true)
  })
  it('loads with either engine and gives identical ids', () => {
    const hf = Tokenizer.fromPretrainedSync(tokenizerDir('qwen3'), { engine: 'hf' })
    const fast = Tokenizer.fromPretrainedSync(tokenizerDir('qwen3'), { engine: 'fast' })
    expect(hf.engine).toBe('hf')
    expect(fast.engine).toBe('fast')
    expect(tok.engine).toBe('fast')
    const text = 'Ünïcödé 你好 🧑‍🚀  spaces\r\n\tand 12345 <|im_end|> tokens\u2028'
    expect(Array.from(fast.encodeSync(text, false))).toEqual(Array.from(hf.encodeSync(text, false)))
  })
})

describe('Gemma 3 on the fast engine', () => {
  const hf = Tokenizer.fromPretrainedSync(tokenizerDir('gemma3'), { engine: 'hf' })
  const auto = Tokenizer.fromPretrainedSync(tokenizerDir('gemma3'))
  const texts = [
    'Hello world',
    '<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n4<end_of_turn>\n',
    '  indented\n\n\n\tcode()  ',
    'Ünïcödé 你好 🧑‍🚀 \u{10ffff} <bos> 12345',
  ]
  it('is chosen by auto and by fast', () => {
    expect(hf.engine).toBe('hf')
    expect(auto.engine).toBe('fast')
    expect(Tokenizer.fromPretrainedSync(tokenizerDir('gemma3'), { engine: 'fast' }).engine).toBe('fast')
  })
  it('gives the ids and decoded text of the HF engine', () => {
    expect(Array.from(auto.encodeSync('Hello world', true))).toEqual([2, 9259, 1902])
    // A char missing from the vocabulary: byte fallback, and back.
    expect(Array.from(auto.encodeSync('\u{10ffff}', false)).map((id) => auto.idToToken(id))).toEqual(['<0xF4>', '<0x8F>', '<0xBF>', '<0xBF>'])
    for (const text of texts) {
      for (const special of [false, true]) {
        const ids = auto.encodeSync(text, special)
        expect(Array.from(ids)).toEqual(Array.from(hf.encodeSync(text, special)))
        expect(auto.decodeSync(ids, special)).toBe(hf.decodeSync(ids, special))
      }
    }
  })
  it('gives the labels of the HF engine (offsets through span masking)', async () => {
    const examples = [
      {
        messages: [
          { role: 'user', content: 'Say  hi in  two languages' },
          { role: 'assistant', content: 'Hi! 你好 🧑‍🚀\n\n  done' },
          { role: 'user', content: 'Again' },
          { role: 'assistant', content: ' Hi again ' },
        ],
      },
    ]
    const config = { completionOnly: true, maskingStrategy: 'spans' as const }
    const fromHf = await createSFTDataset(examples, hf, config).tokenizeExample(0)
    const fromFast = await createSFTDataset(examples, auto, config).tokenizeExample(0)
    expect(fromFast).toEqual(fromHf)
    expect(Array.from(fromFast.labels as ArrayLike<number>).filter((l) => l !== -100).length).toBeGreaterThan(0)
  })
})

describe('errors', () => {
  it('names the path of a missing tokenizer', async () => {
    await expect(Tokenizer.fromPretrained('/no/such/dir')).rejects.toMatchObject({
      code: 'TOKENIZER_LOAD',
      message: expect.stringContaining('/no/such/dir'),
    })
  })
  it('refuses the fast engine on a WordPiece tokenizer with the component named', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sft-wordpiece-'))
    const wordPiece = {
      version: '1.0',
      truncation: null,
      padding: null,
      added_tokens: [],
      normalizer: null,
      pre_tokenizer: null,
      post_processor: null,
      decoder: null,
      model: { type: 'WordPiece', unk_token: '[UNK]', continuing_subword_prefix: '##', max_input_chars_per_word: 100, vocab: { '[UNK]': 0, hello: 1, '##o': 2 } },
    }
    writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(wordPiece))
    expect(() => Tokenizer.fromPretrainedSync(dir, { engine: 'fast' })).toThrow(
      expect.objectContaining({
        code: 'UNSUPPORTED_TOKENIZER',
        message: expect.stringContaining('model: WordPiece is not supported by the fast engine'),
      }),
    )
    const auto = Tokenizer.fromPretrainedSync(dir)
    expect(auto.engine).toBe('hf')
    expect(Array.from(auto.encodeSync('hello', false))).toEqual([1])
  })
  it('reports a missing chat template, a syntax error and raise_exception', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sft-tok-'))
    copyFileSync(join(tokenizerDir('qwen3'), 'tokenizer.json'), join(dir, 'tokenizer.json'))
    const none = Tokenizer.fromPretrainedSync(dir)
    expect(() => none.renderChatTemplate([{ role: 'user', content: 'x' }])).toThrow(
      expect.objectContaining({ code: 'CHAT_TEMPLATE_MISSING' }),
    )
    writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify({ chat_template: '{% if %}' }))
    const broken = Tokenizer.fromPretrainedSync(dir)
    expect(() => broken.renderChatTemplate([{ role: 'user', content: 'x' }])).toThrow(
      expect.objectContaining({ code: 'TEMPLATE_SYNTAX' }),
    )
    writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify({ chat_template: "{{ raise_exception('no system role') }}" }))
    const raising = Tokenizer.fromPretrainedSync(dir)
    expect(() => raising.renderChatTemplate([{ role: 'user', content: 'x' }])).toThrow(
      expect.objectContaining({ code: 'TEMPLATE_RENDER', message: 'no system role' }),
    )
  })
  it('names the message index and field', async () => {
    const tok = tokenizer('qwen3')
    await expect(tok.applyChatTemplate([{ role: 'user', content: 'x' }, { content: 'y' } as any])).rejects.toMatchObject({
      code: 'INVALID_MESSAGE',
      message: 'message 1: role is missing',
    })
  })
})
