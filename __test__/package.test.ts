// What `npm pack` puts in the main package (the same `files` that scripts/package.js stages):
// the documentation and examples with every file their relative links name, so that the README
// and docs read the same in node_modules as in the repository, and the links of the registry
// page (repository, homepage, bugs).
import { execFileSync } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { join, posix } from 'node:path'
import { describe, expect, it } from 'vitest'

import { repoRoot } from './helpers'

const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8'))
// --ignore-scripts: packing must not build the addon.
const [packed] = JSON.parse(execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: repoRoot, encoding: 'utf8' }))
const shipped = new Set<string>(packed.files.map((f: { path: string }) => f.path))

/** The file part of every relative link of a markdown text, outside code. */
function relativeLinks(markdown: string): string[] {
  const prose = markdown.replace(/^\s*(`{3,}|~{3,})[\s\S]*?^\s*\1\s*$/gm, '').replace(/`[^`\n]*`/g, '')
  return [...prose.matchAll(/\]\(([^)\s]+)\)/g)]
    .map(([, target]) => target.split('#')[0])
    .filter((target) => target !== '' && !/^[a-z]+:/i.test(target))
}

describe('the published package', () => {
  it('carries every page of docs/ and every file of examples/', () => {
    for (const folder of ['docs', 'examples']) {
      const files = readdirSync(join(repoRoot, folder)).map((f) => `${folder}/${f}`)
      expect(files.length).toBeGreaterThan(3)
      expect(files.filter((f) => !shipped.has(f))).toEqual([])
    }
    expect([...shipped].filter((f) => /^(src|__test__|tests|bench|scripts|fuzz)\/|\.(rs|node)$/.test(f))).toEqual([])
  })

  it('carries every file that a shipped page links to', () => {
    const pages = [...shipped].filter((f) => f.endsWith('.md'))
    expect(pages).toEqual(expect.arrayContaining(['README.md', 'docs/api.md', 'docs/cli.md', 'BENCHMARKS.md', 'CONTRIBUTING.md']))
    const missing: string[] = []
    let links = 0
    for (const page of pages) {
      for (const target of relativeLinks(readFileSync(join(repoRoot, page), 'utf8'))) {
        links++
        const linked = posix.normalize(posix.join(posix.dirname(page), target))
        if (!shipped.has(linked)) missing.push(`${page} -> ${target}`)
      }
    }
    expect(links).toBeGreaterThan(50)
    expect(missing).toEqual([])
  })

  it('names its repository, home page and issue tracker', () => {
    expect(pkg.repository).toEqual({ type: 'git', url: 'git+https://github.com/sft-dataset/sft-dataset.git' })
    expect(pkg.homepage).toBe('https://github.com/sft-dataset/sft-dataset#readme')
    expect(pkg.bugs).toEqual({ url: 'https://github.com/sft-dataset/sft-dataset/issues' })
  })
})
