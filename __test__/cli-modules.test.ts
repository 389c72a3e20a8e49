// The CLI's pure modules on hand-made inputs: argument parsing, statistics, renderers.
import { describe, expect, it } from 'vitest'

import { parseCommandLine, UsageError } from '../bin/cli/args.js'
import { fallbackText } from '../bin/cli/pieces.js'
import { legend, renderExample } from '../bin/cli/render-text.js'
import { escapeHtml, renderHtml } from '../bin/cli/render-html.js'
import { computeStats, formatStats, histogram, paddingWaste, quantile, summarizeExample, warningKind } from '../bin/cli/stats.js'

describe('parseCommandLine', () => {
  it('fills every default', () => {
    expect(parseCommandLine(['stats', 'd.jsonl'])).toEqual({
      command: 'stats',
      files: ['d.jsonl'],
      options: {
        tokenizer: undefined,
        maxSeqLength: 2048,
        completionOnly: false,
        enableThinking: false,
        seed: 42,
        maskingStrategy: undefined,
        trainOnTurnEnd: undefined,
        trainOnRoles: undefined,
        reasoning: undefined,
        truncation: undefined,
        dropUntrainable: undefined,
        batchSize: 8,
        batching: 'reference',
        maxBatchTokens: undefined,
        padToMultipleOf: 1,
        limit: undefined,
        cache: undefined,
        out: undefined,
        sample: 10000,
        batches: false,
        epoch: 0,
        format: 'reference',
        tools: 'ignore',
        strict: false,
        count: 3,
        indices: undefined,
        html: undefined,
        color: undefined,
        json: false,
        quiet: false,
      },
    })
  })

  it('export --batches takes the batching flags and an epoch', () => {
    const { options } = parseCommandLine(['export', 'd.jsonl', '--out', 'b.parquet', '--batches', '--batching', 'packed', '--batch-size', '4', '--epoch', '2'])
    expect([options.batches, options.batching, options.batchSize, options.epoch, options.out]).toEqual([true, 'packed', 4, 2, 'b.parquet'])
    expect(() => parseCommandLine(['stats', 'd.jsonl', '--batches'])).toThrow('--batches applies only to export')
    expect(() => parseCommandLine(['export', 'd.jsonl', '--out', 'b.parquet', '--epoch', '1'])).toThrow('--epoch applies only to export --batches')
    expect(() => parseCommandLine(['export', 'd.jsonl', '--out', 'b.parquet', '--batches', '--epoch=-1'])).toThrow('--epoch must be an integer >= 0, got "-1"')
  })

  it('reads every flag', () => {
    const { options } = parseCommandLine([
      'preview', 'd.jsonl', '--tokenizer', 't', '--max-seq-length', '512', '--completion-only', '--enable-thinking',
      '--seed', '7', '--batch-size', '2', '--limit', '10', '--index', '5, 17', '--html', 'o.html', '--no-color', '--quiet',
    ])
    expect(options).toMatchObject({
      tokenizer: 't', maxSeqLength: 512, completionOnly: true, enableThinking: true, seed: 7, batchSize: 2,
      limit: 10, indices: [5, 17], html: 'o.html', color: false, quiet: true,
    })
  })

  it('rejects conflicting and malformed flags', () => {
    expect(() => parseCommandLine(['preview', 'd', '-n', '2', '--index', '1'])).toThrow(new UsageError('-n and --index cannot be used together'))
    expect(() => parseCommandLine(['preview', 'd', '--json', '--html', 'x'])).toThrow('--json and --html cannot be used together')
    expect(parseCommandLine(['stats', 'd', 'e']).files).toEqual(['d', 'e'])
    expect(() => parseCommandLine(['stats', 'd', '--seed', '1.5'])).toThrow('--seed must be an integer, got "1.5"')
    expect(() => parseCommandLine(['stats', 'd', '--tokenizer'])).toThrow("Option '--tokenizer <value>' argument missing")
  })
})

describe('stats', () => {
  it('quantiles by nearest rank', () => {
    const values = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    expect(quantile(values, 0.5)).toBe(5)
    expect(quantile(values, 0.95)).toBe(10)
    expect(quantile([4], 0.95)).toBe(4)
  })

  it('bins lengths into equal widths', () => {
    expect(histogram([10, 11, 19, 25], 2)).toEqual([
      { from: 10, to: 17, count: 2 },
      { from: 18, to: 25, count: 2 },
    ])
  })

  it('pads each batch to its longest row, in the given order', () => {
    // Order [2, 0, 1, 3] with batches of 2: [5, 3] -> 10 slots, [4, 1] -> 8 slots.
    expect(paddingWaste([3, 4, 5, 1], Uint32Array.from([2, 0, 1, 3]), 2)).toEqual({
      batchSize: 2, batches: 2, realTokens: 13, paddedTokens: 18, padTokens: 5, share: 5 / 18,
    })
  })

  it('summarises an example from its report entry', () => {
    const entry = { tokens: 5, keptTokens: 4, trainedTokens: 2, truncated: true, turnEndTokens: 2, turnEndTokensTrained: 1 }
    expect(summarizeExample(entry, undefined)).toEqual({ length: 5, kept: 4, trained: 2, truncated: true, eosPresent: 2, eosTrained: 1, warning: null })
  })

  it('classifies warnings', () => {
    expect(warningKind('[SFT Dataset] Prompt tokens differ from prefix of full sequence (10 vs 9). Using common prefix for masking.')).toBe('prefix-mismatch')
    expect(warningKind('something else')).toBe('other')
  })

  it('flags examples without a trained token', () => {
    const s = computeStats(
      [
        { length: 3, kept: 3, trained: 0, eosPresent: 1, eosTrained: 0, warning: null },
        { length: 5, kept: 4, trained: 2, eosPresent: 1, eosTrained: 0, warning: '[SFT Dataset] Prompt tokens differ from prefix' },
      ],
      {
        format: 'conversation',
        maxSeqLength: 4,
        batchSize: 2,
        order: Uint32Array.from([0, 1]),
        eos: { id: 9, token: '<e>' },
        totals: { prefixMismatches: 1, contentMismatchExamples: 2, straddlingTokens: 3, multipleBos: 0 },
      },
    )
    expect(s.noTrainedToken).toBe(1)
    expect(s.noTrainedTokenIndices).toEqual([0])
    expect(s.truncated).toEqual({ examples: 1, share: 0.5 })
    expect(s.trained).toEqual({ tokens: 2, keptTokens: 7, share: 2 / 7 })
    expect(s.warnings).toEqual({ 'prefix-mismatch': 1, other: 0 })
    expect(s.endOfTurn).toEqual({ id: 9, token: '<e>', trained: false, examplesTrained: 0, trainedCount: 0, presentCount: 2 })
    expect(s.padding.padTokens).toBe(1)
    expect(s.checks).toEqual({ prefixMismatches: 1, contentMismatchExamples: 2, straddlingTokens: 3, multipleBos: 0 })
    // Each flagged problem names the option that changes it.
    expect(s.hints).toEqual({
      endOfTurn: 'train it with --train-on-turn-end (selects the spans masking, which trains the turn end by default)',
      truncated: 'raise --max-seq-length, or --truncation turns to drop whole oldest turns instead of cutting tokens',
      noTrainedToken: 'these rows carry no loss: --drop-untrainable skips them; --truncation turns keeps the last trained turn',
      contentNotFound: 'the template rendered some messages without their content (an unknown role or field): see them with preview --index',
    })
    expect(formatStats(s).split('\n').slice(-2)).toEqual([
      'masking checks      prefix mismatches 1 · content not found in 2 examples · straddling tokens 3 · repeated BOS in 0 examples',
      '                    → the template rendered some messages without their content (an unknown role or field): see them with preview --index',
    ])
    expect(formatStats(s)).toContain('end-of-turn trained NO: <e> (id 9) never carries loss, so the model never learns to stop\n                    → train it with --train-on-turn-end')
  })

  it('hints follow the settings already given', () => {
    const summaries = [{ length: 6, kept: 4, trained: 0, eosPresent: 1, eosTrained: 0, warning: null }]
    const context = { format: 'conversation', maxSeqLength: 4, batchSize: 1, order: Uint32Array.from([0]), eos: { id: 9, token: '<e>' }, totals: { prefixMismatches: 0, contentMismatchExamples: 0, straddlingTokens: 0, multipleBos: 0 } }
    const s = computeStats(summaries, { ...context, settings: { trainOnTurnEnd: false, truncation: 'turns', dropUntrainable: true } })
    expect(s.hints).toEqual({
      endOfTurn: 'drop --no-train-on-turn-end to train it',
      truncated: 'raise --max-seq-length to keep more',
      noTrainedToken: 'already skipped by --drop-untrainable',
    })
  })
})

const view = {
  index: 3,
  batch: 0,
  length: 6,
  kept: 4,
  dropped: 2,
  padding: 2,
  padId: 0,
  trained: 2,
  truncated: true,
  warning: null,
  tokens: [
    { id: 1, label: 1, text: 'old', special: false, state: 'dropped' },
    { id: 2, label: 2, text: '\n', special: false, state: 'dropped' },
    { id: 3, label: -100, text: '<s>', special: true, state: 'kept' },
    { id: 4, label: -100, text: 'Q', special: false, state: 'kept' },
    { id: 5, label: 5, text: ' A', special: false, state: 'kept' },
    { id: 6, label: 6, text: '<e>', special: true, state: 'kept' },
  ],
}

describe('renderers', () => {
  it('plain text marks trained runs, drops, specials and padding', () => {
    expect(renderExample(view, { color: false })).toBe(
      'example 3 (batch 0) · tokens 6 · trained 2 of 4 kept (50.0%) · truncated yes, first 2 dropped · padding 2 · warning none\n' +
        '  → truncated: raise --max-seq-length, or --truncation turns to drop whole oldest turns\n' +
        '  ~~old·↵\n' +
        '  ~~✂ ⟦<s>⟧·Q[[ A·⟦<e>⟧]] <pad ×2>',
    )
  })

  it('token boundaries cannot be read as special-token syntax: <tools> is not <|tools|>', () => {
    const tokens = ['<', 'tools', '>', '\n'].map((text, k) => ({ id: k, label: -100, text, special: false, state: 'kept' }))
    const tools = { ...view, length: 4, kept: 4, dropped: 0, padding: 0, trained: 0, truncated: false, tokens }
    const body = renderExample(tools, { color: false }).split('\n').slice(2)
    expect(body).toEqual(['  <·tools·>·↵', '  '])
    expect(body.join('\n')).not.toContain('|')
    expect(legend(false)).toContain('; · token boundary;')
  })

  it('colour output has no plain markers', () => {
    const text = renderExample(view, { color: true })
    expect(text).toContain('\x1b[')
    expect(text).not.toMatch(/\[\[|~~|⟦/)
  })

  it('HTML escapes token text and carries ids and labels', () => {
    expect(escapeHtml(`<a href="x">'&'</a>`)).toBe('&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;')
    const html = renderHtml([view], { title: 't', meta: [['file', 'f']] })
    expect(html).toContain('<span class="tok masked special" tabindex="0" data-id="3" data-label="-100" data-tip="id 3 · label -100">&lt;s&gt;</span>')
    expect(html).toContain('<span class="tok dropped" tabindex="0" data-id="1" data-label="1" data-tip="id 1 · label 1, dropped by truncation">old</span>')
    expect(html).toContain('data-count="2"')
  })

  it('shows split characters as bytes', () => {
    expect(fallbackText('ðŁ')).toBe('<f0 9f>')
    expect(fallbackText('Ġä')).toBe('<20 e4>')
    expect(fallbackText('<0xF0>')).toBe('<0xF0>')
    expect(fallbackText('▁')).toBe('▁')
  })
})
