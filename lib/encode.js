'use strict'
// Writes the examples of `createSFTDataset` into one buffer on the JS thread, for the native
// side to read back as JSON (src/js_encoded.rs has the format). Reading a JS value through napi
// takes several native calls per property; this takes none. It writes only what napi's own
// conversion (src/napi/json.rs) would turn into the very same JSON: plain objects and arrays,
// strings, finite numbers, booleans and null. An example holding anything else (a BigInt, a
// hole, a Date, a Proxy, a getter that throws, nesting past 128, ...) is marked for napi, which
// converts it, or reports it, exactly as before.

const { types } = require('node:util')

// An example left to napi's conversion: its span is SLOW twice.
const SLOW = 0xffffffff
// napi's conversion refuses an object or array nested this deep, and a value of more nodes.
const MAX_DEPTH = 128
const MAX_NODES = 1_000_000
// Strings this short are written a character at a time while they are ASCII; longer ones (and
// the rest) go through TextEncoder, which writes lone surrogates as U+FFFD as napi does.
const SHORT = 48

const textEncoder = new TextEncoder()

class Writer {
  constructor() {
    this.bytes = new Uint8Array(1 << 16)
    this.view = new DataView(this.bytes.buffer)
    this.at = 0
    this.nodes = 0
  }

  reserve(n) {
    if (this.at + n <= this.bytes.length) return
    const grown = new Uint8Array(Math.max(this.bytes.length * 2, this.at + n))
    grown.set(this.bytes.subarray(0, this.at))
    this.bytes = grown
    this.view = new DataView(grown.buffer)
  }

  // A string: its UTF-8 length (u32), then its bytes.
  string(s) {
    const length = s.length
    if (length < SHORT) {
      this.reserve(4 + length)
      const bytes = this.bytes
      const start = this.at + 4
      let i = 0
      for (; i < length; i++) {
        const c = s.charCodeAt(i)
        if (c > 0x7f) break
        bytes[start + i] = c
      }
      if (i === length) {
        this.view.setUint32(this.at, length, true)
        this.at = start + length
        return
      }
    }
    // At most three bytes per UTF-16 unit.
    this.reserve(4 + length * 3)
    const { written } = textEncoder.encodeInto(s, this.bytes.subarray(this.at + 4))
    this.view.setUint32(this.at, written, true)
    this.at += 4 + written
  }

  // Writes `value`; false when napi's conversion must take the whole example instead.
  value(value, depth) {
    if (++this.nodes > MAX_NODES) return false
    switch (typeof value) {
      case 'string':
        this.reserve(1)
        this.bytes[this.at++] = 3
        this.string(value)
        return true
      case 'number':
        if (!Number.isFinite(value)) return false
        this.reserve(9)
        this.bytes[this.at] = 4
        this.view.setFloat64(this.at + 1, value, true)
        this.at += 9
        return true
      case 'boolean':
        this.reserve(1)
        this.bytes[this.at++] = value ? 2 : 1
        return true
      case 'object':
        if (value === null) {
          this.reserve(1)
          this.bytes[this.at++] = 0
          return true
        }
        if (depth >= MAX_DEPTH || types.isProxy(value)) return false
        return this.container(value, depth)
      default:
        return false
    }
  }

  container(value, depth) {
    const proto = Object.getPrototypeOf(value)
    if (proto === Array.prototype) {
      if (!Array.isArray(value)) return false
      const length = value.length
      this.reserve(5)
      this.bytes[this.at] = 5
      this.view.setUint32(this.at + 1, length, true)
      this.at += 5
      for (let i = 0; i < length; i++) {
        const item = value[i]
        // A hole or `undefined`: napi's conversion refuses it.
        if (item === undefined || !this.value(item, depth + 1)) return false
      }
      return true
    }
    if (proto !== Object.prototype && proto !== null) return false
    // Own enumerable string keys, in property order: what napi lists for an object whose
    // prototype chain adds none (checked once per call, in `encodeExamples`).
    const keys = Object.keys(value)
    this.reserve(5)
    this.bytes[this.at] = 6
    const countAt = this.at + 1
    this.at += 5
    let count = 0
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i]
      const item = value[key]
      // napi's conversion leaves `undefined` properties out, as JSON.stringify does.
      if (item === undefined) continue
      this.string(key)
      if (!this.value(item, depth + 1)) return false
      count++
    }
    this.view.setUint32(countAt, count, true)
    return true
  }
}

// Whether `proto` has enumerable properties (its own or inherited): napi would list them as keys
// of every plain object or array element that inherits them.
function addsKeys(proto) {
  for (const _ in proto) return true
  return false
}

/**
 * The examples written into bytes, with each one's `[start, end)` in them (SLOW twice for one left
 * to napi); null when `examples` is not a plain array, or the built-in prototypes carry
 * enumerable properties: then napi converts everything.
 */
function encodeExamples(examples) {
  if (!Array.isArray(examples) || types.isProxy(examples)) return null
  if (Object.getPrototypeOf(examples) !== Array.prototype) return null
  if (addsKeys(Object.prototype) || addsKeys(Array.prototype)) return null
  const count = examples.length
  const spans = new Uint32Array(count * 2)
  const writer = new Writer()
  for (let i = 0; i < count; i++) {
    const start = writer.at
    writer.nodes = 0
    let whole = false
    try {
      const example = examples[i]
      whole = example !== undefined && writer.value(example, 0) && writer.at < SLOW
    } catch {
      whole = false
    }
    if (whole) {
      spans[2 * i] = start
      spans[2 * i + 1] = writer.at
    } else {
      writer.at = start
      spans[2 * i] = SLOW
      spans[2 * i + 1] = SLOW
    }
  }
  return { bytes: writer.bytes.subarray(0, writer.at), spans }
}

module.exports = { encodeExamples, SLOW }
