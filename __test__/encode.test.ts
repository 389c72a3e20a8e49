// createSFTDataset writes plain examples into one buffer on the JS thread (lib/encode.js) and
// leaves everything else to napi's conversion. The two must give the same JSON, byte for byte,
// and the same errors; the buffer must leave to napi exactly what it cannot hold.
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'

import { describe, expect, it } from 'vitest'

import * as lib from '../lib/index.js'
import { hasShared, sharedParity, tokenizer } from './helpers'

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { encodeExamples, SLOW } = require('../lib/encode.js') as {
  encodeExamples: (examples: unknown) => { bytes: Uint8Array; spans: Uint32Array } | null
  SLOW: number
}

type Converted = { texts?: string[]; error?: string }
const convert = (f: () => string[]): Converted => {
  try {
    return { texts: f() }
  } catch (e) {
    return { error: `${(e as { code?: string }).code}: ${(e as Error).message}` }
  }
}
const walked = (examples: unknown[]) => convert(() => lib.SFTDataset._convertedExamples(examples))
const encoded = (examples: unknown[]) => {
  const e = encodeExamples(examples)!
  return convert(() => lib.SFTDataset._convertedExamples(examples, e.bytes, e.spans))
}
const slowOnes = (examples: unknown[]) => {
  const e = encodeExamples(examples)!
  return examples.map((_, i) => e.spans[2 * i] === SLOW)
}

const realFiles = hasShared ? readdirSync(join(sharedParity, 'real', 'data')).filter((f) => f.endsWith('.jsonl')) : []
const readJsonl = (file: string) =>
  readFileSync(join(sharedParity, 'real', 'data', file), 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l))

describe('examples written into a buffer', () => {
  it.skipIf(!hasShared)('read back as the very JSON napi gives, on every real example', () => {
    for (const file of realFiles) {
      const examples = readJsonl(file)
      expect(slowOnes(examples).some(Boolean), file).toBe(false)
      const a = walked(examples)
      expect(a.texts?.length, file).toBe(examples.length)
      expect(encoded(examples), file).toEqual(a)
    }
  })

  const msg = (content: unknown) => ({ messages: [{ role: 'user', content }] })
  class Point {
    x = 1
  }
  const hole = [1, , 3] // eslint-disable-line no-sparse-arrays
  const withExtra = Object.assign([1, 2], { extra: 'not an element' })
  const nullProto = Object.assign(Object.create(null), { role: 'user', content: 'no prototype' })
  const hidden = Object.defineProperty({ role: 'user', content: 'x' }, 'secret', { value: 1, enumerable: false })
  const withSymbol = { role: 'user', content: 'x', [Symbol('s')]: 2 }
  const getter = { role: 'user', get content() { return 'from a getter' } }
  const throwing = { role: 'user', get content(): string { throw new Error('boom') } }
  const nested = (depth: number) => {
    let v: unknown = 'leaf'
    for (let i = 0; i < depth; i++) v = [v]
    return v
  }

  // [name, example, left to napi?]
  const cases: Array<[string, unknown, boolean]> = [
    ['plain', msg('hello'), false],
    ['non-ASCII, short and long', msg(['é', '日本語', '😀', 'x'.repeat(60) + 'é']), false],
    ['lone surrogates', msg(['\ud800', 'a\udc00b', '\udc00\ud800', 'x'.repeat(60) + '\ud83d']), false],
    ['integer-like keys first, in order', { messages: [], b: 1, 2: 'two', a: 2, 1: 'one' }, false],
    ['numbers', msg([0, -0, 1.5, -7, 2 ** 53 - 1, 2 ** 53, 1e21, 0.1, 5e-324, Number.MAX_VALUE]), false],
    ['null, booleans, empty containers', msg([null, true, false, [], {}]), false],
    ['undefined properties are left out', { messages: [{ role: 'user', content: 'x', name: undefined }] }, false],
    ['an array with a named property', msg(withExtra), false],
    ['a null-prototype object', { messages: [nullProto] }, false],
    ['non-enumerable and symbol keys', { messages: [hidden, withSymbol] }, false],
    ['a getter', { messages: [getter] }, false],
    ['the wide-integer carrier key', msg({ '\u0000sft-dataset:int': '12345678901234567890123' }), false],
    ['nesting at the limit', msg(nested(124)), false],
    ['nesting past the limit', msg(nested(126)), true],
    ['a BigInt', msg(12n), true],
    ['NaN', msg(NaN), true],
    ['Infinity', msg(-Infinity), true],
    ['undefined in an array', msg([1, undefined]), true],
    ['a hole', msg(hole), true],
    ['a function', msg(() => 1), true],
    ['a symbol', msg(Symbol('x')), true],
    ['a Date', msg(new Date(0)), true],
    ['a Map', msg(new Map([['a', 1]])), true],
    ['a class instance', msg(new Point()), true],
    ['a boxed string', msg(new String('boxed')), true],
    ['a typed array', msg(new Uint8Array([1, 2])), true],
    ['a Proxy', msg(new Proxy({ a: 1 }, {})), true],
    ['a Proxy of an array', msg(new Proxy([1], {})), true],
    ['a throwing getter', { messages: [throwing] }, true],
    ['an undefined example', undefined, true],
    ['a string example', 'just text', false],
  ]

  it.each(cases)('%s: same JSON or the same error', (_name, example, slow) => {
    expect(slowOnes([example])).toEqual([slow])
    expect(encoded([example])).toEqual(walked([example]))
  })

  it('every case in one array: same JSON texts, same first error', () => {
    const examples = cases.map((c) => c[1])
    expect(slowOnes(examples)).toEqual(cases.map((c) => c[2]))
    const plain = cases.filter((c) => !c[2]).map((c) => c[1])
    const a = walked(plain)
    expect(a.texts).toHaveLength(plain.length)
    expect(encoded(plain)).toEqual(a)
    // The first napi error stays the first error.
    const b = walked(examples)
    expect(b.error).toMatch(/^INVALID_ARGUMENT: examples is not an array of examples: /)
    expect(encoded(examples)).toEqual(b)
  })

  it('spells numbers and keys as napi does', () => {
    const example = { messages: [], b: 1, 2: 'two', a: [2 ** 53, 1.5, -0, 3], 1: 'one' }
    expect(encoded([example]).texts).toEqual(['{"1":"one","2":"two","messages":[],"b":1,"a":[9007199254740992.0,1.5,0,3]}'])
  })

  it('leaves everything to napi when the built-in prototypes add keys', () => {
    const proto = Object.prototype as Record<string, unknown>
    proto.polluted = 'yes'
    try {
      expect(encodeExamples([msg('x')])).toBeNull()
    } finally {
      delete proto.polluted
    }
    expect(encodeExamples([msg('x')])).not.toBeNull()
    expect(encodeExamples(new Proxy([msg('x')], {}))).toBeNull()
    expect(encodeExamples({ length: 1, 0: msg('x') })).toBeNull()
  })

  it('refuses bytes that are not one encoded value, naming the example', () => {
    const e = encodeExamples([msg('a'), msg('b')])!
    const cut = e.bytes.subarray(0, e.bytes.length - 1)
    expect(convert(() => lib.SFTDataset._convertedExamples([msg('a'), msg('b')], cut, e.spans)).error).toMatch(
      /^INVALID_ARGUMENT: examples: encoded example 1: bytes \d+\.\.\d+ are not within the \d+ given$/,
    )
    const bad = new Uint8Array(e.bytes)
    bad[e.spans[2]] = 9
    expect(convert(() => lib.SFTDataset._convertedExamples([msg('a'), msg('b')], bad, e.spans)).error).toBe(
      'INVALID_ARGUMENT: examples: encoded example 1: unknown tag 9 at byte 1',
    )
    expect(convert(() => lib.SFTDataset._convertedExamples([msg('a')], e.bytes, e.spans)).error).toBe(
      'INVALID_ARGUMENT: examples: 4 encoded spans for 1 examples',
    )
  })

  it.skipIf(!hasShared)('createSFTDataset gives the batches of a dataset converted through napi', async () => {
    const tok = tokenizer('qwen3')
    for (const file of ['pc_alpaca.jsonl', 'conv_glaive_toolcall_en.jsonl']) {
      const examples = readJsonl(file).slice(0, 200)
      const config = { completionOnly: true }
      const viaBuffer = lib.createSFTDataset(examples, tok, config)
      const viaNapi = new lib.SFTDataset(examples, tok, config)
      const a: number[][] = []
      const b: number[][] = []
      for await (const batch of viaBuffer.batches(16)) a.push([...batch.inputIds], [...batch.labels])
      for await (const batch of viaNapi.batches(16)) b.push([...batch.inputIds], [...batch.labels])
      expect(a.length, file).toBe(26)
      expect(a, file).toEqual(b)
    }
  })
})
