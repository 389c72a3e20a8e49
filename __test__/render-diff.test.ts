// Differential goldens from Python transformers 5.x (scripts/gen_render_diff_goldens.py): seeded
// random conversations replayed through the public API, so that every value crosses napi as a
// user's does, and through datasets made from JS examples and from a JSONL file.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it, vi } from 'vitest'

import { createSFTDataset, loadSFTDataset, tokenizeForTrainerSync } from '../lib/index.js'
import { fixtures, tokenizer } from './helpers'

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
  dataset?: { ids?: number[]; sameAsRender?: true }
  wideInt: boolean
  nullKeys: boolean
  integralFloat: boolean
}

// Integers beyond Number.MAX_SAFE_INTEGER are stored as {"$bigint": "<digits>"}: a user holds
// them as BigInt.
const revive = (_key: string, v: any) =>
  v !== null && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length === 1 && typeof v.$bigint === 'string'
    ? BigInt(v.$bigint)
    : v

function goldens(family: Family): { generator: Record<string, unknown>; cases: Case[] } {
  return JSON.parse(readFileSync(join(fixtures, 'render_diff', `${family}.json`), 'utf8'), revive)
}

// A JSONL line as Python writes it: BigInts as plain JSON integers, and floats as floats
// (JSON.stringify writes the float 1e16 as 10000000000000000, which a reader takes for an integer;
// Python writes 1e+16).
function jsonLine(record: unknown): string {
  const tagged = JSON.stringify(record, (_k, v) => {
    if (typeof v === 'bigint') return `@@int:${v}@@`
    if (typeof v === 'number' && Number.isInteger(v) && !Number.isSafeInteger(v) && Math.abs(v) < 1e21) {
      return `@@int:${v.toExponential()}@@`
    }
    return v
  })
  return tagged.replace(/"@@int:(-?[\d.e+-]+)@@"/g, '$1')
}

function hasLongFloat(value: unknown): boolean {
  if (typeof value === 'number') return !Number.isSafeInteger(value) && value.toExponential().replace(/e.*|[-.]/g, '').length >= 16
  if (Array.isArray(value)) return value.some(hasLongFloat)
  if (value !== null && typeof value === 'object') return Object.values(value).some(hasLongFloat)
  return false
}

const datasetIds = (c: Case) => (c.dataset?.sameAsRender ? c.ids : c.dataset?.ids) as number[]
const noWarnings = () => vi.spyOn(console, 'warn').mockImplementation(() => {})
const FAMILIES: Family[] = ['qwen3', 'llama3_1', 'gemma3', 'deepseek_v3']
// Templates print the big numbers (tool-call arguments, tool schemas) only in these families.
const PRINTS_NUMBERS: Family[] = ['qwen3', 'llama3_1']

describe.each(FAMILIES)('%s against transformers 5', (family) => {
  const tok = tokenizer(family)
  const { generator, cases: all } = goldens(family)
  // JSON.parse cannot keep a 1.0 apart from 1: those cases are replayed by
  // tests/render_diff_goldens.rs only.
  const cases = all.filter((c) => !c.integralFloat)

  it('has goldens of every kind', () => {
    expect(generator.transformers).toMatch(/^5\./)
    const named = (prefix: string) => all.filter((c) => c.name.startsWith(prefix)).length
    expect(named(`${family}/`)).toBe(90)
    expect(named('python-whitespace/')).toBe(7)
    expect(all.filter((c) => c.name.startsWith('template-golden/')).length).toBeGreaterThan(20)
    expect(cases.filter((c) => c.nullKeys).length).toBeGreaterThan(20)
    expect(cases.filter((c) => c.dataset).length).toBeGreaterThan(70)
    if (PRINTS_NUMBERS.includes(family)) expect(cases.filter((c) => c.wideInt).length).toBeGreaterThan(20)
  })

  it('renderChatTemplate gives the same text, or fails where Python fails', () => {
    for (const c of cases) {
      const opts = {
        addGenerationPrompt: c.addGenerationPrompt,
        tools: c.tools ?? undefined,
        enableThinking: c.enableThinking ?? undefined,
        templateKwargs: c.templateKwargs,
      }
      if (c.error !== undefined) {
        let thrown: any
        try {
          tok.renderChatTemplate(c.messages, opts)
        } catch (e) {
          thrown = e
        }
        expect(thrown?.code, `${c.name}: Python raised ${c.errorType}: ${c.error}`).toBe('TEMPLATE_RENDER')
        continue
      }
      expect(tok.renderChatTemplate(c.messages, opts), c.name).toBe(c.text)
    }
  })

  it('applyChatTemplate gives the same ids', async () => {
    let compared = 0
    for (const c of cases.filter((c) => c.ids !== undefined && c.templateKwargs === undefined)) {
      const ids = await tok.applyChatTemplate(c.messages, c.addGenerationPrompt, c.tools, c.enableThinking)
      expect(Array.from(ids), c.name).toEqual(c.ids)
      compared++
    }
    expect(compared).toBeGreaterThan(50)
  })

  it('a dataset of the examples as JS objects tokenizes each to the ids of its render', async () => {
    const usable = cases.filter((c) => c.dataset)
    const warn = noWarnings()
    const ds = createSFTDataset(
      usable.map((c) => ({ messages: c.messages })),
      tok,
      { maxSeqLength: 1_000_000 },
    )
    warn.mockRestore()
    for (const [i, c] of usable.entries()) {
      const row = await ds.tokenizeExample(i)
      expect(Array.from(row.inputIds), c.name).toEqual(datasetIds(c))
    }
  })

  it('loadSFTDataset of the same examples in a JSONL file gives the same ids', async () => {
    // Integers beyond 64 bits and floats of 16 or more significant digits included: the file's
    // numbers are read as Python's json.loads reads them (src/json_text.rs), where serde_json alone
    // reads the former as floats and the latter one ulp off in about one case in ten.
    const usable = cases.filter((c) => c.dataset)
    expect(usable.length).toBeGreaterThan(70)
    if (PRINTS_NUMBERS.includes(family)) {
      expect(usable.filter((c) => c.wideInt).length).toBeGreaterThan(10)
      expect(usable.filter((c) => hasLongFloat(c.messages)).length).toBeGreaterThan(10)
    }
    const dir = mkdtempSync(join(tmpdir(), 'render-diff-'))
    const file = join(dir, `${family}.jsonl`)
    writeFileSync(file, usable.map((c) => jsonLine({ messages: c.messages })).join('\n') + '\n')
    const warn = noWarnings()
    const ds = await loadSFTDataset(file, tok, { maxSeqLength: 1_000_000, allowedRoot: dir })
    warn.mockRestore()
    expect(ds.length).toBe(usable.length)
    for (const [i, c] of usable.entries()) {
      const row = await ds.tokenizeExample(i)
      expect(Array.from(row.inputIds), c.name).toEqual(datasetIds(c))
    }
  })
})

// A conversation whose one tool call has `args` as its arguments, and those arguments as rendered.
const call = (args: Record<string, unknown>) => [
  { role: 'user', content: 'go' },
  { role: 'assistant', content: '', tool_calls: [{ type: 'function', function: { name: 'f', arguments: args } }] },
]
const argsOf = (text: string) => text.match(/"arguments": (.*)\}\n<\/tool_call>/)?.[1]

describe('numbers from JS', () => {
  const qwen = tokenizer('qwen3')

  it('integers of the issue table render as Python renders them', () => {
    const args = {
      a: 2147483647,
      b: 2147483648,
      c: 4294967296,
      d: 1700000000000,
      e: 9007199254740991,
      f: -3000000000,
    }
    expect(argsOf(qwen.renderChatTemplate(call(args)))).toBe(
      '{"a": 2147483647, "b": 2147483648, "c": 4294967296, "d": 1700000000000, "e": 9007199254740991, "f": -3000000000}',
    )
  })

  it('other numbers are floats spelled as Python spells them, BigInts exact integers', () => {
    const args = {
      half: 2.5,
      tiny: 1e-7,
      huge: 1e21,
      unsafe: 2 ** 60,
      big: 2n ** 60n,
      wide: 2n ** 100n,
      min: -(2n ** 127n),
      max: 2n ** 128n - 1n,
      whole: 1.0,
    }
    expect(argsOf(qwen.renderChatTemplate(call(args)))).toBe(
      '{"half": 2.5, "tiny": 1e-07, "huge": 1e+21, "unsafe": 1.152921504606847e+18, "big": 1152921504606846976, ' +
        '"wide": 1267650600228229401496703205376, "min": -170141183460469231731687303715884105728, ' +
        '"max": 340282366920938463463374607431768211455, "whole": 1}',
    )
  })

  it('of two shortest spellings equally near a float, the even one, as Python repr', () => {
    const args = { a: 95844.268798828125, b: -147495269.775390625, c: 1848626136779785.25 }
    expect(argsOf(qwen.renderChatTemplate(call(args)))).toBe('{"a": 95844.26879882812, "b": -147495269.77539062, "c": 1848626136779785.2}')
  })

  it('numbers reach tools, the GRPO functions and datasets the same way', async () => {
    const tools = [{ type: 'function', function: { name: 'f', parameters: { type: 'object', maximum: 4294967296 } } }]
    expect(qwen.renderChatTemplate(call({}), { tools })).toContain('"maximum": 4294967296}')
    const messages = call({ id: 1700000000000, big: 2n ** 64n })
    const want = '{"id": 1700000000000, "big": 18446744073709551616}'
    const grpo = tokenizeForTrainerSync(qwen, messages)
    expect(argsOf(await qwen.decode(Uint32Array.from(grpo.tokens)))).toBe(want)
    const ds = createSFTDataset([{ messages }], qwen)
    const row = await ds.tokenizeExample(0)
    expect(argsOf(await qwen.decode(Uint32Array.from(row.inputIds)))).toBe(want)
  })

  it('what JSON cannot hold is refused with the path to the value', () => {
    const cases: Array<[unknown, string]> = [
      [Number.NaN, 'NaN'],
      [Number.POSITIVE_INFINITY, 'Infinity'],
      [2n ** 128n, 'a BigInt beyond 128 bits: a chat template holds integers from -2^127 to 2^128-1'],
      [-(2n ** 127n) - 1n, 'a BigInt beyond 128 bits: a chat template holds integers from -2^127 to 2^128-1'],
    ]
    for (const [value, what] of cases) {
      let thrown: any
      try {
        qwen.renderChatTemplate(call({ nested: { list: [1, value] } }))
      } catch (e) {
        thrown = e
      }
      expect(thrown?.code).toBe('INVALID_ARGUMENT')
      expect(thrown?.message).toContain(`tool_calls[0].function.arguments.nested.list[1] is ${what}`)
    }
  })
})

describe('numbers in data files', () => {
  const qwen = tokenizer('qwen3')

  async function loadedArgs(lines: string[]): Promise<string[]> {
    const dir = mkdtempSync(join(tmpdir(), 'numbers-'))
    writeFileSync(join(dir, 'n.jsonl'), lines.join('\n') + '\n')
    const warn = noWarnings()
    const ds = await loadSFTDataset(join(dir, 'n.jsonl'), qwen, { allowedRoot: dir })
    warn.mockRestore()
    const out: string[] = []
    for (let i = 0; i < ds.length; i++) {
      const row = await ds.tokenizeExample(i)
      out.push(argsOf(await qwen.decode(Uint32Array.from(row.inputIds))) as string)
    }
    return out
  }

  it('are read as json.loads reads them: floats to the nearest double, integers exact to 128 bits', async () => {
    const line = (args: string) => `{"messages": [{"role": "user", "content": "go"}, {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": ${args}}}]}]}`
    const got = await loadedArgs([
      line('{"x": 100.00000000000001, "lat": -122.41941550000001, "y": 0.9856906946328695}'),
      line('{"id": 18446744073709551616, "neg": -170141183460469231731687303715884105728, "zero": -0, "f": -0.0}'),
      line('{"k": 1.5, "k": 0.30000000000000004}'),
    ])
    // serde_json alone gives 100.0, -122.4194155, 0.9856906946328696, 1.8446744073709552e+19, ...
    expect(got).toEqual([
      '{"x": 100.00000000000001, "lat": -122.41941550000001, "y": 0.9856906946328695}',
      '{"id": 18446744073709551616, "neg": -170141183460469231731687303715884105728, "zero": 0, "f": -0.0}',
      '{"k": 0.30000000000000004}',
    ])
  })

  it('a file renders as the same examples made from JS objects, on random full-precision floats', async () => {
    // JSON.parse, like Python's json.loads, rounds correctly: a loaded row must equal the created one.
    let seed = 7
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31
      return seed / 2 ** 31
    }
    const examples = Array.from({ length: 300 }, () => {
      const args = { a: random() * 360 - 180, b: [random(), random() * 1e-9], c: { d: random() * 1e6 } }
      return { messages: call(args) }
    })
    const loaded = await loadedArgs(examples.map((e) => JSON.stringify(e)))
    const created = createSFTDataset(examples, qwen)
    const want: string[] = []
    for (let i = 0; i < examples.length; i++) {
      const row = await created.tokenizeExample(i)
      want.push(argsOf(await qwen.decode(Uint32Array.from(row.inputIds))) as string)
    }
    expect(loaded).toEqual(want)
    expect(want[0]).toMatch(/^\{"a": -?\d+\.\d+, "b": \[0\.\d+, \d\.\d+e-1\d\], "c": \{"d": \d+\.\d+\}\}$/)
  })
})

describe('strings in data files', () => {
  it('a lone surrogate escape reads as U+FFFD, as JSON.parse and napi hand it to the reference', async () => {
    const qwen = tokenizer('qwen3')
    const lines = [
      String.raw`{"messages": [{"role": "user", "content": "a\ud800b \udc00"}, {"role": "assistant", "content": "ok \ud83d\ude00 \\ud800"}]}`,
    ]
    const dir = mkdtempSync(join(tmpdir(), 'surrogates-'))
    writeFileSync(join(dir, 's.jsonl'), lines.join('\n') + '\n')
    const loaded = await loadSFTDataset(join(dir, 's.jsonl'), qwen, { allowedRoot: dir })
    const created = createSFTDataset(lines.map((l) => JSON.parse(l)), qwen)
    const row = await loaded.tokenizeExample(0)
    expect(Array.from(row.inputIds)).toEqual(Array.from((await created.tokenizeExample(0)).inputIds))
    expect(await qwen.decode(Uint32Array.from(row.inputIds), false)).toBe(
      '<|im_start|>user\na\ufffdb \ufffd<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nok \u{1F600} \\ud800<|im_end|>\n',
    )
  })
})

describe('null-valued message keys', () => {
  it('are dropped, so Llama 3.1 renders no "None" for an OpenAI tool-call message', () => {
    const llama = tokenizer('llama3_1')
    const messages = [
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: null, tool_calls: [{ type: 'function', function: { name: 'f', arguments: {} } }] },
    ]
    // transformers 5.24 renders exactly this; 4.x and the reference render "None" as the content.
    const want =
      '<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>' +
      '<|start_header_id|>assistant<|end_header_id|>\n\n<|eot_id|>'
    expect(llama.renderChatTemplate(messages)).toBe(want)
  })

  it('are dropped only at the top of a message: nested nulls stay null', () => {
    const qwen = tokenizer('qwen3')
    const text = qwen.renderChatTemplate([
      { role: 'user', content: 'go', name: null },
      {
        role: 'assistant',
        content: 'ok',
        reasoning_content: null,
        tool_calls: [{ type: 'function', function: { name: 'f', arguments: { x: null } } }],
      },
    ])
    expect(text).toBe(
      '<|im_start|>user\ngo<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nok\n<tool_call>\n{"name": "f", "arguments": {"x": null}}\n</tool_call><|im_end|>\n',
    )
  })
})
