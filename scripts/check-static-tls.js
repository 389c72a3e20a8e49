#!/usr/bin/env node
'use strict'
// `node scripts/check-static-tls.js [addon.node]`: the static TLS the built addon asks for (its
// ELF PT_TLS segment), against a budget. glibc loads a module's thread-locals into a small
// surplus that every module loaded at run time shares (about 1.6 KB with the defaults); a
// module whose thread-locals do not fit fails to load with "cannot allocate memory in static
// TLS block". Large thread-local values are therefore boxed; this check keeps it so.

const fs = require('node:fs')
const path = require('node:path')

/** Bytes of the addon's thread-local storage: the memory size of its PT_TLS program header. */
function staticTls(file) {
  const elf = fs.readFileSync(file)
  if (elf.readUInt32BE(0) !== 0x7f454c46 || elf[4] !== 2 || elf[5] !== 1) {
    throw new Error(`${file}: not a 64-bit little-endian ELF file`)
  }
  const phoff = Number(elf.readBigUInt64LE(0x20))
  const phentsize = elf.readUInt16LE(0x36)
  const phnum = elf.readUInt16LE(0x38)
  for (let i = 0; i < phnum; i++) {
    const at = phoff + i * phentsize
    const PT_TLS = 7
    if (elf.readUInt32LE(at) === PT_TLS) return Number(elf.readBigUInt64LE(at + 0x28))
  }
  return 0
}

const BUDGET = 1280
const root = path.join(__dirname, '..')
const file =
  process.argv[2] ?? path.join(root, fs.readdirSync(root).find((name) => name.endsWith('.node')) ?? 'missing.node')
const bytes = staticTls(file)
console.log(`${path.basename(file)}: ${bytes} bytes of static TLS (budget ${BUDGET})`)
if (bytes > BUDGET) {
  console.error('the addon asks for more static TLS than its budget: box the largest thread-locals (readelf -sW shows them)')
  process.exit(1)
}
