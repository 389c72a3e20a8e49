// The chat-template renderers through the public API: the direct renderer of a known template
// (`renderer: 'compiled'`, chosen by 'auto'), the render plan of any other template ('plan',
// chosen by 'auto' for Qwen3.5 and GPT-OSS) and the minijinja interpreter write the same text
// for every template golden, and datasets built with any of them give the same batches.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

import { copyFileSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'

import { Tokenizer, loadSFTDataset } from '../lib/index.js'
import { fixtures, qwen35Dir, repoRoot, requireShared, sharedParity, tokenizer, tokenizerDir } from './helpers'

type Family = 'qwen3' | 'llama3_1' | 'gemma3' | 'deepseek_v3'
const FAMILIES: Family[] = ['qwen3', 'llama3_1', 'gemma3', 'deepseek_v3']

type Renderer = 'auto' | 'plan' | 'interpreter' | 'compiled'
const load = (family: Family, renderer?: Renderer) =>
  Tokenizer.fromPretrainedSync(tokenizerDir(family), renderer ? { renderer } : undefined)

describe('renderer choice', () => {
  it('uses the direct renderer for the four known templates by default', () => {
    for (const family of FAMILIES) expect(tokenizer(family).renderer).toBe('compiled')
    expect(load('qwen3', 'auto').renderer).toBe('compiled')
    expect(load('qwen3', 'interpreter').renderer).toBe('interpreter')
    expect(load('qwen3', 'compiled').renderer).toBe('compiled')
    expect(load('qwen3', 'plan').renderer).toBe('plan')
  })
  it('uses the render plan for every other template by default', () => {
    expect(tokenizer('qwen3.5').renderer).toBe('plan')
    expect(Tokenizer.fromPretrainedSync(gptOssDir()).renderer).toBe('plan')
    expect(Tokenizer.fromPretrainedSync(gptOssDir(), { renderer: 'interpreter' }).renderer).toBe('interpreter')
  })
  it('refuses an unknown renderer name', () => {
    expect(() => load('qwen3', 'jit' as any)).toThrow(
      expect.objectContaining({
        code: 'INVALID_ARGUMENT',
        message: `renderer must be 'auto', 'plan', 'interpreter' or 'compiled', got "jit"`,
      }),
    )
  })
})

describe.each(FAMILIES)('%s goldens under both renderers', (family) => {
  const cases: any[] = JSON.parse(readFileSync(join(fixtures, 'templates', `${family}.json`), 'utf8')).cases
  const compiled = tokenizer(family)
  const interpreter = load(family, 'interpreter')
  it('renders the same text and ids as transformers with either renderer', () => {
    let checked = 0
    for (const c of cases) {
      if (c.text === undefined || /\d\.0\b|\de[+-]\d/.test(c.text)) continue
      if (c.messages.some((m: any) => m && typeof m === 'object' && Object.values(m).includes(null))) continue
      const opts = { addGenerationPrompt: c.addGenerationPrompt, enableThinking: c.enableThinking ?? undefined, tools: c.tools ?? undefined }
      const direct = compiled.renderChatTemplate(c.messages, opts)
      const interpreted = interpreter.renderChatTemplate(c.messages, opts)
      expect(direct, c.name).toBe(c.text)
      expect(interpreted, c.name).toBe(c.text)
      checked++
    }
    expect(checked).toBeGreaterThan(100)
  })
  it('trims contents as Python does (U+001C..U+001F are whitespace)', () => {
    const messages = [
      { role: 'user', content: '\u001cHi\u001f' },
      { role: 'assistant', content: '\u001d Hello\u3000\u001e' },
    ]
    const direct = compiled.renderChatTemplate(messages, { addGenerationPrompt: false })
    expect(interpreter.renderChatTemplate(messages, { addGenerationPrompt: false })).toBe(direct)
    const want: Record<Family, string> = {
      qwen3: '<|im_start|>user\n\u001cHi\u001f<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n\u001d Hello\u3000\u001e<|im_end|>\n',
      llama3_1: '<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello<|eot_id|>',
      gemma3: '<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nHello<end_of_turn>\n',
      deepseek_v3: '<｜begin▁of▁sentence｜><｜User｜>\u001cHi\u001f<｜Assistant｜>\u001d Hello\u3000\u001e<｜end▁of▁sentence｜>',
    }
    expect(direct).toBe(want[family])
  })
})

/** The GPT-OSS tokenizer with the TRL collection's GPT-OSS template. */
function gptOssDir(): string {
  const template = requireShared(join(repoRoot, '..', 'shared', 'templates', 'trl', 'gptoss.jinja'))
  const dir = mkdtempSync(join(tmpdir(), 'sft-gptoss-'))
  const models = join(repoRoot, 'node_modules', '@lenml', 'tokenizer-gptoss', 'models')
  for (const file of ['tokenizer.json', 'tokenizer_config.json']) copyFileSync(join(models, file), join(dir, file))
  copyFileSync(template, join(dir, 'chat_template.jinja'))
  return dir
}

const realData = join(sharedParity, 'real', 'data')
describe('datasets under both renderers', () => {
  requireShared(realData)
  const files = ['pc_gsm8k_think.jsonl', 'conv_glaive_toolcall_en.jsonl', 'conv_fastchat_mtbench.jsonl']
  it.each(files)('%s: the same epoch of batches', async (file) => {
    const path = join(realData, file)
    const epochs: { ids: number[][]; labels: number[][] }[] = []
    for (const renderer of ['compiled', 'interpreter'] as const) {
      const tok = Tokenizer.fromPretrainedSync(tokenizerDir('qwen3'), { renderer })
      const warn = console.warn
      console.warn = () => {}
      try {
        const ds = await loadSFTDataset(path, tok, { allowedRoot: realData, completionOnly: true, tools: 'example' })
        const ids: number[][] = []
        const labels: number[][] = []
        for await (const b of ds.batches(8)) {
          ids.push(Array.from(b.inputIds))
          labels.push(Array.from(b.labels))
        }
        epochs.push({ ids, labels })
      } finally {
        console.warn = warn
      }
    }
    expect(epochs[0].ids.length).toBeGreaterThan(30)
    expect(epochs[0].ids).toEqual(epochs[1].ids)
    expect(epochs[0].labels).toEqual(epochs[1].labels)
  })
  const models: [string, () => string][] = [
    ['Qwen3.5', qwen35Dir],
    ['GPT-OSS', gptOssDir],
  ]
  describe.each(models)('%s: the render plan against the interpreter', (_, dir) => {
    const plainFiles = ['pc_gsm8k_think.jsonl', 'pc_alpaca.jsonl', 'conv_fastchat_mtbench.jsonl']
    // The first 300 records of each file: enough for every branch these templates take.
    it.each(plainFiles)('%s: the same epoch of batches, as transformers and as MLX Node renders', async (file) => {
      const path = join(realData, file)
      for (const renderAs of ['transformers', 'mlx-node'] as const) {
        const epochs: number[][][] = []
        for (const renderer of ['plan', 'interpreter'] as const) {
          const tok = Tokenizer.fromPretrainedSync(dir(), { renderer, renderAs })
          expect(tok.renderer).toBe(renderer)
          const warn = console.warn
          console.warn = () => {}
          try {
            const ds = await loadSFTDataset(path, tok, { allowedRoot: realData, completionOnly: true, limit: 300 })
            const rows: number[][] = []
            for await (const b of ds.batches(8)) rows.push(Array.from(b.inputIds), Array.from(b.labels))
            epochs.push(rows)
          } finally {
            console.warn = warn
          }
        }
        expect(epochs[0].length).toBe(2 * Math.ceil(300 / 8))
        expect(epochs[0]).toEqual(epochs[1])
      }
    })
  })
})
