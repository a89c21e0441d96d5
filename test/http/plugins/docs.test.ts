import { test } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { chromium } from 'playwright-core'
import type { Page } from 'playwright-core'
import { startGateway } from '../../../scripts/lib/gateway-process.js'

// Debian's chromium (apt), driven by playwright-core: nothing downloads a browser.
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
const KEY = 'admin-key-swagger-ui-0123456789'

const missing = existsSync(CHROMIUM) ? undefined : `no Chromium at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM_PATH)`
if (missing !== undefined && process.env.CI === 'true') throw new Error(`${missing}: the Swagger UI test cannot be skipped under CI=true`)

/** Expands an operation, presses "Try it out" once, executes it with what is prefilled; resolves with the status Swagger UI shows. */
async function tryOut (page: Page, operation: string): Promise<{ status: string, url: string, body: string }> {
  const block = page.locator(`#${operation}`)
  if (await block.locator('.try-out__btn').count() === 0) await block.locator('.opblock-summary').click()
  const tryOutButton = block.locator('.try-out__btn')
  if ((await tryOutButton.innerText()).trim() === 'Try it out') await tryOutButton.click()
  // A previous answer stays on the page until the new one replaces it: clear it first.
  const clear = block.locator('.btn-clear')
  if (await clear.count() > 0) await clear.click()
  await block.locator('.execute').click()
  const status = block.locator('.live-responses-table tbody .response-col_status').first()
  await status.waitFor()
  return {
    status: (await status.innerText()).trim(),
    url: (await block.locator('.request-url pre').innerText()).trim(),
    body: await block.locator('.live-responses-table tbody .response-col_description').first().innerText()
  }
}

test('Swagger UI: "Try it out" is a 401 until Authorize is given the bearer key, ' +
  'then the prefilled examples answer 200 from the serving gateway', { skip: missing }, async (t) => {
  const workspaces = await mkdtemp(join(tmpdir(), 'tg-docs-ui-'))
  t.after(async () => await rm(workspaces, { recursive: true, force: true }))
  const gateway = await startGateway(t, { API_KEYS: `${KEY}:*`, WORKSPACES_DIR: workspaces })
  t.after(async () => { await gateway.stop() })
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'], headless: true })
  t.after(async () => { await browser.close() })
  const page = await browser.newPage()
  const screenshot = join(tmpdir(), 'tool-gateway-swagger-ui.png')
  try {
    await page.goto(`${gateway.url}/docs`)
    await page.locator('#operations-tools-listTools').waitFor()

    // Without a key: the prefilled GET /tools goes to the serving gateway and is refused.
    const refused = await tryOut(page, 'operations-tools-listTools')
    assert.equal(refused.status, '401', refused.body)
    assert.ok(refused.url.startsWith(`${gateway.url}/tools?functions=current_time%2Ccalculate%2Ctext_slugify`), refused.url)

    await page.locator('.btn.authorize').first().click()
    await page.locator('#auth-bearer-value').fill(KEY)
    await page.locator('.auth-btn-wrapper .authorize').click()
    await page.locator('.auth-btn-wrapper .btn-done').click()

    const listed = await tryOut(page, 'operations-tools-listTools')
    assert.equal(listed.status, '200', listed.body)
    for (const name of ['current_time', 'calculate', 'text_slugify']) assert.ok(listed.body.includes(`"name": "${name}"`), listed.body)

    // The prefilled POST /invoke body is the first example: a real call of the calculate function.
    const invoked = await tryOut(page, 'operations-invoke-invokeTool')
    assert.equal(invoked.status, '200', invoked.body)
    assert.match(invoked.body, /"isError": false/)
    assert.match(invoked.body, /"name": "calculate"/)
    assert.equal(invoked.url, `${gateway.url}/invoke`)

    // POST /mcp: the prefilled tools/list for the prefilled allow-list (the MCP transport wants an
    // Accept of both JSON and an event stream, which Swagger UI only sends thanks to the docs plugin).
    const mcp = await tryOut(page, 'operations-mcp-mcpPost')
    assert.equal(mcp.status, '200', mcp.body)
    for (const name of ['current_time', 'calculate', 'text_slugify']) assert.ok(mcp.body.includes(`"name": "${name}"`), mcp.body)
  } finally {
    await page.screenshot({ path: screenshot, fullPage: true })
    t.diagnostic(`screenshot: ${screenshot}`)
  }
})
