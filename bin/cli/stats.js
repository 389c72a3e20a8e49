'use strict'
// Dataset statistics from per-example summaries. Pure functions: the command gathers the
// summaries from the library, these turn them into figures and text.

const { IGNORE } = require('./view')

const PREFIX_MISMATCH = /^\[SFT Dataset\] Prompt tokens differ from prefix/

/**
 * What stats needs of one example: its entry of `SFTDataset.report()` (whole length, tokens kept
 * after truncation or 0 when dropped, trained and end-of-turn tokens among them) and its warning.
 */
function summarizeExample(entry, warning) {
  // An example the template fails on has no row: it counts in no figure, only in renderFailures.
  if (entry.renderError) return { length: 0, kept: 0, trained: 0, truncated: false, eosPresent: 0, eosTrained: 0, warning: null, failed: entry.renderError }
  return {
    length: entry.tokens,
    kept: entry.keptTokens,
    trained: entry.trainedTokens,
    truncated: entry.truncated,
    eosPresent: entry.turnEndTokens,
    eosTrained: entry.turnEndTokensTrained,
    warning: warning ?? null,
  }
}

function warningKind(message) {
  return PREFIX_MISMATCH.test(message) ? 'prefix-mismatch' : 'other'
}

/** The value at quantile `q` of sorted `values` (nearest rank). */
function quantile(sorted, q) {
  if (sorted.length === 0) return 0
  const rank = Math.ceil(q * sorted.length)
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]
}

/** Equal-width bins over [min, max]; each `{from, to, count}` with `to` inclusive. */
function histogram(sorted, bins) {
  if (sorted.length === 0) return []
  const min = sorted[0]
  const max = sorted[sorted.length - 1]
  const width = Math.max(1, Math.ceil((max - min + 1) / bins))
  const out = []
  for (let from = min; from <= max; from += width) out.push({ from, to: Math.min(max, from + width - 1), count: 0 })
  for (const v of sorted) out[Math.floor((v - min) / width)].count++
  return out
}

/**
 * Padding of batches of `batchSize` rows taken in `order` (example indices): each batch is
 * as wide as its longest row, capped at `maxSeqLength`.
 */
function paddingWaste(keptLengths, order, batchSize) {
  let real = 0
  let padded = 0
  let batches = 0
  for (let start = 0; start < order.length; start += batchSize) {
    const rows = Array.from(order.slice(start, start + batchSize), (i) => keptLengths[i])
    const width = Math.max(...rows)
    real += rows.reduce((a, b) => a + b, 0)
    padded += rows.length * width
    batches++
  }
  return { batchSize, batches, realTokens: real, paddedTokens: padded, padTokens: padded - real, share: padded === 0 ? 0 : (padded - real) / padded }
}

// For each problem stats can flag, what to do about it: the command-line options that change it.
function hintsFor(stats, settings = {}) {
  const hints = {}
  if (!stats.endOfTurn.trained && stats.examples > 0) {
    hints.endOfTurn = settings.trainOnTurnEnd === false
      ? 'drop --no-train-on-turn-end to train it'
      : 'train it with --train-on-turn-end (selects the spans masking, which trains the turn end by default)'
  }
  if (stats.truncated.examples > 0) {
    hints.truncated = settings.truncation === 'turns'
      ? 'raise --max-seq-length to keep more'
      : 'raise --max-seq-length, or --truncation turns to drop whole oldest turns instead of cutting tokens'
  }
  if (stats.noTrainedToken > 0) {
    hints.noTrainedToken = settings.dropUntrainable
      ? 'already skipped by --drop-untrainable'
      : 'these rows carry no loss: --drop-untrainable skips them; --truncation turns keeps the last trained turn'
  }
  if (stats.checks.contentMismatchExamples > 0) {
    hints.contentNotFound = 'the template rendered some messages without their content (an unknown role or field): see them with preview --index'
  }
  return hints
}

function computeStats(summaries, { format, maxSeqLength, batchSize, order, eos, totals, batching, settings }) {
  const rows = summaries.filter((s) => !s.failed)
  const lengths = rows.map((s) => s.length).sort((a, b) => a - b)
  const kept = rows.reduce((a, s) => a + s.kept, 0)
  const trained = rows.reduce((a, s) => a + s.trained, 0)
  const warnings = { 'prefix-mismatch': 0, other: 0 }
  for (const s of rows) if (s.warning) warnings[warningKind(s.warning)]++
  const truncated = rows.filter((s) => s.truncated ?? s.length > maxSeqLength).length
  const eosExamples = rows.filter((s) => s.eosTrained > 0).length
  const untrained = summaries.flatMap((s, i) => (!s.failed && s.trained === 0 ? [i] : []))
  const stats = {
    examples: summaries.length,
    renderFailures: summaries.flatMap((s, i) => (s.failed ? [{ example: i, message: s.failed }] : [])),
    format,
    maxSeqLength,
    tokens: {
      total: lengths.reduce((a, b) => a + b, 0),
      min: lengths[0] ?? 0,
      median: quantile(lengths, 0.5),
      p95: quantile(lengths, 0.95),
      max: lengths[lengths.length - 1] ?? 0,
      histogram: histogram(lengths, 8),
    },
    truncated: { examples: truncated, share: rows.length ? truncated / rows.length : 0 },
    trained: { tokens: trained, keptTokens: kept, share: kept ? trained / kept : 0 },
    noTrainedToken: untrained.length,
    noTrainedTokenIndices: untrained,
    warnings,
    endOfTurn: {
      id: eos.id,
      token: eos.token,
      trained: eosExamples > 0,
      examplesTrained: eosExamples,
      trainedCount: summaries.reduce((a, s) => a + s.eosTrained, 0),
      presentCount: summaries.reduce((a, s) => a + s.eosPresent, 0),
    },
    padding: paddingWaste(
      summaries.map((s) => s.kept),
      order,
      batchSize,
    ),
    // From SFTDataset.batchingStats(): every strategy's epoch side by side.
    batching,
    // From SFTDataset.report(): what the masking could not verify.
    checks: {
      prefixMismatches: totals.prefixMismatches,
      contentMismatchExamples: totals.contentMismatchExamples,
      straddlingTokens: totals.straddlingTokens,
      multipleBos: totals.multipleBos,
    },
  }
  return { ...stats, hints: hintsFor(stats, settings) }
}

function pct(share) {
  return `${(100 * share).toFixed(1)}%`
}

/** The strategies side by side: batches, tokens computed and the padding share of each. */
function batchingLines(b, batchSize) {
  if (b == null) return []
  const header = `batching            at batch size ${batchSize}, max-batch-tokens ${b.maxBatchTokens}, pad-to-multiple-of ${b.padToMultipleOf} (epoch-0 order; * chosen)`
  const names = b.strategies.map((s) => s.batching)
  const width = Math.max(...names.map((n) => n.length))
  const rows = b.strategies.map((s) => {
    const mark = s.batching === b.chosen ? '*' : ' '
    return `    ${mark} ${s.batching.padEnd(width)}  ${String(s.batches).padStart(7)} batches  ${String(s.computedTokens).padStart(11)} tokens computed  ${pct(s.paddingShare).padStart(6)} padding`
  })
  if (!names.includes('packed')) rows.push('      packed: not possible, max-batch-tokens is below max-seq-length')
  return [header, ...rows]
}

function formatStats(stats) {
  const t = stats.tokens
  const bar = Math.max(1, ...t.histogram.map((b) => b.count))
  const labelWidth = Math.max(...t.histogram.map((b) => `${b.from}–${b.to}`.length), 1)
  const hist = t.histogram.map((b) => {
    const label = `${b.from}–${b.to}`.padStart(labelWidth)
    const marks = '█'.repeat(Math.round((30 * b.count) / bar)) || (b.count > 0 ? '▏' : '')
    const max = stats.maxSeqLength
    const over = b.from > max ? '  (truncated)' : b.to > max ? `  (truncated above ${max})` : ''
    return `    ${label} │${marks} ${b.count}${over}`
  })
  const eot = stats.endOfTurn
  const eotLine = eot.trained
    ? `yes: ${eot.token} (id ${eot.id}) trained in ${eot.examplesTrained} of ${stats.examples} examples`
    : `NO: ${eot.token} (id ${eot.id}) never carries loss, so the model never learns to stop`
  const p = stats.padding
  const c = stats.checks
  const h = stats.hints ?? {}
  const hint = (key) => (h[key] ? [`                    → ${h[key]}`] : [])
  const failures = stats.renderFailures ?? []
  const failureLines = failures.length
    ? [
        `fail to render      ${failures.length} (left out; loadSFTDataset fails on them unless dropUnrenderable): ${failures
          .slice(0, 3)
          .map((f) => `example ${f.example}: ${f.message}`)
          .join('; ')}${failures.length > 3 ? '; …' : ''}`,
      ]
    : []
  return [
    `examples            ${stats.examples}`,
    ...failureLines,
    `format              ${stats.format}`,
    `tokens per example  min ${t.min} · median ${t.median} · p95 ${t.p95} · max ${t.max} · total ${t.total}`,
    ...hist,
    `truncated           ${stats.truncated.examples} of ${stats.examples} (${pct(stats.truncated.share)}) at max-seq-length ${stats.maxSeqLength}`,
    ...hint('truncated'),
    `trained tokens      ${stats.trained.tokens} of ${stats.trained.keptTokens} kept (${pct(stats.trained.share)})`,
    `no trained token    ${stats.noTrainedToken}${stats.noTrainedToken ? ` (examples ${stats.noTrainedTokenIndices.slice(0, 10).join(', ')}${stats.noTrainedToken > 10 ? ', …' : ''})` : ''}`,
    ...hint('noTrainedToken'),
    `warnings            prefix-mismatch ${stats.warnings['prefix-mismatch']} · other ${stats.warnings.other}`,
    `end-of-turn trained ${eotLine}`,
    ...hint('endOfTurn'),
    `padding waste       ${pct(p.share)} at batch size ${p.batchSize}: ${p.padTokens} pad tokens of ${p.paddedTokens} in ${p.batches} batch${p.batches === 1 ? '' : 'es'} (epoch-0 order)`,
    ...batchingLines(stats.batching, p.batchSize),
    `masking checks      prefix mismatches ${c.prefixMismatches} · content not found in ${c.contentMismatchExamples} example${c.contentMismatchExamples === 1 ? '' : 's'} · straddling tokens ${c.straddlingTokens} · repeated BOS in ${c.multipleBos} example${c.multipleBos === 1 ? '' : 's'}`,
    ...hint('contentNotFound'),
  ].join('\n')
}

module.exports = { summarizeExample, computeStats, formatStats, quantile, histogram, paddingWaste, warningKind }
