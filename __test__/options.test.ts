// The option objects of createSFTDataset, validateSFTFile, loadSFTDataset and exportSFTParquet:
// a key the dataset does not know, or a masking setting that cannot change anything, is one
// SFTDataWarning per call naming it (and the key most likely meant); an option of the wrong JS
// type is an INVALID_ARGUMENT naming the option. The lists of known options in lib/options.js
// are the fields of the typings.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import ts from 'typescript'
import { afterAll, describe, expect, it } from 'vitest'

import * as lib from '../lib/index.js'
import { DATASET_OPTIONS, EXPORT_OPTIONS, LOAD_OPTIONS, nearestOption } from '../lib/options.js'
import { repoRoot, tokenizer } from './helpers'

const tok = tokenizer('qwen3')
const sample = join(repoRoot, 'examples', 'sample.jsonl')
const examples = [
  { messages: [{ role: 'user', content: 'What is 2+2?' }, { role: 'assistant', content: '<think>\nAdd.\n</think>\n\n4' }] },
] as lib.SFTExample[]
const out = mkdtempSync(join(tmpdir(), 'sft-options-'))
afterAll(() => rmSync(out, { recursive: true, force: true }))

/** The data warnings `call` emits, as `[code, message]`, in order. */
async function warningsOf(call: () => unknown): Promise<Array<[string, string]>> {
  const seen: Array<[string, string]> = []
  const listener = (w: Error & { code?: string }) => {
    if (w.name === 'SFTDataWarning') seen.push([w.code ?? '', w.message])
  }
  process.on('warning', listener)
  try {
    await call()
    // Node emits process warnings on the next tick.
    await new Promise((resolve) => setTimeout(resolve, 20))
    return seen
  } finally {
    process.off('warning', listener)
  }
}

/** `name -> sorted JS types` of the members of an interface or type literal. */
function membersOf(node: ts.InterfaceDeclaration | ts.TypeLiteralNode): Record<string, string[]> {
  const kinds = (type: ts.TypeNode): string[] => {
    if (ts.isUnionTypeNode(type)) return type.types.flatMap(kinds)
    if (ts.isParenthesizedTypeNode(type)) return kinds(type.type)
    if (type.kind === ts.SyntaxKind.NumberKeyword) return ['number']
    if (type.kind === ts.SyntaxKind.BooleanKeyword) return ['boolean']
    if (type.kind === ts.SyntaxKind.StringKeyword) return ['string']
    if (ts.isLiteralTypeNode(type) && ts.isStringLiteral(type.literal)) return ['string']
    if (ts.isArrayTypeNode(type) || (ts.isTypeReferenceNode(type) && type.typeName.getText() === 'Array')) return ['array']
    if (ts.isFunctionTypeNode(type)) return ['function']
    return ['object']
  }
  const members: Record<string, string[]> = {}
  for (const m of node.members) {
    if (ts.isPropertySignature(m) && m.type) members[m.name.getText()] = [...new Set(kinds(m.type))].sort()
  }
  return members
}

function declarations(file: string): ts.SourceFile {
  return ts.createSourceFile(file, readFileSync(join(repoRoot, file), 'utf8'), ts.ScriptTarget.Latest, true)
}

function interfaceMembers(source: ts.SourceFile, name: string) {
  const found = source.statements.find((s): s is ts.InterfaceDeclaration => ts.isInterfaceDeclaration(s) && s.name.text === name)
  if (!found) throw new Error(`no interface ${name}`)
  return membersOf(found)
}

const sortedTypes = (options: Record<string, string[]>) => Object.fromEntries(Object.entries(options).map(([k, v]) => [k, [...v].sort()]))

describe('the known options are the fields of the typings', () => {
  const generated = declarations('index.d.ts')

  it('SFTDatasetConfig: createSFTDataset, validateSFTFile', () => {
    expect(sortedTypes(DATASET_OPTIONS)).toEqual(interfaceMembers(generated, 'SFTDatasetConfig'))
  })

  it('LoadSFTDatasetOptions: loadSFTDataset, the config of exportSFTParquet', () => {
    expect(sortedTypes(LOAD_OPTIONS)).toEqual(interfaceMembers(generated, 'LoadSFTDatasetOptions'))
  })

  it("exportSFTParquet's last argument", () => {
    const source = declarations('lib/index.d.ts')
    const fn = source.statements.find((s): s is ts.FunctionDeclaration => ts.isFunctionDeclaration(s) && s.name?.text === 'exportSFTParquet')!
    const options = fn.parameters[4].type as ts.UnionTypeNode
    const literal = options.types.find(ts.isTypeLiteralNode)!
    expect(sortedTypes(EXPORT_OPTIONS)).toEqual(membersOf(literal))
  })
})

describe('unknown options', () => {
  it('a misspelt key names the known one it was meant as', async () => {
    expect(await warningsOf(() => lib.createSFTDataset(examples, tok, { completion_only: true } as never))).toEqual([
      [
        'UNKNOWN_OPTION',
        '[SFT Dataset] UNKNOWN_OPTION: createSFTDataset: unknown option "completion_only" (did you mean "completionOnly"?); it is ignored',
      ],
    ])
  })

  it('new SFTDataset warns as createSFTDataset does', async () => {
    expect(await warningsOf(() => new lib.SFTDataset(examples, tok, { completion_only: true } as never))).toEqual([
      [
        'UNKNOWN_OPTION',
        '[SFT Dataset] UNKNOWN_OPTION: new SFTDataset: unknown option "completion_only" (did you mean "completionOnly"?); it is ignored',
      ],
    ])
  })

  it('several keys are one warning for the call, each with where it belongs', async () => {
    const config = { MAX_SEQ_LENGTH: 64, maskStrategy: 'spans', limit: 2, batch_size: 8, colour: 'red' }
    expect(await warningsOf(() => lib.createSFTDataset(examples, tok, config as never))).toEqual([
      [
        'UNKNOWN_OPTION',
        '[SFT Dataset] UNKNOWN_OPTION: createSFTDataset: unknown options "MAX_SEQ_LENGTH" (did you mean "maxSeqLength"?), ' +
          '"maskStrategy" (did you mean "maskingStrategy"?), "limit" (an option of loadSFTDataset only), ' +
          '"batch_size" (did you mean "batchSize"? the batch size is the argument of batches() and numBatches(), not a dataset option) ' +
          'and "colour"; they are ignored',
      ],
    ])
  })

  it('the key is ignored: the rows are those of the config without it', async () => {
    const plain = await lib.createSFTDataset(examples, tok).tokenizeExample(0)
    let typo: lib.TokenizedExample | undefined
    await warningsOf(async () => {
      typo = await lib.createSFTDataset(examples, tok, { completion_only: true } as never).tokenizeExample(0)
    })
    expect(Array.from(typo!.labels)).toEqual(Array.from(plain.labels))
    expect(Array.from(plain.labels)).toEqual(Array.from(plain.inputIds))
  })

  it('loadSFTDataset and validateSFTFile warn under their own names, once per call', async () => {
    const config = { maxSeqLen: 64, allowedRoot: repoRoot, limit: 2 }
    expect(await warningsOf(() => lib.loadSFTDataset(sample, tok, config as never))).toEqual([
      ['UNKNOWN_OPTION', '[SFT Dataset] UNKNOWN_OPTION: loadSFTDataset: unknown option "maxSeqLen" (did you mean "maxSeqLength"?); it is ignored'],
    ])
    expect(await warningsOf(() => lib.validateSFTFile(sample, tok, { enable_thinking: true } as never))).toEqual([
      ['UNKNOWN_OPTION', '[SFT Dataset] UNKNOWN_OPTION: validateSFTFile: unknown option "enable_thinking" (did you mean "enableThinking"?); it is ignored'],
    ])
    const twice = await warningsOf(async () => {
      lib.createSFTDataset(examples, tok, { seeed: 1 } as never)
      lib.createSFTDataset(examples, tok, { seeed: 1 } as never)
    })
    expect(twice.map(([, m]) => m)).toEqual(Array(2).fill('[SFT Dataset] UNKNOWN_OPTION: createSFTDataset: unknown option "seeed" (did you mean "seed"?); it is ignored'))
  })

  it('exportSFTParquet checks both of its option arguments in one warning', async () => {
    const file = join(out, 'rows.parquet')
    const warnings = await warningsOf(() =>
      lib.exportSFTParquet(sample, tok, file, { allowedRoot: repoRoot, limit: 2, batch_size: 4 } as never, { batchSize: 4, maxSeqLength: 64 } as never),
    )
    expect(warnings).toEqual([
      [
        'UNKNOWN_OPTION',
        '[SFT Dataset] UNKNOWN_OPTION: exportSFTParquet: unknown options "batch_size" (did you mean "batchSize"? an option of the last argument of exportSFTParquet) ' +
          'and "maxSeqLength" (an option of the config argument of exportSFTParquet, not of its last); they are ignored',
      ],
    ])
  })

  it('a config of known keys, renderAs among them, warns nothing', async () => {
    const config = { maxSeqLength: 64, completionOnly: 'auto', maskingStrategy: 'spans', trainOnRoles: ['assistant'], renderAs: 'transformers', seed: 1 }
    expect(await warningsOf(() => lib.createSFTDataset(examples, tok, config as lib.SFTDatasetConfig))).toEqual([])
    expect(await warningsOf(() => lib.loadSFTDataset(sample, tok, { ...config, limit: 2, allowedRoot: repoRoot, onProgress: () => {} } as lib.LoadSFTDatasetOptions))).toEqual([])
  })

  it('the nearest known key: case, underscores and dashes aside, else a small edit distance', () => {
    const known = Object.keys(LOAD_OPTIONS)
    expect(nearestOption('completion_only', known)).toBe('completionOnly')
    expect(nearestOption('Max-Seq-Length', known)).toBe('maxSeqLength')
    expect(nearestOption('maxSeqLen', known)).toBe('maxSeqLength')
    expect(nearestOption('trainOnRole', known)).toBe('trainOnRoles')
    expect(nearestOption('allowed_root', known)).toBe('allowedRoot')
    expect(nearestOption('colour', known)).toBe(null)
    expect(nearestOption('learningRate', known)).toBe(null)
  })
})

describe('masking settings without completionOnly', () => {
  it.each([
    [{ maskingStrategy: 'spans' }, "maskingStrategy: 'spans' has no effect"],
    [{ maskingStrategy: 'spans', completionOnly: false, trainOnTurnEnd: false, reasoning: 'mask' }, "maskingStrategy: 'spans', trainOnTurnEnd and reasoning have no effect"],
    [{ trainOnRoles: ['user', 'assistant'] }, 'trainOnRoles has no effect'],
  ])('%j warns that it changes nothing, and it does not', async (config, said) => {
    let labels: number[] = []
    const warnings = await warningsOf(async () => {
      labels = Array.from((await lib.createSFTDataset(examples, tok, config as lib.SFTDatasetConfig).tokenizeExample(0)).labels)
    })
    expect(warnings).toEqual([['INERT_OPTION', `[SFT Dataset] INERT_OPTION: createSFTDataset: ${said} without completionOnly: true (every token is trained)`]])
    const plain = await lib.createSFTDataset(examples, tok).tokenizeExample(0)
    expect(labels).toEqual(Array.from(plain.labels))
  })

  it("'generation' too, through loadSFTDataset", async () => {
    const warnings = await warningsOf(() =>
      lib.loadSFTDataset(sample, tok, { maskingStrategy: 'generation', allowedRoot: repoRoot, limit: 1 }).catch(() => null),
    )
    expect(warnings[0]).toEqual([
      'INERT_OPTION',
      "[SFT Dataset] INERT_OPTION: loadSFTDataset: maskingStrategy: 'generation' has no effect without completionOnly: true (every token is trained)",
    ])
  })

  it("with completionOnly true or 'auto' they train what they say", async () => {
    for (const completionOnly of [true, 'auto'] as const) {
      const config = { maskingStrategy: 'spans', completionOnly, reasoning: 'mask' } as const
      expect(await warningsOf(() => lib.createSFTDataset(examples, tok, config))).toEqual([])
    }
  })
})
