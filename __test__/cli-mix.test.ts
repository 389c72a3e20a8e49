// `sft-dataset` on several data files, run as a child process as a user runs it: a mix by
// --weight for preview, stats, export and report, and validate of each file in turn. Expected
// figures come from the library's own load of the same mix.
import { spawnSync } from 'node:child_process'
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

import { loadSFTDataset } from '../lib/index.js'
import { fixtures, repoRoot, requireShared, sharedParity, tokenizer } from './helpers'

const bin = join(repoRoot, 'bin', 'sft-dataset.js')
const data = requireShared(join(sharedParity, 'real', 'data'))
const emoji = join(data, 'conv_emoji_gemoji.jsonl')
const alpaca = join(data, 'pc_alpaca.jsonl')
const toolCalls = join(data, 'conv_glaive_toolcall_en.jsonl')

// 25 records of each file: the weight 0.5 draws 12.5 of them, rounded to 13 per epoch.
const LIMIT = 25
const mixArgs = [emoji, alpaca, '--weight', '2,0.5', '--limit', String(LIMIT), '--quiet']

function runIn(cwd: string, ...args: string[]) {
  const r = spawnSync(process.execPath, [bin, ...args], { cwd, env: { ...process.env, MLX_NODE_DATA_ROOT: data }, encoding: 'utf8' })
  return { status: r.status, stdout: r.stdout, stderr: r.stderr }
}

function json(...args: string[]) {
  const r = runIn(repoRoot, ...args, '--json')
  expect(r.stderr).toBe('')
  expect(r.status).toBe(0)
  return JSON.parse(r.stdout)
}

/** Appearances per epoch of a source: rows times the weight's integer part, plus its fraction's share. */
function perEpoch(rows: number, weight: number) {
  return rows * Math.floor(weight) + Math.round((weight - Math.floor(weight)) * rows)
}

async function libraryMix() {
  const sources = [
    { path: emoji, weight: 2, limit: LIMIT },
    { path: alpaca, weight: 0.5, limit: LIMIT },
  ]
  return loadSFTDataset(sources, tokenizer('qwen3'), { allowedRoot: data })
}

describe('a mix of two files by --weight', () => {
  let expected: Awaited<ReturnType<Awaited<ReturnType<typeof libraryMix>>['report']>>
  beforeAll(async () => {
    expected = await (await libraryMix()).report()
  })

  it('stats --json names the files with their weights and counts each source as the library does', () => {
    const stats = json('stats', ...mixArgs)
    expect(stats.file).toBeUndefined()
    expect(stats.files).toEqual([
      { path: emoji, weight: 2 },
      { path: alpaca, weight: 0.5 },
    ])
    expect(stats.format).toBe('conversation + prompt-completion')
    expect(stats.examples).toBe(2 * LIMIT)
    expect(stats.sources.map((s: any) => [s.path, s.format, s.examples, s.start, s.rows, s.perEpoch])).toEqual([
      [emoji, 'conversation', 25, 0, 25, 50],
      [alpaca, 'prompt-completion', 25, 25, 25, 13],
    ])
    expect(stats.sources.map((s: any) => s.perEpoch)).toEqual([perEpoch(25, 2), perEpoch(25, 0.5)])
    expect(stats.sources).toEqual(expected.sources)
    expect(stats.tokens.total).toBe(expected.totals.keptTokens)
  })

  it('stats names each file with its weight on a file: line', () => {
    const r = runIn(repoRoot, 'stats', ...mixArgs)
    expect(r.status).toBe(0)
    expect(r.stdout.split('\n').slice(0, 2)).toEqual([
      `file: ${emoji} (weight 2) · 25 examples, 50 per epoch`,
      `file: ${alpaca} (weight 0.5) · 25 examples, 13 per epoch`,
    ])
  })

  describe('export', () => {
    let dir: string
    beforeAll(() => {
      dir = mkdtempSync(join(tmpdir(), 'sft-cli-mix-'))
    })
    afterAll(() => rmSync(dir, { recursive: true, force: true }))

    it('--json writes each example once, with the sources and their per-epoch counts', () => {
      const out = join(dir, 'rows.parquet')
      const written = json('export', ...mixArgs, '--out', out)
      expect(written.files).toEqual([
        { path: emoji, weight: 2 },
        { path: alpaca, weight: 0.5 },
      ])
      expect([written.file, written.rows, written.tokens, written.trainedTokens]).toEqual([out, 50, expected.totals.keptTokens, expected.totals.trainedTokens])
      expect(written.sources.map((s: any) => [s.examples, s.rows, s.perEpoch])).toEqual([
        [25, 25, 50],
        [25, 25, 13],
      ])
      expect(written.cache).toBeNull()
      expect(existsSync(out)).toBe(true)
    })

    it('--batches writes the rows of one epoch: each source as often as its weight says', () => {
      const written = json('export', ...mixArgs, '--out', join(dir, 'batches.parquet'), '--batches')
      expect(written.rows).toBe(50 + 13)
    })

    it('--split holds out a part of each source in proportion', () => {
      const out = join(dir, 'split.parquet')
      const written = json('export', ...mixArgs, '--out', out, '--split', '0.2')
      // 50 examples: 10 held out, 5 of each file; the test part is not weighted.
      expect(written.sources.map((s: any) => [s.rows, s.perEpoch])).toEqual([
        [20, 40],
        [20, 10],
      ])
      expect(written.test.sources.map((s: any) => [s.weight, s.rows, s.perEpoch])).toEqual([
        [1, 5, 5],
        [1, 5, 5],
      ])
      expect([written.rows, written.test.rows, written.test.file]).toEqual([40, 10, join(dir, 'split.test.parquet')])
    })
  })

  it('preview counts the examples of every file and indexes them end to end', () => {
    const r = runIn(repoRoot, 'preview', ...mixArgs, '--index', '30', '--no-color')
    expect(r.status).toBe(0)
    const lines = r.stdout.split('\n')
    expect(lines.slice(0, 2)).toEqual([`file: ${emoji} (weight 2) · 25 examples, 50 per epoch`, `file: ${alpaca} (weight 0.5) · 25 examples, 13 per epoch`])
    expect(lines[4]).toBe('examples: 50 in 2 files; showing example 30')
  })

  it('--weight with one file still loads it as a mix whose weight repeats its examples', () => {
    const stats = json('stats', emoji, '--weight', '3', '--limit', '4', '--quiet')
    expect(stats.files).toEqual([{ path: emoji, weight: 3 }])
    expect(stats.sources.map((s: any) => [s.examples, s.rows, s.perEpoch])).toEqual([[4, 4, 12]])
    expect(stats.padding.batches).toBe(2)
  })

  it('report --json: the files, summary.sources and findings whose examples name their file', () => {
    const result = json('report', emoji, toolCalls, '--limit', '10', '--quiet')
    expect(result.file).toBeUndefined()
    expect(result.files).toEqual([
      { path: emoji, weight: 1 },
      { path: toolCalls, weight: 1 },
    ])
    expect(result.summary.source).toBeNull()
    expect(result.summary.sources.map((s: any) => [s.path, s.weight, s.examples, s.rows, s.perEpoch])).toEqual([
      [emoji, 1, 10, 10, 10],
      [toolCalls, 1, 10, 10, 10],
    ])
    const ignored = result.summary.findings.find((f: any) => f.code === 'TOOLS_IGNORED')
    expect(ignored.examples[0]).toMatchObject({ example: 10, file: toolCalls, line: 1 })
  })

  it('report --out: a Sources table, and finding examples named with their file and line', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sft-cli-mix-report-'))
    try {
      const page = join(dir, 'report.html')
      const r = runIn(repoRoot, 'report', emoji, toolCalls, '--weight', '1,1.5', '--limit', '10', '--quiet', '--out', page)
      expect(r.stderr).toBe('')
      expect(r.status).toBe(0)
      expect(r.stdout.split('\n').slice(0, 2)).toEqual([`file: ${emoji} (weight 1) · 10 examples, 10 per epoch`, `file: ${toolCalls} (weight 1.5) · 10 examples, 15 per epoch`])
      const html = readFileSync(page, 'utf8')
      expect(html).toContain('<title>sft-dataset report: conv_emoji_gemoji.jsonl + conv_glaive_toolcall_en.jsonl</title>')
      expect(html).toContain('<a href="#sources">Sources</a>')
      const table = html.slice(html.indexOf('<section id="sources">'), html.indexOf('</section>', html.indexOf('<section id="sources">')))
      expect(table).toContain('<th scope="col">per epoch</th><th scope="col">trained tokens</th>')
      expect(table).toContain(`${toolCalls}</span></td><td data-label="weight">1.5</td><td data-label="format">conversation</td><td data-label="examples">10</td><td data-label="rows">10</td><td data-label="per epoch">15</td>`)
      expect(html).toContain('<a href="#example-10">example 10</a> (conv_glaive_toolcall_en.jsonl line 1)')
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

describe('validate of several files', () => {
  let dir: string
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'sft-cli-validate-'))
    copyFileSync(join(fixtures, 'cli', 'good.jsonl'), join(dir, 'good.jsonl'))
    writeFileSync(join(dir, 'bad.jsonl'), '{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]}\n{"messages": 5}\n')
  })
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  function validate(...args: string[]) {
    return spawnSync(process.execPath, [bin, 'validate', ...args, '--quiet'], { cwd: dir, env: { ...process.env, MLX_NODE_DATA_ROOT: '' }, encoding: 'utf8' })
  }

  it('reports each file in turn and exits 1 naming the bad file and its line', () => {
    const r = validate('good.jsonl', 'bad.jsonl')
    expect(r.stderr).toBe('')
    expect(r.status).toBe(1)
    const lines = r.stdout.trimEnd().split('\n')
    expect(lines[0]).toBe(`file: ${join(dir, 'good.jsonl')}`)
    expect(lines[1]).toMatch(/^2 examples \(conversation\), 0 problems in 0 examples; tokenizer: /)
    expect(lines[2]).toBe(`file: ${join(dir, 'bad.jsonl')}`)
    expect(lines[3]).toBe('bad.jsonl:2: INVALID_EXAMPLE SFT example 1: messages must be an array')
    expect(lines[4]).toMatch(/^2 examples \(conversation\), 1 problem in 1 example; tokenizer: /)
    expect(lines.slice(5)).toEqual(['2 files validated; 1 fails: bad.jsonl'])
  })

  it('--json prints one object per file, one per line', () => {
    const r = validate('bad.jsonl', 'good.jsonl', '--json')
    expect(r.status).toBe(1)
    const reports = r.stdout.trimEnd().split('\n').map((line) => JSON.parse(line))
    expect(reports.map((x) => [x.file, x.ok, x.examples, x.problems.map((p: any) => [p.code, p.line])])).toEqual([
      [join(dir, 'bad.jsonl'), false, 2, [['INVALID_EXAMPLE', 2]]],
      [join(dir, 'good.jsonl'), true, 2, []],
    ])
  })

  it('files that all pass exit 0', () => {
    const r = validate('good.jsonl', 'good.jsonl')
    expect(r.status).toBe(0)
    expect(r.stdout.trimEnd().split('\n').at(-1)).toBe('2 files validated; all pass')
  })
})

describe('--weight usage errors exit 2 with one line on stderr', () => {
  const cases: Array<[string[], string]> = [
    [['stats', emoji, alpaca, '--weight', '2'], 'sft-dataset: --weight gives 1 weight for 2 data files: give one per file, in their order\n'],
    [['stats', emoji, '--weight', '1,2'], 'sft-dataset: --weight gives 2 weights for 1 data file: give one per file, in their order\n'],
    [['stats', emoji, alpaca, '--weight', '2,0'], 'sft-dataset: --weight must be a comma-separated list of numbers > 0, one per data file, got "0" in "2,0"\n'],
    [['stats', emoji, alpaca, '--weight', '2,x'], 'sft-dataset: --weight must be a comma-separated list of numbers > 0, one per data file, got "x" in "2,x"\n'],
    [['export', emoji, alpaca, '--out', 'o.parquet', '--weight=1,-1'], 'sft-dataset: --weight must be a comma-separated list of numbers > 0, one per data file, got "-1" in "1,-1"\n'],
    [['stats', emoji, alpaca, '--weight', '1,'], 'sft-dataset: --weight must be a comma-separated list of numbers > 0, one per data file, got "" in "1,"\n'],
    [['validate', emoji, alpaca, '--weight', '1,1'], 'sft-dataset: --weight applies only to preview, stats, export and report\n'],
    [['stats', emoji, join(data, 'nope.jsonl')], `sft-dataset: data file not found: ${join(data, 'nope.jsonl')}\n`],
  ]
  it.each(cases)('%j', (args, message) => {
    const r = runIn(repoRoot, ...args)
    expect(r.stderr).toBe(message)
    expect(r.stdout).toBe('')
    expect(r.status).toBe(2)
  })
})
