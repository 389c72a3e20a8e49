// MLX Node as it is today: Qwen3.5 (the family its SFT trainer trains) through the public API,
// the upstream tokenizer's applyChatTemplate call shape with reasoningEffort, reasoningEffort in
// datasets and the CLI, and a CLI whose idea of a valid file is loadSFTDataset's.
import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'

import { afterAll, describe, expect, it } from 'vitest'

import { Tokenizer, createSFTDataset, loadSFTDataset } from '../lib/index.js'
import { qwen35Dir, repoRoot, tokenizer } from './helpers'

const work = mkdtempSync(join(tmpdir(), 'sft-mlx-node-'))
afterAll(() => rmSync(work, { recursive: true, force: true }))
const bin = join(repoRoot, 'bin', 'sft-dataset.js')

function cli(...args: string[]) {
  const r = spawnSync(process.execPath, [bin, ...args], { cwd: work, encoding: 'utf8' })
  return { status: r.status, stdout: r.stdout, stderr: r.stderr }
}

/** The GPT-OSS tokenizer with the GPT-OSS template of the TRL collection as chat_template.jinja. */
function gptOss(): string {
  const dir = join(work, 'gptoss')
  mkdirSync(dir, { recursive: true })
  const models = join(repoRoot, 'node_modules', '@lenml', 'tokenizer-gptoss', 'models')
  symlinkSync(join(models, 'tokenizer.json'), join(dir, 'tokenizer.json'))
  symlinkSync(join(models, 'tokenizer_config.json'), join(dir, 'tokenizer_config.json'))
  writeFileSync(join(dir, 'chat_template.jinja'), readFileSync(resolve(repoRoot, '..', 'shared', 'templates', 'trl', 'gptoss.jinja')))
  return dir
}
const gptOssDir = gptOss()
process.env.SOURCE_DATE_EPOCH = '1721995200'

const chat = [{ role: 'user', content: 'What is 2+2?' }]

function reasoningLine(text: string): string | undefined {
  return /Reasoning: \w+/.exec(text)?.[0]
}

describe('applyChatTemplate in the call shape of MLX Node', () => {
  const tok = Tokenizer.fromPretrainedSync(gptOssDir)
  const decode = (ids: Uint32Array) => tok.decodeSync(ids, false)

  it('takes contentOrder, existingImagePlaceholder and reasoningEffort in positions five to seven', async () => {
    expect(reasoningLine(decode(await tok.applyChatTemplate(chat, true, null, false, undefined, undefined, 'high')))).toBe('Reasoning: high')
    expect(reasoningLine(decode(tok.applyChatTemplateSync(chat, true, null, false, 'text_first', '<image>', 'low')))).toBe('Reasoning: low')
    // Not given: the template's own default.
    expect(reasoningLine(decode(await tok.applyChatTemplate(chat, true)))).toBe('Reasoning: medium')
  })

  it('takes reasoningEffort in the options object too, and passes unknown values on', async () => {
    expect(reasoningLine(decode(await tok.applyChatTemplate(chat, true, null, null, { reasoningEffort: 'max' })))).toBe('Reasoning: max')
    expect(reasoningLine(tok.renderChatTemplate(chat, { addGenerationPrompt: true, reasoningEffort: 'xhigh' }))).toBe('Reasoning: xhigh')
  })

  it('rejects a reasoningEffort that is not a string', async () => {
    await expect(tok.applyChatTemplate(chat, true, null, false, undefined, undefined, 3 as any)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' })
    expect(() => tok.applyChatTemplateSync(chat, true, null, false, undefined, undefined, {} as any)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }))
  })
})

describe('reasoningEffort in datasets and the CLI', () => {
  const examples = [{ messages: [...chat, { role: 'assistant', content: '4' }] }]

  it('reaches the template of every row and is part of the token cache key', async () => {
    const tok = Tokenizer.fromPretrainedSync(gptOssDir)
    for (const effort of ['low', 'high']) {
      const ds = createSFTDataset(examples, tok, { reasoningEffort: effort })
      const row = await ds.tokenizeExample(0)
      expect(reasoningLine(tok.decodeSync(Array.from(row.inputIds), false))).toBe(`Reasoning: ${effort}`)
    }
    const data = join(work, 'effort.jsonl')
    writeFileSync(data, JSON.stringify(examples[0]) + '\n')
    const cache = join(work, 'cache')
    const low = await loadSFTDataset(data, tok, { reasoningEffort: 'low', cache: { dir: cache }, allowedRoot: work })
    const high = await loadSFTDataset(data, tok, { reasoningEffort: 'high', cache: { dir: cache }, allowedRoot: work })
    expect([low.cache?.status, high.cache?.status]).toEqual(['stored', 'stored'])
    const again = await loadSFTDataset(data, tok, { reasoningEffort: 'high', cache: { dir: cache }, allowedRoot: work })
    expect(again.cache?.status).toBe('hit')
  })

  it('is --reasoning-effort on the command line', () => {
    const data = join(work, 'effort-cli.jsonl')
    writeFileSync(data, JSON.stringify(examples[0]) + '\n')
    const r = cli('preview', data, '--tokenizer', gptOssDir, '--reasoning-effort', 'low', '-n', '1', '--json')
    expect(r.stderr).toBe('')
    expect(r.status).toBe(0)
    const preview = JSON.parse(r.stdout)
    expect(preview.config.reasoningEffort).toBe('low')
    expect(reasoningLine(preview.previews[0].tokens.map((t: any) => t.text).join(''))).toBe('Reasoning: low')
  })
})

describe("renderAs 'mlx-node' in datasets, the token cache and the CLI", () => {
  const reasoning = {
    messages: [
      { role: 'user', content: 'a' },
      { role: 'assistant', content: 'b', reasoning_content: 'deep thought' },
      { role: 'user', content: 'c' },
      { role: 'assistant', content: 'd' },
    ],
  }
  const data = join(work, 'render-as.jsonl')
  writeFileSync(data, JSON.stringify(reasoning) + '\n')
  const text = (tok: Tokenizer, ids: Int32Array) => tok.decodeSync(Array.from(ids), false)

  it("follows the tokenizer's setting, and the dataset's over it", async () => {
    const plain = tokenizer('qwen3.5')
    const mlx = Tokenizer.fromPretrainedSync(qwen35Dir(), { renderAs: 'mlx-node' })
    const rows = async (tok: Tokenizer, config = {}) => text(tok, (await createSFTDataset([reasoning], tok, config).tokenizeExample(0)).inputIds)
    expect(await rows(plain)).not.toContain('deep thought')
    expect(await rows(mlx)).toContain('<think>\ndeep thought\n</think>')
    expect(await rows(plain, { renderAs: 'mlx-node' })).toBe(await rows(mlx))
    expect(await rows(mlx, { renderAs: 'transformers' })).toBe(await rows(plain))
  })

  it('is part of the token cache key, as the rendering in effect', async () => {
    const cache = join(work, 'render-as-cache')
    const mlx = Tokenizer.fromPretrainedSync(qwen35Dir(), { renderAs: 'mlx-node' })
    const plain = tokenizer('qwen3.5')
    const statuses = []
    for (const [tok, config] of [
      [plain, {}],
      [mlx, {}],
      [plain, { renderAs: 'mlx-node' }],
      [mlx, { renderAs: 'transformers' }],
    ] as const) {
      const ds = await loadSFTDataset(data, tok, { ...config, cache: { dir: cache }, allowedRoot: work })
      statuses.push(ds.cache?.status)
    }
    expect(statuses).toEqual(['stored', 'stored', 'hit', 'hit'])
  })

  it('reports and honours the renderer of its own rendering', async () => {
    const qwen3 = join(repoRoot, 'node_modules', '@lenml', 'tokenizer-qwen3', 'models')
    // Rendered as transformers, Qwen3's template has a direct renderer; as MLX Node, its plan.
    expect(Tokenizer.fromPretrainedSync(qwen3).renderer).toBe('compiled')
    const mlx = Tokenizer.fromPretrainedSync(qwen3, { renderAs: 'mlx-node' })
    expect(mlx.renderer).toBe('plan')
    const interpreted = Tokenizer.fromPretrainedSync(qwen3, { renderAs: 'mlx-node', renderer: 'interpreter' })
    expect(interpreted.renderer).toBe('interpreter')
    // Both give MLX Node's text: historical reasoning kept.
    const text = mlx.renderChatTemplate(reasoning.messages, {})
    expect(text).toContain('<think>\ndeep thought\n</think>')
    expect(interpreted.renderChatTemplate(reasoning.messages, {})).toBe(text)
    expect(() => Tokenizer.fromPretrainedSync(qwen3, { renderAs: 'mlx-node', renderer: 'compiled' })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', message: expect.stringContaining("renderer 'compiled' cannot render as MLX Node does") }),
    )
  })

  it('is --render-as on the command line', () => {
    const r = cli('preview', data, '--tokenizer', qwen35Dir(), '--render-as', 'mlx-node', '-n', '1', '--json')
    expect(r.stderr).toBe('')
    expect(r.status).toBe(0)
    const preview = JSON.parse(r.stdout)
    expect(preview.config.renderAs).toBe('mlx-node')
    expect(preview.previews[0].tokens.map((t: any) => t.text).join('')).toContain('deep thought')
    const bad = cli('preview', data, '--tokenizer', qwen35Dir(), '--render-as', 'python')
    expect(bad.status).toBe(2)
    expect(bad.stderr).toContain(`renderAs must be 'transformers' or 'mlx-node', got "python"`)
  })
})

describe('Qwen3.5 through the public API', () => {
  const tok = tokenizer('qwen3.5')
  const toolChat = [
    { role: 'system', content: 'You are helpful.' },
    { role: 'user', content: 'Weather in Paris?' },
    { role: 'assistant', content: '', tool_calls: [{ type: 'function', function: { name: 'get_weather', arguments: { city: 'Paris' } } }] },
    { role: 'tool', content: '{"t": 21}' },
    { role: 'assistant', content: 'It is 21 C in Paris.' },
  ]

  function trained(ids: Int32Array, labels: Int32Array): string {
    return tok.decodeSync(Array.from(ids).filter((_, i) => labels[i] !== -100), false)
  }

  it('renders its own template from the model folder (chat_template.jinja and tokenizer_config.json agree)', () => {
    expect(tok.renderChatTemplate(toolChat)).toBe(
      '<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nWeather in Paris?<|im_end|>\n' +
        '<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call><|im_end|>\n' +
        '<|im_start|>user\n<tool_response>\n{"t": 21}\n</tool_response><|im_end|>\n' +
        '<|im_start|>assistant\n<think>\n\n</think>\n\nIt is 21 C in Paris.<|im_end|>\n',
    )
  })

  it("masks tool conversations under 'reference' and 'spans'", async () => {
    const reference = await createSFTDataset([{ messages: toolChat }], tok, { completionOnly: true }).tokenizeExample(0)
    const spans = await createSFTDataset([{ messages: toolChat }], tok, { completionOnly: true, maskingStrategy: 'spans' }).tokenizeExample(0)
    expect(Array.from(spans.inputIds)).toEqual(Array.from(reference.inputIds))
    // The reference trains each assistant turn from the newline after its role to its end token
    // (excluded); spans trains what the assistant generates and its end token, the empty thinking
    // block being part of the generation prompt (enableThinking false).
    expect(trained(reference.inputIds, reference.labels)).toBe(
      '\n<think>\n\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>' +
        '\n<think>\n\n</think>\n\nIt is 21 C in Paris.',
    )
    expect(trained(spans.inputIds, spans.labels)).toBe(
      '<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call><|im_end|>' +
        'It is 21 C in Paris.<|im_end|>',
    )
  })

  it('gives the same ids on both engines', async () => {
    const hf = await Tokenizer.fromPretrained(qwen35Dir(), { engine: 'hf' } as any)
    const texts = [tok.renderChatTemplate(toolChat), 'Ünïcödé e\u0301 한국어 你好 🙂 <|im_end|>', '  spaces\n\n\ttabs 12345 ']
    for (const text of texts) expect(Array.from(tok.encodeSync(text, false))).toEqual(Array.from(hf.encodeSync(text, false)))
  })
})

describe('one meaning of "valid" in the CLI and the library', () => {
  const lines = [
    { prompt: 'Say hi', completion: 'Hi!' },
    { prompt: 'text', completion: { role: 'assistant', content: 'a message object' } },
    { prompt: 'Say bye', completion: 'Bye!' },
    { prompt: 'more', completion: { role: 'assistant', content: 'another one' } },
  ]
  const data = join(work, 'mixed.jsonl')
  writeFileSync(data, lines.map((l) => JSON.stringify(l)).join('\n') + '\n')

  // In the reference format a prompt and a completion are messages: none of these lines loads.
  it('validate fails exactly where loadSFTDataset fails, lists every line, and names the format that loads', async () => {
    await expect(loadSFTDataset(data, tokenizer('qwen3'), { allowedRoot: work })).rejects.toMatchObject({ code: 'INVALID_EXAMPLE' })
    const r = cli('validate', data, '--json')
    expect(r.status).toBe(1)
    const report = JSON.parse(r.stdout)
    expect(report.problems.map((p: any) => [p.line, p.code])).toEqual([
      [1, 'INVALID_EXAMPLE'],
      [2, 'INVALID_EXAMPLE'],
      [3, 'INVALID_EXAMPLE'],
      [4, 'INVALID_EXAMPLE'],
    ])
    expect(report.hint).toMatch(/^every record loads with --format auto \(format: 'auto' in loadSFTDataset\)/)
    const text = cli('validate', data)
    expect(text.status).toBe(1)
    expect(text.stdout).toMatch(/^hint: every record loads with --format auto/m)
  })

  it('stats says which option loads the file; with it the file loads in both', async () => {
    const r = cli('stats', data)
    expect(r.status).toBe(1)
    expect(r.stderr).toMatch(/INVALID_EXAMPLE: .*every record loads with --format auto/)
    const ok = cli('validate', data, '--format', 'auto')
    expect(ok.status).toBe(0)
    const ds = await loadSFTDataset(data, tokenizer('qwen3'), { format: 'auto', allowedRoot: work })
    expect(ds.length).toBe(4)
  })
})
