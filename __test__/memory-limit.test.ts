// memoryBudget under a hard memory limit: a child process in a cgroup (v1 memory controller)
// whose limit lies between what a load with its rows in memory needs and what a load within a
// small budget needs. The first is killed by the kernel; the second completes and gives the
// batches and order of an unlimited load. Where no cgroup can be made (not Linux, not root, no
// v1 memory controller), the limit is the budget's own accounting: the rows held in memory never
// exceed the budget.
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, rmdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

import { repoRoot, tokenizerDir } from './helpers'

const MB = 1 << 20
const scratch = mkdtempSync(join(tmpdir(), 'sft-memlimit-'))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

const WORDS = 'alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau'.split(' ')

/** `mb` MB of unique prompt-completion records. */
function generate(mb: number): string {
  const file = join(scratch, `data-${mb}.jsonl`)
  const lines: string[] = []
  let size = 0
  for (let i = 0; size < mb * MB; i++) {
    const words: string[] = []
    for (let k = 0; k < 200; k++) words.push(WORDS[(i * 5 + k * 11 + ((k * k) % 7)) % WORDS.length] + (k % 19 === 0 ? ` ${i}` : ''))
    const text = words.join(' ')
    const line = JSON.stringify({ prompt: [{ role: 'user', content: `task ${i}: ${text.slice(0, 100)}` }], completion: { role: 'assistant', content: text } })
    lines.push(line)
    size += line.length + 1
  }
  writeFileSync(file, lines.join('\n') + '\n')
  return file
}

const child = join(scratch, 'child.js')
writeFileSync(
  child,
  `'use strict'
const { createHash } = require('node:crypto')
const fs = require('node:fs')
const path = require('node:path')
const lib = require(${JSON.stringify(join(repoRoot, 'lib'))})
const anon = () => Number(/RssAnon:\\s+(\\d+) kB/.exec(fs.readFileSync('/proc/self/status', 'utf8'))[1]) * 1024
;(async () => {
  const [file, optionsJson] = process.argv.slice(2)
  const tok = await lib.Tokenizer.fromPretrained(${JSON.stringify(tokenizerDir('qwen3'))})
  let peak = anon()
  const sampler = setInterval(() => { peak = Math.max(peak, anon()) }, 2)
  const ds = await lib.loadSFTDataset(file, tok, { allowedRoot: path.dirname(file), ...JSON.parse(optionsJson) })
  clearInterval(sampler)
  peak = Math.max(peak, anon())
  const hash = createHash('sha256')
  ds.shuffleForEpoch(1)
  hash.update(Buffer.from(ds.order().buffer))
  for await (const b of ds.batches(8)) {
    hash.update(Buffer.from(b.inputIds.buffer, b.inputIds.byteOffset, b.inputIds.byteLength))
    hash.update(Buffer.from(b.labels.buffer, b.labels.byteOffset, b.labels.byteLength))
  }
  console.log(JSON.stringify({ length: ds.length, memory: ds.memory, anonPeak: peak, digest: hash.digest('hex') }))
})().catch((e) => { console.error(e.code, e.message); process.exit(1) })
`,
)

interface Result {
  status: number | null
  signal: string | null
  out?: { length: number; memory: { rows: string; residentBytes: number; mappedBytes: number; budget: number; peakBytes: number }; anonPeak: number; digest: string }
}

/** Runs the child on `file`, inside cgroup `cgroup` when given. */
function run(file: string, options: Record<string, unknown>, cgroup?: string): Result {
  const tmp = join(scratch, `tmp-${Math.random().toString(36).slice(2)}`)
  mkdirSync(tmp)
  const env = { ...process.env, TMPDIR: tmp, MIMALLOC_PURGE_DELAY: '0' }
  const args = [child, file, JSON.stringify(options)]
  const r = cgroup
    ? spawnSync('/bin/sh', ['-c', `echo $$ > ${cgroup}/cgroup.procs && exec "$0" "$@"`, process.execPath, ...args], { env, encoding: 'utf8' })
    : spawnSync(process.execPath, args, { env, encoding: 'utf8' })
  const last = r.stdout?.trim().split('\n').pop()
  return { status: r.status, signal: r.signal, out: r.status === 0 && last ? JSON.parse(last) : undefined }
}

const controller = '/sys/fs/cgroup/memory'
const canLimit = process.platform === 'linux' && process.getuid?.() === 0 && existsSync(join(controller, 'cgroup.procs'))

describe('a load under a hard memory limit', () => {
  const budget = 16 * MB
  const file = generate(canLimit ? 120 : 20)
  let free: Result
  beforeAll(() => {
    free = run(file, {})
  })

  if (canLimit) {
    const cgroup = join(controller, `sft-test-${process.pid}`)
    afterAll(() => {
      try {
        rmdirSync(cgroup)
      } catch {}
    })

    it('kills the load that keeps its rows in memory, and not the one within the budget', () => {
      expect(free.status).toBe(0)
      const rows = free.out!.memory.residentBytes
      expect(free.out!.memory.rows).toBe('memory')
      expect(rows).toBeGreaterThan(100 * MB)
      // A quarter of the rows below the anonymous memory the unlimited load needed: the budgeted
      // load needs the rows' worth less, and the rest of the limit leaves room for the page
      // cache of the data file and of the rows' file being written (charged to the cgroup,
      // reclaimable once written back).
      const limit = Math.round(free.out!.anonPeak - rows / 4)
      mkdirSync(cgroup, { recursive: true })
      writeFileSync(join(cgroup, 'memory.limit_in_bytes'), String(limit))
      try {
        writeFileSync(join(cgroup, 'memory.swappiness'), '0')
      } catch {}
      const killed = run(file, {}, cgroup)
      expect(killed.status).toBeNull()
      expect(killed.signal).toBe('SIGKILL')
      const bounded = run(file, { memoryBudget: budget }, cgroup)
      expect(bounded.status).toBe(0)
      expect(bounded.out!.memory.rows).toBe('mapped')
      expect(bounded.out!.memory.peakBytes).toBeLessThanOrEqual(budget)
      expect(bounded.out!.length).toBe(free.out!.length)
      expect(bounded.out!.digest).toBe(free.out!.digest)
    })
  } else {
    it('keeps the rows held in memory within the budget (no cgroup here: the budget is the limit)', () => {
      const bounded = run(file, { memoryBudget: budget })
      expect(free.status).toBe(0)
      expect(bounded.status).toBe(0)
      expect(bounded.out!.memory.rows).toBe('mapped')
      expect(bounded.out!.memory.peakBytes).toBeLessThanOrEqual(budget)
      expect(bounded.out!.memory.residentBytes).toBeLessThan(free.out!.memory.residentBytes)
      expect(bounded.out!.digest).toBe(free.out!.digest)
    })
  }
})
