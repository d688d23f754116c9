// The documentation page as a person uses it, in a real headless Chromium (the system's:
// CI installs it before the tests, see .ci/run; nothing is downloaded here): it loads
// without a console error (no CSP violation), "Try it out" leaves every parameter empty
// (examples are shown, not filled in), the Authorize dialog offers the user scheme, and
// `GET agents` run from the page with a login token answers 200 with the agents.
import fs from 'node:fs'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { chromium, type Browser } from 'playwright-core'
import { docsAuthorizePlugin, docsResponseInterceptor } from '../lib/docs.js'
import { build, login } from './helpers.js'
import { addAgent } from './fixtures/fleet.js'

t.setTimeout(180_000)

const candidates = ['/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome']
// CHROMIUM_PATH, when set, is the only one tried: a wrong path must not fall back unnoticed.
const executablePath = process.env.CHROMIUM_PATH || candidates.find((p) => fs.existsSync(p))

/** Why no browser can run, saying what to install; null when one can. */
export function missingBrowser(path: string | undefined, exists: (p: string) => boolean = fs.existsSync): string | null {
  const install = 'install Chromium (Debian or Ubuntu: sudo apt-get install chromium; .ci/run does it), or set CHROMIUM_PATH to a Chromium or Chrome binary'
  if (!path) return `no Chromium found in ${candidates.join(', ')}: ${install}`
  if (!exists(path)) return `CHROMIUM_PATH=${path} does not exist: ${install}`
  return null
}

t.test('a missing browser fails the test, saying what to install', async (t) => {
  t.match(missingBrowser(undefined), /no Chromium found .*sudo apt-get install chromium.*CHROMIUM_PATH/)
  t.match(
    missingBrowser('/nowhere/chrome', () => false),
    /CHROMIUM_PATH=\/nowhere\/chrome does not exist: install Chromium/,
  )
  t.equal(
    missingBrowser('/usr/bin/chromium', () => true),
    null,
  )
})

t.test("the page's own functions stand alone, as serialized into it: no transpiler helper in their text", async (t) => {
  // Under tsx (esbuild's keepNames) a function named by a variable or a property is wrapped in
  // __name(), which the page does not have: the page then fails to start.
  for (const fn of [docsResponseInterceptor, docsAuthorizePlugin]) t.notMatch(fn.toString(), /\b__\w+\(/, `${fn.name}: no helper called`)
})

t.test('the docs page: no console error, nothing prefilled, user login, GET agents through Try it out', async (t) => {
  const missing = missingBrowser(executablePath)
  // Never a skip: the page is part of what the suite proves.
  if (missing || !executablePath) {
    t.fail(missing ?? 'no browser')
    return
  }
  const app = await build(t)
  const hosts = ['DOCS-HOST-1', 'DOCS-HOST-2', 'DOCS-HOST-3']
  for (const h of hosts) await addAgent(app, { host_identifier: h })
  await app.listen({ host: '127.0.0.1', port: 0 })
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
  const token = await login(app)

  const browser: Browser = await chromium.launch({ executablePath, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] })
  t.teardown(() => browser.close())
  const page = await browser.newPage()
  const problems: string[] = []
  page.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warning') problems.push(`console ${m.type()}: ${m.text()}`)
  })
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`))
  page.on('requestfailed', (r) => problems.push(`request failed: ${r.url()} ${r.failure()?.errorText}`))

  await page.goto(`${base}/prime/webui/docs`)
  await page.waitForSelector('.information-container .title', { timeout: 60_000 })

  // The Authorize dialog: the user scheme only, and a token accepted.
  await page.click('button.authorize')
  await page.waitForSelector('.dialog-ux .auth-container')
  const schemes = await page.$$eval('.dialog-ux .auth-container h4', (els) => els.map((e) => e.textContent?.trim()))
  t.same(
    schemes.map((s) => s?.replace(/\s*\(.*$/, '')),
    ['bearerAuth'],
    'only the user scheme is offered',
  )
  await page.fill('.dialog-ux .auth-container input', token)
  await page.click('.dialog-ux .auth-btn-wrapper button.authorize')
  await page.click('.dialog-ux button.btn-done')

  // GET agents: every parameter empty, its examples in the descriptions.
  await page.click('#operations-tag-Agents')
  await page.click('#operations-Agents-getAgents .opblock-summary')
  const op = page.locator('#operations-Agents-getAgents')
  await op.locator('button.try-out__btn').click()
  const values = await op.locator('.parameters input[type=text], .parameters input:not([type])').evaluateAll((els) => els.map((e) => [e.getAttribute('placeholder'), (e as HTMLInputElement).value]))
  t.ok(values.length >= 10, `${values.length} text parameters`)
  t.same(
    values.filter(([, v]) => v !== ''),
    [
      ['PageNumber', '1'],
      ['PageSize', '20'],
    ],
    'no parameter is filled in but the paging defaults',
  )
  t.match(await op.locator('.parameters').innerText(), /Example: DESKTOP-9LR/, 'examples are shown in the descriptions')

  await op.locator('button.execute').click()
  const cell = op.locator('.live-responses-table tbody .response-col_status').first()
  await cell.waitFor({ timeout: 30_000 })
  const status = (await cell.innerText()).trim()
  t.equal(status, '200')
  const body = await op.locator('.live-responses-table .response-col_description pre').first().innerText()
  for (const h of hosts) t.match(body, h, `${h} is listed`)

  t.same(problems, [], 'no console error or warning, no failed request')
})
