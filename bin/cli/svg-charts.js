'use strict'
// Inline SVG charts for the data report. Colours come from CSS classes (the page's variables)
// and text from currentColor, so one drawing reads in light and dark mode; each chart scales to
// the width of its box through its viewBox. Every chart carries a <title> and a <desc> saying
// its figures, for screen readers and for anyone who cannot see the bars.

const { escapeHtml } = require('./render-html')

// The drawing width in viewBox units; text sizes are in the same units, so they scale with it.
const WIDTH = 480
const FONT = 13
const TICK_FONT = 12
// Average glyph width of the page's sans-serif font relative to its size, to make room for labels.
const GLYPH = 0.6

const COUNT = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 })

/** A count with thousands separators (1,234,567): how every count in the report is written. */
function formatCount(n) {
  return COUNT.format(n)
}

/** An axis tick label: separators below a million, then millions, so neighbours never collide. */
function tickLabel(n) {
  if (Math.abs(n) < 1e6) return formatCount(n)
  return `${Number((n / 1e6).toFixed(1))}M`
}

/**
 * Round tick values (steps of 1, 2 or 5 times a power of ten) covering [min, max], about `count`
 * of them. `integer` keeps the step at least 1, for counts of examples.
 */
function niceTicks(min, max, count = 5, integer = false) {
  const span = max - min
  if (!(span > 0)) return [min]
  const rough = span / count
  const magnitude = 10 ** Math.floor(Math.log10(rough))
  const norm = rough / magnitude
  let step = (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * magnitude
  if (integer) step = Math.max(1, step)
  const ticks = []
  for (let k = Math.ceil(min / step - 1e-9); k * step <= max + step * 1e-9; k++) ticks.push(Number((k * step).toPrecision(12)))
  return ticks
}

/** The smallest round tick at or above `max`: the top of a value axis, so no bar touches the frame. */
function axisTop(max, count = 5) {
  const ticks = niceTicks(0, Math.max(1, max), count, true)
  const last = ticks[ticks.length - 1]
  if (last >= max) return { top: last, ticks }
  const step = ticks.length > 1 ? ticks[1] - ticks[0] : last
  return { top: last + step, ticks: [...ticks, last + step] }
}

/** Whether tick labels side by side along `room` units spanning `span` values leave a gap between them. */
function labelsFit(ticks, span, room, format) {
  if (ticks.length < 2) return true
  const gap = ((ticks[1] - ticks[0]) / span) * room
  return gap >= Math.max(...ticks.map((t) => textWidth(format(t), TICK_FONT))) + 8
}

/** A horizontal value axis from 0 with as many ticks as fit, up to `count`: no labels overlap on a narrow chart. */
function valueAxis(max, count, room) {
  for (let n = count; n > 1; n--) {
    const axis = axisTop(max, n)
    if (labelsFit(axis.ticks, axis.top, room, tickLabel)) return axis
  }
  return axisTop(max, 1)
}

/** Ticks over [lo, hi], as many as fit in `room` units, up to `count`. */
function spreadTicks(lo, hi, room, format, count = 6) {
  for (let n = count; n > 1; n--) {
    const ticks = niceTicks(lo, hi, n)
    if (labelsFit(ticks, hi - lo, room, format)) return ticks
  }
  return niceTicks(lo, hi, 1)
}

/** A coordinate with at most one decimal: keeps the markup short and stable across runs. */
function r(v) {
  return Math.round(v * 10) / 10
}

/** Room a label of `text` takes at `size` (an estimate: SVG text cannot be measured without a script). */
function textWidth(text, size = FONT) {
  return String(text).length * size * GLYPH
}

/**
 * The outer <svg>: an image to assistive technology, named by its title and described by its
 * desc. The width and height attributes are a fallback for viewers without the page's CSS.
 */
function svgFrame(id, height, title, desc, body) {
  return `<svg class="chart" id="${id}" role="img" aria-labelledby="${id}-title ${id}-desc" viewBox="0 0 ${WIDTH} ${height}" width="100%" height="${height}" font-size="${FONT}" fill="currentColor">
<title id="${id}-title">${escapeHtml(title)}</title>
<desc id="${id}-desc">${escapeHtml(desc)}</desc>
${body}
</svg>`
}

/** A piece of text; `anchor` is start, middle or end, `extra` more attributes. */
function text(x, y, content, { anchor = 'start', cls = '', extra = '' } = {}) {
  const klass = cls ? ` class="${cls}"` : ''
  return `<text x="${r(x)}" y="${r(y)}" text-anchor="${anchor}"${klass}${extra}>${escapeHtml(content)}</text>`
}

/** A tick label, in the smaller size the label widths are estimated for. */
function tickText(x, y, value, format, anchor) {
  return text(x, y, format(value), { anchor, cls: 'tick', extra: ` font-size="${TICK_FONT}"` })
}

/** A rectangle with a tooltip (its `<title>`), for one bar or one part of a bar. */
function bar(x, y, w, h, cls, tip) {
  return `<rect class="${cls}" x="${r(x)}" y="${r(y)}" width="${r(Math.max(0, w))}" height="${r(Math.max(0, h))}"><title>${escapeHtml(tip)}</title></rect>`
}

/**
 * A histogram: one column per bin over a continuous x axis, counts up the y axis.
 * `spec`: `{ id, title, desc, bins: [{ x0, x1, count, cls, tip }], domain: [lo, hi], xTitle,
 * yTitle, xFormat, xTicks?, marker?: { at, label }, shadeFrom? }`. `shadeFrom` tints the plot
 * from that x to the right edge (the region past a limit); `marker` draws a labelled vertical line.
 */
function histogramChart(spec) {
  const height = 300
  const m = { left: 64, right: 16, top: spec.marker ? 30 : 12, bottom: 56 }
  const plotW = WIDTH - m.left - m.right
  const plotH = height - m.top - m.bottom
  const [lo, hi] = spec.domain
  const x = (v) => m.left + ((Math.min(hi, Math.max(lo, v)) - lo) / (hi - lo || 1)) * plotW
  const { top, ticks: yTicks } = axisTop(Math.max(0, ...spec.bins.map((b) => b.count)))
  const y = (v) => m.top + plotH - (v / top) * plotH
  const bottom = m.top + plotH
  const parts = []
  if (spec.shadeFrom !== undefined && spec.shadeFrom < hi) {
    parts.push(`<rect class="shade" x="${r(x(spec.shadeFrom))}" y="${m.top}" width="${r(m.left + plotW - x(spec.shadeFrom))}" height="${plotH}"/>`)
  }
  for (const t of yTicks) {
    parts.push(`<line class="grid" x1="${m.left}" x2="${m.left + plotW}" y1="${r(y(t))}" y2="${r(y(t))}"/>`)
    parts.push(tickText(m.left - 6, y(t) + TICK_FONT * 0.35, t, tickLabel, 'end'))
  }
  for (const b of spec.bins) {
    // A hairline gap between columns keeps neighbouring bins apart at any scale.
    parts.push(bar(x(b.x0) + 0.5, y(b.count), x(b.x1) - x(b.x0) - 1, bottom - y(b.count), b.cls, b.tip))
  }
  parts.push(`<line class="axis" x1="${m.left}" x2="${m.left + plotW}" y1="${bottom}" y2="${bottom}"/>`)
  const xFormat = spec.xFormat ?? tickLabel
  for (const t of spec.xTicks ?? spreadTicks(lo, hi, plotW, xFormat)) {
    parts.push(`<line class="axis" x1="${r(x(t))}" x2="${r(x(t))}" y1="${bottom}" y2="${bottom + 5}"/>`)
    parts.push(tickText(x(t), bottom + 5 + TICK_FONT, t, xFormat, 'middle'))
  }
  if (spec.marker) parts.push(markerLine(x(spec.marker.at), m.top, bottom, spec.marker.label, m.left, m.left + plotW))
  parts.push(text(m.left + plotW / 2, height - 8, spec.xTitle, { anchor: 'middle', cls: 'axis-title' }))
  parts.push(text(16, m.top + plotH / 2, spec.yTitle, { anchor: 'middle', cls: 'axis-title', extra: ` transform="rotate(-90 16 ${r(m.top + plotH / 2)})"` }))
  return svgFrame(spec.id, height, spec.title, spec.desc, parts.join('\n'))
}

/** A dashed vertical line with its label above the plot, kept inside [left, right]. */
function markerLine(at, top, bottom, label, left, right) {
  const room = textWidth(label)
  const anchor = at + room / 2 > right ? 'end' : at - room / 2 < left ? 'start' : 'middle'
  return `<g class="marker"><line x1="${r(at)}" x2="${r(at)}" y1="${top - 6}" y2="${bottom}"/>${text(at, top - 10, label, { anchor, cls: 'marker-label' })}</g>`
}

/**
 * Horizontal stacked bars, one row per category, all on one value axis.
 * `spec`: `{ id, title, desc, rows: [{ label, cls?, parts: [{ value, cls, tip }], note }], xTitle }`.
 * The label sits left of its bar and the note (a share, say) in a column on the right.
 */
function stackedBarChart(spec) {
  const rowH = 30
  const labelW = Math.min(200, Math.max(...spec.rows.map((row) => textWidth(row.label)), 40) + 12)
  const noteW = Math.max(...spec.rows.map((row) => textWidth(row.note)), 30) + 12
  const m = { left: labelW, right: noteW, top: 8, bottom: 48 }
  const height = m.top + spec.rows.length * rowH + m.bottom
  const plotW = WIDTH - m.left - m.right
  const totals = spec.rows.map((row) => row.parts.reduce((sum, p) => sum + p.value, 0))
  const { top, ticks } = valueAxis(Math.max(0, ...totals), 5, plotW)
  const x = (v) => m.left + (v / top) * plotW
  const bottom = m.top + spec.rows.length * rowH
  const parts = []
  for (const t of ticks) {
    parts.push(`<line class="grid" x1="${r(x(t))}" x2="${r(x(t))}" y1="${m.top}" y2="${bottom}"/>`)
    parts.push(tickText(x(t), bottom + 5 + TICK_FONT, t, tickLabel, 'middle'))
  }
  spec.rows.forEach((row, k) => {
    const mid = m.top + k * rowH + rowH / 2
    const cls = row.cls ? ` class="${row.cls}"` : ''
    let at = 0
    const bars = row.parts.map((p) => {
      const drawn = bar(x(at), mid - 9, x(at + p.value) - x(at), 18, p.cls, p.tip)
      at += p.value
      return drawn
    })
    parts.push(`<g${cls}>${text(m.left - 8, mid + FONT * 0.35, row.label, { anchor: 'end', cls: 'row-label' })}${bars.join('')}${text(WIDTH - m.right + 8, mid + FONT * 0.35, row.note, { cls: 'row-note' })}</g>`)
  })
  parts.push(`<line class="axis" x1="${m.left}" x2="${m.left}" y1="${m.top}" y2="${bottom}"/>`)
  parts.push(text(m.left + plotW / 2, height - 8, spec.xTitle, { anchor: 'middle', cls: 'axis-title' }))
  return svgFrame(spec.id, height, spec.title, spec.desc, parts.join('\n'))
}

module.exports = { histogramChart, stackedBarChart, niceTicks, formatCount, tickLabel }
