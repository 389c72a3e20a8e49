// OpenAI's wire shape of a tool-calling turn, `content: null` beside `tool_calls`: read as an
// empty content by the openai format (and auto, which detects it from that turn); under the
// other formats the template's error names the example, the message and the missing field.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'

import { createSFTDataset, loadSFTDataset } from '../lib/index.js'
import { tokenizer } from './helpers'

const dir = mkdtempSync(join(tmpdir(), 'sft-openai-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const call = { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }
const record = {
  messages: [
    { role: 'user', content: 'Weather in Paris?' },
    { role: 'assistant', content: null, tool_calls: [call] },
    { role: 'tool', tool_call_id: 'call_1', content: '{"temp": 21}' },
    { role: 'assistant', content: 'It is 21 C.' },
  ],
}
const path = join(dir, 'openai.jsonl')
writeFileSync(path, JSON.stringify({ messages: [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello' }] }) + '\n' + JSON.stringify(record) + '\n')

describe('content: null beside tool_calls', () => {
  const qwen3 = tokenizer('qwen3')

  it('loads under the openai format and auto, as the same example with an empty content', async () => {
    const withEmpty = {
      messages: record.messages.map((m) => (m.content === null ? { ...m, content: '' } : m)),
    }
    const expected = await createSFTDataset([withEmpty], qwen3, { completionOnly: true }).tokenizeExample(0)
    for (const format of ['openai', 'auto'] as const) {
      const ds = await loadSFTDataset(path, qwen3, { format, completionOnly: true, allowedRoot: dir })
      const row = await ds.tokenizeExample(1)
      expect(Array.from(row.inputIds)).toEqual(Array.from(expected.inputIds))
      expect(qwen3.decodeSync(Array.from(row.inputIds), false)).toContain('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>')
    }
  })

  it('elsewhere, the render error names the example, the message and the field', async () => {
    const ds = createSFTDataset([record], qwen3)
    const error = await ds.tokenizeExample(0).catch((e) => e)
    expect(error.code).toBe('TEMPLATE_RENDER')
    expect(error.message).toMatch(/^SFT example 0: chat template failed to render: .*\(line \d+\) \(message 1 \(assistant\) has no content: a null or missing field reaches the template undefined; the OpenAI format reads a null content beside tool_calls as ""\)$/)
  })
})
