#!/usr/bin/env node
'use strict'
// `npm run package`: the release binary for this machine, then installable tarballs in dist/:
// the main package `sft-dataset` (JS, typings, CLI; its optionalDependencies name every platform
// package at the same version) and this platform's binary package (npm/<platform>/ plus the
// `.node` file). The release workflow runs the same script on each runner; `--no-build` packs the
// binary already built (after `npm ci`, whose prepare step built it). Each tarball appears in
// dist/ whole or not at all: it is packed in a staging folder and renamed into place.

const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const root = path.join(__dirname, '..')
const dist = path.join(root, 'dist')
const stage = path.join(dist, '.stage')
const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'))
const binaryName = pkg.napi.binaryName

const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'
const run = (command, args, cwd = root) =>
  execFileSync(command, args, { cwd, stdio: ['ignore', 'pipe', 'inherit'], shell: process.platform === 'win32' })

// npm/<suffix>/ for every target, keyed by the suffix the binary file carries.
function platformPackages() {
  const dir = path.join(root, 'npm')
  return fs.readdirSync(dir).map((suffix) => ({
    suffix,
    dir: path.join(dir, suffix),
    manifest: JSON.parse(fs.readFileSync(path.join(dir, suffix, 'package.json'), 'utf8')),
  }))
}

function builtBinaries() {
  const prefix = `${binaryName}.`
  return fs.readdirSync(root).filter((f) => f.startsWith(prefix) && f.endsWith('.node'))
}

// Packs `folder` and moves the tarball into dist/; returns its path.
function pack(folder) {
  const out = fs.mkdtempSync(path.join(stage, 'out-'))
  const json = run(npm, ['pack', '--json', '--pack-destination', out], folder).toString()
  const [{ filename }] = JSON.parse(json)
  const file = path.join(dist, path.basename(filename))
  fs.renameSync(path.join(out, path.basename(filename)), file)
  return file
}

function copyInto(from, to) {
  fs.cpSync(from, to, { recursive: true, filter: (src) => !src.endsWith('.node') })
}

function stageMain(platforms) {
  const dir = path.join(stage, 'main')
  fs.mkdirSync(dir, { recursive: true })
  for (const entry of pkg.files) copyInto(path.join(root, entry), path.join(dir, entry))
  const manifest = { ...pkg }
  for (const key of ['devDependencies', 'scripts', 'overrides', 'napi']) delete manifest[key]
  manifest.optionalDependencies = Object.fromEntries(
    platforms.map((p) => [p.manifest.name, pkg.version]).sort(([a], [b]) => a.localeCompare(b)),
  )
  fs.writeFileSync(path.join(dir, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`)
  return dir
}

function stagePlatform(platform, binary) {
  const dir = path.join(stage, platform.suffix)
  copyInto(platform.dir, dir)
  if (platform.manifest.version !== pkg.version) {
    throw new Error(`npm/${platform.suffix}/package.json has version ${platform.manifest.version}, expected ${pkg.version} (run \`npx napi version\`)`)
  }
  // npm provenance checks every package's repository against the one that built it.
  const manifest = { ...platform.manifest, repository: pkg.repository, homepage: pkg.homepage, bugs: pkg.bugs }
  fs.writeFileSync(path.join(dir, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`)
  fs.copyFileSync(path.join(root, binary), path.join(dir, binary))
  return dir
}

function main() {
  if (!process.argv.includes('--no-build')) {
    run('npx', ['napi', 'build', '--platform', '--release', '--features', 'napi'])
  }
  const platforms = platformPackages()
  const binaries = builtBinaries()
  if (binaries.length === 0) throw new Error(`no ${binaryName}.*.node in ${root}: build first (npm run build)`)

  fs.rmSync(stage, { recursive: true, force: true })
  fs.mkdirSync(stage, { recursive: true })
  const written = [pack(stageMain(platforms))]
  for (const binary of binaries) {
    const suffix = binary.slice(binaryName.length + 1, -'.node'.length)
    const platform = platforms.find((p) => p.suffix === suffix)
    if (platform === undefined) throw new Error(`${binary}: no npm/${suffix}/ package for it (napi.targets in package.json)`)
    written.push(pack(stagePlatform(platform, binary)))
  }
  fs.rmSync(stage, { recursive: true, force: true })
  for (const file of written) console.log(path.relative(root, file))
}

main()
