#!/usr/bin/env node
'use strict'
// `node scripts/publish.js <dir> [--dry-run]`: publishes the tarballs that `npm run package`
// wrote on every runner, platform packages first, so that the main package never names an
// optional dependency the registry does not have yet. Every tarball must carry this checkout's
// version, and every platform of napi.targets must be present.

const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const root = path.join(__dirname, '..')
const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'))
const [dir = 'artifacts'] = process.argv.slice(2).filter((a) => !a.startsWith('--'))
const dryRun = process.argv.includes('--dry-run')

const platformNames = fs.readdirSync(path.join(root, 'npm')).map((suffix) => `${pkg.name}-${suffix}`)
const tarball = (name) => path.join(dir, `${name}-${pkg.version}.tgz`)
const missing = [pkg.name, ...platformNames].filter((name) => !fs.existsSync(tarball(name)))
if (missing.length > 0) {
  console.error(`missing tarballs in ${dir}: ${missing.map((n) => path.basename(tarball(n))).join(', ')}`)
  process.exit(1)
}

for (const name of [...platformNames, pkg.name]) {
  const args = ['publish', tarball(name), '--access', 'public', ...(dryRun ? ['--dry-run'] : ['--provenance'])]
  console.log(`npm ${args.join(' ')}`)
  execFileSync('npm', args, { stdio: 'inherit' })
}
