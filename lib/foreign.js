'use strict'
// Datasets over a tokenizer of another library: any object with the five methods the reference
// calls (`ChatTemplateTokenizer` in index.d.ts), such as MLX Node's own `Qwen3Tokenizer`. Every
// render goes through its `applyChatTemplate`, with exactly the reference's arguments, and the
// special ids come from its methods, so the batches are the reference's with that tokenizer. The
// native dataset (src/dataset/foreign.rs) masks, truncates and batches the ids it hands back.
//
// The calls are asynchronous, so rows arrive when a dataset is first used: `loadSFTDataset`
// renders every example before it resolves; a dataset made by `createSFTDataset` or `new
// SFTDataset` renders them all at its first asynchronous call (or `ready()`), several calls in
// flight at once.

const native = require('./native.js')
const { invalidArgument } = require('./arguments.js')

const METHODS = ['applyChatTemplate', 'tokenToId', 'getPadTokenId', 'getImStartToken', 'getImEndToken']

// The strings the reference looks up as newline tokens, and the token its conversation scan
// expects after `<|im_start|>`.
const LOOKED_UP = ['\n', ' \n', '\r\n', '\n\n', 'assistant']

// `applyChatTemplate` calls in flight at once: enough to keep a native tokenizer's thread pool
// busy, few enough that a slow tokenizer does not hold every example's render in memory.
const IN_FLIGHT = 64

/** Per dataset over a foreign tokenizer: the tokenizer, the examples, how to call it, and the
 * render of all examples once it has started. */
const states = new WeakMap()

// Marks the errors that fail every row (the tokenizer broke its contract), not only one.
const FATAL = Symbol('sft-dataset fatal tokenizer error')

/** Whether `tokenizer` is to be driven through its methods: an object that is not ours. */
function isForeignTokenizer(tokenizer) {
  const object = tokenizer !== null && (typeof tokenizer === 'object' || typeof tokenizer === 'function')
  return object && !(tokenizer instanceof native.Tokenizer)
}

function describe(value) {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'an array'
  if (ArrayBuffer.isView(value)) return `a ${value.constructor.name}`
  if (typeof value === 'object') return 'an object'
  if (typeof value === 'string') return `the string ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)}`
  return `${typeof value} ${String(value)}`
}

function checkMethods(tokenizer, caller) {
  const missing = METHODS.filter((name) => typeof tokenizer[name] !== 'function')
  if (missing.length === 0) return
  throw invalidArgument(
    `${caller}: tokenizer must be a Tokenizer of sft-dataset (Tokenizer.fromPretrained) or an object with the methods ` +
      `${METHODS.join(', ')} (as MLX Node's Qwen3Tokenizer); this one lacks ${missing.join(', ')}`,
  )
}

// A synchronous method of the tokenizer; what it throws keeps its message, with the call named.
function ask(tokenizer, caller, name, ...args) {
  try {
    return tokenizer[name](...args)
  } catch (e) {
    const message = e instanceof Error ? e.message : String(e)
    const error = invalidArgument(`${caller}: tokenizer.${name}(${args.map((a) => JSON.stringify(a)).join(', ')}) threw: ${message}`, e)
    throw error
  }
}

const isId = (v) => Number.isInteger(v) && v >= 0 && v <= 0xffffffff

function returned(caller, call, value, expected) {
  return invalidArgument(`${caller}: tokenizer.${call} returned ${describe(value)}, expected ${expected}`)
}

/** What the tokenizer answers to the reference's lookups, asked once per dataset. */
function answersOf(tokenizer, caller) {
  const imStartToken = ask(tokenizer, caller, 'getImStartToken')
  if (typeof imStartToken !== 'string') throw returned(caller, 'getImStartToken()', imStartToken, 'a string')
  const imEndToken = ask(tokenizer, caller, 'getImEndToken')
  if (typeof imEndToken !== 'string') throw returned(caller, 'getImEndToken()', imEndToken, 'a string')
  const padTokenId = ask(tokenizer, caller, 'getPadTokenId')
  if (!isId(padTokenId)) throw returned(caller, 'getPadTokenId()', padTokenId, 'a token id (an integer in [0, 2^32))')
  const lookups = [...new Set([imStartToken, imEndToken, ...LOOKED_UP])].map((token) => {
    const id = ask(tokenizer, caller, 'tokenToId', token)
    if (id !== null && id !== undefined && !isId(id)) {
      throw returned(caller, `tokenToId(${JSON.stringify(token)})`, id, 'a token id or null')
    }
    return [token, id ?? null]
  })
  return { padTokenId, imStartToken, imEndToken, lookups }
}

// Settings whose rows or files need this package's own tokenizer, refused before any call.
function checkConfig(config, caller) {
  if (config?.cache !== undefined && config.cache !== null) {
    throw invalidArgument(
      `${caller}: the token cache needs a Tokenizer of sft-dataset (its key holds the tokenizer's files and template); ` +
        'this tokenizer renders its own. Load without cache, or with Tokenizer.fromPretrained (renderAs: \'mlx-node\' renders as MLX Node does)',
    )
  }
}

/** A dataset over `examples` whose rows `tokenizer` renders (see the top of this file). */
function createForeignDataset(examples, tokenizer, config, caller) {
  checkMethods(tokenizer, caller)
  checkConfig(config, caller)
  if (!Array.isArray(examples)) {
    throw invalidArgument(`${caller}: examples is not an array of examples: got ${describe(examples)}`)
  }
  const answers = answersOf(tokenizer, caller)
  return track(native.SFTDataset._forForeign(examples, answers, config ?? null, caller), tokenizer, examples, config)
}

/** Keeps what the renders of `dataset` need. */
function track(dataset, tokenizer, examples, config) {
  states.set(dataset, {
    tokenizer,
    examples,
    format: dataset.format,
    // A mix may hold both formats: each source's examples are rendered by their own.
    sources: dataset.sources,
    enableThinking: config?.enableThinking ?? false,
    tools: config?.tools === 'example',
    reasoningEffort: config?.reasoningEffort,
    ready: null,
  })
  return dataset
}

/** The tools an example passes to the template with `tools: 'example'` (a JSON string parsed). */
function toolsOf(example) {
  const tools = example?.tools
  if (typeof tools !== 'string') return tools ?? null
  try {
    return JSON.parse(tools)
  } catch {
    return tools
  }
}

// Token ids as a Uint32Array, from what `applyChatTemplate` resolved to.
function toIds(value, index) {
  if (value instanceof Uint32Array) return value
  const listLike = Array.isArray(value) || (ArrayBuffer.isView(value) && !(value instanceof DataView))
  if (listLike && Array.prototype.every.call(value, isId)) return Uint32Array.from(value)
  const error = invalidArgument(
    `SFT example ${index}: tokenizer.applyChatTemplate resolved to ${describe(value)}, expected token ids ` +
      '(a Uint32Array, an Int32Array or an array of integers in [0, 2^32))',
  )
  error[FATAL] = true
  throw error
}

// One `applyChatTemplate` call with the reference's four arguments (and `reasoningEffort` in
// position seven, MLX Node's, when the dataset sets it).
async function render(state, index, messages, addGenerationPrompt, tools) {
  const tail = state.reasoningEffort === undefined ? [] : [undefined, undefined, state.reasoningEffort]
  const ids = await state.tokenizer.applyChatTemplate(messages, addGenerationPrompt, tools, state.enableThinking, ...tail)
  return toIds(ids, index)
}

/** Whether example `index` is a prompt-completion example. */
function isPromptCompletion(state, index) {
  if (state.sources === null) return state.format === 'prompt-completion'
  return state.sources.find((s) => index >= s.start && index < s.start + s.examples).format === 'prompt-completion'
}

async function renderOne(state, index, full, prompts) {
  const example = state.examples[index]
  const tools = state.tools ? toolsOf(example) : null
  try {
    if (prompts === undefined || !isPromptCompletion(state, index)) {
      full[index] = await render(state, index, example.messages, false, tools)
    } else {
      const messages = Array.isArray(example.prompt) ? [...example.prompt, example.completion] : example.prompt
      const [prompt, whole] = await Promise.all([
        render(state, index, example.prompt, true, tools),
        render(state, index, messages, false, tools),
      ])
      prompts[index] = prompt
      full[index] = whole
    }
  } catch (e) {
    if (e?.[FATAL]) throw e
    // The row's error, raised where the row is used: the tokenizer's message, kept.
    full[index] = e instanceof Error ? e.message : String(e)
  }
}

/** Renders every example, `IN_FLIGHT` calls at a time, and hands the ids to the dataset. */
async function renderAll(dataset, state) {
  const count = state.examples.length
  const full = new Array(count)
  const pc = state.sources === null ? state.format === 'prompt-completion' : state.sources.some((s) => s.format === 'prompt-completion')
  const prompts = pc ? new Array(count).fill(null) : undefined
  let next = 0
  const worker = async () => {
    while (next < count) await renderOne(state, next++, full, prompts)
  }
  await Promise.all(Array.from({ length: Math.min(IN_FLIGHT, count) }, worker))
  dataset._supplyForeign(full, prompts)
  state.examples = null
  return full
}

/** Resolves once the rows of `dataset` are there (at once for a dataset over our tokenizer). */
function ensureRows(dataset) {
  const state = states.get(dataset)
  if (state === undefined) return Promise.resolve()
  if (state.ready === null) state.ready = renderAll(dataset, state)
  return state.ready
}

/** `loadSFTDataset` with a foreign tokenizer: the file read and checked natively, every example
 * rendered before it resolves; the first example the tokenizer fails on fails the load. */
async function loadForeignDataset(absolute, tokenizer, config) {
  checkMethods(tokenizer, 'loadSFTDataset')
  checkConfig(config, 'loadSFTDataset')
  // Asked before the file is read: the records `_foreignExamples` keeps natively (so that they
  // cross from JS no second time) are taken at once by `_forForeignRead`.
  const answers = answersOf(tokenizer, 'loadSFTDataset')
  const { examples, handle } = await native._foreignExamples(absolute, config)
  const dataset = track(native.SFTDataset._forForeignRead(handle, answers, config ?? null), tokenizer, examples, config)
  const rendered = await ensureRows(dataset)
  const failed = rendered.flatMap((r, i) => (typeof r === 'string' ? [i] : []))
  if (failed.length > 0) {
    const more = failed.length > 1 ? ` (and ${failed.length - 1} more example${failed.length > 2 ? 's' : ''})` : ''
    const error = new Error(`${absolute}: SFT example ${failed[0]}: ${rendered[failed[0]]}${more}`)
    error.code = 'TEMPLATE_RENDER'
    throw error
  }
  return dataset
}

/** `loadSFTDataset` of several files (lib/mix.js) with a foreign tokenizer: each file read and
 * checked natively, then the mix rendered as one dataset before it resolves. */
async function loadForeignMix(sources, tokenizer, config) {
  checkMethods(tokenizer, 'loadSFTDataset')
  checkConfig(config, 'loadSFTDataset')
  const answers = answersOf(tokenizer, 'loadSFTDataset')
  const reads = []
  for (const source of sources) reads.push(await native._foreignExamples(source.path, source.config))
  const dataset = native.SFTDataset._forForeignMix(
    reads.map((r) => r.handle),
    sources,
    answers,
  )
  track(dataset, tokenizer, reads.flatMap((r) => r.examples), config)
  const rendered = await ensureRows(dataset)
  const failed = rendered.findIndex((r) => typeof r === 'string')
  if (failed >= 0) {
    const more = rendered.filter((r) => typeof r === 'string').length - 1
    const source = dataset.sources.find((s) => failed >= s.start && failed < s.start + s.examples)
    const tail = more > 0 ? ` (and ${more} more example${more > 1 ? 's' : ''} of the mix)` : ''
    const error = new Error(`${source.path}: SFT example ${failed - source.start}: ${rendered[failed]}${tail}`)
    error.code = 'TEMPLATE_RENDER'
    throw error
  }
  return dataset
}

// The asynchronous methods that read rows: on a dataset over a foreign tokenizer they wait for
// its renders first.
const READS_ROWS = ['collateBatch', '_collateExamples', 'tokenizeExample', 'report', 'summary', 'batchingStats', 'exportParquet', '_awaitRows', '_plannedBatch']

/** Makes the methods of `proto` (SFTDataset's) wait for a foreign tokenizer's rows. */
function installReadiness(proto) {
  for (const name of READS_ROWS) {
    const method = proto[name]
    const waiting = {
      [name](...args) {
        if (!states.has(this) || !this._awaitsForeignRows()) return method.apply(this, args)
        return ensureRows(this).then(() => method.apply(this, args))
      },
    }[name]
    Object.defineProperty(waiting, 'length', { value: method.length })
    proto[name] = waiting
  }
  /** Resolves when the rows can be read: for a dataset over a foreign tokenizer, once every
   * example went through its `applyChatTemplate`. */
  proto.ready = async function ready() {
    await ensureRows(this)
  }
}

module.exports = { isForeignTokenizer, createForeignDataset, loadForeignDataset, loadForeignMix, ensureRows, installReadiness }
