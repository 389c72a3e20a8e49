'use strict'
// The generated binding with every function and method guarded (see arguments.js); the rest of
// lib/ reaches the native code through this module only. When no binary fits this machine, the
// generated loader's error chain is replaced by one that says which package was looked for and
// how to build from source.

const { guardArguments } = require('./arguments.js')

// Platforms with a prebuilt binary package, keyed as `${process.platform}-${process.arch}`
// (Linux adds the C library); the same list as `napi.targets` in package.json.
const PREBUILT = new Map([
  ['darwin-arm64', 'sft-dataset-darwin-arm64'],
  ['darwin-x64', 'sft-dataset-darwin-x64'],
  ['linux-x64-gnu', 'sft-dataset-linux-x64-gnu'],
  ['linux-arm64-gnu', 'sft-dataset-linux-arm64-gnu'],
  ['win32-x64', 'sft-dataset-win32-x64-msvc'],
])

function platformKey() {
  const key = `${process.platform}-${process.arch}`
  if (process.platform !== 'linux') return key
  const glibc = process.report?.getReport?.()?.header?.glibcVersionRuntime
  return `${key}-${glibc ? 'gnu' : 'musl'}`
}

const BUILD_FROM_SOURCE =
  'build from source: clone the repository, install Rust (https://rustup.rs) and Node >= 20,\n' +
  'run `npm install` there (it compiles the addon), then `npm install <that folder>`.'

function isInstalled(name) {
  try {
    require.resolve(`${name}/package.json`)
    return true
  } catch {
    return false
  }
}

function missingBinding(cause) {
  const key = platformKey()
  const wanted = PREBUILT.get(key)
  let lines
  if (wanted === undefined) {
    lines = [
      `sft-dataset: there is no prebuilt binary for ${key} (prebuilt: ${[...PREBUILT.keys()].join(', ')}).`,
      `To use it here, ${BUILD_FROM_SOURCE}`,
    ]
  } else if (isInstalled(wanted)) {
    lines = [
      `sft-dataset: the binary package "${wanted}" for ${key} is installed but failed to load (see error.cause).`,
      'Reinstall it at the version of sft-dataset.',
      `Or ${BUILD_FROM_SOURCE}`,
    ]
  } else {
    lines = [
      `sft-dataset: the binary package "${wanted}" for ${key} is not installed.`,
      'It is an optional dependency: reinstall without --no-optional / --omit=optional. A lockfile',
      'made on another platform can leave it out: delete node_modules and package-lock.json, then',
      'run npm install again.',
      `Or ${BUILD_FROM_SOURCE}`,
    ]
  }
  const error = new Error(lines.join('\n'), { cause })
  error.code = 'NATIVE_BINDING_MISSING'
  error.platform = key
  error.packageName = wanted ?? null
  return error
}

function loadBinding() {
  try {
    return require('../index.js')
  } catch (error) {
    if (error?.message?.startsWith('Cannot find native binding')) throw missingBinding(error)
    throw error
  }
}

module.exports = guardArguments(loadBinding())
