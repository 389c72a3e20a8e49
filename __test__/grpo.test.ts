import { readFileSync } from 'node:fs'
import { join } from 'node:path'

import { describe, expect, it } from 'vitest'

import {
  createMasksFromResponseStart,
  fixHistoricalMasks,
  tokenizeConversationForTrainer,
  tokenizeConversationForTrainerSync,
  tokenizeForTrainer,
  tokenizeForTrainerBatch,
  tokenizeForTrainerSync,
  validateMasks,
} from '../lib/index.js'
import { fixtures, tokenizer } from './helpers'

type Runs = Array<[number | null, number]>
interface Result { tokens?: number[]; masks: Runs; promptLength: number; completionLength: number; totalLength: number; error?: string }
interface Case {
  messages: any[]
  options: { enableThinking: boolean | null; tools: any[] | null; addGenerationPrompt: boolean }
  trainer: Result
  conversation: Result
  fix: Array<{ tokens?: number[]; masks: Runs; expected?: Runs; error?: string }>
  validate: Array<{ masks: Runs; isValid: boolean; issues: string[] }>
}
const golden: {
  cases: Case[]
  validate: Array<{ tokens: number[]; masks: number[]; isValid: boolean; issues: string[] }>
  responseStart: Array<{ tokens: number[]; start: number; masks: number[] }>
} = JSON.parse(readFileSync(join(fixtures, 'grpo', 'qwen3.json'), 'utf8'))

// Python exception class of the reference run -> error code of the port.
const ERROR_CODES: Record<string, string> = { IndexError: 'INVALID_ARGUMENT', TypeError: 'TEMPLATE_RENDER' }

function unruns(tokens: number[], runs: Runs): number[] {
  const out: number[] = []
  for (const [value, n] of runs) for (let k = 0; k < n; k++) out.push(value ?? tokens[out.length])
  return out
}

function renderOptions(c: Case) {
  return { enableThinking: c.options.enableThinking ?? undefined, tools: c.options.tools ?? undefined }
}

function expectResult(actual: any, expected: Result, tokens: number[]) {
  expect(Array.from(actual.tokens)).toEqual(tokens)
  expect(actual.tokens).toBeInstanceOf(Int32Array)
  expect(actual.masks).toBeInstanceOf(Int32Array)
  expect(Array.from(actual.masks)).toEqual(unruns(tokens, expected.masks))
  expect([actual.promptLength, actual.completionLength, actual.totalLength]).toEqual([
    expected.promptLength,
    expected.completionLength,
    expected.totalLength,
  ])
}

function expectCode(fn: () => unknown, pythonError: string) {
  let thrown: any
  try {
    fn()
  } catch (e) {
    thrown = e
  }
  expect(thrown?.code).toBe(ERROR_CODES[pythonError])
}

// Alternate input types so every golden also checks the conversions.
const asInput = [(a: number[]) => a, (a: number[]) => Int32Array.from(a), (a: number[]) => Uint32Array.from(a)]

describe('GRPO goldens (Python reference + transformers, Qwen3)', () => {
  const tok = tokenizer('qwen3')

  it('has at least 200 conversations', () => {
    expect(golden.cases.length).toBeGreaterThanOrEqual(200)
  })

  it('tokenizeForTrainer', () => {
    for (const c of golden.cases) {
      const options = { ...renderOptions(c), addGenerationPrompt: c.options.addGenerationPrompt }
      if (c.trainer.error) {
        expectCode(() => tokenizeForTrainerSync(tok, c.messages, options), c.trainer.error)
        continue
      }
      expectResult(tokenizeForTrainerSync(tok, c.messages, options), c.trainer, c.trainer.tokens!)
    }
  })

  it('tokenizeConversationForTrainer', () => {
    for (const c of golden.cases) {
      if (c.conversation.error) {
        expectCode(() => tokenizeConversationForTrainerSync(tok, c.messages, renderOptions(c)), c.conversation.error)
        continue
      }
      const tokens = c.conversation.tokens ?? c.trainer.tokens!
      expectResult(tokenizeConversationForTrainerSync(tok, c.messages, renderOptions(c)), c.conversation, tokens)
    }
  })

  it('async and batch forms give the same results', async () => {
    const ok = golden.cases.filter((c) => !c.trainer.error)
    const groups = new Map<string, Case[]>()
    for (const c of ok) {
      const key = JSON.stringify(c.options)
      groups.set(key, [...(groups.get(key) ?? []), c])
    }
    let seen = 0
    for (const cases of groups.values()) {
      const options = { ...renderOptions(cases[0]), addGenerationPrompt: cases[0].options.addGenerationPrompt }
      const batch = await tokenizeForTrainerBatch(tok, cases.map((c) => c.messages), options)
      expect(batch.length).toBe(cases.length)
      batch.forEach((r, i) => expectResult(r, cases[i].trainer, cases[i].trainer.tokens!))
      seen += batch.length
    }
    expect(seen).toBe(ok.length)
    for (const c of ok.slice(0, 20)) {
      const options = { ...renderOptions(c), addGenerationPrompt: c.options.addGenerationPrompt }
      expectResult(await tokenizeForTrainer(tok, c.messages, options), c.trainer, c.trainer.tokens!)
      const conv = await tokenizeConversationForTrainer(tok, c.messages, renderOptions(c))
      expectResult(conv, c.conversation, c.conversation.tokens ?? c.trainer.tokens!)
    }
  })

  it('validateMasks', () => {
    let n = 0
    for (const c of golden.cases) {
      const tokens = c.trainer.tokens
      for (const v of c.validate) {
        const masks = unruns(tokens!, v.masks)
        expect(validateMasks(asInput[n % 3](tokens!), asInput[(n + 1) % 2](masks))).toEqual({
          isValid: v.isValid,
          issues: v.issues,
        })
        n++
      }
    }
    for (const v of golden.validate) {
      expect(validateMasks(v.tokens, v.masks)).toEqual({ isValid: v.isValid, issues: v.issues })
      n++
    }
    expect(n).toBeGreaterThan(1000)
  })

  it('createMasksFromResponseStart', () => {
    for (const r of golden.responseStart) {
      const masks = createMasksFromResponseStart(r.tokens, r.start)
      expect(masks).toBeInstanceOf(Int32Array)
      expect(Array.from(masks)).toEqual(r.masks)
    }
  })

  it('fixHistoricalMasks', async () => {
    let n = 0
    for (const c of golden.cases) {
      for (const f of c.fix) {
        const tokens = f.tokens ?? c.trainer.tokens!
        const masks = unruns(tokens, f.masks)
        const call = fixHistoricalMasks(asInput[n % 3](tokens), asInput[n % 2](masks), tok, c.messages, renderOptions(c))
        n++
        if (f.error) {
          await expect(call).rejects.toMatchObject({ code: ERROR_CODES[f.error] })
          continue
        }
        const fixed = await call
        expect(fixed).toBeInstanceOf(Int32Array)
        expect(Array.from(fixed)).toEqual(unruns(tokens, f.expected!))
      }
    }
    expect(n).toBeGreaterThan(1000)
  })
})

describe('GRPO opt-in corrections', () => {
  const tok = tokenizer('qwen3')
  const H = -100

  it('maskAssistantHeaders masks what the generation prompt already holds', () => {
    const messages = [
      { role: 'user', content: 'x' },
      { role: 'assistant', content: 'y' },
      { role: 'user', content: 'z' },
      { role: 'assistant', content: 'w' },
    ]
    const plain = tokenizeConversationForTrainerSync(tok, messages, { enableThinking: false })
    const fixed = tokenizeConversationForTrainerSync(tok, messages, { enableThinking: false, maskAssistantHeaders: true })
    // <|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\ny<|im_end|>\n ... the first assistant
    // turn is not last, so Qwen3 renders it without a think block.
    expect(Array.from(plain.tokens)).toEqual([
      151644, 872, 198, 87, 151645, 198, 151644, 77091, 198, 88, 151645, 198, 151644, 872, 198, 89, 151645, 198,
      151644, 77091, 198, 151667, 271, 151668, 271, 86, 151645, 198,
    ])
    // The reference measures each message as what its prefix render adds. The prefix that ends
    // with the first reply renders it as the last turn, with a 4-token think block the full
    // conversation does not hold, so the first reply's piece runs 4 tokens into the next user
    // turn (`<|im_start|>user\nz` is trained). The pieces still add up to the sequence, so there
    // is no fallback: a quirk of the reference with Qwen3 that the port reproduces.
    expect(Array.from(plain.masks)).toEqual([
      ...Array(6).fill(H), 151644, 77091, 198, 88, 151645, 198, 151644, 872, 198, 89,
      H, H, 151644, 77091, 198, 151667, 271, 151668, 271, 86, 151645, 198,
    ])
    // maskAssistantHeaders masks what each prefix rendered with a generation prompt holds (here
    // header and empty think block, 7 tokens); the shifted boundaries of the pieces remain.
    expect(Array.from(fixed.masks)).toEqual([...Array(13).fill(H), 872, 198, 89, ...Array(9).fill(H), 86, 151645, 198])

    const single = [{ role: 'user', content: 'x' }, { role: 'assistant', content: 'y' }]
    const ref = tokenizeConversationForTrainerSync(tok, single)
    const corrected = tokenizeConversationForTrainerSync(tok, single, { maskAssistantHeaders: true })
    expect(Array.from(ref.masks)).toEqual([H, H, H, H, H, H, 151644, 77091, 198, 151667, 271, 151668, 271, 88, 151645, 198])
    expect(Array.from(corrected.masks)).toEqual([H, H, H, H, H, H, H, H, H, 151667, 271, 151668, 271, 88, 151645, 198])
    expect([corrected.promptLength, corrected.completionLength]).toEqual([9, 7])
  })

  it('strictLegacyDetection spares labels that are token ids 0 and 1', async () => {
    const legacy =
      'LEGACY MASK FORMAT DETECTED: Using 0/1 instead of -100/token_id. This will train on ALL tokens incorrectly!'
    const tokens = [0, 1, 1, 0]
    const masks = [-100, 1, 1, 0]
    expect(validateMasks(tokens, [0, 1, 1, 0])).toEqual({
      isValid: false,
      issues: ['No masked tokens (no prompt) - should have -100 values', legacy],
    })
    expect(validateMasks(tokens, [0, 1, 1, 0], { strictLegacyDetection: true })).toEqual({
      isValid: false,
      issues: ['No masked tokens (no prompt) - should have -100 values'],
    })
    expect(validateMasks(tokens, [1, 1, 1, 1], { strictLegacyDetection: true }).issues.at(-1)).toBe(legacy)
    expect(validateMasks(tokens, masks)).toEqual({ isValid: true, issues: [] })
  })
})

describe('GRPO input conversions', () => {
  it('accepts Int32Array, Uint32Array and number[] alike', () => {
    const expected = [-100, -100, 7, 8]
    for (const tokens of [[5, 6, 7, 8], Int32Array.of(5, 6, 7, 8), Uint32Array.of(5, 6, 7, 8)]) {
      expect(Array.from(createMasksFromResponseStart(tokens, 2))).toEqual(expected)
    }
  })

  it('rejects values that are not token ids or 32-bit masks', () => {
    expect(() => createMasksFromResponseStart([1, -3], 0)).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', message: 'tokens[1] = -3 is not a token id' }),
    )
    expect(() => createMasksFromResponseStart(Uint32Array.of(4294967295), 0)).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', message: 'tokens[0] = 4294967295 is not a token id' }),
    )
    expect(() => validateMasks([1, 2], [1, 2.5])).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', message: 'masks[1] = 2.5 is not a 32-bit integer' }),
    )
  })

  it('names the conversation a batch fails on', async () => {
    const tok = tokenizer('qwen3')
    await expect(
      tokenizeForTrainerBatch(tok, [[{ role: 'user', content: 'a' }], [{ content: 'no role' } as any]]),
    ).rejects.toMatchObject({ code: 'INVALID_MESSAGE', message: 'conversation 1: message 0: role is missing' })
  })
})
