// The dataset options that follow transformers 5's apply_chat_template: maskingStrategy
// 'generation', parseToolArguments, reasoning under any of its names, and which of a model's
// templates renders. Values are asserted token for token.
import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'

import { afterAll, describe, expect, it } from 'vitest'

import { Tokenizer, createSFTDataset, loadSFTDataset } from '../lib/index.js'
import { repoRoot, tokenizerDir } from './helpers'

const templates = resolve(repoRoot, '..', 'shared', 'templates', 'trl')
const work = mkdtempSync(join(tmpdir(), 'sft-template-options-'))
afterAll(() => rmSync(work, { recursive: true, force: true }))

/** The Qwen3 tokenizer carrying `files` (file name -> text) and `config` overrides. */
function model(name: string, files: Record<string, string>, config: Record<string, unknown> = {}): Tokenizer {
  const dir = join(work, name)
  mkdirSync(dir, { recursive: true })
  const base = tokenizerDir('qwen3')
  symlinkSync(join(base, 'tokenizer.json'), join(dir, 'tokenizer.json'))
  const original = JSON.parse(readFileSync(join(base, 'tokenizer_config.json'), 'utf8'))
  delete original.chat_template
  writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify({ ...original, ...config }))
  for (const [file, text] of Object.entries(files)) {
    mkdirSync(join(dir, file, '..'), { recursive: true })
    writeFileSync(join(dir, file), text)
  }
  return Tokenizer.fromPretrainedSync(dir)
}

function trainedText(tok: Tokenizer, ids: Int32Array, labels: Int32Array): string {
  const kept = Array.from(ids).filter((_, i) => labels[i] !== -100)
  return tok.decodeSync(kept, false)
}

const toolConversation = [
  { role: 'user', content: 'Weather in Paris?' },
  {
    role: 'assistant',
    content: '',
    tool_calls: [{ type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris", "days": 2}' } }],
  },
  { role: 'tool', content: '{"t": 21}' },
  { role: 'assistant', content: 'It is 21 C.' },
]

describe("maskingStrategy 'generation'", () => {
  const qwen3Training = readFileSync(join(templates, 'qwen3_training.jinja'), 'utf8')

  it('trains exactly the generation blocks of the template', async () => {
    const tok = model('generation', { 'chat_template.jinja': qwen3Training })
    const ds = createSFTDataset(
      [{ messages: [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello!' }] }],
      tok,
      { maskingStrategy: 'generation', completionOnly: true },
    )
    const row = await ds.tokenizeExample(0)
    expect(tok.decodeSync(Array.from(row.inputIds), false)).toBe(
      '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHello!<|im_end|>\n',
    )
    expect(trainedText(tok, row.inputIds, row.labels)).toBe('<think>\n\n</think>\n\nHello!<|im_end|>\n')
  })

  it('is an error naming the example on a template without generation blocks', async () => {
    const ds = createSFTDataset([{ messages: [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Yo' }] }], model('no-generation', { 'chat_template.jinja': readFileSync(join(templates, 'qwen3.jinja'), 'utf8') }), {
      maskingStrategy: 'generation',
      completionOnly: true,
    })
    await expect(ds.tokenizeExample(0)).rejects.toMatchObject({
      code: 'TEMPLATE_RENDER',
      message: expect.stringMatching(/^SFT example 0: maskingStrategy 'generation' needs \{% generation %\} blocks/),
    })
  })

  it('rejects settings of the spans strategy', () => {
    const tok = model('generation-roles', { 'chat_template.jinja': qwen3Training })
    expect(() => createSFTDataset([{ messages: [{ role: 'user', content: 'x' }] }], tok, { maskingStrategy: 'generation', trainOnRoles: ['user'] })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', message: "trainOnRoles needs maskingStrategy 'spans'" }),
    )
  })
})

describe('parseToolArguments', () => {
  const qwen35 = readFileSync(join(templates, 'qwen3_5_think.jinja'), 'utf8')

  it('parses string arguments so that Qwen3.5 can render OpenAI-shaped tool calls', async () => {
    const tok = model('qwen35-args', { 'chat_template.jinja': qwen35 })
    const plain = createSFTDataset([{ messages: toolConversation }], tok, { maskingStrategy: 'spans', completionOnly: true })
    await expect(plain.tokenizeExample(0)).rejects.toMatchObject({ code: 'TEMPLATE_RENDER' })
    const parsed = createSFTDataset([{ messages: toolConversation }], tok, {
      maskingStrategy: 'spans',
      completionOnly: true,
      parseToolArguments: true,
    })
    const row = await parsed.tokenizeExample(0)
    const text = tok.decodeSync(Array.from(row.inputIds), false)
    expect(text).toContain('<parameter=city>\nParis\n</parameter>\n<parameter=days>\n2\n</parameter>')
    // The answer after the tool result is trained; the tool result is not.
    const trained = trainedText(tok, row.inputIds, row.labels)
    expect(trained).toContain('It is 21 C.')
    expect(trained).not.toContain('{"t": 21}')
  })

  it('names the example and message of a string that is not a JSON object', async () => {
    const tok = model('qwen35-bad-args', { 'chat_template.jinja': qwen35 })
    const messages = structuredClone(toolConversation)
    messages[1].tool_calls![0].function.arguments = '[1, 2]'
    const ds = createSFTDataset([{ messages }], tok, { parseToolArguments: true })
    await expect(ds.tokenizeExample(0)).rejects.toMatchObject({
      code: 'INVALID_MESSAGE',
      message: 'SFT example 0: message 1: tool_calls[0].function.arguments is a string that does not hold a JSON object',
    })
  })
})

describe('template choice and message preprocessing as in transformers 5', () => {
  it('renders chat_template.jinja over the config template, and tool_use when tools are given', () => {
    const tok = model(
      'choice',
      {
        'chat_template.jinja': 'FILE{% for m in messages %}|{{ m.content }}{% endfor %}',
        'additional_chat_templates/tool_use.jinja': 'TOOLS {{ tools | length }}{% for m in messages %}|{{ m.content }}{% endfor %}',
      },
      { chat_template: 'CONFIG' },
    )
    const messages = [{ role: 'user', content: 'a' }]
    expect(tok.renderChatTemplate(messages)).toBe('FILE|a')
    expect(tok.renderChatTemplate(messages, { tools: [{ type: 'function', function: { name: 'f' } }] })).toBe('TOOLS 1|a')
  })

  it('gives a message its reasoning under reasoning_content and thinking, whichever name it came under', () => {
    const tok = model('reasoning', {
      'chat_template.jinja': '{% for m in messages %}[{{ m.reasoning_content }}|{{ m.thinking }}]{% endfor %}',
    })
    const text = tok.renderChatTemplate([
      { role: 'assistant', content: 'x', reasoning: 'r1' },
      { role: 'assistant', content: 'x', thinking: 't2' },
      { role: 'assistant', content: 'x', reasoning_content: 'c3', thinking: 't3' },
    ])
    expect(text).toBe('[r1|r1][t2|t2][c3|t3]')
  })

  it('prints floats, lists and maps as Python prints them', () => {
    const tok = model('python-values', {
      'chat_template.jinja':
        "{% for k, v in messages[0].args | items %}{{ k }}={{ v | string }};{% endfor %}{{ messages[0].args.list }}|{{ messages[0].args | tojson(ensure_ascii=True) }}",
    })
    const text = tok.renderChatTemplate([{ role: 'user', args: { tiny: 1e-7, huge: 1e21, list: [2.5, 'é', null, true] } }])
    expect(text).toBe(
      "tiny=1e-07;huge=1e+21;list=[2.5, 'é', None, True];[2.5, 'é', None, True]|" +
        '{"tiny": 1e-07, "huge": 1e+21, "list": [2.5, "\\u00e9", null, true]}',
    )
  })
})

describe('CLI', () => {
  it('takes --masking-strategy generation and --parse-tool-arguments', async () => {
    const dir = join(work, 'cli-model')
    model('cli-model', { 'chat_template.jinja': readFileSync(join(templates, 'qwen3_5_think_training.jinja'), 'utf8') })
    const data = join(work, 'tools.jsonl')
    writeFileSync(data, JSON.stringify({ messages: toolConversation }) + '\n')
    const r = spawnSync(
      process.execPath,
      [join(repoRoot, 'bin', 'sft-dataset.js'), 'stats', data, '--tokenizer', dir, '--masking-strategy', 'generation', '--completion-only', '--parse-tool-arguments', '--json'],
      { cwd: work, encoding: 'utf8' },
    )
    expect(r.stderr).toBe('')
    expect(r.status).toBe(0)
    const tok = Tokenizer.fromPretrainedSync(dir)
    const ds = await loadSFTDataset(data, tok, { maskingStrategy: 'generation', completionOnly: true, parseToolArguments: true, allowedRoot: work })
    const row = await ds.tokenizeExample(0)
    const trained = Array.from(row.labels).filter((l) => l !== -100).length
    expect(trained).toBeGreaterThan(0)
    const stats = JSON.parse(r.stdout)
    expect(stats.config).toMatchObject({ maskingStrategy: 'generation', parseToolArguments: true })
    expect(stats.trained.tokens).toBe(trained)
  })
})
