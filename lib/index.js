'use strict'
// The public entry point: the generated native binding plus what napi cannot express — the
// async generator `batches()`, the `PathTraversalError` class, the `Qwen3Tokenizer` alias,
// `attachDistillation` (it awaits the caller's fetch function) and datasets over a tokenizer of
// another library (lib/foreign.js: its methods are called from JS).

const path = require('node:path')
const native = require('./native.js')
const { asPublic, invalidArgument } = require('./arguments.js')
const distill = require('./distill.js')
const { checkingOptions, checkDatasetConfig } = require('./options.js')
const foreign = require('./foreign.js')
const { mixSources } = require('./mix.js')

const { SFTDataset: NativeSFTDataset, Tokenizer } = native

// `new SFTDataset(examples, tokenizer, config)`: the native class, or a dataset over a foreign
// tokenizer. Instances of either are `instanceof SFTDataset` (one prototype).
function SFTDataset(examples, tokenizer, config) {
  if (new.target === undefined) throw new TypeError("Class constructor SFTDataset cannot be invoked without 'new'")
  checkDatasetConfig('new SFTDataset', config)
  if (foreign.isForeignTokenizer(tokenizer)) {
    return foreign.createForeignDataset(examples, tokenizer, config, 'new SFTDataset')
  }
  const target = new.target === SFTDataset ? NativeSFTDataset : new.target
  return Reflect.construct(NativeSFTDataset, [examples, tokenizer, config], target)
}
SFTDataset.prototype = NativeSFTDataset.prototype
Object.setPrototypeOf(SFTDataset, NativeSFTDataset)
Object.defineProperty(SFTDataset, 'length', { value: NativeSFTDataset.length })

function createSFTDataset(examples, tokenizer, config) {
  if (foreign.isForeignTokenizer(tokenizer)) {
    return foreign.createForeignDataset(examples, tokenizer, config, 'createSFTDataset')
  }
  return native.createSFTDataset(examples, tokenizer, config)
}

// How to allow a path outside the root, said after every containment failure.
const ALLOW_HINT = ' (to allow it, pass the allowedRoot option or set the MLX_NODE_DATA_ROOT environment variable)'

class PathTraversalError extends Error {
  constructor(resolvedPath, allowedRoot, message) {
    const detected = message ?? `Path traversal detected: "${resolvedPath}" is outside allowed directory "${allowedRoot}"`
    super(detected.startsWith('Path traversal detected') ? detected + ALLOW_HINT : detected)
    this.name = 'PathTraversalError'
    this.code = 'PATH_TRAVERSAL'
    this.resolvedPath = resolvedPath
    this.allowedRoot = allowedRoot
  }
}

function getAllowedRoot(options) {
  return native.getAllowedRoot(options ?? null)
}

function validatePathContainment(resolvedPath, allowedRoot, options) {
  const check = native.checkPathContainment(resolvedPath, allowedRoot, options?.followSymlinks ?? null)
  if (check.error != null) throw new PathTraversalError(resolvedPath, allowedRoot, check.error)
}

function resolveAndValidatePath(userPath, allowedRoot, options) {
  const check = native.checkResolvedPath(userPath, allowedRoot, options?.followSymlinks ?? null)
  if (check.error != null) throw new PathTraversalError(check.resolvedPath, allowedRoot, check.error)
  return check.resolvedPath
}

async function loadSFTDataset(filePath, tokenizer, config) {
  if (Array.isArray(filePath)) return loadMix(filePath, tokenizer, config)
  if (typeof filePath !== 'string') {
    throw invalidArgument(`loadSFTDataset: path must be a string or a list of sources, got ${filePath === null ? 'null' : typeof filePath}`)
  }
  const root = getAllowedRoot(config)
  const absolute = resolveAndValidatePath(filePath, root, config)
  const contained = { ...config, allowedRoot: path.dirname(absolute) }
  if (foreign.isForeignTokenizer(tokenizer)) return foreign.loadForeignDataset(absolute, tokenizer, contained)
  return native.loadSFTDatasetNative(absolute, tokenizer, contained)
}

/** Several files as one dataset, each source with its weight (lib/mix.js, src/napi/mix.rs). */
function loadMix(sources, tokenizer, config) {
  const root = getAllowedRoot(config)
  const resolved = mixSources(sources, config, (p) => resolveAndValidatePath(p, root, config))
  if (foreign.isForeignTokenizer(tokenizer)) return foreign.loadForeignMix(resolved, tokenizer, config)
  return native.loadSFTMixNative(resolved, tokenizer, config)
}

/**
 * Loads `filePath` (through `config.cache` when given) and writes its rows as Parquet; with
 * `options.batchSize`, the batches of `options.epoch` (default 0) instead.
 */
async function exportSFTParquet(filePath, tokenizer, outPath, config, options) {
  if (typeof outPath !== 'string') throw invalidArgument('exportSFTParquet: outPath must be a string')
  const ds = await loadSFTDataset(filePath, tokenizer, config)
  if (options?.batchSize === undefined) return ds.exportParquet(outPath)
  ds.shuffleForEpoch(options.epoch ?? 0)
  return ds.exportParquet(outPath, { batchSize: options.batchSize })
}

SFTDataset.prototype.batches = async function* batches(batchSize) {
  this._checkBatchSize(batchSize)
  await foreign.ensureRows(this)
  // Batches whose rows are all built are copied on this thread (the `...Built` calls); the
  // others are built off it.
  if (this._usesPlan()) {
    const count = this.numBatches(batchSize)
    for (let k = 0; k < count; k++) yield this._plannedBatchBuilt(batchSize, k) ?? (await this._plannedBatch(batchSize, k))
    return
  }
  // At a batch whose rows are not built, it waits for the rows of that batch and of the next
  // ones in one crossing to the addon's threads and back, then copies them here a batch at a
  // time: one batch the first time (the first batch comes as soon as it can), twice as many rows
  // each time after, up to about MAX_AHEAD_ROWS.
  const length = this.length
  const most = Math.max(batchSize, Math.ceil(MAX_AHEAD_ROWS / batchSize) * batchSize)
  let ahead = batchSize
  for (let start = 0; start < length; start += batchSize) {
    const end = Math.min(start + batchSize, length)
    let batch = this._collateRangeBuilt(start, end)
    if (batch === null) {
      await this._awaitRows(start, Math.min(start + ahead, length))
      ahead = Math.min(ahead * 2, most)
      batch = this._collateRangeBuilt(start, end) ?? (await this.collateBatch(Array.from({ length: end - start }, (_, k) => start + k)))
    }
    yield batch
  }
}

/**
 * `{ train, test }`: two datasets over this one's rows (nothing is tokenized again), disjoint,
 * the same for the same data and seed in every process. `test` is a fraction in (0, 1) or a
 * count; `seed` defaults to the dataset's.
 */
SFTDataset.prototype.split = function split(options) {
  return { train: this._splitPart(options, 'train'), test: this._splitPart(options, 'test') }
}

/** The most rows `batches()` waits for at once when it reaches rows that are not built. */
const MAX_AHEAD_ROWS = 256

// `collateBatch` of rows that are all built is a copy: done on this thread, with no hop to a
// worker and back. Anything else (rows to build, a bad argument) takes the native path, which
// builds off this thread and rejects exactly as before.
const nativeCollateBatch = SFTDataset.prototype.collateBatch
SFTDataset.prototype.collateBatch = function collateBatch(indices) {
  let built = null
  try {
    built = this._collateBuilt(indices)
  } catch {
    built = null
  }
  return built === null ? nativeCollateBatch.call(this, indices) : Promise.resolve(built)
}

// Over a foreign tokenizer, the methods that read rows wait for its renders.
foreign.installReadiness(SFTDataset.prototype)

// `encodeSync` calls a static method with the tokenizer's number (src/napi/handles.rs): napi-rs
// checks the borrow of `this` on every method call, which costs a third of the call on a short
// text. The number is asked for once and kept on the tokenizer under a symbol.
const HANDLE = Symbol('sft-dataset tokenizer handle')
const nativeHandle = Tokenizer.prototype._handle
const encodeSyncByHandle = Tokenizer._encodeSyncByHandle
Tokenizer.prototype.encodeSync = function encodeSync(text, addSpecialTokens) {
  let handle = this?.[HANDLE]
  if (handle === undefined) {
    handle = nativeHandle.call(this)
    if (Object.isExtensible(this)) Object.defineProperty(this, HANDLE, { value: handle })
  }
  return encodeSyncByHandle(handle, text, addSpecialTokens)
}

// A few short texts are encoded on this thread and handed back in a settled Promise: their
// encoding takes tens of microseconds at most, about what the round trip to a worker thread that
// `encodeBatch` and `encodeBatchFlat` otherwise make costs. Errors still reject the Promise.
const INLINE_TEXTS = 64
const INLINE_UNITS = 2048
function fewShortTexts(texts) {
  if (!Array.isArray(texts) || texts.length > INLINE_TEXTS) return false
  let units = 0
  for (let k = 0; k < texts.length; k++) {
    const text = texts[k]
    if (typeof text !== 'string') return false
    units += text.length
    if (units > INLINE_UNITS) return false
  }
  return true
}
for (const [name, now] of [
  ['encodeBatch', '_encodeBatchNow'],
  ['encodeBatchFlat', '_encodeBatchFlatNow'],
]) {
  const onWorker = Tokenizer.prototype[name]
  const onThisThread = Tokenizer.prototype[now]
  Object.defineProperty(Tokenizer.prototype, name, {
    ...Object.getOwnPropertyDescriptor(Tokenizer.prototype, name),
    value: {
      [name](texts, addSpecialTokens) {
        if (!fewShortTexts(texts)) return onWorker.call(this, texts, addSpecialTokens)
        // The guarded native call reports every error as a rejection (lib/arguments.js).
        return Promise.resolve(onThisThread.call(this, texts, addSpecialTokens))
      },
    }[name],
  })
}

// The generated loader also names the Rust struct names of the classes (`JsSftDataset`,
// `JsTokenizer`), which the binding does not define: only defined values are exports.
const bound = Object.fromEntries(Object.entries(native).filter(([, value]) => value !== undefined))

module.exports = checkingOptions({
  ...bound,
  SFTDataset,
  createSFTDataset: asPublic('createSFTDataset', createSFTDataset),
  Qwen3Tokenizer: Tokenizer,
  PathTraversalError,
  getAllowedRoot: asPublic('getAllowedRoot', getAllowedRoot),
  validatePathContainment: asPublic('validatePathContainment', validatePathContainment),
  resolveAndValidatePath: asPublic('resolveAndValidatePath', resolveAndValidatePath),
  loadSFTDataset: asPublic('loadSFTDataset', loadSFTDataset),
  exportSFTParquet: asPublic('exportSFTParquet', exportSFTParquet),
  attachDistillation: asPublic('attachDistillation', distill.attachDistillation),
})
