// `SFTDataset.summary()` and `sft-dataset report --json`: every figure equals what the rest of
// the library says about the same file and settings (report(), batchingStats(),
// validateSFTFile()), on the real parity files; the CLI prints exactly the library's summary.
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'

import { describe, expect, it } from 'vitest'

import { createSFTDataset, loadSFTDataset, validateSFTFile, type DatasetSummary } from '../lib/index.js'
import { repoRoot, requireShared, sharedParity, tokenizer } from './helpers'

const FILES = ['conv_emoji_gemoji', 'conv_fastchat_mtbench', 'conv_glaive_toolcall_en', 'pc_alpaca', 'pc_gsm8k_think']
const SETTINGS = { maxSeqLength: 512, completionOnly: true, allowedRoot: '/' }
const SILENT = ['CONTENT_NOT_RENDERED', 'TOOLS_IGNORED', 'CONTENT_DROPPED_BY_TEMPLATE', 'DUPLICATE_EXAMPLE', 'CONTROL_TOKEN_IN_CONTENT']

function realFile(name: string): string {
  return requireShared(join(sharedParity, 'real', 'data', `${name}.jsonl`))
}

/** The physical line (1-based) of each record (non-blank line) of a JSONL file. */
function recordLines(path: string): number[] {
  return readFileSync(path, 'utf8').split('\n').flatMap((line, k) => (line.trim() === '' ? [] : [k + 1]))
}

describe('summary() agrees with the library on the real parity files', () => {
  for (const name of FILES) {
    it(name, async () => {
      const path = realFile(name)
      const tok = tokenizer('qwen3')
      const ds = await loadSFTDataset(path, tok, SETTINGS)
      ds.shuffleForEpoch(0)
      const s = await ds.summary({ batchSize: 8, sample: 0 })
      const report = await ds.report()
      const t = report.totals
      expect(s.examples).toBe(t.examples)
      expect(s.rows).toBe(t.examples - t.droppedTooLong - t.droppedUntrainable)
      expect(s.tokens.total).toBe(t.tokens)
      expect(s.tokens.kept).toBe(t.keptTokens)
      expect(s.tokens.trained).toBe(t.trainedTokens)
      expect(s.lengths.truncated).toBe(t.truncated)
      expect(s.lengths.histogram.reduce((a, b) => a + b.count, 0)).toBe(t.examples)
      const lengths = report.examples.map((e) => e.tokens).sort((a, b) => a - b)
      expect([s.tokens.min, s.tokens.max]).toEqual([lengths[0], lengths[lengths.length - 1]])
      expect(s.tokens.median).toBe(lengths[Math.ceil(0.5 * lengths.length) - 1])
      // Every strategy's epoch, exactly as batchingStats gives it.
      expect(s.batching.strategies).toEqual(await ds.batchingStats(8))
      expect(s.batching.chosen).toBe('reference')
      // The file itself.
      expect(s.source).toMatchObject({ path, bytes: statSync(path).size, fileFormat: 'jsonl' })
      expect(s.source!.blake3).toMatch(/^[0-9a-f]{64}$/)
      expect(s.template.family).toBe('qwen3')
      expect(s.settings).toMatchObject({ maxSeqLength: 512, completionOnly: true, truncation: 'keepEnd', batching: 'reference' })
      // Every example rendered again and attributed: the kinds add up to the kept and trained tokens.
      const kinds = s.kinds!
      expect([kinds.sampled, kinds.attributed]).toEqual([t.examples, t.examples])
      expect(kinds.parts.reduce((a, p) => a + p.tokens, 0)).toBe(t.keptTokens)
      expect(kinds.parts.reduce((a, p) => a + p.trained, 0)).toBe(t.trainedTokens)
      const byKind = Object.fromEntries(kinds.parts.map((p) => [p.kind, p]))
      // The reference masking trains assistant turns only.
      expect(byKind.user.trained).toBe(0)
      expect(byKind.system.trained).toBe(0)
      expect(byKind.assistant.trained).toBeGreaterThan(0)
      // Findings: counts as report() has them, silent losses listed as validateSFTFile lists them.
      const lines = recordLines(path)
      const validation = await validateSFTFile(path, tok, SETTINGS)
      const findings = Object.fromEntries(s.findings.map((f) => [f.code, f]))
      for (const code of SILENT) {
        expect(findings[code]?.count ?? 0, code).toBe(t.silentLosses[code] ?? 0)
        const warned = validation.warnings.filter((w) => w.code === code).slice(0, 5)
        expect((findings[code]?.examples ?? []).map((e) => [e.example, e.line]), code).toEqual(warned.map((w) => [w.example, w.line]))
      }
      const truncated = report.examples.flatMap((e, i) => (e.truncated && !e.dropped ? [i] : []))
      expect(findings.TRUNCATED?.count ?? 0).toBe(truncated.length)
      expect((findings.TRUNCATED?.examples ?? []).map((e) => e.example)).toEqual(truncated.slice(0, 5))
      for (const f of s.findings) {
        for (const e of f.examples) expect(e.line, `${f.code} example ${e.example}`).toBe(lines[e.example])
      }
      // Most severe first.
      const rank = { error: 0, warning: 1, info: 2 }
      expect(s.findings.map((f) => rank[f.severity])).toEqual(s.findings.map((f) => rank[f.severity]).sort())
    })
  }
})

describe('sft-dataset report', () => {
  const cli = join(repoRoot, 'bin', 'sft-dataset.js')

  it('--json prints the library summary of the same file and settings', async () => {
    const path = realFile('conv_glaive_toolcall_en')
    // Run where the data is: the command reads files inside the current directory only.
    const out = execFileSync(process.execPath, [cli, 'report', path, '--max-seq-length', '512', '--completion-only', '--json', '--quiet'], { cwd: dirname(path), encoding: 'utf8' })
    const printed = JSON.parse(out)
    const ds = await loadSFTDataset(path, tokenizer('qwen3'), SETTINGS)
    ds.shuffleForEpoch(0)
    const s: DatasetSummary = await ds.summary({ batchSize: 8 })
    expect(printed.summary).toEqual(s)
    expect(printed.file).toEqual(s.source)
    expect(printed.summary.findings.map((f: { code: string }) => f.code)).toEqual(['TOOLS_IGNORED', 'TURN_END_NOT_TRAINED', 'TRUNCATED', 'DUPLICATE_EXAMPLE'])
  })

  it('writes one self-contained page with a preview of every listed example', () => {
    const path = realFile('pc_alpaca')
    const html = join(mkdtempSync(join(tmpdir(), 'sft-report-')), 'r.html')
    const out = execFileSync(process.execPath, [cli, 'report', path, '--max-seq-length', '64', '--out', html, '--quiet'], { cwd: dirname(path), encoding: 'utf8' })
    expect(out).toContain(`wrote ${html}`)
    const page = readFileSync(html, 'utf8')
    expect(page.startsWith('<!DOCTYPE html>')).toBe(true)
    expect(page).not.toMatch(/(src|href)="https?:/)
    const links = [...page.matchAll(/href="#example-(\d+)"/g)].map((m) => m[1])
    expect(links.length).toBeGreaterThan(0)
    for (const n of links) expect(page).toContain(`id="example-${n}"`)
    expect(page).toContain('max seq length 64')
    // Settings left unset read as what the library chose: Qwen3 has the ChatML tokens.
    expect(page).toContain('<dt>maskingStrategy</dt><dd>reference (default)</dd>')
    expect(page).toContain('<dt>specialTokenIds</dt><dd>from the tokenizer</dd>')
    expect(page).not.toContain('<dd>—</dd>')
  })

  it('needs --out or --json, and --sample only applies to it', () => {
    const run = (...args: string[]) => {
      try {
        execFileSync(process.execPath, [cli, ...args], { cwd: dirname(realFile('pc_alpaca')), encoding: 'utf8', stdio: 'pipe' })
        return { status: 0, stderr: '' }
      } catch (e: any) {
        return { status: e.status, stderr: String(e.stderr) }
      }
    }
    const path = realFile('pc_alpaca')
    expect(run('report', path)).toEqual({ status: 2, stderr: 'sft-dataset: report: give --out <report.html>, --json, or both\n' })
    expect(run('stats', path, '--sample', '5')).toEqual({ status: 2, stderr: 'sft-dataset: --sample applies only to report\n' })
  })
})

describe('summary() of a dataset made in memory', () => {
  it('has no file, no breakdown by kind, and findings without lines', async () => {
    const examples = [
      { prompt: [{ role: 'user', content: 'Hi' }], completion: { role: 'assistant', content: 'Hello!' } },
      { prompt: [{ role: 'user', content: 'Hi' }], completion: { role: 'assistant', content: 'Hello!' } },
    ]
    const ds = createSFTDataset(examples, tokenizer('qwen3'), { maxSeqLength: 64, completionOnly: true })
    const s = await ds.summary({ batchSize: 2 })
    expect(s.source).toBeNull()
    expect(s.kinds).toBeNull()
    expect(s.examples).toBe(2)
    const duplicate = s.findings.find((f) => f.code === 'DUPLICATE_EXAMPLE')!
    expect(duplicate.examples).toEqual([{ example: 1 }])
  })

  it('refuses bad options with INVALID_ARGUMENT', async () => {
    const ds = createSFTDataset([{ prompt: [{ role: 'user', content: 'a' }], completion: { role: 'assistant', content: 'b' } }], tokenizer('qwen3'))
    await expect(ds.summary({ batchSize: 0 })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' })
    await expect(ds.summary({ sample: -1 })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: 'sample must be a non-negative integer, got -1' })
  })
})

describe('loadSFTDataset onProgress', () => {
  it('reports the records built and the bytes read, growing to the whole file', async () => {
    const path = realFile('pc_alpaca')
    const seen: Array<{ records: number; bytes: number }> = []
    const ds = await loadSFTDataset(path, tokenizer('qwen3'), { ...SETTINGS, onProgress: (p) => seen.push(p) })
    // Calls are queued on the event loop: let the last one arrive.
    await new Promise((resolve) => setTimeout(resolve, 50))
    expect(seen.length).toBeGreaterThan(1)
    for (let k = 1; k < seen.length; k++) {
      expect(seen[k].records).toBeGreaterThanOrEqual(seen[k - 1].records)
      expect(seen[k].bytes).toBeGreaterThanOrEqual(seen[k - 1].bytes)
    }
    expect(seen.at(-1)).toEqual({ records: ds.length, bytes: statSync(path).size, waiting: false })
  })
})
