// A file the chat template cannot render fails when it is loaded, not at the batch that holds
// the bad example mid-training: the error names the first failures and the count;
// dropUnrenderable leaves them out instead (a warning, report(), summary()); stats and report
// list them; a tokenizer folder without a chat template fails at the load.
import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'

import { Tokenizer, loadSFTDataset } from '../lib/index.js'
import { repoRoot, tokenizer, tokenizerDir } from './helpers'

const dir = mkdtempSync(join(tmpdir(), 'sft-fail-at-load-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const turn = (q: string, a: string) => [
  { role: 'user', content: q },
  { role: 'assistant', content: a },
]
// Gemma 3 raises "Conversation roles must alternate" for two user turns in a row.
const records = [
  { messages: turn('a', 'b') },
  { messages: [{ role: 'user', content: 'x' }, { role: 'user', content: 'y' }, { role: 'assistant', content: 'z' }] },
  { messages: turn('c', 'd') },
  { messages: [{ role: 'user', content: 'p' }, { role: 'user', content: 'q' }, { role: 'assistant', content: 'r' }] },
]
const file = join(dir, 'alternation.jsonl')
writeFileSync(file, records.map((r) => JSON.stringify(r)).join('\n') + '\n')
const gemma = tokenizer('gemma3')
const alternate = 'Conversation roles must alternate user/assistant/user/assistant/...'

function cli(...args: string[]) {
  const r = spawnSync(process.execPath, [join(repoRoot, 'bin', 'sft-dataset.js'), ...args], { cwd: dir, encoding: 'utf8' })
  return { status: r.status, stdout: r.stdout, stderr: r.stderr }
}

describe('an example the template fails on', () => {
  it('fails the load, naming the first failures and the count', async () => {
    const error = await loadSFTDataset(file, gemma, { allowedRoot: dir }).catch((e) => e)
    expect(error.code).toBe('TEMPLATE_RENDER')
    expect(error.message).toBe(
      `2 of 4 examples of ${file} fail to render (dropUnrenderable: true leaves them out): ` +
        `SFT example 1: ${alternate} (at ${file}:2); SFT example 3: ${alternate} (at ${file}:4)`,
    )
    const one = join(dir, 'one.jsonl')
    writeFileSync(one, [records[0], records[1]].map((r) => JSON.stringify(r)).join('\n'))
    const single = await loadSFTDataset(one, gemma, { allowedRoot: dir }).catch((e) => e)
    expect(single.message).toBe(`SFT example 1: ${alternate} (at ${one}:2) (the only example of ${one} that fails to render; dropUnrenderable: true leaves such examples out)`)
  })

  it('dropUnrenderable leaves them out, with a warning, in report() and summary()', async () => {
    const warnings: string[] = []
    const listener = (w: Error & { code?: string }) => {
      if (w.code === 'DROPPED_UNRENDERABLE') warnings.push(w.message)
    }
    process.on('warning', listener)
    const ds = await loadSFTDataset(file, gemma, { allowedRoot: dir, dropUnrenderable: true })
    await new Promise((resolve) => setTimeout(resolve, 20))
    process.off('warning', listener)
    expect(warnings).toEqual([
      `[SFT Dataset] DROPPED_UNRENDERABLE: 2 examples of ${file} fail to render and are left out (dropUnrenderable), the first is example 1: SFT example 1: ${alternate} (at ${file}:2)`,
    ])
    expect(ds.length).toBe(2)
    expect(Array.from(ds.order())).toEqual([0, 2])
    let rows = 0
    for await (const b of ds.batches(4)) rows += b.shape[0]
    expect(rows).toBe(2)
    const report = await ds.report()
    expect(report.examples.map((e) => e.dropped ?? null)).toEqual([null, 'unrenderable', null, 'unrenderable'])
    expect(report.examples[1].renderError).toBe(`SFT example 1: ${alternate} (at ${file}:2)`)
    expect(report.totals.unrenderable).toBe(2)
    const summary = await ds.summary()
    const finding = summary.findings.find((f) => f.code === 'RENDER_FAILED')!
    expect(finding).toMatchObject({ severity: 'error', count: 2, examples: [{ example: 1, line: 2 }, { example: 3, line: 4 }] })
    expect(summary.rows).toBe(2)
  })

  it('stats and report list them rather than stop', () => {
    const gemmaDir = tokenizerDir('gemma3')
    const stats = cli('stats', 'alternation.jsonl', '--tokenizer', gemmaDir, '--json')
    expect(stats.status).toBe(0)
    expect(JSON.parse(stats.stdout).renderFailures).toEqual([
      { example: 1, message: `SFT example 1: ${alternate} (at ${file}:2)` },
      { example: 3, message: `SFT example 3: ${alternate} (at ${file}:4)` },
    ])
    const report = cli('report', 'alternation.jsonl', '--tokenizer', gemmaDir, '--json')
    expect(report.status).toBe(0)
    expect(JSON.parse(report.stdout).summary.findings.map((f: { code: string }) => f.code)).toContain('RENDER_FAILED')
    const preview = cli('preview', 'alternation.jsonl', '--tokenizer', gemmaDir)
    expect(preview.status).not.toBe(0)
    expect(preview.stderr).toContain('2 of 4 examples')
  })
})

describe('a tokenizer folder without a chat template', () => {
  it('fails the load with CHAT_TEMPLATE_MISSING', async () => {
    const bare = join(dir, 'bare')
    mkdirSync(bare)
    symlinkSync(join(tokenizerDir('qwen3'), 'tokenizer.json'), join(bare, 'tokenizer.json'))
    const tok = Tokenizer.fromPretrainedSync(bare)
    expect(tok.hasChatTemplate).toBe(false)
    const error = await loadSFTDataset(file, tok, { allowedRoot: dir }).catch((e) => e)
    expect(error.code).toBe('CHAT_TEMPLATE_MISSING')
    expect(error.message).toMatch(/^SFT example 0: no chat template for /)
  })
})
