import { describe, expect, it } from 'vitest'

import { attachDistillation, packDistillation } from '../lib/index.js'

const DROP = 'Dropping distill payload for this group.'
const MISALIGNED =
  'Student distillation request did not align to the original token sequence. Override-driven prompt/messages are only supported when they reproduce the exact same prompt tokens.'

/** A fetch that answers every request with aligned top-k lists and records the requests. */
function server(topk = (ids: number[]) => ids.map((_, p) => (p === 0 ? [] : [ids[p], 99]))) {
  const requests: any[] = []
  const fetch = async (request: any) => {
    requests.push(request)
    const ids: number[] = request.input_ids
    const tokenIds = topk(ids)
    return {
      prompt_tokens: ids,
      prompt_topk_token_ids: tokenIds,
      prompt_topk_logprobs: tokenIds.map((row) => row.map((_, k) => -k - 0.5)),
    }
  }
  return { fetch, requests }
}

const on = (extra: object = {}) => ({ studentDistillEnabled: true, ...extra })

describe('attachDistillation', () => {
  it('leaves the group untouched when disabled (the default)', async () => {
    const { fetch, requests } = server()
    const group = { tokens: [[1, 2]], scores: [1] }
    expect(await attachDistillation(group, fetch)).toBe(group)
    expect(group).toEqual({ tokens: [[1, 2]], scores: [1] })
    await attachDistillation(group, fetch, { studentDistillEnabled: false, studentTopK: 5 })
    expect(group).toEqual({ tokens: [[1, 2]], scores: [1] })
    expect(requests).toEqual([])
  })

  it('fetches every sequence and attaches [sequence][position][k]', async () => {
    const { fetch, requests } = server()
    const group: any = { tokens: [[1, 2, 3], [4, 5]], scores: [0.5, 1] }
    await attachDistillation(group, fetch, on({ studentTopK: 1 }))
    expect(requests).toEqual([
      { input_ids: [1, 2, 3], top_k: 1, max_tokens: 1, split: 'train' },
      { input_ids: [4, 5], top_k: 1, max_tokens: 1, split: 'train' },
    ])
    expect(group).toEqual({
      tokens: [[1, 2, 3], [4, 5]],
      scores: [0.5, 1],
      distill_token_ids: [[[], [2, 99], [3, 99]], [[], [5, 99]]],
      distill_logprobs: [[[], [-0.5, -1.5], [-0.5, -1.5]], [[], [-0.5, -1.5]]],
    })
  })

  it('sets a null payload for an empty group, skip_student_top_k, and a top-k of -1', async () => {
    const { fetch, requests } = server()
    for (const [group, config] of [
      [{ tokens: [] }, on()],
      [{ tokens: [[1]], group_overrides: { skip_student_top_k: true } }, on()],
      [{ tokens: [[1]] }, on({ studentTopK: -1 })],
      [{ tokens: [[1]], group_overrides: { student_top_k: -4 } }, on({ studentTopK: 3 })],
    ] as const) {
      const out: any = await attachDistillation({ ...group }, fetch, config)
      expect([out.distill_token_ids, out.distill_logprobs]).toEqual([null, null])
    }
    expect(requests).toEqual([])
  })

  it('takes the group top-k override over the config', async () => {
    const { fetch, requests } = server()
    await attachDistillation({ tokens: [[7]], group_overrides: { student_top_k: 4 } }, fetch, on({ studentTopK: 1 }))
    expect(requests).toEqual([{ input_ids: [7], top_k: 4, max_tokens: 1, split: 'train' }])
  })

  it('merges group kwargs, then per-sequence kwargs, and drops input_ids for messages/prompt', async () => {
    const { fetch, requests } = server()
    const seen: any[] = []
    const echoing = async (request: any) => {
      seen.push(request)
      return fetch({ ...request, input_ids: [[1, 2], [3], [4]][seen.length - 1] })
    }
    const group: any = {
      tokens: [[1, 2], [3], [4]],
      group_overrides: { student_logprob_kwargs: { temperature: 0.5 }, student_distill_kwargs: { ignored: 1 } },
      overrides: [
        { student_distill_kwargs: { messages: [{ role: 'user', content: 'q' }] } },
        null,
        { student_logprob_kwargs: { temperature: 1, prompt: 'p', top_k: 9 } },
      ],
    }
    await attachDistillation(group, echoing, on())
    expect(seen).toEqual([
      { top_k: 0, max_tokens: 1, split: 'train', temperature: 0.5, messages: [{ role: 'user', content: 'q' }] },
      { input_ids: [3], top_k: 0, max_tokens: 1, split: 'train', temperature: 0.5 },
      { top_k: 9, max_tokens: 1, split: 'train', temperature: 1, prompt: 'p' },
    ])
    expect(Object.keys(seen[0])).toEqual(['top_k', 'max_tokens', 'split', 'temperature', 'messages'])
    expect(group.distill_token_ids).toEqual([[[], [2, 99]], [[]], [[]]])
  })

  it('drops the whole group when a reply is misaligned', async () => {
    const warnings: string[] = []
    const fetch = async (request: any) => ({
      prompt_tokens: request.input_ids[0] === 4 ? [4, 6] : request.input_ids,
      prompt_topk_token_ids: [[], [1]],
      prompt_topk_logprobs: [[], [-1]],
    })
    const group: any = { tokens: [[1, 2], [4, 5]], scores: [1, 2] }
    await attachDistillation(group, fetch, on({ onWarning: (w: string) => warnings.push(w) }))
    expect(group).toEqual({ tokens: [[1, 2], [4, 5]], scores: [1, 2], distill_token_ids: null, distill_logprobs: null })
    expect(warnings).toEqual([`Student logprob fetch failed for seq 1: ${MISALIGNED}. ${DROP}`])
  })

  it('drops the whole group when a fetch rejects or throws', async () => {
    const warnings: string[] = []
    const { fetch } = server()
    const failing = async (request: any) => {
      if (request.input_ids[0] === 9) throw new Error('connection refused')
      return fetch(request)
    }
    const group: any = { tokens: [[1], [9]] }
    await attachDistillation(group, failing, on({ onWarning: (w: string) => warnings.push(w) }))
    expect([group.distill_token_ids, group.distill_logprobs]).toEqual([null, null])
    expect(warnings).toEqual([`Student logprob fetch failed for seq 1: connection refused. ${DROP}`])

    const throwing = () => {
      throw 'sync failure'
    }
    await attachDistillation({ tokens: [[1]] }, throwing as any, on({ onWarning: (w: string) => warnings.push(w) }))
    expect(warnings[1]).toBe(`Student logprob fetch failed for seq 0: sync failure. ${DROP}`)
  })

  it('drops the whole group when ids and logprobs differ in length', async () => {
    const warnings: string[] = []
    const fetch = async (request: any) => ({
      prompt_tokens: request.input_ids,
      prompt_topk_token_ids: [[], [1], [2]],
      prompt_topk_logprobs: [[], [-1]],
    })
    const group: any = { tokens: [[1, 2, 3]] }
    await attachDistillation(group, fetch, on({ onWarning: (w: string) => warnings.push(w) }))
    expect([group.distill_token_ids, group.distill_logprobs]).toEqual([null, null])
    expect(warnings).toEqual([`Student prompt-topk length mismatch for seq 0 (3 != 2). ${DROP}`])
  })

  it('reports the first failing sequence in order, after every fetch settled', async () => {
    const warnings: string[] = []
    let settled = 0
    const fetch = async (request: any) => {
      const seq = request.input_ids[0]
      await new Promise((r) => setTimeout(r, seq === 0 ? 30 : 1))
      settled++
      if (seq === 2) throw new Error('late seq failed')
      return { prompt_tokens: request.input_ids, prompt_topk_token_ids: [[]], prompt_topk_logprobs: [[], []] }
    }
    await attachDistillation({ tokens: [[0], [1], [2]] }, fetch, on({ onWarning: (w: string) => warnings.push(w) }))
    expect(settled).toBe(3)
    expect(warnings).toEqual([`Student prompt-topk length mismatch for seq 0 (1 != 2). ${DROP}`])
  })

  it('has every fetch in flight at once', async () => {
    const pending: Array<{ request: any; resolve: (v: any) => void }> = []
    const fetch = (request: any) => new Promise((resolve) => pending.push({ request, resolve }))
    const group: any = { tokens: [[1], [2], [3], [4]] }
    const done = attachDistillation(group, fetch, on())
    await new Promise((r) => setImmediate(r))
    expect(pending.map((p) => p.request.input_ids)).toEqual([[1], [2], [3], [4]])
    for (const p of pending.reverse()) {
      p.resolve({ prompt_tokens: p.request.input_ids, prompt_topk_token_ids: [[]], prompt_topk_logprobs: [[]] })
    }
    expect(await done).toBe(group)
    expect(group.distill_token_ids).toEqual([[[]], [[]], [[]], [[]]])
  })

  it('rejects a config outside the reference domain', async () => {
    await expect(attachDistillation({ tokens: [[1]] }, server().fetch, on({ studentTopK: -2 }))).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: 'studentTopK must be an integer >= -1, got -2',
    })
  })
})

describe('packDistillation', () => {
  it('packs [sequences, positions, topK + 1] with -1 / -Infinity sentinels', () => {
    const packed = packDistillation(
      [[[], [5, 6]], [[], [7], [8, 9]]],
      [[[], [-0.5, -1.5]], [[], [-0.25], [-1, -Infinity]]],
      { topK: 1 },
    )
    expect(packed.shape).toEqual([2, 3, 2])
    expect(packed.ids).toBeInstanceOf(Int32Array)
    expect(packed.logprobs).toBeInstanceOf(Float32Array)
    expect(Array.from(packed.ids)).toEqual([-1, -1, 5, 6, -1, -1, -1, -1, 7, -1, 8, 9])
    expect(Array.from(packed.logprobs)).toEqual([
      -Infinity, -Infinity, -0.5, -1.5, -Infinity, -Infinity,
      -Infinity, -Infinity, -0.25, -Infinity, -1, -Infinity,
    ])
  })

  it.each([
    [[[[1]]], [], 'tokenIds has 1 sequences but logprobs has 0'],
    [[[[]], [[], []]], [[[]], [[]]], 'sequence 1: tokenIds has 2 positions but logprobs has 1'],
    [[[[], [1]]], [[[], []]], 'sequence 0, position 1: 1 token ids but 0 logprobs'],
    [[[[1, 2, 3]]], [[[0, 0, 0]]], 'sequence 0, position 0: 3 entries, more than topK + 1 = 2'],
    [[[[1, 2]]], [[[0, NaN]]], 'sequence 0, position 0: logprob is NaN'],
    [[[[], [1]]], [[[], [Infinity]]], 'sequence 0, position 1: logprob is +Infinity'],
    [[[[1.5]]], [[[0]]], 'sequence 0, position 0: token id 1.5 is not an integer in [0, 2147483647]'],
    [[[[-1]]], [[[0]]], 'sequence 0, position 0: token id -1 is not an integer in [0, 2147483647]'],
  ])('rejects malformed input: %#', (ids, lps, message) => {
    expect(() => packDistillation(ids as any, lps as any, { topK: 1 })).toThrow(
      expect.objectContaining({ code: 'INVALID_DISTILLATION', message }),
    )
  })

  it('rejects a negative topK', () => {
    expect(() => packDistillation([], [], { topK: -1 })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', message: 'topK must be an integer >= 0, got -1' }),
    )
  })
})
