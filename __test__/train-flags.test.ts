// Per-message training flags: a message's `train` (true/false) or `weight` (1/0) decides whether
// what it adds is trained, whatever trainOnRoles says of its role, under maskingStrategy 'spans'
// and 'generation'. The flags never reach the template: the ids are those of the same data
// without them. Real conversations of ../shared/parity/real, flagged into files of a temp dir.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'

import { afterAll, describe, expect, it } from 'vitest'

import { Tokenizer, createSFTDataset, loadSFTDataset } from '../lib/index.js'
import { foreignTokenizer, repoRoot, requireShared, sharedParity, tokenizer, tokenizerDir } from './helpers'

type Message = { role: string; content: string; train?: boolean; weight?: number }
type Conversation = { messages: Message[] }

const dir = mkdtempSync(join(tmpdir(), 'sft-train-flags-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const real = requireShared(join(sharedParity, 'real', 'data'))
const readJsonl = (file: string, n: number) =>
  readFileSync(join(real, file), 'utf8').trim().split('\n').slice(0, n).map((l) => JSON.parse(l))
const plain: Conversation[] = readJsonl('conv_fastchat_mtbench.jsonl', 24)

// Every spelling on some message: nothing, train true, weight 0, weight 1, train false.
const FLAGS: Array<Partial<Message>> = [{}, { train: true }, { weight: 0 }, { weight: 1 }, { train: false }]
const flagOf = (e: number, k: number) => FLAGS[(3 * e + k) % FLAGS.length]
const flagged: Conversation[] = plain.map((c, e) => ({ messages: c.messages.map((m, k) => ({ ...m, ...flagOf(e, k) })) }))
/** Whether message `k` of a flagged conversation is trained: its flag, else its role. */
const trains = (m: Message) => m.train ?? (m.weight === undefined ? m.role === 'assistant' : m.weight === 1)

const write = (name: string, records: unknown[]) => {
  const file = join(dir, name)
  writeFileSync(file, records.map((r) => JSON.stringify(r)).join('\n') + '\n')
  return file
}
const flaggedFile = write('flagged.jsonl', flagged)
const plainFile = write('plain.jsonl', plain)

const qwen3 = tokenizer('qwen3')
/** Qwen3 with TRL's training template, whose assistant turns are `{% generation %}` blocks. */
function trainingTokenizer(): Tokenizer {
  const model = join(dir, 'qwen3-training')
  mkdirSync(model)
  const base = tokenizerDir('qwen3')
  symlinkSync(join(base, 'tokenizer.json'), join(model, 'tokenizer.json'))
  const config = JSON.parse(readFileSync(join(base, 'tokenizer_config.json'), 'utf8'))
  delete config.chat_template
  writeFileSync(join(model, 'tokenizer_config.json'), JSON.stringify(config))
  const templates = resolve(repoRoot, '..', 'shared', 'templates', 'trl')
  writeFileSync(join(model, 'chat_template.jinja'), readFileSync(requireShared(join(templates, 'qwen3_training.jinja')), 'utf8'))
  return Tokenizer.fromPretrainedSync(model)
}
const STRATEGIES = [
  { maskingStrategy: 'spans' as const, tok: qwen3 },
  { maskingStrategy: 'generation' as const, tok: trainingTokenizer() },
]

/** The decoded text of each run of trained tokens. */
function runs(tok: Tokenizer, ids: Int32Array, labels: Int32Array): string[] {
  const out: string[] = []
  let run: number[] = []
  for (let i = 0; i <= ids.length; i++) {
    if (i < ids.length && labels[i] !== -100) {
      expect(labels[i]).toBe(ids[i])
      run.push(ids[i])
    } else if (run.length) {
      out.push(tok.decodeSync(run, false))
      run = []
    }
  }
  return out
}

/**
 * The runs a conversation's flags ask for: an assistant turn trains what the strategy trains of
 * it unflagged (one run a turn, taken from the same messages without flags), any other message
 * its content and `<|im_end|>`.
 */
async function expectedRuns(tok: Tokenizer, maskingStrategy: 'spans' | 'generation', messages: Message[]) {
  const bare = messages.map(({ train: _t, weight: _w, ...m }) => m)
  const row = await createSFTDataset([{ messages: bare }], tok, { maskingStrategy, completionOnly: true, maxSeqLength: 100_000 }).tokenizeExample(0)
  const assistantRuns = runs(tok, row.inputIds, row.labels)
  expect(assistantRuns).toHaveLength(messages.filter((m) => m.role === 'assistant').length)
  let a = 0
  const out: string[] = []
  for (const m of messages) {
    const own = m.role === 'assistant' ? assistantRuns[a++] : `${m.content}<|im_end|>`
    if (trains(m)) out.push(own)
  }
  return out
}

describe('per-message train / weight flags', () => {
  for (const { maskingStrategy, tok } of STRATEGIES) {
    describe(`maskingStrategy '${maskingStrategy}'`, () => {
      it('train each message as its flag says, over the ids of the same data without flags', async () => {
        const options = { maskingStrategy, completionOnly: true, maxSeqLength: 100_000, allowedRoot: dir }
        const ds = await loadSFTDataset(flaggedFile, tok, options)
        const bare = await loadSFTDataset(plainFile, tok, options)
        expect(ds.length).toBe(24)
        let trainedUsers = 0
        let untrainedAssistants = 0
        for (let e = 0; e < flagged.length; e++) {
          const row = await ds.tokenizeExample(e)
          expect(Array.from(row.inputIds)).toEqual(Array.from((await bare.tokenizeExample(e)).inputIds))
          expect(runs(tok, row.inputIds, row.labels)).toEqual(await expectedRuns(tok, maskingStrategy, flagged[e].messages))
          trainedUsers += flagged[e].messages.filter((m) => m.role !== 'assistant' && trains(m)).length
          untrainedAssistants += flagged[e].messages.filter((m) => m.role === 'assistant' && !trains(m)).length
        }
        // The flags do change what is trained, both ways.
        expect(trainedUsers).toBeGreaterThan(10)
        expect(untrainedAssistants).toBeGreaterThan(10)
      })

      for (const truncation of ['keepEnd', 'keepStart'] as const) {
        it(`truncation '${truncation}' cuts the flagged labels like any others`, async () => {
          const full = await loadSFTDataset(flaggedFile, tok, { maskingStrategy, completionOnly: true, maxSeqLength: 100_000, allowedRoot: dir })
          const ds = await loadSFTDataset(flaggedFile, tok, { maskingStrategy, completionOnly: true, maxSeqLength: 40, truncation, allowedRoot: dir })
          const order = Array.from(ds.order())
          let cut = 0
          let trained = 0
          for (let pos = 0; pos < order.length; pos++) {
            const whole = await full.tokenizeExample(order[pos])
            const n = whole.inputIds.length
            const window = truncation === 'keepEnd' ? [Math.max(0, n - 40), n] : [0, Math.min(n, 40)]
            const batch = await ds.collateBatch([pos])
            expect(batch.shape).toEqual([1, window[1] - window[0]])
            expect(Array.from(batch.inputIds)).toEqual(Array.from(whole.inputIds.slice(window[0], window[1])))
            expect(Array.from(batch.labels)).toEqual(Array.from(whole.labels.slice(window[0], window[1])))
            cut += Number(n > 40)
            trained += batch.labels.filter((l) => l !== -100).length
          }
          expect(cut).toBe(24)
          expect(trained).toBeGreaterThan(200)
        })
      }

      it("truncation 'turns' drops turns only before the last trained message, and trains the rest as flagged", async () => {
        const maxSeqLength = 64
        const ds = await loadSFTDataset(flaggedFile, tok, { maskingStrategy, completionOnly: true, maxSeqLength, truncation: 'turns', allowedRoot: dir })
        const report = await ds.report()
        const order = Array.from(ds.order())
        let shortened = 0
        for (let e = 0; e < flagged.length; e++) {
          const messages = flagged[e].messages
          const lastTrained = messages.map(trains).lastIndexOf(true)
          const first = messages.findIndex((m) => m.role !== 'system')
          const { messagesDropped, dropped } = report.examples[e]
          if (dropped) {
            expect(dropped).toBe('tooLong')
            continue
          }
          expect(first + messagesDropped).toBeLessThanOrEqual(Math.max(lastTrained, first))
          const kept = [...messages.slice(0, first), ...messages.slice(first + messagesDropped)]
          const batch = await ds.collateBatch([order.indexOf(e)])
          expect(batch.shape[1]).toBeLessThanOrEqual(maxSeqLength)
          expect(runs(tok, batch.inputIds, batch.labels)).toEqual(await expectedRuns(tok, maskingStrategy, kept))
          shortened += Number(messagesDropped > 0)
        }
        expect(shortened).toBeGreaterThan(2)
        // Only the first message trained: no turn can go, and the row is too long. Unflagged,
        // the same conversation loses its first two turns.
        const early = { messages: plain[2].messages.map((m, k) => ({ ...m, train: k === 0 })) }
        const file = write(`early-${maskingStrategy}.jsonl`, [early, plain[2]])
        const both = await (await loadSFTDataset(file, tok, { maskingStrategy, completionOnly: true, maxSeqLength, truncation: 'turns', allowedRoot: dir })).report()
        expect(both.examples.map((e) => [e.dropped ?? null, e.messagesDropped])).toEqual([['tooLong', 0], [null, 4]])
      })
    })
  }

  it('ShareGPT turns and OpenAI messages carry the same flags', async () => {
    const sharegpt = flagged.map((c) => ({
      conversations: c.messages.map(({ role, content, ...flags }) => ({ from: { user: 'human', assistant: 'gpt' }[role] ?? role, value: content, ...flags })),
    }))
    const openai = flagged.map((c) => ({ messages: c.messages.map((m) => ({ ...m, content: [{ type: 'text', text: m.content }] })) }))
    const options = { maskingStrategy: 'spans' as const, completionOnly: true, allowedRoot: dir }
    const want = await loadSFTDataset(flaggedFile, qwen3, options)
    for (const [name, format, records] of [['sharegpt.jsonl', 'sharegpt', sharegpt], ['openai.jsonl', 'openai', openai]] as const) {
      const ds = await loadSFTDataset(write(name, records), qwen3, { ...options, format })
      for (let e = 0; e < flagged.length; e++) {
        const [got, exp] = [await ds.tokenizeExample(e), await want.tokenizeExample(e)]
        expect(Array.from(got.labels)).toEqual(Array.from(exp.labels))
      }
    }
  })

  it('a prompt-completion example trains a flagged prompt message, and not a completion flagged off', async () => {
    const records = readJsonl('pc_gsm8k_think.jsonl', 3)
    records[0].prompt[0].train = true
    records[1].completion.weight = 0
    records[2].prompt[0].weight = 1
    const ds = await loadSFTDataset(write('pc.jsonl', records), qwen3, { maskingStrategy: 'spans', completionOnly: true, allowedRoot: dir })
    const text = async (e: number) => {
      const row = await ds.tokenizeExample(e)
      return runs(qwen3, row.inputIds, row.labels)
    }
    const [first, second, third] = [await text(0), await text(1), await text(2)]
    expect(first[0]).toBe(`${records[0].prompt[0].content}<|im_end|>`)
    expect(first).toHaveLength(2)
    expect(first[1].endsWith(`${records[0].completion.content.split('</think>')[1].trim()}<|im_end|>`)).toBe(true)
    expect(second).toEqual([])
    expect(third[0]).toBe(`${records[2].prompt[0].content}<|im_end|>`)
  })

  describe('bad flags and settings fail the load naming the file, line and message', () => {
    const withBad = (flag: Record<string, unknown>) => {
      const records = structuredClone(flagged.slice(0, 4)) as Array<{ messages: Array<Record<string, unknown>> }>
      for (const r of records) for (const m of r.messages) for (const k of ['train', 'weight']) delete m[k]
      Object.assign(records[2].messages[1], flag)
      return write(`bad-${Object.keys(flag).join('-')}-${Object.values(flag).join('-')}.jsonl`, records)
    }
    const created = { maskingStrategy: 'spans' as const, completionOnly: true }
    const spans = { ...created, allowedRoot: dir }
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ weight: 0.5 }, 'weight must be 0 or 1, got 0.5 (fractional loss weights are not supported yet: a message is trained whole or not at all)'],
      [{ weight: 2 }, 'weight must be 0 or 1, got 2'],
      [{ weight: '1' }, 'weight must be 0 or 1, got "1"'],
      [{ train: 'yes' }, 'train must be true or false, got "yes"'],
      [{ train: true, weight: 0 }, 'train is true but weight is 0: they disagree'],
    ]
    for (const [flag, why] of cases) {
      it(`${JSON.stringify(flag)} is INVALID_EXAMPLE`, async () => {
        const file = withBad(flag)
        // dropUnrenderable leaves out examples the template fails on, never bad data.
        await expect(loadSFTDataset(file, qwen3, { ...spans, dropUnrenderable: true })).rejects.toMatchObject({
          code: 'INVALID_EXAMPLE',
          message: `SFT example 2: message 1: ${why} (at ${file}:3)`,
        })
        // A created dataset fails at that example's row.
        const records = readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l))
        await expect(createSFTDataset(records, qwen3, created).tokenizeExample(2)).rejects.toMatchObject({
          code: 'INVALID_EXAMPLE',
          message: `SFT example 2: message 1: ${why}`,
        })
      })
    }

    it('the reference masking and completionOnly off are INVALID_ARGUMENT naming the strategies that take flags', async () => {
      const file = withBad({ weight: 1 })
      const supported = "per-message flags are supported under maskingStrategy 'spans' and 'generation' with completionOnly on"
      await expect(loadSFTDataset(file, qwen3, { completionOnly: true, allowedRoot: dir })).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: `SFT example 2: message 1 has a train/weight flag, which the reference masking cannot honour (its ChatML scan trains every assistant turn): ${supported} (at ${file}:3)`,
      })
      await expect(loadSFTDataset(file, qwen3, { maskingStrategy: 'spans', allowedRoot: dir })).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: `SFT example 2: message 1 has a train/weight flag, which has no effect with completionOnly off (every token is trained): ${supported} (at ${file}:3)`,
      })
      // A created dataset fails at the example's row, naming the example.
      const created = createSFTDataset([plain[0], flagged[1]], qwen3, { completionOnly: true })
      const row = await created.tokenizeExample(0)
      expect(runs(qwen3, row.inputIds, row.labels)).toHaveLength(2)
      const err = await created.tokenizeExample(1).then(() => null, (e: Error & { code: string }) => e)
      expect(err).toBeInstanceOf(Error)
      expect(err!.code).toBe('INVALID_ARGUMENT')
      expect(err!.message).toMatch(/^SFT example 1: message \d has a train\/weight flag, which the reference masking cannot honour/)
    })

    it("a foreign tokenizer's rows, masked by the reference's scan, refuse them too", async () => {
      const file = withBad({ train: false })
      const foreign = foreignTokenizer(qwen3)
      const message = "message 1 has a train/weight flag, which the reference masking cannot honour (its ChatML scan trains every assistant turn): per-message flags are supported under maskingStrategy 'spans' and 'generation' with completionOnly on"
      await expect(loadSFTDataset(file, foreign, { completionOnly: true, allowedRoot: dir })).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: `SFT example 2: ${message} (at ${file}:3)`,
      })
      const records = readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l))
      expect(() => createSFTDataset(records, foreign, { completionOnly: true })).toThrow(`SFT example 2: ${message}`)
      expect(foreign.calls).toEqual([])
    })
  })
})
