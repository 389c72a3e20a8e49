'use strict'
// `loadSFTDataset` of several files: the list of sources checked and each path resolved here
// (every error names the source), then loaded and mixed by the native code (src/napi/mix.rs).

const path = require('node:path')
const { invalidArgument } = require('./arguments.js')
const { nearestOption } = require('./options.js')

// What a source object may say beside its path: how many times its examples appear per epoch,
// and how to read the file (these override the load's own options for this source).
const SOURCE_KEYS = ['path', 'weight', 'limit', 'format', 'columns', 'roles']
const PER_SOURCE = ['limit', 'format', 'columns', 'roles']

function isPlainObject(value) {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}

/**
 * The native form of `sources`: `{ path, weight, config }` each, `config` the load's options with
 * the source's own reading options in place. `resolve(path)` resolves and checks a path; the
 * native load then checks it again within its own folder.
 */
function mixSources(sources, config, resolve) {
  // `onProgress` goes to the mix once; each source gets the rest of the options.
  if (sources.length === 0) throw invalidArgument('loadSFTDataset: the list of sources is empty')
  const { onProgress, ...shared } = config ?? {}
  return sources.map((source, k) => {
    const entry = typeof source === 'string' ? { path: source } : source
    if (!isPlainObject(entry)) {
      throw invalidArgument(`loadSFTDataset: sources[${k}] must be a path or an object { path, weight?, limit?, format?, columns?, roles? }, got ${source === null ? 'null' : typeof source}`)
    }
    for (const key of Object.keys(entry)) {
      if (SOURCE_KEYS.includes(key)) continue
      const near = nearestOption(key, SOURCE_KEYS)
      throw invalidArgument(`loadSFTDataset: sources[${k}] has an unknown key "${key}"${near ? ` (did you mean "${near}"?)` : ''}; a source takes ${SOURCE_KEYS.join(', ')}`)
    }
    if (typeof entry.path !== 'string') throw invalidArgument(`loadSFTDataset: sources[${k}].path must be a string, got ${entry.path === null ? 'null' : typeof entry.path}`)
    const weight = entry.weight ?? 1
    if (typeof weight !== 'number') throw invalidArgument(`loadSFTDataset: sources[${k}].weight must be a number, got ${typeof weight}`)
    const own = Object.fromEntries(PER_SOURCE.filter((key) => entry[key] !== undefined).map((key) => [key, entry[key]]))
    const absolute = resolve(entry.path)
    return { path: absolute, weight, config: { ...shared, ...own, allowedRoot: path.dirname(absolute) } }
  })
}

module.exports = { mixSources }
