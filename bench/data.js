'use strict'
// The benchmarks' data: the real files of ../shared/parity/real/data and how they are read.

const { readFileSync, readdirSync, statSync, existsSync } = require('node:fs')
const path = require('node:path')

const realData = path.resolve(__dirname, '..', '..', 'shared', 'parity', 'real', 'data')

/** The largest `<prefix>*.jsonl` file of the real data, or undefined when there is none. */
function largest(prefix) {
  if (!existsSync(realData)) return undefined
  const files = readdirSync(realData).filter((f) => f.startsWith(prefix) && f.endsWith('.jsonl'))
  files.sort((a, b) => statSync(path.join(realData, b)).size - statSync(path.join(realData, a)).size)
  return files.length ? path.join(realData, files[0]) : undefined
}

/** The records of a JSONL file, blank lines skipped. */
function readJsonl(file) {
  return readFileSync(file, 'utf8')
    .split(/\r?\n/)
    .filter((l) => l.trim().length > 0)
    .map((l) => JSON.parse(l))
}

/** The middle value of `values` (the upper middle of an even count): the benchmarks' statistic. */
function median(values) {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)]
}

module.exports = { realData, largest, readJsonl, median }
