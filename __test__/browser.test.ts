// The HTML preview in a real headless browser (the system's Chromium, driven by playwright-core;
// nothing is downloaded). Without a Chromium the tests fail, saying how to install one (CI
// installs it).
import { execFileSync } from 'node:child_process'
import { existsSync, mkdtempSync, mkdirSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'

import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { chromium, type Browser, type Page } from 'playwright-core'

import { repoRoot, tokenizer } from './helpers'

const CANDIDATES = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome']
const executablePath = CANDIDATES.find((p): p is string => !!p && existsSync(p))
describe('preview --html in Chromium', () => {
  it('has a Chromium to run in', () => {
    expect(executablePath, 'no Chromium found: set CHROMIUM_PATH or `apt-get install chromium`').toBeDefined()
  })

  let browser: Browser
  let page: Page
  const consoleErrors: string[] = []
  const requests: string[] = []
  let pageUrl = ''

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sft-preview-'))
    const html = join(dir, 'preview.html')
    // Example 0 is a conversation: a system prompt, user turns (masked) and assistant turns (trained).
    execFileSync(process.execPath, [join(repoRoot, 'bin', 'sft-dataset.js'), 'preview', join(repoRoot, 'examples', 'sample.jsonl'),
      '--index', '0', '--max-seq-length', '256', '--completion-only', '--html', html, '--quiet'], { stdio: 'pipe' })
    pageUrl = pathToFileURL(html).href
    browser = await chromium.launch({
      executablePath,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
        '--disable-component-update', '--disable-sync'],
    })
    page = await browser.newPage({ viewport: { width: 1100, height: 900 } })
    page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()) })
    page.on('pageerror', (e) => consoleErrors.push(String(e)))
    page.on('request', (r) => requests.push(r.url()))
    await page.goto(pageUrl, { waitUntil: 'load' })
  })

  afterAll(async () => {
    await browser?.close()
  })

  it('draws trained and masked tokens in different styles', async () => {
    const style = (selector: string) => page.$eval(selector, (el) => {
      const s = getComputedStyle(el)
      return { background: s.backgroundColor, color: s.color }
    })
    const trained = await style('#example-0 .tok.trained')
    const masked = await style('#example-0 .tok.masked')
    expect(trained.background).toBe('rgb(200, 240, 200)')
    expect(masked.background).toBe('rgb(238, 238, 238)')
    expect(trained.color).not.toBe(masked.color)
    // The conversation has both kinds, and only the assistant's tokens are trained.
    const counts = await page.$$eval('#example-0 .tok', (els) => els.map((e) => e.classList.contains('trained')))
    expect(counts.filter(Boolean).length).toBeGreaterThan(0)
    expect(counts.filter((t) => !t).length).toBeGreaterThan(0)
  })

  it('shows the id and label of a token on hover and on keyboard focus', async () => {
    const tip = (selector: string) => page.$eval(selector, (el) => getComputedStyle(el, '::after').content)
    const first = page.locator('#example-0 .tok.trained').first()
    const id = await first.getAttribute('data-id')
    await first.hover()
    expect(await tip('#example-0 .tok.trained:hover')).toBe(`"id ${id} · label ${id}"`)

    const masked = page.locator('#example-0 .tok.masked').first()
    const maskedId = await masked.getAttribute('data-id')
    await page.mouse.move(0, 0)
    await masked.focus()
    expect(await tip('#example-0 .tok.masked:focus')).toBe(`"id ${maskedId} · label -100"`)
    // Without hover or focus no tooltip is drawn.
    expect(await tip('#example-0 .tok.trained')).toBe('none')
  })

  it('ids in the page are the tokenizer’s', async () => {
    const ids = await page.$$eval('#example-0 .tok', (els) => els.map((e) => Number(e.getAttribute('data-id'))))
    const text = tokenizer().decodeSync(Uint32Array.from(ids), false)
    expect(text).toContain('You are a concise assistant for a hardware store.')
  })

  it('has no console errors, loads nothing but itself, and renders a screenshot', async () => {
    expect(consoleErrors).toEqual([])
    expect(requests).toEqual([pageUrl])
    const out = join(repoRoot, 'target')
    mkdirSync(out, { recursive: true })
    const shot = join(out, 'preview-screenshot.png')
    await page.locator('#example-0 .tok.trained').first().hover()
    await page.screenshot({ path: shot, fullPage: true })
    const png = readFileSync(shot)
    expect(png.subarray(1, 4).toString('latin1')).toBe('PNG')
    expect(png.length).toBeGreaterThan(10_000)
  })
})
