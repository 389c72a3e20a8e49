// Distillation targets carried by SFT examples: collated into [batch, seqLen, k] tensors that are
// truncated and padded exactly like inputIds.
import { describe, expect, it } from 'vitest'

import { createSFTDataset } from '../lib/index.js'
import { tokenizer } from './helpers'

const NINF = Number.NEGATIVE_INFINITY

describe('SFT distillation targets', () => {
  const tok = tokenizer('qwen3')
  const base = [
    { messages: [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello there, friend.' }] },
    { messages: [{ role: 'user', content: 'Yo' }, { role: 'assistant', content: 'Hey' }] },
  ]

  async function withTargets(maxSeqLength: number) {
    const plain = createSFTDataset(base, tok)
    const rows = await Promise.all([0, 1].map((i) => plain.tokenizeExample(i)))
    // Example 0 gets two candidates per position (id = token + 1, token + 2); position 0 empty.
    const ids0 = Array.from(rows[0].inputIds, (t, p) => (p === 0 ? [] : [t + 1, t + 2]))
    const lp0 = Array.from(rows[0].inputIds, (_, p) => (p === 0 ? [] : [-p, -p - 0.5]))
    const examples = [{ ...base[0], distill: { tokenIds: ids0, logprobs: lp0 } }, base[1]]
    return { rows, ds: createSFTDataset(examples, tok, { maxSeqLength }) }
  }

  it('packs, truncates (keeping the end) and pads like inputIds', async () => {
    const { rows, ds } = await withTargets(8)
    const batch = await ds.collateBatch([0, 1])
    const [B, L] = batch.shape
    expect(batch.distillShape).toEqual([B, L, 2])
    const n0 = rows[0].inputIds.length
    expect(n0).toBeGreaterThan(8)
    for (let s = 0; s < L; s++) {
      const p = n0 - L + s
      const t = rows[0].inputIds[p]
      expect(batch.inputIds[s]).toBe(t)
      expect(Array.from(batch.distillTokenIds!.slice(s * 2, s * 2 + 2))).toEqual([t + 1, t + 2])
      expect(Array.from(batch.distillLogprobs!.slice(s * 2, s * 2 + 2))).toEqual([-p, -p - 0.5])
    }
    // Example 1 has no targets: every slot of its row is the sentinel.
    const row1 = batch.distillTokenIds!.slice(L * 2, L * 4)
    expect(Array.from(row1).every((v) => v === -1)).toBe(true)
    expect(Array.from(batch.distillLogprobs!.slice(L * 2, L * 4)).every((v) => v === NINF)).toBe(true)
  })

  it('keeps position 0 empty and pads the tail with sentinels when rows are short', async () => {
    const { rows, ds } = await withTargets(2048)
    const batch = await ds.collateBatch([1, 0])
    const [, L] = batch.shape
    expect(L).toBe(rows[0].inputIds.length)
    const second = batch.distillTokenIds!.slice(L * 2, L * 4)
    expect(Array.from(second.slice(0, 2))).toEqual([-1, -1])
    expect(second[2]).toBe(rows[0].inputIds[1] + 1)
  })

  it('has no distillation fields without targets', async () => {
    const batch = await createSFTDataset(base, tok).collateBatch([0])
    expect(batch.distillTokenIds).toBeUndefined()
    expect(batch.distillShape).toBeUndefined()
  })

  it('rejects targets whose length does not match the tokenized example, naming it', async () => {
    const ds = createSFTDataset([base[1], { ...base[0], distill: { tokenIds: [[1]], logprobs: [[-1]] } }], tok)
    await expect(ds.collateBatch([1])).rejects.toMatchObject({
      code: 'INVALID_DISTILLATION',
      message: expect.stringMatching(/^SFT example 1: distill targets cover 1 positions but the example has \d+ tokens$/),
    })
  })

  it('rejects malformed targets with the position named', async () => {
    const plain = createSFTDataset(base, tok)
    const n = (await plain.tokenizeExample(1)).inputIds.length
    const ids = Array.from({ length: n }, () => [1])
    const lps = Array.from({ length: n }, () => [-1])
    ids[2] = [1.5]
    const ds = createSFTDataset([base[0], { ...base[1], distill: { tokenIds: ids, logprobs: lps } }], tok)
    await expect(ds.collateBatch([1])).rejects.toMatchObject({
      code: 'INVALID_DISTILLATION',
      message: expect.stringContaining('position 2'),
    })
  })
})
