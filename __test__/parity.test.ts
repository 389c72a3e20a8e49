// Replays every golden of the reference SFTDataset: same length, numBatches, order, warnings,
// and every batch's shape, inputIds and labels, through the public API.
import { readdirSync, readFileSync, existsSync } from 'node:fs'
import { dirname, join, relative } from 'node:path'
import { afterEach, describe, expect, it, vi } from 'vitest'

import { Tokenizer, createSFTDataset, loadSFTDataset } from '../lib/index.js'
import type { ChatTemplateTokenizer } from '../lib/index.js'
import { foreignTokenizer, fixtures, qwen35Dir, readGzJson, repoRoot, requireShared, sharedParity, tokenizer, tokenizerDir } from './helpers'

interface Golden {
  meta: {
    data: { file: string; examples: number }
    config: Record<string, unknown>
    batchSize: number
    loader: 'load' | 'create'
    padTokenId: number
  }
  epochs: Array<{
    epoch: 'none' | number
    order: number[]
    warnings: Array<{ example: number; message: string }>
    batches: Array<{ shape: [number, number]; inputIds: number[]; labels: number[] }>
  }>
}

function goldensIn(dir: string): string[] {
  if (!existsSync(dir)) return []
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? goldensIn(join(dir, e.name)) : e.name.endsWith('.json.gz') ? [join(dir, e.name)] : [],
  )
}

/** Beside the golden's group, in the group's data/, or (Qwen3.5 goldens) in ../shared/parity/real/data. */
function dataFileFor(goldenPath: string, file: string): string {
  const group = dirname(dirname(goldenPath))
  const found = [join(group, file), join(dirname(group), 'data', file), join(sharedParity, 'real', 'data', file)].find((p) => existsSync(p))
  if (!found) throw new Error(`${file}: the data file of ${goldenPath} is missing`)
  return found
}

async function replay(goldenPath: string, family: 'qwen3' | 'qwen3.5' = 'qwen3', tok: Tokenizer | ChatTemplateTokenizer = tokenizer(family)) {
  const golden = readGzJson<Golden>(goldenPath)
  const { meta } = golden
  const file = dataFileFor(goldenPath, meta.data.file)
  expect(tok.getPadTokenId()).toBe(meta.padTokenId)
  for (const epoch of golden.epochs) {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {})
    const ds =
      meta.loader === 'create'
        ? createSFTDataset(
            readFileSync(file, 'utf8')
              .split(/\r?\n/)
              .filter((l) => l.trim().length > 0)
              .map((l) => JSON.parse(l)),
            tok,
            meta.config,
          )
        : await loadSFTDataset(file, tok, { ...meta.config, allowedRoot: dirname(file) })
    expect(ds.length).toBe(meta.data.examples)
    expect(ds.numBatches(meta.batchSize)).toBe(epoch.batches.length)
    if (epoch.epoch !== 'none') ds.shuffleForEpoch(epoch.epoch)
    expect(Array.from(ds.order())).toEqual(epoch.order)
    let b = 0
    for await (const batch of ds.batches(meta.batchSize)) {
      const want = epoch.batches[b++]
      expect(batch.shape).toEqual(want.shape)
      expect(batch.inputIds).toEqual(Int32Array.from(want.inputIds))
      expect(batch.labels).toEqual(Int32Array.from(want.labels))
    }
    expect(b).toBe(epoch.batches.length)
    expect(warn.mock.calls.map((c) => c[0])).toEqual(epoch.warnings.map((w) => w.message))
    warn.mockRestore()
  }
}

afterEach(() => vi.restoreAllMocks())

describe('parity with the reference SFTDataset (edge fixtures)', () => {
  const goldens = goldensIn(join(fixtures, 'parity', 'edge'))
  it('has the edge goldens', () => expect(goldens.length).toBe(21))
  for (const g of goldens) {
    it(relative(fixtures, g), () => replay(g))
  }
})

describe('parity with the reference SFTDataset (real data in ../shared)', () => {
  const goldens = goldensIn(requireShared(join(sharedParity, 'real', 'golden')))
  it('has the real goldens', () => expect(goldens.length).toBe(44))
  for (const g of goldens) {
    it(relative(sharedParity, g), () => replay(g))
  }
})

describe('parity with the reference SFTDataset on the Qwen3.5 tokenizer (../shared/parity-qwen3.5)', () => {
  const root = requireShared(join(repoRoot, '..', 'shared', 'parity-qwen3.5'))
  const goldens = goldensIn(root)
  it('has the Qwen3.5 goldens', () => expect(goldens.length).toBe(32))
  for (const g of goldens) {
    it(relative(root, g), () => replay(g, 'qwen3.5'))
  }
})

describe("parity with MLX Node's own rendering (../shared/parity-mlx-node)", () => {
  const root = requireShared(join(repoRoot, '..', 'shared', 'parity-mlx-node'))
  const families = [
    ['qwen3', tokenizerDir('qwen3')],
    ['qwen3.5', qwen35Dir()],
  ] as const
  for (const [family, dir] of families) {
    const goldens = goldensIn(join(root, family))
    it(`has the ${family} goldens`, () => expect(goldens.length).toBe(12))
    const mlx = Tokenizer.fromPretrainedSync(dir, { renderAs: 'mlx-node' })
    for (const g of goldens) {
      it(`${relative(root, g)} with renderAs 'mlx-node'`, () => replay(g, family, mlx))
      it(`${relative(root, g)} through a foreign tokenizer object`, () => replay(g, family, foreignTokenizer(mlx)))
    }
  }
})

describe('shuffleForEpoch orders', () => {
  const { orders } = JSON.parse(readFileSync(join(fixtures, 'parity', 'shuffle_orders.json'), 'utf8')) as {
    orders: Array<{ n: number; seed: number; epoch: number; order: number[] }>
  }
  it(`reproduces all ${orders.length} pinned orders`, () => {
    const tok = tokenizer('qwen3')
    for (const o of orders) {
      const examples = Array.from({ length: o.n }, () => ({ messages: [{ role: 'assistant', content: 'x' }] }))
      const ds = createSFTDataset(examples, tok, { seed: o.seed })
      ds.shuffleForEpoch(o.epoch)
      expect(Array.from(ds.order()), `n=${o.n} seed=${o.seed} epoch=${o.epoch}`).toEqual(o.order)
    }
  })
})
