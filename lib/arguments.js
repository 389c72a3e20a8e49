'use strict'
// napi converts a native function's arguments before the Rust code runs and throws its own
// errors (code `StringExpected`, `NumberExpected`, ...). These wrappers give such errors this
// library's code, `INVALID_ARGUMENT`, name the function, and make functions that return a
// Promise report them through the Promise, as an async function would.

// napi's status codes for a value of the wrong type, and what was expected instead.
const EXPECTED = new Map([
  ['ObjectExpected', 'an object'],
  ['StringExpected', 'a string'],
  ['NameExpected', 'a string or symbol'],
  ['FunctionExpected', 'a function'],
  ['NumberExpected', 'a number'],
  ['BooleanExpected', 'a boolean'],
  ['ArrayExpected', 'an array'],
  ['BigintExpected', 'a bigint'],
  ['DateExpected', 'a Date'],
  ['ArrayBufferExpected', 'an ArrayBuffer'],
  ['DetachableArraybufferExpected', 'a detachable ArrayBuffer'],
])

// Exports and methods that return a Promise (index.d.ts); a test keeps this list complete.
const ASYNC = new Set([
  'SFTDataset.collateBatch',
  'SFTDataset._collateExamples',
  'SFTDataset.exportParquet',
  'SFTDataset.batchingStats',
  'SFTDataset._plannedBatch',
  'SFTDataset._awaitRows',
  'SFTDataset.tokenizeExample',
  'SFTDataset.report',
  'SFTDataset.summary',
  'Tokenizer.fromPretrained',
  'Tokenizer.encode',
  'Tokenizer.encodeBatch',
  'Tokenizer.encodeBatchFlat',
  'Tokenizer.decode',
  'Tokenizer.decodeBatch',
  'Tokenizer.applyChatTemplate',
  '_foreignExamples',
  'loadSFTMixNative',
  'fixHistoricalMasks',
  'loadSFTDatasetNative',
  'tokenizeConversationForTrainer',
  'tokenizeForTrainer',
  'tokenizeForTrainerBatch',
  'validateSFTFile',
])

/** A `TypeError` with this library's code for bad arguments. */
function invalidArgument(message, cause) {
  const error = new TypeError(message)
  error.code = 'INVALID_ARGUMENT'
  if (cause !== undefined) error.cause = cause
  return error
}

// napi's names of the members of a union argument (`Either3<Int32Array, Uint32Array, Vec<f64>>`).
const UNION_MEMBERS = new Map([
  ['TypedArray<i32>', 'an Int32Array'],
  ['TypedArray<u32>', 'a Uint32Array'],
  ['Array<T>', 'an array of numbers'],
])

// "Value is none of these types `A`, `B`, " -> "an Int32Array, a Uint32Array or ..."; null when
// the message is not napi's union mismatch.
function unionExpected(message) {
  const match = /^Value is none of these types (.*)$/.exec(String(message))
  if (match === null) return null
  const names = [...match[1].matchAll(/`([^`]+)`/g)].map(([, name]) => UNION_MEMBERS.get(name) ?? name)
  return names.length < 2 ? names.join('') : `${names.slice(0, -1).join(', ')} or ${names[names.length - 1]}`
}

function argumentError(where, error) {
  const union = error?.code === 'InvalidArg' ? unionExpected(error.message) : null
  if (union !== null) {
    return invalidArgument(`${where}: an argument has the wrong type, expected ${union}: ${error.message}`, error)
  }
  const expected = EXPECTED.get(error?.code)
  if (expected !== undefined) {
    return invalidArgument(`${where}: an argument has the wrong type, expected ${expected}: ${error.message}`, error)
  }
  if (error?.code === 'InvalidArg') return invalidArgument(`${where}: an argument is not valid: ${error.message}`, error)
  return error
}

// Gives a wrapper the name and arity of the function it wraps.
function named(wrapper, name, length) {
  Object.defineProperty(wrapper, 'name', { value: name })
  Object.defineProperty(wrapper, 'length', { value: length })
  return wrapper
}

function guarded(fn, where) {
  const isAsync = ASYNC.has(where)
  const wrapper = function (...args) {
    try {
      return fn.apply(this, args)
    } catch (e) {
      const error = argumentError(where, e)
      if (isAsync) return Promise.reject(error)
      throw error
    }
  }
  // Native static methods have no name of their own.
  return named(wrapper, fn.name || where.split('.').pop(), fn.length)
}

// Native methods that lib/ calls on behalf of a public one, and whose argument errors are that
// method's.
const ON_BEHALF = new Map([
  ['Tokenizer._encodeSyncByHandle', 'Tokenizer.encodeSync'],
  ['Tokenizer._encodeBatchNow', 'Tokenizer.encodeBatch'],
  ['Tokenizer._encodeBatchFlatNow', 'Tokenizer.encodeBatchFlat'],
])

// Replaces the methods (own, plain functions; not getters) of `target` with guarded ones.
function guardMethods(target, prefix) {
  for (const key of Object.getOwnPropertyNames(target)) {
    if (key === 'constructor' || key === 'prototype' || key === 'length' || key === 'name') continue
    const descriptor = Object.getOwnPropertyDescriptor(target, key)
    // Skips getters, and a sloppy function's own `arguments`/`caller`.
    if (typeof descriptor.value !== 'function' || !(descriptor.configurable || descriptor.writable)) continue
    const where = `${prefix}.${key}`
    Object.defineProperty(target, key, { ...descriptor, value: guarded(descriptor.value, ON_BEHALF.get(where) ?? where) })
  }
}

const isClass = (value) =>
  typeof value === 'function' && value.prototype != null && Object.getOwnPropertyNames(value.prototype).length > 1

// Classes exported under two names (aliases) are guarded once.
const guardedClasses = new WeakSet()

// A copy of the binding's exports whose functions, class methods and static methods are
// guarded. Classes stay the same objects (their constructors check their own arguments), so
// `instanceof` holds for instances made anywhere.
function guardArguments(binding) {
  const api = {}
  for (const [name, value] of Object.entries(binding)) {
    if (isClass(value)) {
      if (!guardedClasses.has(value)) {
        guardedClasses.add(value)
        guardMethods(value.prototype, value.name)
        guardMethods(value, value.name)
      }
      api[name] = value
    } else if (typeof value === 'function') {
      api[name] = guarded(value, name)
    } else {
      api[name] = value
    }
  }
  return api
}

// For the JS functions of lib/: an argument error raised by a native function they call is
// reported under the public function's name.
function asPublic(name, fn) {
  const rename = (e) => {
    if (e?.code === 'INVALID_ARGUMENT' && e.cause !== undefined && typeof e.message === 'string') {
      e.message = e.message.replace(/^[\w.]+: /, `${name}: `)
    }
    return e
  }
  const wrapper = function (...args) {
    let result
    try {
      result = fn.apply(this, args)
    } catch (e) {
      throw rename(e)
    }
    if (result instanceof Promise) {
      return result.catch((e) => {
        throw rename(e)
      })
    }
    return result
  }
  return named(wrapper, name, fn.length)
}

module.exports = { guardArguments, asPublic, invalidArgument, ASYNC }
