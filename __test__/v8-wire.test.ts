// createSFTDataset reads its examples from V8's serialization of the array (`v8.serialize`,
// `src/input/v8_wire.rs`) where it can, and through napi's walk of the JS objects otherwise. The
// two readings must give the same JSON and the same errors: `_readExamples` shows both.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'

import { describe, expect, it } from 'vitest'

import * as lib from '../lib/index.js'
import { requireShared, sharedParity, tokenizer } from './helpers'

type Read = { json?: string | null; error?: string | null; wire: boolean }
const readExamples = (lib as any)._readExamples as (examples: unknown, wire: boolean) => Read[]

/** Both readings of `examples`: their JSON or error, and which examples the wire gave. */
function both(examples: unknown[]) {
  const walk = readExamples(examples, false)
  const wire = readExamples(examples, true)
  expect(walk.every((r) => !r.wire)).toBe(true)
  const outcome = (r: Read) => (r.error != null ? { error: r.error } : { json: r.json })
  expect(wire.map(outcome)).toEqual(walk.map(outcome))
  return { walk, wire, viaWire: wire.map((r) => r.wire) }
}

function rng(seed: number) {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const PIECES = ['a', 'role', 'é', 'Ã©', 'ÿ', '€', '😀', '\ud800', '\udc00', ' ', '\n', '"', '\\', '<|im_end|>', '0', 'ü'.normalize('NFD'), '\u0000']
const KEYS = ['role', 'content', 'tool_calls', 'name', 'arguments', '0', '7', '10', '4294967294', '4294967295', '1073741824', '-1', '__proto__', 'é', '€', '']
const NUMBERS = [0, -0, 1, -1, 7, 2 ** 30, -(2 ** 30), 2 ** 31, -(2 ** 31) - 1, 2 ** 53 - 1, 2 ** 53, 2 ** 60, 1e21, 0.1, -2.5, 1e-7, 5e-324, Number.MAX_VALUE]
const BIGINTS = [0n, -5n, 2n ** 63n, 2n ** 64n, 2n ** 100n, 2n ** 128n - 1n, -(2n ** 127n)]

/** A random plain value, as JSON data or JS code would hold it: the wire reads all of these. */
function plain(r: () => number, depth = 0): unknown {
  const pick = <T>(list: T[]) => list[Math.floor(r() * list.length)]
  const kind = depth > 4 ? Math.floor(r() * 5) : Math.floor(r() * 9)
  switch (kind) {
    case 0:
      return Array.from({ length: Math.floor(r() * 6) }, () => pick(PIECES)).join('')
    case 1:
      return pick(NUMBERS)
    case 2:
      return pick([true, false, null])
    case 3:
      return pick(BIGINTS)
    case 4:
      return r() < 0.02 ? 'x'.repeat(20000) + '€' : pick(PIECES)
    case 5:
    case 6: {
      const o: Record<string, unknown> = {}
      const n = Math.floor(r() * 5)
      for (let i = 0; i < n; i++) {
        const key = pick(KEYS)
        const value = r() < 0.1 ? undefined : plain(r, depth + 1)
        // `__proto__` as an own key, as JSON.parse makes it.
        Object.defineProperty(o, key, { value, enumerable: true, writable: true, configurable: true })
      }
      return o
    }
    default: {
      const a = Array.from({ length: Math.floor(r() * 4) }, () => plain(r, depth + 1))
      if (r() < 0.1) {
        // Holey storage with every index set: the serializer writes it sparse.
        const holey: unknown[] = new Array(a.length + 1)
        for (let i = holey.length - 1; i >= 0; i--) holey[i] = i < a.length ? a[i] : 1
        return holey
      }
      return a
    }
  }
}

describe('V8 serialization and the napi walk read the same JSON', () => {
  it('random plain values: every example from the wire, the same JSON as the walk', () => {
    const r = rng(20261203)
    let examples = 0
    for (let round = 0; round < 150; round++) {
      const values = Array.from({ length: 12 }, () => plain(r))
      // Shared objects within and across examples are read in full where they appear.
      if (round % 3 === 0) {
        const shared = { tools: [plain(r)], n: 2n ** 70n }
        values.push({ a: shared, b: [shared, shared] }, { c: shared })
      }
      const { viaWire } = both(values)
      expect(viaWire.every(Boolean)).toBe(true)
      examples += values.length
    }
    expect(examples).toBeGreaterThan(1800)
  })

  it('what the walk refuses or may read differently goes to the walk, with its own error', () => {
    const cyclic: Record<string, unknown> = { role: 'user' }
    cyclic.self = cyclic
    const holey = [1, , 3] // eslint-disable-line no-sparse-arrays
    const cases: [string, unknown, string | null][] = [
      ['NaN', { n: NaN }, 'n is NaN, which JSON cannot hold: only finite numbers reach a chat template'],
      ['Infinity in an array', { a: [1, -Infinity] }, 'a[1] is -Infinity, which JSON cannot hold: only finite numbers reach a chat template'],
      ['undefined in an array', { a: [undefined] }, 'a[0] is undefined'],
      ['a hole', { a: holey }, 'a[1] is undefined'],
      ['a wide BigInt', { n: 2n ** 128n }, 'n is a BigInt beyond 128 bits: a chat template holds integers from -2^127 to 2^128-1'],
      ['a cycle', cyclic, 'Exceeded maximum JSON nesting depth'],
      ['undefined itself', undefined, 'the value is undefined'],
    ]
    for (const [name, value, error] of cases) {
      const { wire, viaWire } = both([{ role: 'user' }, value, { role: 'after' }])
      expect([name, viaWire]).toEqual([name, [true, false, true]])
      expect([name, wire[1].error ?? null]).toEqual([name, error])
    }
  })

  it('values the wire does not read stop it: the walk reads them and every later example of their slice', () => {
    const cases: [string, unknown, string][] = [
      ['a Date', { d: new Date(0) }, '{"d":{}}'],
      ['a boxed string', { s: new String('ab') }, '{"s":{"0":"a","1":"b"}}'],
      ['a Map', { m: new Map([[1, 2]]) }, '{"m":{}}'],
      ['a typed array', { t: new Uint8Array([7, 8]) }, '{"t":{"0":7,"1":8}}'],
      ['a regular expression', { r: /x/g }, '{"r":{}}'],
    ]
    for (const [name, value, json] of cases) {
      const { wire, viaWire } = both([{ role: 'user' }, value, { role: 'after' }])
      expect([name, viaWire]).toEqual([name, [true, false, false]])
      expect([name, wire[1].json]).toEqual([name, json])
    }
    // Nesting past the walk's limit: 128 arrays inside an example are read, 129 are refused.
    const nested = (n: number) => {
      let v: unknown = 'x'
      for (let i = 0; i < n; i++) v = [v]
      return v
    }
    expect(both([nested(128), 'after']).viaWire).toEqual([true, true])
    // Example 0 is a slice of its own.
    const deep = both([nested(129), 'after'])
    expect(deep.viaWire).toEqual([false, true])
    expect(deep.wire[0].error).toBe('Exceeded maximum JSON nesting depth')
  })

  it('values V8 cannot serialize leave their slice to the walk', () => {
    for (const value of [{ f: () => 1 }, { s: Symbol('x') }, new Proxy({ role: 'user' }, {})]) {
      const { viaWire } = both([{ role: 'user' }, value, { role: 'after' }])
      expect(viaWire).toEqual([true, false, false])
    }
  })

  it('each slice is serialized on its own: example 0, then 8, 16, 32 and 64 at a time', () => {
    const examples: unknown[] = Array.from({ length: 300 }, (_, i) => ({ role: 'user', content: `m${i}` }))
    // Slices: [0], [1, 9), [9, 25), [25, 57), [57, 121), [121, 185), [185, 249), [249, 300).
    examples[3] = { d: new Date(0) } // stops the wire for the rest of [1, 9)
    examples[12] = { f: () => 1 } // V8 refuses [9, 25)
    const shared = { role: 'system', content: 'shared' }
    for (const i of [30, 60, 61, 200]) examples[i] = { messages: [shared, shared] }
    const { viaWire, wire } = both(examples)
    const walked = viaWire.flatMap((w, i) => (w ? [] : [i]))
    const range = (from: number, to: number) => Array.from({ length: to - from }, (_, k) => from + k)
    expect(walked).toEqual([...range(3, 9), ...range(9, 25)])
    expect(wire[3].json).toBe('{"d":{}}')
    expect(wire[12].error).toBe('f is a function')
    // An object shared across slices is written again in each; within one, by reference.
    const twice = '{"messages":[{"role":"system","content":"shared"},{"role":"system","content":"shared"}]}'
    expect([30, 60, 61, 200].map((i) => wire[i].json)).toEqual([twice, twice, twice, twice])
  })

  it('holey arrays: read from the wire up to their first hole, whatever V8 made of the slices', () => {
    // Holey but full, as an optimized `lines.map(JSON.parse)` returns: V8 writes its slices in
    // the sparse form.
    const full = new Array(20)
    for (let i = 0; i < 20; i++) full[i] = { role: 'user', content: `m${i}` }
    expect(both(full).viaWire.every(Boolean)).toBe(true)
    const holey = [{ role: 'a' }, { role: 'b' }, , { role: 'd' }] // eslint-disable-line no-sparse-arrays
    const { wire, viaWire } = both(holey)
    // Slices [0] and [1, 4): the hole stops the skim of the second one.
    expect(viaWire).toEqual([true, true, false, false])
    expect(wire[2].error).toBe('the value is undefined')
  })

  it('arrays that are not plain are copied element by element: no constructor of theirs runs', () => {
    // (A proxy of an array is refused as before: napi reads no length from it.)
    let constructed = 0
    class Examples extends Array {
      constructor(...args: any[]) {
        super(...args)
        constructed++
      }
    }
    const make = () => Array.from({ length: 30 }, (_, i) => ({ role: 'user', content: `m${i}` }))
    const sub = Examples.from(make())
    const own = make()
    ;(own as any).constructor = Examples
    const before = constructed
    for (const examples of [sub, own]) {
      const { wire, viaWire } = both(examples)
      expect(viaWire.every(Boolean)).toBe(true)
      expect(JSON.parse(wire[29].json!)).toEqual({ role: 'user', content: 'm29' })
    }
    expect(constructed - before).toBe(0)
  })

  it('own enumerable properties only, getters called, symbols and hidden properties left out', () => {
    const proto = { inherited: 'not read' }
    const o = Object.create(proto)
    o.role = 'user'
    Object.defineProperty(o, 'hidden', { value: 1, enumerable: false })
    o[Symbol('s')] = 2
    Object.defineProperty(o, 'content', { get: () => 'from a getter', enumerable: true })
    class Message {
      role = 'assistant'
      get content() {
        return 'on the prototype: not read'
      }
    }
    const { wire, viaWire } = both([o, new Message()])
    expect(viaWire).toEqual([true, true])
    expect(wire.map((r) => r.json)).toEqual(['{"role":"user","content":"from a getter"}', '{"role":"assistant"}'])
  })

  it('strings as napi writes them: Latin-1, UTF-16, lone surrogates replaced', () => {
    // 'Ã©' is stored as the bytes c3 a9, which UTF-8 would read as 'é'.
    const texts = ['café', 'ÿ\u0080', '€😀', '\ud800x\udc00', 'a'.repeat(16 * 1024 - 2) + '😀', '', 'Ã©']
    const { wire, viaWire } = both(texts.map((content) => ({ content })))
    expect(viaWire.every(Boolean)).toBe(true)
    expect(JSON.parse(wire[3].json!).content).toBe('\ufffdx\ufffd')
    expect(JSON.parse(wire[1].json!).content).toBe('ÿ\u0080')
    expect(JSON.parse(wire[6].json!).content).toBe('Ã©')
  })
})

describe('createSFTDataset with and without the wire', () => {
  requireShared(sharedParity)
  const files = ['conv_glaive_toolcall_en.jsonl', 'pc_alpaca.jsonl']
  for (const file of files) {
    it(`${file}: the same batches, every example from the wire`, async () => {
      const read = () =>
        readFileSync(join(sharedParity, 'real', 'data', file), 'utf8')
          .split('\n')
          .filter((l) => l.trim())
          .map((l) => JSON.parse(l))
      expect(readExamples(read(), true).every((r) => r.wire)).toBe(true)
      const epoch = async () => {
        const ds = lib.createSFTDataset(read(), tokenizer(), { completionOnly: true })
        const out: number[][] = []
        for await (const b of ds.batches(8)) out.push([...b.inputIds], [...b.labels])
        return out
      }
      const withWire = await epoch()
      const getBuiltinModule = process.getBuiltinModule
      try {
        ;(process as any).getBuiltinModule = undefined
        expect(readExamples(read(), true).some((r) => r.wire)).toBe(false)
        expect(await epoch()).toEqual(withWire)
      } finally {
        ;(process as any).getBuiltinModule = getBuiltinModule
      }
    })
  }
})

describe('createSFTDataset errors are the walk\'s', () => {
  it('the first bad example, named the same way with and without the wire', () => {
    const examples = [
      { messages: [{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'ok' }] },
      { messages: [{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'ok', n: NaN }] },
    ]
    const message = (fn: () => unknown) => {
      try {
        fn()
      } catch (e: any) {
        return `${e.code}: ${e.message}`
      }
      return 'no error'
    }
    const withWire = message(() => lib.createSFTDataset(examples, tokenizer()))
    const getBuiltinModule = process.getBuiltinModule
    let without: string
    try {
      ;(process as any).getBuiltinModule = undefined
      without = message(() => lib.createSFTDataset(examples, tokenizer()))
    } finally {
      ;(process as any).getBuiltinModule = getBuiltinModule
    }
    expect(withWire).toBe(without)
    expect(withWire).toContain('messages[1].n is NaN')
  })
})
