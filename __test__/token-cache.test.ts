// The token cache (`loadSFTDataset(..., {cache})`): a hit gives what a cold load gives (batches,
// warnings, report), every input of a row is part of the key, damaged entries are rebuilt with a
// warning, concurrent cold loads leave one valid entry, an unwritable cache still loads. Plus the
// Parquet export and the `export` / `cache` commands of the CLI.
import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import {
  chmodSync,
  copyFileSync,
  cpSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, dirname, join } from 'node:path'
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest'

import { listTokenCache, loadSFTDataset, pruneTokenCache, Tokenizer, exportSFTParquet } from '../lib/index.js'
import type { SFTDataset } from '../lib/index.js'
import { fixtures, repoRoot, sharedParity, tokenizer, tokenizerDir } from './helpers'

const realData = join(sharedParity, 'real', 'data')
const edgeData = join(fixtures, 'parity', 'edge')
const scratch = mkdtempSync(join(tmpdir(), 'sft-token-cache-'))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))
afterEach(() => vi.restoreAllMocks())

let dirs = 0
function freshDir(): string {
  const d = join(scratch, `c${dirs++}`)
  return d
}

/** Everything a trainer sees of a dataset: two epochs of batches, the warnings printed on the
 * way (and by the load), the report. */
async function observe(load: () => Promise<SFTDataset>) {
  const warned: string[] = []
  vi.spyOn(console, 'warn').mockImplementation((m: string) => void warned.push(m))
  const ds = await load()
  const loadWarnings = warned.splice(0)
  const epochs: Array<Array<{ shape: number[]; ids: number[]; labels: number[] }>> = []
  for (const epoch of [0, 1]) {
    ds.shuffleForEpoch(epoch)
    const batches = []
    for await (const b of ds.batches(4)) {
      batches.push({ shape: [...b.shape], ids: Array.from(b.inputIds), labels: Array.from(b.labels) })
    }
    epochs.push(batches)
  }
  const report = await ds.report()
  vi.restoreAllMocks()
  return { ds, loadWarnings, batchWarnings: warned, epochs, report, length: ds.length, order: Array.from(ds.order()) }
}

function entriesIn(dir: string): string[] {
  return existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith('.sftrows')) : []
}

const dataFiles = [
  join(edgeData, 'pc_special_strings.jsonl'),
  join(edgeData, 'conv_edge.jsonl'),
  join(realData, 'pc_alpaca.jsonl'),
  join(realData, 'conv_glaive_toolcall_en.jsonl'),
].filter(existsSync)

const optionSets: Array<Record<string, unknown>> = [
  {},
  { completionOnly: true, maxSeqLength: 256, seed: 3 },
  { completionOnly: true, maskingStrategy: 'spans', truncation: 'turns', dropUntrainable: true, maxSeqLength: 200 },
]

describe('a hit gives what a cold load gives', () => {
  it('reads the real parity data', () => expect(dataFiles.length).toBe(4))
  for (const file of dataFiles) {
    for (const [k, options] of optionSets.entries()) {
      it(`${basename(file)}, options ${k}`, async () => {
        const dir = freshDir()
        const tok = tokenizer('qwen3')
        const base = { ...options, allowedRoot: dirname(file) }
        const cold = await observe(() => loadSFTDataset(file, tok, base))
        expect(cold.ds.cache).toBeNull()
        const first = await observe(() => loadSFTDataset(file, tok, { ...base, cache: dir }))
        expect(first.ds.cache?.status).toBe('stored')
        expect(first.loadWarnings).toEqual([])
        const hit = await observe(() => loadSFTDataset(file, tok, { ...base, cache: { dir, mode: 'read' } }))
        expect(hit.ds.cache?.status).toBe('hit')
        expect(hit.ds.cache?.file).toBe(join(dir, `${hit.ds.cache?.key}.sftrows`))
        for (const got of [first, hit]) {
          expect(got.length).toBe(cold.length)
          expect(got.order).toEqual(cold.order)
          expect(got.epochs).toEqual(cold.epochs)
          expect(got.batchWarnings).toEqual(cold.batchWarnings)
          expect(got.report).toEqual(cold.report)
          expect(got.ds.format).toBe(cold.ds.format)
        }
        // Every example's full row too.
        for (let i = 0; i < Math.min(cold.report.examples.length, 50); i++) {
          const [a, b] = await Promise.all([cold.ds.tokenizeExample(i), hit.ds.tokenizeExample(i)])
          expect(b).toEqual(a)
        }
        expect(entriesIn(dir)).toHaveLength(1)
      })
    }
  }
})

describe('the key', () => {
  const source = join(edgeData, 'pc_special_strings.jsonl')

  async function statusOf(file: string, tok: Tokenizer, dir: string, options: Record<string, unknown> = {}) {
    vi.spyOn(console, 'warn').mockImplementation(() => {})
    const ds = await loadSFTDataset(file, tok, { ...options, allowedRoot: dirname(file), cache: dir })
    vi.restoreAllMocks()
    return ds.cache?.status
  }

  it('changes with each input of a row alone, and not with the path or the seed', async () => {
    const dir = freshDir()
    const work = join(scratch, 'key')
    rmSync(work, { recursive: true, force: true })
    cpSync(tokenizerDir('qwen3'), join(work, 'tok'), { recursive: true })
    const data = join(work, 'data.jsonl')
    copyFileSync(source, data)
    const tok = await Tokenizer.fromPretrained(join(work, 'tok'))
    expect(await statusOf(data, tok, dir)).toBe('stored')
    expect(await statusOf(data, tok, dir)).toBe('hit')
    // The same content elsewhere, another mtime, another seed or maxSeqLength: still a hit.
    const moved = join(work, 'moved.jsonl')
    copyFileSync(data, moved)
    expect(await statusOf(moved, tok, dir)).toBe('hit')
    expect(await statusOf(data, tok, dir, { seed: 9, maxSeqLength: 64 })).toBe('hit')

    const options: Array<Record<string, unknown>> = [
      { completionOnly: true },
      { enableThinking: true },
      { maskingStrategy: 'spans' },
      { trainOnRoles: ['assistant', 'user'] },
      { trainOnTurnEnd: false },
      { reasoning: 'mask' },
      { truncation: 'keepStart' },
      { dropUntrainable: true },
      { specialTokenIds: { imEnd: 151643 } },
      { specialTokenIds: { newlineTokens: [198] } },
      { limit: 2 },
    ]
    for (const o of options) expect([JSON.stringify(o), await statusOf(data, tok, dir, o)]).toEqual([JSON.stringify(o), 'stored'])
    // maxSeqLength changes rows under truncation 'turns'.
    expect(await statusOf(data, tok, dir, { truncation: 'turns', maxSeqLength: 100 })).toBe('stored')
    expect(await statusOf(data, tok, dir, { truncation: 'turns', maxSeqLength: 101 })).toBe('stored')

    // The data's content: one byte changed.
    const text = readFileSync(source, 'utf8')
    writeFileSync(data, text.replace('What', 'what'))
    expect(await statusOf(data, tok, dir)).toBe('stored')

    // tokenizer.json (a change that leaves every id alone still changes the key).
    writeFileSync(data, text)
    const tokJson = join(work, 'tok', 'tokenizer.json')
    writeFileSync(tokJson, readFileSync(tokJson, 'utf8') + '\n')
    const tok2 = await Tokenizer.fromPretrained(join(work, 'tok'))
    expect(await statusOf(data, tok2, dir)).toBe('stored')
    // The chat template.
    const configFile = join(work, 'tok', 'tokenizer_config.json')
    const config = JSON.parse(readFileSync(configFile, 'utf8'))
    config.chat_template = config.chat_template + '\n'
    writeFileSync(configFile, JSON.stringify(config))
    const tok3 = await Tokenizer.fromPretrained(join(work, 'tok'))
    expect(await statusOf(data, tok3, dir)).toBe('stored')
    expect(await statusOf(data, tok3, dir)).toBe('hit')
    expect(entriesIn(dir)).toHaveLength(options.length + 6)
  })
})

describe('damaged entries', () => {
  const file = join(edgeData, 'pc_special_strings.jsonl')
  const opts = { allowedRoot: edgeData, completionOnly: true }

  async function loadWith(dir: string) {
    return observe(() => loadSFTDataset(file, tokenizer('qwen3'), { ...opts, cache: dir }))
  }

  it('truncated, bit-flipped or foreign files are rebuilt with a warning, never read', async () => {
    const dir = freshDir()
    const cold = await observe(() => loadSFTDataset(file, tokenizer('qwen3'), opts))
    const first = await loadWith(dir)
    const entry = first.ds.cache!.file!
    const good = readFileSync(entry)
    // Another entry (other settings) to swap in.
    const otherDs = await loadSFTDataset(file, tokenizer('qwen3'), { allowedRoot: edgeData, cache: dir })
    const foreign = readFileSync(otherDs.cache!.file!)

    let seed = 12345
    const random = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2147483648
      return seed % n
    }
    const damaged: Array<[string, Buffer, RegExp]> = []
    for (let k = 0; k < 6; k++) {
      const cut = random(good.length)
      damaged.push([`truncated at ${cut}`, good.subarray(0, cut), /truncated|wrong magic/])
    }
    for (let k = 0; k < 6; k++) {
      const bad = Buffer.from(good)
      const at = random(bad.length)
      bad[at] ^= 1 << random(8)
      damaged.push([`bit flipped at ${at}`, bad, /checksum|magic|row format|byte order|other data|truncated/])
    }
    damaged.push(['another entry', foreign, /other data or settings/])
    for (const [what, bytes, reason] of damaged) {
      writeFileSync(entry, bytes)
      const got = await loadWith(dir)
      expect(got.loadWarnings, what).toHaveLength(1)
      expect(got.loadWarnings[0], what).toMatch(reason)
      expect(got.loadWarnings[0]).toContain('rebuilding it')
      expect(got.ds.cache?.status, what).toBe('stored')
      expect(got.epochs, what).toEqual(cold.epochs)
      expect(got.report, what).toEqual(cold.report)
      // Rebuilt whole (only the creation time in its description may differ).
      expect(readFileSync(entry).length, what).toBe(good.length)
    }
  })
})

/** A script loading `file` through `dir` that prints its cache status and a digest of two epochs. */
function childScript(): string {
  const script = join(scratch, 'child.js')
  writeFileSync(
    script,
    `const { loadSFTDataset, Tokenizer } = require(${JSON.stringify(join(repoRoot, 'lib'))})
const crypto = require('node:crypto')
const [file, dir, tokDir] = process.argv.slice(2)
;(async () => {
  const warnings = []
  console.warn = (m) => warnings.push(m)
  const tok = await Tokenizer.fromPretrained(tokDir)
  // The wait for another process's build, said on stderr as it happens.
  const onProgress = (p) => { if (p.waiting) process.stderr.write('WAITING\\n') }
  const ds = await loadSFTDataset(file, tok, { allowedRoot: require('node:path').dirname(file), completionOnly: true, cache: dir, onProgress })
  const h = crypto.createHash('sha256')
  for (const epoch of [0, 1]) {
    ds.shuffleForEpoch(epoch)
    for await (const b of ds.batches(4)) { h.update(Buffer.from(b.inputIds.buffer)); h.update(Buffer.from(b.labels.buffer)) }
  }
  process.stdout.write(JSON.stringify({ status: ds.cache.status, digest: h.digest('hex'), warnings }))
})().catch((e) => { process.stderr.write(String(e.stack)); process.exit(1) })
`,
  )
  return script
}

function run(args: string[], options: { uid?: number; gid?: number } = {}): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { ...options, cwd: repoRoot })
    let out = ''
    let err = ''
    child.stdout.on('data', (d) => (out += d))
    child.stderr.on('data', (d) => (err += d))
    child.on('close', (code) => resolve({ code: code ?? -1, out, err }))
  })
}

async function digestOf(ds: SFTDataset): Promise<string> {
  const h = createHash('sha256')
  for (const epoch of [0, 1]) {
    ds.shuffleForEpoch(epoch)
    for await (const b of ds.batches(4)) {
      h.update(Buffer.from(b.inputIds.buffer))
      h.update(Buffer.from(b.labels.buffer))
    }
  }
  return h.digest('hex')
}

describe('processes and permissions', () => {
  const file = existsSync(join(realData, 'pc_alpaca.jsonl')) ? join(realData, 'pc_alpaca.jsonl') : join(edgeData, 'pc_edge.jsonl')

  it('two processes started together on a cold cache both get the right batches and leave one entry', async () => {
    const dir = freshDir()
    const want = await digestOf(await loadSFTDataset(file, tokenizer('qwen3'), { allowedRoot: dirname(file), completionOnly: true }))
    const script = childScript()
    const args = [script, file, dir, tokenizerDir('qwen3')]
    const [a, b] = await Promise.all([run(args), run(args)])
    for (const r of [a, b]) {
      expect(r.code, r.err).toBe(0)
      const got = JSON.parse(r.out)
      expect(got.digest).toBe(want)
      expect(got.warnings).toEqual([])
      expect(['stored', 'hit']).toContain(got.status)
    }
    // One entry (and its build lock), no temporary file left, and it is valid: a third process
    // maps it.
    expect(readdirSync(dir).filter((n) => !n.endsWith('.lock'))).toEqual(entriesIn(dir))
    expect(entriesIn(dir)).toHaveLength(1)
    const c = JSON.parse((await run(args)).out)
    expect(c).toEqual({ status: 'hit', digest: want, warnings: [] })
  })

  it('four processes started together build once: one stores the entry, the others wait and map it', async () => {
    const dir = freshDir()
    const want = await digestOf(await loadSFTDataset(file, tokenizer('qwen3'), { allowedRoot: dirname(file), completionOnly: true }))
    const args = [childScript(), file, dir, tokenizerDir('qwen3')]
    const results = await Promise.all([0, 1, 2, 3].map(() => run(args)))
    const got = results.map((r) => {
      expect(r.code, r.err).toBe(0)
      return JSON.parse(r.out)
    })
    expect(got.map((g) => g.digest)).toEqual([want, want, want, want])
    expect(got.map((g) => g.status).sort()).toEqual(['hit', 'hit', 'hit', 'stored'])
  })

  /** Holds the build lock of `lockFile` from another process (flock, as the library takes it). */
  function holdLock(lockFile: string) {
    const holder = spawn('python3', ['-c', 'import fcntl,sys,time\nf=open(sys.argv[1],"a")\nfcntl.flock(f,fcntl.LOCK_EX)\nprint("locked",flush=True)\ntime.sleep(600)', lockFile])
    const locked = new Promise<void>((resolve) => holder.stdout.on('data', (d) => String(d).includes('locked') && resolve()))
    return { holder, locked }
  }

  /** Runs the child script, resolving `waiting` when it says it waits for another build. */
  function runWaiting(args: string[]) {
    const child = spawn(process.execPath, args, { cwd: repoRoot })
    let out = ''
    let err = ''
    let said: () => void = () => {}
    const waiting = new Promise<void>((resolve) => (said = resolve))
    child.stdout.on('data', (d) => (out += d))
    child.stderr.on('data', (d) => {
      err += d
      if (err.includes('WAITING')) said()
    })
    const done = new Promise<{ code: number; out: string; err: string }>((resolve) => child.on('close', (code) => resolve({ code: code ?? -1, out, err })))
    return { waiting, done }
  }

  /**
   * A child load of `file` through a fresh cache directory, waiting on the build lock of its
   * entry that another process holds; `ds`: the same rows loaded through another directory.
   */
  async function waitingOnAnotherBuild() {
    const dir = freshDir()
    const ds = await loadSFTDataset(file, tokenizer('qwen3'), { allowedRoot: dirname(file), completionOnly: true, cache: join(dir, 'other') })
    const want = await digestOf(ds)
    const { mkdirSync } = await import('node:fs')
    mkdirSync(dir, { recursive: true })
    const { holder, locked } = holdLock(join(dir, `${ds.cache!.key}.lock`))
    await locked
    const child = runWaiting([childScript(), file, dir, tokenizerDir('qwen3')])
    await child.waiting
    return { dir, ds, want, holder, child }
  }

  it('a load waits while another process builds the entry, and maps what it wrote', async () => {
    const { dir, ds, want, holder, child } = await waitingOnAnotherBuild()
    // The "builder" writes the entry, then releases the lock.
    copyFileSync(ds.cache!.file!, join(dir, basename(ds.cache!.file!)))
    holder.kill('SIGKILL')
    const r = await child.done
    expect(r.code, r.err).toBe(0)
    expect(JSON.parse(r.out)).toMatchObject({ status: 'hit', digest: want })
  })

  it('a waiting load whose builder dies without an entry builds it itself', async () => {
    const { dir, ds, want, holder, child } = await waitingOnAnotherBuild()
    holder.kill('SIGKILL')
    const r = await child.done
    expect(r.code, r.err).toBe(0)
    expect(JSON.parse(r.out)).toMatchObject({ status: 'stored', digest: want })
    expect(entriesIn(dir)).toHaveLength(1)
  })

  it('a read-only cache directory still loads: its entry is read, a missing one is built uncached', async () => {
    const dir = freshDir()
    const script = childScript()
    const want = await digestOf(await loadSFTDataset(file, tokenizer('qwen3'), { allowedRoot: dirname(file), completionOnly: true }))
    // Root ignores directory permissions: run the child as nobody then.
    const asUser = process.getuid?.() === 0 ? { uid: 65534, gid: 65534 } : {}
    const args = [script, file, dir, tokenizerDir('qwen3')]
    // Empty and read-only: the load builds the rows and warns that it cannot write.
    const { mkdirSync } = await import('node:fs')
    mkdirSync(dir, { recursive: true })
    chmodSync(dir, 0o555)
    chmodSync(scratch, 0o755)
    chmodSync(script, 0o644)
    const empty = await run(args, asUser)
    expect(empty.code, empty.err).toBe(0)
    const got = JSON.parse(empty.out)
    expect(got.status).toBe('built')
    expect(got.digest).toBe(want)
    expect(got.warnings).toHaveLength(1)
    expect(got.warnings[0]).toMatch(/cannot write an entry to .*: .*loaded without caching/)
    expect(readdirSync(dir)).toEqual([])
    // With an entry written before: a hit, no warning.
    chmodSync(dir, 0o755)
    await loadSFTDataset(file, tokenizer('qwen3'), { allowedRoot: dirname(file), completionOnly: true, cache: dir })
    chmodSync(dir, 0o555)
    const hit = JSON.parse((await run(args, asUser)).out)
    expect(hit).toEqual({ status: 'hit', digest: want, warnings: [] })
    chmodSync(dir, 0o755)
  })
})

describe('cache ls and prune', () => {
  it('lists entries with their data and settings, prunes by size and age', async () => {
    const dir = freshDir()
    const file = join(edgeData, 'pc_edge.jsonl')
    for (const completionOnly of [false, true]) {
      await loadSFTDataset(file, tokenizer('qwen3'), { allowedRoot: edgeData, completionOnly, cache: dir })
    }
    const listed = listTokenCache(dir)
    expect(listed).toHaveLength(2)
    for (const e of listed) {
      expect(e.problem ?? null).toBeNull()
      expect(e.bytes).toBe(statSync(e.file).size)
      const d = e.description as any
      expect(d.data.path).toBe(file)
      expect(d.format).toBe('prompt-completion')
      expect(d.rows).toBe(readFileSync(file, 'utf8').trim().split('\n').length)
      expect(d.key.rowFormat).toBe(6)
    }
    expect(listed.map((e) => (e.description as any).key.settings.completionOnly).sort()).toEqual([false, true])
    const newest = listed[1]
    const removed = pruneTokenCache(dir, { maxBytes: newest.bytes })
    expect(removed.map((e) => e.file)).toEqual([listed[0].file])
    expect(pruneTokenCache(dir, { maxAgeSeconds: 3600 })).toEqual([])
    expect(pruneTokenCache(dir, { maxAgeSeconds: 0 }).map((e) => e.file)).toEqual([newest.file])
    expect(listTokenCache(dir)).toEqual([])
    expect(() => pruneTokenCache(dir, { maxBytes: -1 })).toThrow(/maxBytes must be a finite number >= 0/)
  })
})

describe('Parquet export', () => {
  it('writes every kept row; the counts are those of tokenizeExample', async () => {
    const file = join(edgeData, 'conv_edge.jsonl')
    const out = join(scratch, 'rows.parquet')
    const options = { allowedRoot: edgeData, completionOnly: true }
    const written = await exportSFTParquet(file, tokenizer('qwen3'), out, options)
    const ds = await loadSFTDataset(file, tokenizer('qwen3'), options)
    let tokens = 0
    let trained = 0
    for (let i = 0; i < ds.length; i++) {
      const row = await ds.tokenizeExample(i)
      tokens += row.inputIds.length
      trained += row.labels.filter((l) => l !== -100).length
    }
    expect(written).toEqual({ file: out, rows: ds.length, tokens, trainedTokens: trained })
    const bytes = readFileSync(out)
    expect(bytes.subarray(0, 4).toString()).toBe('PAR1')
    expect(bytes.subarray(bytes.length - 4).toString()).toBe('PAR1')
    expect(readdirSync(scratch).filter((f) => f.endsWith('.tmp'))).toEqual([])
  })

  it('writes one epoch of packed batches: the rows and tokens of batches()', async () => {
    const file = join(edgeData, 'conv_edge.jsonl')
    const out = join(scratch, 'batches.parquet')
    const options = { allowedRoot: edgeData, completionOnly: true, batching: 'packed' as const, maxSeqLength: 256 }
    const written = await exportSFTParquet(file, tokenizer('qwen3'), out, options, { batchSize: 2, epoch: 3 })
    const ds = await loadSFTDataset(file, tokenizer('qwen3'), options)
    ds.shuffleForEpoch(3)
    let rows = 0
    let tokens = 0
    let trained = 0
    for await (const b of ds.batches(2)) {
      rows += b.shape[0]
      tokens += b.exampleIds!.filter((e) => e >= 0).length
      trained += b.labels.filter((l) => l !== -100).length
    }
    expect(written).toEqual({ file: out, rows, tokens, trainedTokens: trained })
    expect(rows).toBeLessThan(ds.length)
    expect(readFileSync(out).subarray(0, 4).toString()).toBe('PAR1')
  })
})

describe('CLI', () => {
  const cli = join(repoRoot, 'bin', 'sft-dataset.js')
  const file = join(edgeData, 'pc_edge.jsonl')

  it('export --cache writes the Parquet file and the entry; cache ls and prune report them', async () => {
    const dir = freshDir()
    const out = join(scratch, 'cli.parquet')
    const first = await run([cli, 'export', file, '--out', out, '--cache', dir, '--completion-only', '--quiet', '--json'])
    expect(first.code, first.err).toBe(0)
    const summary = JSON.parse(first.out)
    expect(summary.cache.status).toBe('stored')
    expect(summary.file).toBe(out)
    const again = JSON.parse((await run([cli, 'export', file, '--out', out, '--cache', dir, '--completion-only', '--quiet', '--json'])).out)
    expect(again.cache.status).toBe('hit')
    expect({ ...again, cache: null }).toEqual({ ...summary, cache: null })
    const ls = await run([cli, 'cache', 'ls', dir])
    expect(ls.code, ls.err).toBe(0)
    expect(ls.out).toContain(`${summary.cache.key}.sftrows`)
    expect(ls.out).toContain(`prompt-completion rows of ${file}`)
    expect(ls.out).toContain('tokenizer ')
    expect(ls.out).toMatch(/; --completion-only$/m)
    expect(ls.out).not.toMatch(/Reference|Ignore|KeepEnd|columns/)
    expect(ls.out).toMatch(/1 file, /)
    const prune = await run([cli, 'cache', 'prune', dir, '--max-size', '0'])
    expect(prune.code, prune.err).toBe(0)
    expect(prune.out).toMatch(/removed 1 file, /)
    expect(entriesIn(dir)).toEqual([])
    const usage = await run([cli, 'cache', 'prune', dir])
    expect(usage.code).toBe(2)
    expect(usage.err).toContain('give --max-age and/or --max-size')
    const noOut = await run([cli, 'export', file])
    expect(noOut.code).toBe(2)
    expect(noOut.err).toContain('missing --out')
  })
})
