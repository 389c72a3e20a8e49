'use strict'
// The option objects the dataset functions take, checked before they reach the native code:
// a key the function does not know is ignored there (as the reference ignores it), so it is
// reported as an `SFTDataWarning` naming the nearest known key; settings that cannot change
// anything are reported the same way; and when napi refuses an option's type, the error names
// the option. The lists below are the fields of the config types of index.d.ts (and of
// lib/index.d.ts for exportSFTParquet's options); a test keeps them equal.

// Option name -> the JS types napi converts it from.
const DATASET_OPTIONS = {
  maxSeqLength: ['number'],
  completionOnly: ['boolean', 'string'],
  enableThinking: ['boolean'],
  seed: ['number'],
  specialTokenIds: ['object'],
  maskingStrategy: ['string'],
  trainOnRoles: ['array'],
  trainOnTurnEnd: ['boolean'],
  reasoning: ['string'],
  truncation: ['string'],
  dropUntrainable: ['boolean'],
  dropUnrenderable: ['boolean'],
  dropDuplicates: ['boolean'],
  format: ['string'],
  columns: ['object'],
  roles: ['object'],
  tools: ['string'],
  batching: ['string'],
  maxBatchTokens: ['number'],
  padToMultipleOf: ['number'],
  shard: ['object'],
  sanitizeControlTokens: ['boolean'],
  parseToolArguments: ['boolean'],
  reasoningEffort: ['string'],
  renderAs: ['string'],
}

/** `loadSFTDataset` (and `exportSFTParquet`) also take where and how to read the file. */
const LOAD_OPTIONS = {
  ...DATASET_OPTIONS,
  limit: ['number'],
  memoryBudget: ['number'],
  onProgress: ['function'],
  allowedRoot: ['string'],
  followSymlinks: ['boolean'],
  cache: ['string', 'object'],
}

/** The last argument of `exportSFTParquet`. */
const EXPORT_OPTIONS = {
  batchSize: ['number'],
  epoch: ['number'],
}

// Span-masking settings that choose which tokens are trained: without `completionOnly` every
// token is trained, so they change nothing (docs/masking.md).
const MASKING_SETTINGS = ['trainOnRoles', 'trainOnTurnEnd', 'reasoning']

/** `completion_only`, `CompletionOnly` and `completion-only` all read as `completiononly`. */
function folded(key) {
  return key.toLowerCase().replace(/[-_\s]/g, '')
}

/** Levenshtein distance with adjacent transpositions (optimal string alignment). */
function editDistance(a, b) {
  const rows = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array(b.length).fill(0)])
  for (let j = 1; j <= b.length; j++) rows[0][j] = j
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      rows[i][j] = Math.min(rows[i - 1][j] + 1, rows[i][j - 1] + 1, rows[i - 1][j - 1] + cost)
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) rows[i][j] = Math.min(rows[i][j], rows[i - 2][j - 2] + 1)
    }
  }
  return rows[a.length][b.length]
}

/**
 * The known key `key` was most likely meant as: the same letters ignoring case, `_` and `-`,
 * else the closest by edit distance when it is close enough to be a typo; null otherwise.
 */
function nearestOption(key, known) {
  const target = folded(key)
  let best = null
  let bestDistance = Infinity
  for (const name of known) {
    const distance = editDistance(target, folded(name))
    if (distance < bestDistance) {
      best = name
      bestDistance = distance
    }
  }
  return bestDistance <= Math.max(2, Math.floor(target.length / 3)) ? best : null
}

/** `a`, `a and b`, `a, b and c`. */
function listed(items) {
  return items.length === 1 ? items[0] : `${items.slice(0, -1).join(', ')} and ${items[items.length - 1]}`
}

function isOptionsObject(value) {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}

function emit(code, message) {
  process.emitWarning(`[SFT Dataset] ${code}: ${message}`, { type: 'SFTDataWarning', code })
}

/**
 * `"completion_only" (did you mean "completionOnly"?)`, `"limit" (an option of loadSFTDataset
 * only)`, `"batch_size" (did you mean "batchSize"? the batch size is ...)`.
 */
function describeUnknown(key, { known, elsewhere = {} }) {
  if (Object.hasOwn(elsewhere, key)) return `"${key}" (${elsewhere[key]})`
  const near = nearestOption(key, [...Object.keys(known), ...Object.keys(elsewhere)])
  if (near === null) return `"${key}"`
  return Object.hasOwn(elsewhere, near) ? `"${key}" (did you mean "${near}"? ${elsewhere[near]})` : `"${key}" (did you mean "${near}"?)`
}

/** The keys of `options` that `spec.known` lacks, each described (see describeUnknown). */
function unknownOptions(options, spec) {
  if (!isOptionsObject(options)) return []
  return Object.keys(options)
    .filter((key) => !Object.hasOwn(spec.known, key))
    .map((key) => describeUnknown(key, spec))
}

/** The masking settings of a dataset config that cannot change anything: no completionOnly. */
function inertOptions(options, spec) {
  if (!isOptionsObject(options) || !Object.hasOwn(spec.known, 'completionOnly') || options.completionOnly) return []
  const inert = []
  if (options.maskingStrategy === 'spans' || options.maskingStrategy === 'generation') inert.push(`maskingStrategy: '${options.maskingStrategy}'`)
  for (const key of MASKING_SETTINGS) if (options[key] !== undefined && options[key] !== null) inert.push(key)
  return inert
}

/**
 * Warns, once for the call, about the option keys that `where` does not take (`spec.known`;
 * `spec.elsewhere`: keys that belong to another argument or function, with where), and once
 * about masking settings that cannot change anything. Never throws: the native code validates
 * the values.
 */
function checkOptions(where, checked, args) {
  const unknown = checked.flatMap(([index, spec]) => unknownOptions(args[index], spec))
  if (unknown.length > 0) {
    const ignored = unknown.length === 1 ? 'it is ignored' : 'they are ignored'
    emit('UNKNOWN_OPTION', `${where}: unknown option${unknown.length === 1 ? '' : 's'} ${listed(unknown)}; ${ignored}`)
  }
  const inert = checked.flatMap(([index, spec]) => inertOptions(args[index], spec))
  if (inert.length > 0) {
    const has = inert.length === 1 ? 'has' : 'have'
    emit('INERT_OPTION', `${where}: ${listed(inert)} ${has} no effect without completionOnly: true (every token is trained)`)
  }
}

function typeName(value) {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'array'
  return typeof value
}

const ARTICLE = { number: 'a number', boolean: 'a boolean', string: 'a string', object: 'an object', array: 'an array', function: 'a function' }

// Where the JS types alone say too little.
const EXPECTED_WORDS = { completionOnly: "true, false or 'auto'" }

function shown(value) {
  const type = typeName(value)
  if (type === 'string') return `a string (${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)})`
  if (type === 'number' || type === 'boolean') return `${ARTICLE[type]} (${value})`
  if (type === 'bigint') return `a bigint (${value}n)`
  return ARTICLE[type] ?? type
}

/** The first option of `options` whose JS type napi cannot convert, as a sentence; else null. */
function optionTypeError(options, known) {
  if (!isOptionsObject(options)) return null
  for (const [key, types] of Object.entries(known)) {
    const value = options[key]
    if (value === undefined || value === null || types.includes(typeName(value))) continue
    const expected = EXPECTED_WORDS[key] ?? types.map((t) => ARTICLE[t]).join(' or ')
    return `option ${key} must be ${expected}, got ${shown(value)}`
  }
  return null
}

/**
 * `fn` with its option arguments checked: `optionArgs` maps an argument's position to the spec of
 * the options it takes (see checkOptions). Unknown and inert options warn before the call; an
 * argument error (INVALID_ARGUMENT from napi's conversion) that one of those options explains is
 * worded after that option.
 */
function withOptions(name, fn, optionArgs) {
  const checked = Object.entries(optionArgs).map(([index, spec]) => [Number(index), spec])
  const explain = (error, args) => {
    if (error?.code !== 'INVALID_ARGUMENT') return error
    for (const [index, spec] of checked) {
      const reason = optionTypeError(args[index], spec.known)
      if (reason !== null) {
        error.message = `${name}: ${reason}`
        break
      }
    }
    return error
  }
  const wrapper = function (...args) {
    checkOptions(name, checked, args)
    let result
    try {
      result = fn.apply(this, args)
    } catch (e) {
      throw explain(e, args)
    }
    if (result instanceof Promise) {
      return result.catch((e) => {
        throw explain(e, args)
      })
    }
    return result
  }
  Object.defineProperty(wrapper, 'name', { value: name })
  Object.defineProperty(wrapper, 'length', { value: fn.length })
  return wrapper
}

// Where the keys that users put in a dataset's config by mistake belong.
const BATCH_ARGUMENTS = {
  batchSize: 'the batch size is the argument of batches() and numBatches(), not a dataset option',
  epoch: 'the epoch is the argument of shuffleForEpoch(), not a dataset option',
}
const LOAD_ONLY = Object.fromEntries(Object.keys(LOAD_OPTIONS).filter((key) => !Object.hasOwn(DATASET_OPTIONS, key)).map((key) => [key, 'an option of loadSFTDataset only']))

const DATASET_ARG = { known: DATASET_OPTIONS, elsewhere: { ...LOAD_ONLY, ...BATCH_ARGUMENTS } }
const LOAD_ARG = { known: LOAD_OPTIONS, elsewhere: BATCH_ARGUMENTS }
const EXPORT_CONFIG_ARG = {
  known: LOAD_OPTIONS,
  elsewhere: Object.fromEntries(Object.keys(EXPORT_OPTIONS).map((key) => [key, 'an option of the last argument of exportSFTParquet'])),
}
const EXPORT_ARG = {
  known: EXPORT_OPTIONS,
  elsewhere: Object.fromEntries(Object.keys(LOAD_OPTIONS).map((key) => [key, 'an option of the config argument of exportSFTParquet, not of its last'])),
}

// The exports whose arguments are option objects, by the position of those arguments.
const CHECKED = {
  createSFTDataset: { 2: DATASET_ARG },
  validateSFTFile: { 2: DATASET_ARG },
  loadSFTDataset: { 2: LOAD_ARG },
  exportSFTParquet: { 3: EXPORT_CONFIG_ARG, 4: EXPORT_ARG },
}

/** Warns about the unknown and inert keys of a dataset config (`new SFTDataset`'s). */
function checkDatasetConfig(where, config) {
  checkOptions(where, [[0, DATASET_ARG]], [config])
}

/** The public API with the option arguments of the CHECKED exports checked. */
function checkingOptions(api) {
  for (const [name, optionArgs] of Object.entries(CHECKED)) api[name] = withOptions(name, api[name], optionArgs)
  return api
}

module.exports = { DATASET_OPTIONS, LOAD_OPTIONS, EXPORT_OPTIONS, checkingOptions, checkDatasetConfig, nearestOption }
