// dropDuplicates: exact copies of an earlier example (what DUPLICATE_EXAMPLE reports) leave
// training, the first staying; counted in a warning and in report(), for loaded and created
// datasets alike, through the token cache too.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'

import { createSFTDataset, loadSFTDataset } from '../lib/index.js'
import { tokenizer } from './helpers'

const dir = mkdtempSync(join(tmpdir(), 'sft-drop-duplicates-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const conv = (q: string, a: string) => ({ messages: [{ role: 'user', content: q }, { role: 'assistant', content: a }] })
// Examples 2, 3 and 5 repeat earlier ones; 4 differs from 0 only in its answer.
const records = [conv('a', 'b'), conv('c', 'd'), conv('a', 'b'), conv('c', 'd'), conv('a', 'B'), conv('a', 'b')]
const file = join(dir, 'dups.jsonl')
writeFileSync(file, records.map((r) => JSON.stringify(r)).join('\n') + '\n')
const qwen3 = tokenizer('qwen3')

async function batchIds(ds: { batches(n: number): AsyncGenerator<{ inputIds: Int32Array; shape: number[] }> }) {
  const rows: number[][] = []
  for await (const b of ds.batches(1)) rows.push(Array.from(b.inputIds))
  return rows
}

describe('dropDuplicates', () => {
  it('a load keeps the first of each example, warns with the count, and reports the copies', async () => {
    const warnings: string[] = []
    const listener = (w: Error & { code?: string }) => {
      if (w.code === 'DROPPED_DUPLICATES') warnings.push(w.message)
    }
    process.on('warning', listener)
    const ds = await loadSFTDataset(file, qwen3, { allowedRoot: dir, dropDuplicates: true })
    await new Promise((resolve) => setTimeout(resolve, 20))
    process.off('warning', listener)
    expect(warnings).toEqual([`[SFT Dataset] DROPPED_DUPLICATES: 3 exact copies of earlier examples in ${file} are left out (dropDuplicates); the first of each stays`])
    expect(ds.length).toBe(3)
    expect(Array.from(ds.order())).toEqual([0, 1, 4])
    const report = await ds.report()
    expect(report.examples.map((e) => e.dropped ?? null)).toEqual([null, null, 'duplicate', 'duplicate', null, 'duplicate'])
    expect(report.totals.droppedDuplicates).toBe(3)
    expect(report.examples[2].keptTokens).toBe(0)
    // The same rows as a load of the distinct examples alone.
    const distinct = createSFTDataset([records[0], records[1], records[4]], qwen3)
    expect(await batchIds(ds)).toEqual(await batchIds(distinct))
  })

  it('a created dataset drops the same examples, and without the setting nothing is dropped', async () => {
    const created = createSFTDataset(records, qwen3, { dropDuplicates: true })
    expect(Array.from(created.order())).toEqual([0, 1, 4])
    expect((await created.report()).totals.droppedDuplicates).toBe(3)
    const all = await loadSFTDataset(file, qwen3, { allowedRoot: dir })
    expect(all.length).toBe(6)
  })

  it('a token cache hit drops them too', async () => {
    const cache = join(dir, 'cache')
    const first = await loadSFTDataset(file, qwen3, { allowedRoot: dir, cache })
    const hit = await loadSFTDataset(file, qwen3, { allowedRoot: dir, cache, dropDuplicates: true })
    expect([first.cache?.status, hit.cache?.status]).toEqual(['stored', 'hit'])
    expect(Array.from(hit.order())).toEqual([0, 1, 4])
  })
})
