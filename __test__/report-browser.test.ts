// The data report page in a real headless browser (the system's Chromium, driven by
// playwright-core; nothing is downloaded): it loads nothing but itself, its charts show at a
// readable size on a laptop and fit a phone, findings links land on their previews, and it
// follows the reader's dark colour scheme. Without a Chromium the tests fail, saying how to
// install one (CI installs it).
import { execFileSync } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { pathToFileURL } from 'node:url'

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { chromium, type Browser, type Page } from 'playwright-core'

import { renderReport } from '../bin/cli/report-html.js'
import { fixtures, repoRoot, requireShared, sharedParity } from './helpers'

const CANDIDATES = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome']
const executablePath = CANDIDATES.find((p): p is string => !!p && existsSync(p))

/** The relative luminance (0 black … 1 white) of a computed `rgb(r, g, b)` colour. */
function luminance(rgb: string): number {
  const [r, g, b] = rgb.match(/\d+(\.\d+)?/g)!.slice(0, 3).map((c) => {
    const v = Number(c) / 255
    return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4
  })
  return 0.2126 * r + 0.7152 * g + 0.0722 * b
}

describe('report page in Chromium', () => {
  it('has a Chromium to run in', () => {
    expect(executablePath, 'no Chromium found: set CHROMIUM_PATH or `apt-get install chromium`').toBeDefined()
  })

  let browser: Browser
  let pageUrl = ''

  /** A fresh page at `width` px, recording console errors, page errors and every request. */
  async function open(width: number, colorScheme: 'light' | 'dark' = 'light') {
    const page = await browser.newPage({ viewport: { width, height: 800 } })
    const errors: string[] = []
    const requests: string[] = []
    page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') errors.push(m.text()) })
    page.on('pageerror', (e) => errors.push(String(e)))
    page.on('request', (r) => requests.push(r.url()))
    await page.emulateMedia({ colorScheme })
    await page.goto(pageUrl, { waitUntil: 'load' })
    return { page, errors, requests }
  }

  /** The width and height of every chart as drawn, and whether each is visible. */
  const chartBoxes = (page: Page) => page.$$eval('svg', (svgs) => svgs.map((svg) => {
    const box = svg.getBoundingClientRect()
    const style = getComputedStyle(svg)
    return { id: svg.id, width: box.width, height: box.height, shown: style.display !== 'none' && style.visibility !== 'hidden' }
  }))

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sft-report-'))
    const html = join(dir, 'report.html')
    writeFileSync(html, renderReport(JSON.parse(readFileSync(join(fixtures, 'report', 'sample-report.json'), 'utf8'))))
    pageUrl = pathToFileURL(html).href
    browser = await chromium.launch({
      executablePath,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
        '--disable-component-update', '--disable-sync'],
    })
  })

  afterAll(async () => {
    await browser?.close()
  })

  it('has no console or page errors and requests nothing but itself', async () => {
    for (const scheme of ['light', 'dark'] as const) {
      const { page, errors, requests } = await open(1100, scheme)
      expect(errors).toEqual([])
      expect(requests).toEqual([pageUrl])
      await page.close()
    }
  })

  it('draws every chart at least 200×100 px on a 1100 px wide window', async () => {
    const { page } = await open(1100)
    const boxes = await chartBoxes(page)
    expect(boxes.map((b) => b.id)).toEqual(['chart-lengths', 'chart-trained-share', 'chart-kinds', 'chart-batching'])
    for (const box of boxes) {
      expect(box.shown, box.id).toBe(true)
      expect(box.width, box.id).toBeGreaterThanOrEqual(200)
      expect(box.height, box.id).toBeGreaterThanOrEqual(100)
    }
    await page.close()
  })

  it('fits a 375 px phone: every chart visible and inside the page, no horizontal scroll', async () => {
    const { page } = await open(375)
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(375)
    const boxes = await page.$$eval('svg', (svgs) => svgs.map((svg) => {
      const box = svg.getBoundingClientRect()
      return { id: svg.id, left: box.left, right: box.right, width: box.width, height: box.height }
    }))
    expect(boxes).toHaveLength(4)
    for (const box of boxes) {
      expect(box.left, box.id).toBeGreaterThanOrEqual(0)
      expect(box.right, box.id).toBeLessThanOrEqual(375)
      expect(box.width, box.id).toBeGreaterThanOrEqual(300)
      expect(box.height, box.id).toBeGreaterThanOrEqual(80)
    }
    for (const id of ['chart-lengths', 'chart-trained-share', 'chart-kinds', 'chart-batching']) {
      await expect(page.locator(`#${id}`).isVisible()).resolves.toBe(true)
    }
    // Long token rows scroll inside their own box, not the page.
    const overflow = await page.$eval('#example-17 .tokens', (el) => getComputedStyle(el).overflowY)
    expect(overflow).toBe('auto')
    await page.close()
  })

  it('reads the findings on a 390 px phone: one card per finding, its text wrapped by words across the width', async () => {
    const { page } = await open(390)
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390)
    const box = await page.$eval('#findings .scroll', (el) => ({ scroll: el.scrollWidth, client: el.clientWidth }))
    expect(box.scroll).toBeLessThanOrEqual(box.client)
    expect(await page.locator('#findings thead').isVisible()).toBe(false)
    const cells = await page.$$eval('#findings tbody td', (tds) => tds.map((td) => {
      const r = td.getBoundingClientRect()
      // The lines the cell's text takes, from the boxes of its text.
      const range = document.createRange()
      range.selectNodeContents(td)
      const lines = new Set([...range.getClientRects()].map((rect) => Math.round(rect.bottom))).size
      return { label: (td as HTMLElement).dataset.label, left: r.left, right: r.right, width: r.width, lines, chars: td.textContent!.length }
    }))
    expect(cells.map((c) => c.label).slice(0, 5)).toEqual(['code', 'severity', 'count', 'description', 'first examples'])
    for (const cell of cells) {
      expect(cell.left, cell.label).toBeGreaterThanOrEqual(0)
      expect(cell.right, cell.label).toBeLessThanOrEqual(390)
      expect(cell.width, cell.label).toBeGreaterThanOrEqual(300)
    }
    // Descriptions hold dozens of characters a line, not a few.
    for (const cell of cells.filter((c) => c.label === 'description')) expect(cell.chars / cell.lines, String(cell.chars)).toBeGreaterThanOrEqual(25)
    await page.close()
    const wide = await open(1100)
    expect(await wide.page.locator('#findings thead').isVisible()).toBe(true)
    await wide.page.close()
  })

  it('jumps from the first findings link to that example’s preview', async () => {
    const { page } = await open(1100)
    const link = page.locator('#findings a[href^="#example-"]').first()
    const href = await link.getAttribute('href')
    expect(href).toBe('#example-17')
    expect(await page.evaluate(() => window.scrollY)).toBe(0)
    await link.click()
    await page.waitForFunction((hash) => location.hash === hash, href)
    const rect = await page.$eval(href!, (el) => {
      const r = el.getBoundingClientRect()
      return { top: r.top, bottom: r.bottom }
    })
    const height = await page.evaluate(() => window.innerHeight)
    expect(rect.top).toBeGreaterThanOrEqual(-1)
    expect(rect.top).toBeLessThan(height)
    expect(await page.evaluate(() => window.scrollY)).toBeGreaterThan(0)
    // The example's tokens are drawn: trained ones in their own colour.
    const trained = await page.$eval(`${href} .tok.trained`, (el) => getComputedStyle(el).backgroundColor)
    const masked = await page.$eval(`${href} .tok.masked`, (el) => getComputedStyle(el).backgroundColor)
    expect(trained).toBe('rgb(200, 240, 200)')
    expect(trained).not.toBe(masked)
    await page.close()
  })

  it('follows a dark colour scheme: dark background, light text, charts drawn in it', async () => {
    const light = await open(1100, 'light')
    const dark = await open(1100, 'dark')
    const colours = (page: Page) => page.evaluate(() => {
      const body = getComputedStyle(document.body)
      const tick = document.querySelector('#chart-lengths .tick')!
      const bar = document.querySelector('#chart-lengths rect.bar')!
      return { background: body.backgroundColor, color: body.color, tick: getComputedStyle(tick).fill, bar: getComputedStyle(bar).fill }
    })
    const l = await colours(light.page)
    const d = await colours(dark.page)
    expect(luminance(l.background)).toBeGreaterThan(0.8)
    expect(luminance(d.background)).toBeLessThan(0.05)
    expect(luminance(d.color)).toBeGreaterThan(0.6)
    // Chart text follows the scheme too, and stays readable on the background.
    expect(luminance(d.tick)).toBeGreaterThan(luminance(l.tick))
    expect(d.bar).not.toBe(l.bar)
    await light.page.close()
    await dark.page.close()
  })
})

describe('a report the CLI writes of a real file, in Chromium', () => {
  let browser: Browser
  let pageUrl = ''

  beforeAll(async () => {
    const data = requireShared(join(sharedParity, 'real', 'data', 'conv_glaive_toolcall_en.jsonl'))
    const html = join(mkdtempSync(join(tmpdir(), 'sft-report-cli-')), 'report.html')
    // Truncation, tools the template ignores and repeated examples give findings of three kinds.
    execFileSync(process.execPath, [join(repoRoot, 'bin', 'sft-dataset.js'), 'report', data, '--max-seq-length', '1024',
      '--completion-only', '--out', html, '--quiet'], { cwd: dirname(data), stdio: 'pipe' })
    pageUrl = pathToFileURL(html).href
    browser = await chromium.launch({ executablePath, args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'] })
  })

  afterAll(async () => {
    await browser?.close()
  })

  it('loads nothing else, draws every chart, and every findings link lands on its example', async () => {
    const page = await browser.newPage({ viewport: { width: 1100, height: 800 } })
    const errors: string[] = []
    const requests: string[] = []
    page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()) })
    page.on('pageerror', (e) => errors.push(String(e)))
    page.on('request', (r) => requests.push(r.url()))
    await page.goto(pageUrl, { waitUntil: 'load' })
    expect(errors).toEqual([])
    expect(requests).toEqual([pageUrl])
    const boxes = await page.$$eval('svg', (svgs) => svgs.map((svg) => {
      const box = svg.getBoundingClientRect()
      return { id: svg.id, width: box.width, height: box.height }
    }))
    expect(boxes.map((b) => b.id)).toEqual(['chart-lengths', 'chart-trained-share', 'chart-kinds', 'chart-batching'])
    for (const box of boxes) expect(box.width * box.height, box.id).toBeGreaterThanOrEqual(200 * 100)
    const hrefs = await page.$$eval('#findings a[href^="#example-"]', (links) => links.map((a) => a.getAttribute('href')!))
    expect(hrefs.length).toBeGreaterThanOrEqual(3)
    for (const href of new Set(hrefs)) {
      expect(await page.locator(href).count(), href).toBe(1)
    }
    await page.locator(`#findings a[href="${hrefs[0]}"]`).first().click()
    await page.waitForFunction((hash) => location.hash === hash, hrefs[0])
    const top = await page.$eval(hrefs[0], (el) => el.getBoundingClientRect().top)
    expect(top).toBeGreaterThanOrEqual(-1)
    expect(top).toBeLessThan(800)
    await page.close()
  })
})

describe('a report of a file the template fails on, in Chromium', () => {
  let browser: Browser
  let page: Page
  const errors: string[] = []

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sft-report-fail-'))
    const turn = (q: string, a: string) => [{ role: 'user', content: q }, { role: 'assistant', content: a }]
    // Gemma 3 refuses two user turns in a row: examples 1 and 3 fail to render.
    const records = [
      { messages: turn('a', 'b') },
      { messages: [{ role: 'user', content: 'x' }, ...turn('y', 'z')] },
      { messages: turn('c', 'd') },
      { messages: [{ role: 'user', content: 'p' }, ...turn('q', 'r')] },
    ]
    writeFileSync(join(dir, 'data.jsonl'), records.map((r) => JSON.stringify(r)).join('\n'))
    const html = join(dir, 'report.html')
    const gemma = join(repoRoot, 'node_modules', '@lenml', 'tokenizer-gemma3', 'models')
    execFileSync(process.execPath, [join(repoRoot, 'bin', 'sft-dataset.js'), 'report', 'data.jsonl', '--tokenizer', gemma, '--out', html, '--quiet'], {
      cwd: dir,
      stdio: 'pipe',
    })
    browser = await chromium.launch({ executablePath, args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'] })
    page = await browser.newPage({ viewport: { width: 1100, height: 800 } })
    page.on('pageerror', (e) => errors.push(String(e)))
    page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()) })
    await page.goto(pathToFileURL(html).href, { waitUntil: 'load' })
  })

  afterAll(async () => {
    await browser?.close()
  })

  it('lists the failures as a finding, and every link it shows lands on an element', async () => {
    expect(errors).toEqual([])
    const findings = await page.locator('#findings').innerText()
    expect(findings).toContain('RENDER_FAILED')
    const hrefs = await page.$$eval('#findings a[href^="#"]', (links) => links.map((a) => a.getAttribute('href')!))
    for (const href of new Set(hrefs)) expect(await page.locator(href).count(), href).toBe(1)
  })
})
