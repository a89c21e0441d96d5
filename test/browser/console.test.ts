import { test } from 'node:test'
import type { TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { chromium } from 'playwright-core'
import type { Browser, Locator, Page } from 'playwright-core'
import { startGateway } from '../../scripts/lib/gateway-process.js'
import type { GatewayProcess } from '../../scripts/lib/gateway-process.js'
import { startStreamableHttpFixture } from '../../scripts/lib/mcp-fixtures/index.js'
import { CHROMIUM, api, logIn, missingChromium as missing, view, watchErrors } from '../helpers/console-browser.js'

// The console in a real browser (Debian's chromium driven by playwright-core; nothing downloads a
// browser) against the real gateway process, as an operator would use it.
const ADMIN = 'console-admin-key-0123456789'
const ACME = 'console-acme-key-0123456789'
const APPROVER = 'console-approver-key-0123456789'
const KEYS = `${ADMIN}:*,${ACME}:acme,${APPROVER}:approver:acme`

interface Setup { gateway: GatewayProcess, browser: Browser, shots: string, dir: string }

async function setUp (t: TestContext, env: Record<string, string> = {}): Promise<Setup> {
  const dir = await mkdtemp(join(tmpdir(), 'tg-console-'))
  t.after(async () => await rm(dir, { recursive: true, force: true }))
  const shots = await mkdtemp(join(tmpdir(), 'tg-console-screenshots-'))
  t.diagnostic(`screenshots: ${shots}`)
  // The console runs no command: no sandbox (its own tests cover it), like the other HTTP-level suites.
  const gateway = await startGateway(t, { API_KEYS: KEYS, SANDBOX: 'none', WORKSPACES_DIR: join(dir, 'workspaces'), EGRESS_ALLOW: '127.0.0.1/32', ...env })
  t.after(async () => { await gateway.stop() })
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'], headless: true })
  t.after(async () => { await browser.close() })
  return { gateway, browser, shots, dir }
}

/** A new page watched for console errors (listeners `before` adds see the first load too), on the console's login form. */
async function openConsole (
  setup: Pick<Setup, 'gateway' | 'browser'>,
  before?: (page: Page) => void
): Promise<{ page: Page, watch: ReturnType<typeof watchErrors> }> {
  const page = await setup.browser.newPage()
  const watch = watchErrors(page)
  before?.(page)
  await page.goto(`${setup.gateway.url}/console`)
  return { page, watch }
}

/** Opens the playground and loads the tools of an allow-list; the tool picker, once it is shown. */
async function loadPlayground (page: Page, functions: string, mcp: string): Promise<Locator> {
  await view(page, 'Playground')
  await page.fill('input[name=functions]', functions)
  await page.fill('input[name=mcp]', mcp)
  await page.click('button:has-text("Load tools")')
  const tool = page.locator('select[name=tool]')
  await tool.waitFor()
  return tool
}

async function tarGz (dir: string, name: string, files: Record<string, string>): Promise<string> {
  const src = join(dir, `${name}-src`)
  await mkdir(src, { recursive: true })
  for (const [file, text] of Object.entries(files)) await writeFile(join(src, file), text)
  const archive = join(dir, `${name}.tar.gz`)
  execFileSync('tar', ['czf', archive, '-C', src, ...Object.keys(files)])
  return archive
}

test('console: log in (a wrong key shows the API\'s error), tools, a fixture MCP server, playground, approvals, workspaces, ' +
  'journal and status in a real browser, with no console errors', { skip: missing }, async (t) => {
  const { gateway, browser, shots, dir } = await setUp(t)
  const fixture = await startStreamableHttpFixture({ marker: 'console' })
  t.after(async () => { await fixture.close() })
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, acceptDownloads: true })
  const page = await context.newPage()
  const watch = watchErrors(page)
  const shot = async (name: string): Promise<void> => { await page.screenshot({ path: join(shots, `${name}.png`), fullPage: true }) }

  await page.goto(`${gateway.url}/console`)
  await page.locator('form.login-card').waitFor()

  // A wrong key: the API's own code and message, and the login form stays.
  watch.phase('wrong-key')
  await logIn(page, 'not-a-key-0123456789')
  const refused = page.locator('.login-card .error')
  await refused.waitFor()
  assert.match(await refused.innerText(), /GW_UNAUTHORIZED[\s\S]*Unknown API key/)
  await shot('login-error')

  watch.phase('login')
  await logIn(page, ADMIN)
  await page.locator('.badge.role', { hasText: 'admin' }).waitFor()
  // Browser-side expressions as strings: the tests are type-checked without the DOM library.
  assert.equal(await page.evaluate("sessionStorage.getItem('tool-gateway.console.session').includes('console-admin-key')"), true)
  assert.equal(await page.evaluate('localStorage.length'), 0, 'nothing in localStorage')
  await page.fill('.tenant-picker input', 'acme')
  await page.press('.tenant-picker input', 'Enter')
  await page.locator('main h1', { hasText: 'acme' }).waitFor()

  watch.phase('tools')
  await view(page, 'Tools')
  await page.fill('input[name=functions]', 'calculate, current_time')
  await page.fill('input[name=mcp]', '')
  await page.click('button:has-text("List tools")')
  await page.locator('#tools-listing').waitFor()
  assert.match(await page.locator('#tools-listing .tool-names').innerText(), /calculate, current_time/)
  await page.selectOption('select[name=format]', 'anthropic')
  await page.click('button:has-text("List tools")')
  await page.locator('#tools-listing details pre', { hasText: '"input_schema"' }).waitFor()
  await page.locator('#catalog td', { hasText: 'calculate' }).first().waitFor()
  // The catalog's Add puts a tool on the allow-list (once), and the next listing offers it.
  const catalogRow = (name: string): ReturnType<Page['locator']> => page.locator('#catalog tbody tr', { has: page.locator('td:first-child', { hasText: new RegExp(`^${name}$`) }) })
  await catalogRow('json_query').locator('button:has-text("Add")').click()
  assert.equal(await page.inputValue('input[name=functions]'), 'calculate, current_time, json_query')
  await catalogRow('calculate').locator('button:has-text("Add")').click()
  assert.equal(await page.inputValue('input[name=functions]'), 'calculate, current_time, json_query', 'a tool already allowed is not added twice')
  await page.click('button:has-text("List tools")')
  await page.locator('#tools-listing .tool-names', { hasText: 'json_query' }).waitFor()
  assert.match(await page.locator('#tools-listing .tool-names').innerText(), /^calculate, current_time, json_query$/)
  // Search over the same allow-list: the best match first, with its score; never a tool outside it.
  await page.fill('input[name=q]', 'what time is it in Tokyo')
  await page.click('button:has-text("Search")')
  await page.locator('#tools-search tbody tr').first().waitFor()
  assert.equal(await page.locator('#tools-search tbody tr').first().getAttribute('data-found'), 'current_time')
  assert.match(await page.locator('#tools-search p').first().innerText(), /of 3 tools match/)
  // Search mode: the listing is tool_search and the pinned tool.
  await page.selectOption('select[name=mode]', 'search')
  await page.fill('input[name=pinned]', 'calculate')
  await page.click('button:has-text("List tools")')
  await page.locator('#tools-listing .tool-names', { hasText: 'tool_search' }).waitFor()
  assert.equal(await page.locator('#tools-listing .tool-names').innerText(), 'tool_search, calculate')
  await page.selectOption('select[name=mode]', 'all')
  await shot('tools')

  watch.phase('servers')
  await view(page, 'Servers')
  const tenantScope = page.locator('section', { has: page.locator('h2', { hasText: 'Servers of acme' }) })
  await tenantScope.locator('button:has-text("Add")').first().click()
  await tenantScope.locator('input[name=serverId]').fill('fixture')
  await tenantScope.locator('input[name=url]').fill(fixture.url)
  await tenantScope.locator('textarea[name=headers]').fill('Authorization: Bearer fixture-secret-123')
  await tenantScope.locator('button:has-text("Add server")').click()
  const row = tenantScope.locator('tr[data-server=fixture]')
  await row.waitFor()
  const rowText = await row.innerText()
  assert.doesNotMatch(rowText, /fixture-secret-123/, 'the header value is shown masked')
  assert.match(rowText, /Authorization/)
  await row.locator('button:has-text("Test")').click()
  const live = tenantScope.locator('.live-tools[data-server=fixture]')
  await live.waitFor()
  for (const name of ['echo', 'add']) assert.match(await live.innerText(), new RegExp(`\\b${name}\\b`))
  // Settings the form does not show, set through the API: an edit through the form keeps them.
  const extra = { priority: 5, disabledTools: ['nothing'], protocol: 'legacy' }
  const put = await api(gateway, ADMIN, 'PUT', '/users/acme/mcp/servers/fixture', {
    type: 'streamable_http', url: fixture.url, headers: { Authorization: 'Bearer fixture-secret-123' }, ...extra
  })
  assert.equal(put.status, 200)
  await tenantScope.locator('button:has-text("Refresh")').first().click()
  // Edit: the masked header goes back as shown, and the stored secret is kept.
  await row.locator('button:has-text("Edit")').click()
  await tenantScope.locator('input[name=description]').fill('the loopback fixture')
  await tenantScope.locator('button:has-text("Save")').click()
  await tenantScope.locator('tr[data-server=fixture]', { hasText: 'the loopback fixture' }).waitFor()
  const listed = await api(gateway, ADMIN, 'GET', '/users/acme/mcp/servers')
  assert.equal(listed.json.servers[0].config.url, fixture.url)
  assert.equal(listed.json.servers[0].config.description, 'the loopback fixture')
  for (const [field, value] of Object.entries(extra)) assert.deepEqual(listed.json.servers[0].config[field], value, field)
  assert.equal(fixture.stats.sessions > 0, true)
  await shot('servers')

  watch.phase('playground')
  const tool = await loadPlayground(page, 'calculate', 'fixture')
  const options = await tool.locator('option').allInnerTexts()
  const add = options.find((o) => /add$/.test(o))
  assert.ok(add !== undefined && options.includes('calculate'), options.join(', '))
  // Raw JSON arguments first.
  await tool.selectOption('calculate')
  await page.click('button[role=tab]:has-text("JSON")')
  await page.fill('textarea[name=arguments]', '{ "expression": "6 * 7" }')
  await page.click('#invoke')
  await page.locator('#result-output', { hasText: '"result":42' }).waitFor()
  assert.equal(await page.locator('#result-is-error').innerText(), 'false')
  // Then the form from the tool's JSON schema (one field per argument), on the remote MCP tool.
  await tool.selectOption(add)
  await page.click('button[role=tab]:has-text("Form")')
  await page.fill('label[data-arg=a] input', '2')
  await page.fill('label[data-arg=b] input', '40')
  await page.click('#invoke')
  await page.locator('#result-output', { hasText: /^42$/ }).waitFor()
  assert.equal(await page.locator('#result-is-error').innerText(), 'false')
  assert.match(await page.locator('#result-overhead').innerText(), /^\d+(\.\d+)?$/)
  assert.match(await page.locator('#result-duration').innerText(), /^\d+(\.\d+)?$/)
  await page.click('details:has(summary:has-text("Trace")) summary')
  // Code mode: run_tools_script from the form (its code in a text area); its inner call is journaled under it.
  const scripted = await loadPlayground(page, '@code,calculate', '')
  await scripted.selectOption('run_tools_script')
  await page.click('button[role=tab]:has-text("Form")')
  await page.selectOption('label[data-arg=language] select', '"javascript"')
  await page.fill('label[data-arg=code] textarea', 'const r = await tools.calculate({ expression: "6 * 7" })\nreturn r.result')
  await page.click('#invoke')
  await page.locator('#result-output', { hasText: /^42$/ }).waitFor()
  assert.equal(await page.locator('#result-is-error').innerText(), 'false')
  await shot('playground')
  // The README's picture (docs/console-playground.png): CONSOLE_SCREENSHOT_OUT=docs/console-playground.png npm test -- test/browser/console
  if (process.env.CONSOLE_SCREENSHOT_OUT !== undefined) {
    await page.locator('#invoke-result').scrollIntoViewIfNeeded()
    await page.screenshot({ path: process.env.CONSOLE_SCREENSHOT_OUT, fullPage: true })
    t.diagnostic(`playground screenshot: ${process.env.CONSOLE_SCREENSHOT_OUT}`)
  }

  watch.phase('approvals')
  assert.equal((await api(gateway, ADMIN, 'PUT', '/users/acme/policy', { requireApproval: ['current_time'] })).status, 201)
  const held = await api(gateway, ACME, 'POST', '/invoke', { name: 'current_time', arguments: {} })
  assert.equal(held.status, 202, JSON.stringify(held.json))
  await view(page, 'Approvals')
  const pending = page.locator(`li[data-approval=${held.json.approvalId}]`).first()
  await pending.waitFor()
  await shot('approvals')
  await pending.locator('input[name=reason]').fill('looks fine')
  await pending.locator('button:has-text("Approve")').click()
  const decided = page.locator(`li.decided[data-approval=${held.json.approvalId}]`)
  await decided.waitFor()
  assert.match(await decided.innerText(), /approved/)
  const after = await api(gateway, ADMIN, 'GET', `/approvals/${held.json.approvalId as string}`)
  assert.equal(after.json.status, 'approved')
  assert.equal(after.json.reason, 'looks fine')
  assert.equal(after.json.result.isError, false)
  await page.locator('#no-approvals').waitFor()

  watch.phase('workspaces')
  await view(page, 'Workspaces')
  const archive = await tarGz(dir, 'proj', { 'hello.txt': 'hello from the console test\n' })
  await page.fill('input[name=workspaceId]', 'proj')
  await page.setInputFiles('input[name=archive]', archive)
  await page.click('button:has-text("Upload")')
  await page.locator('#uploaded').waitFor()
  const wsRow = page.locator('tr[data-workspace=proj]')
  await wsRow.waitFor()
  assert.match(await wsRow.locator('.usage').innerText(), /\//)
  const [download] = await Promise.all([page.waitForEvent('download'), wsRow.locator('button:has-text("Download")').click()])
  const saved = join(dir, 'downloaded.tar.gz')
  await download.saveAs(saved)
  assert.equal(download.suggestedFilename(), 'proj.tar.gz')
  const entry = execFileSync('tar', ['tzf', saved], { encoding: 'utf8' }).split('\n').find((e) => /(^|\/)hello\.txt$/.test(e))
  assert.ok(entry !== undefined, 'hello.txt is in the downloaded archive')
  assert.equal(execFileSync('tar', ['xzOf', saved, entry], { encoding: 'utf8' }), 'hello from the console test\n')

  await wsRow.locator('button:has-text("Checkpoints")').click()
  await page.fill('.checkpoints input[name=label]', 'first')
  await page.click('button:has-text("Create checkpoint")')
  const cpRow = page.locator('.checkpoints tr[data-checkpoint]').first()
  await cpRow.waitFor()
  // Change the workspace, then restore the checkpoint: the change is gone.
  const changed = await tarGz(dir, 'changed', { 'hello.txt': 'changed\n', 'extra.txt': 'extra\n' })
  await page.setInputFiles('input[name=archive]', changed)
  await page.click('button:has-text("Upload")')
  await page.locator('#uploaded', { hasText: '2 entries' }).waitFor()
  const before = await fetch(`${gateway.url}/users/acme/workspaces/proj/files/hello.txt`, { headers: { authorization: `Bearer ${ACME}` } })
  assert.equal(await before.text(), 'changed\n')
  await cpRow.locator('button:has-text("Restore")').click()
  await cpRow.locator('button:has-text("Yes, restore")').click()
  await page.locator('#restored').waitFor()
  const restored = await fetch(`${gateway.url}/users/acme/workspaces/proj/files/hello.txt`, { headers: { authorization: `Bearer ${ACME}` } })
  assert.equal(await restored.text(), 'hello from the console test\n')
  assert.equal((await fetch(`${gateway.url}/users/acme/workspaces/proj/files/extra.txt`, { headers: { authorization: `Bearer ${ACME}` } })).status, 404)
  await shot('workspaces')
  // Delete asks first.
  await wsRow.locator('button:has-text("Delete")').click()
  await wsRow.locator('button:has-text("Yes, delete")').click()
  await wsRow.waitFor({ state: 'detached' })
  // (The playground's script ran in acme's default workspace: only proj is deleted.)
  assert.deepEqual((await api(gateway, ACME, 'GET', '/users/acme/workspaces')).json.workspaces.map((w: any) => w.workspaceId), ['default'])

  watch.phase('journal')
  await view(page, 'Journal')
  const entryRow = page.locator('#journal tr.clickable', { hasText: 'calculate' }).first()
  await entryRow.waitFor()
  // The script's inner call is the row right under the script's.
  const names = await page.locator('#journal tbody tr td:nth-child(2)').allInnerTexts()
  const script = names.indexOf('run_tools_script')
  assert.ok(script >= 0 && names[script + 1] === '↳ calculate', names.join(', '))
  await page.fill('.filters input[name=tool]', 'calculate')
  await page.click('.filters button[type=submit]')
  // The filtered page replaces the unfiltered one (other tools' rows go away).
  // (Locators, not waitForFunction: the page's CSP refuses evaluating strings.)
  await page.locator('#journal tbody tr td:nth-child(2)', { hasNotText: /^calculate$/ }).first().waitFor({ state: 'detached' })
  const tools = await page.locator('#journal tbody tr td:nth-child(2)').allInnerTexts()
  assert.ok(tools.length > 0 && tools.every((n) => n === 'calculate'), tools.join(', '))
  // One entry a page: Older goes to the next (older) page, Newer comes back.
  await page.fill('.filters input[name=tool]', '')
  await page.fill('.filters input[name=limit]', '1')
  await page.click('.filters button[type=submit]')
  await page.locator('.pager', { hasText: 'page 1' }).waitFor()
  // The page of one entry replaces the filtered one (which may hold more).
  await page.locator('#journal tbody tr').nth(1).waitFor({ state: 'detached' })
  const first = await page.locator('#journal tbody tr td:last-child').allInnerTexts()
  await page.click('.pager button:has-text("Older")')
  await page.locator('.pager', { hasText: 'page 2' }).waitFor()
  assert.equal(first.length, 1)
  await page.locator('#journal tbody tr td:last-child', { hasNotText: first[0] as string }).first().waitFor()
  assert.equal(await page.locator('#journal tbody tr').count(), 1)
  await page.click('.pager button:has-text("Newer")')
  await page.locator('.pager', { hasText: 'page 1' }).waitFor()
  await page.fill('.filters input[name=tool]', 'calculate')
  await page.fill('.filters input[name=limit]', '20')
  await page.click('.filters button[type=submit]')
  await page.locator('#journal tr.clickable', { hasText: 'calculate' }).first().click()
  await page.locator('#journal-entry').waitFor()
  const curl = await page.locator('#curl').innerText()
  assert.match(curl, /curl -sS -X POST '.*\/invoke'/)
  assert.match(curl, /"name":"calculate"/)
  assert.doesNotMatch(curl, new RegExp(ADMIN), 'the curl line never carries the session\'s key')
  await shot('journal')

  watch.phase('status')
  await view(page, 'Status')
  await page.locator('#readiness').waitFor()
  await page.locator('#status').waitFor()
  await page.locator('figure.chart svg rect').first().waitFor({ state: 'attached' })
  await shot('status')

  // A narrow window: the page reflows instead of scrolling sideways.
  watch.phase('narrow')
  await page.setViewportSize({ width: 390, height: 800 })
  for (const name of ['Tools', 'Servers', 'Journal', 'Approvals', 'Workspaces', 'Status', 'Playground']) {
    await view(page, name)
    const overflow = await page.evaluate('document.documentElement.scrollWidth - document.documentElement.clientWidth') as number
    assert.ok(overflow <= 0, `${name}: the page is ${overflow}px wider than a 390px window`)
    await shot(`narrow-${name.toLowerCase()}`)
  }

  // The only console errors: the browser's own note of the wrong key's 401.
  const unexpected = watch.errors.filter((e) => !(e.phase === 'wrong-key' && /status of 401/.test(e.text)))
  assert.deepEqual(unexpected, [])
  assert.ok(watch.errors.some((e) => e.phase === 'wrong-key'), 'the wrong key\'s 401 was seen (the error watch works)')
  await context.close()
})

test('console: an approver key sees its tenant\'s approvals and journal only, and decides', { skip: missing }, async (t) => {
  const { gateway, browser } = await setUp(t)
  assert.equal((await api(gateway, ADMIN, 'PUT', '/users/acme/policy', { requireApproval: ['calculate'] })).status, 201)
  const held = await api(gateway, ACME, 'POST', '/invoke', { name: 'calculate', arguments: { expression: '1 + 1' } })
  assert.equal(held.status, 202)
  const { page, watch } = await openConsole({ gateway, browser })
  await logIn(page, APPROVER)
  await page.locator('.badge.role', { hasText: 'approver' }).waitFor()
  await page.locator('.badge', { hasText: 'tenant acme' }).waitFor()
  assert.deepEqual(await page.locator('nav a').allInnerTexts(), ['Journal', 'Approvals', 'Status'])
  await view(page, 'Approvals')
  const pending = page.locator(`li[data-approval=${held.json.approvalId as string}]`).first()
  await pending.locator('input[name=reason]').fill('not now')
  await pending.locator('button:has-text("Deny")').click()
  await page.locator(`li.decided[data-approval=${held.json.approvalId as string}]`, { hasText: 'denied' }).waitFor()
  assert.equal((await api(gateway, ADMIN, 'GET', `/approvals/${held.json.approvalId as string}`)).json.status, 'denied')
  // Identifying the key is one GET /whoami: no admin-only route is tried, so the browser notes nothing.
  assert.deepEqual(watch.errors, [])
})

test('GET /console: strict CSP, no-cache page, immutable hashed assets, nothing loaded from another origin', { skip: missing }, async (t) => {
  const { gateway, browser } = await setUp(t)
  const res = await fetch(`${gateway.url}/console`)
  assert.equal(res.status, 200)
  const csp = res.headers.get('content-security-policy') ?? ''
  for (const directive of [
    "default-src 'self'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "object-src 'none'",
    "frame-ancestors 'none'", "base-uri 'none'"
  ]) {
    assert.ok(csp.includes(directive), `${directive} in ${csp}`)
  }
  assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/)
  assert.equal(res.headers.get('cache-control'), 'no-cache')
  const html = await res.text()
  assert.doesNotMatch(html, /<script>|<script [^>]*>[^<]|style=/, 'no inline script or style in the page')
  const assets = [...html.matchAll(/(?:src|href)="(\/console\/assets\/[^"]+)"/g)].map((m) => m[1] as string)
  assert.equal(assets.length, 2, html)
  for (const asset of assets) {
    assert.match(asset, /-[A-Z0-9]{8}\.(js|css)$/, 'content-hashed name')
    const a = await fetch(`${gateway.url}${asset}`)
    assert.equal(a.status, 200)
    assert.equal(a.headers.get('cache-control'), 'public, max-age=31536000, immutable')
  }
  // Public, out of the API description and the invocation metrics.
  const openapi = await (await fetch(`${gateway.url}/openapi.json`)).text()
  assert.doesNotMatch(openapi, /\/console/)
  const metrics = await (await fetch(`${gateway.url}/metrics`)).text()
  assert.doesNotMatch(metrics, /gateway_invocations_total\{/)

  const requests: string[] = []
  const { page, watch } = await openConsole({ gateway, browser }, (p) => { p.on('request', (r) => requests.push(r.url())) })
  await logIn(page, ADMIN)
  await page.locator('.badge.role', { hasText: 'admin' }).waitFor()
  for (const name of ['Servers', 'Playground', 'Journal', 'Approvals', 'Workspaces', 'Status', 'Tools']) await view(page, name)
  assert.ok(requests.length > 3)
  const foreign = requests.filter((u) => {
    const h = new URL(u).hostname
    return !['127.0.0.1', 'localhost', '[::1]'].includes(h) && !u.startsWith('data:') && !u.startsWith('blob:')
  })
  assert.deepEqual(foreign, [])
  assert.deepEqual(watch.errors, [])
})

test('console: a tenant key logs in without naming its tenant, reads approvals without deciding; ' +
  'a wrong key is refused with the API\'s error', { skip: missing }, async (t) => {
  const { gateway, browser } = await setUp(t)
  const { page, watch } = await openConsole({ gateway, browser })
  assert.equal(await page.locator('input[name=tenant]').count(), 0, 'the login asks for the key only')
  await logIn(page, 'k-wrong-0000000000')
  const refused = page.locator('.login-card .error')
  await refused.waitFor()
  assert.match(await refused.innerText(), /GW_UNAUTHORIZED/)
  await logIn(page, ACME)
  await page.locator('.badge.role', { hasText: 'tenant' }).waitFor()
  await page.locator('.badge', { hasText: 'tenant acme' }).waitFor()
  assert.deepEqual(await page.locator('nav a').allInnerTexts(), ['Tools', 'Servers', 'Playground', 'Journal', 'Approvals', 'Workspaces', 'Status'])
  // No global servers for a tenant key.
  await view(page, 'Servers')
  await page.locator('h2', { hasText: 'Servers of acme' }).waitFor()
  assert.equal(await page.locator('h2', { hasText: 'Global servers' }).count(), 0)
  assert.equal((await api(gateway, ADMIN, 'PUT', '/users/acme/policy', { requireApproval: ['calculate'] })).status, 201)
  const held = await api(gateway, ACME, 'POST', '/invoke', { name: 'calculate', arguments: { expression: '2 + 2' } })
  assert.equal(held.status, 202)
  await view(page, 'Approvals')
  const pending = page.locator(`li[data-approval=${held.json.approvalId as string}]`)
  await pending.waitFor()
  assert.equal(await pending.locator('button').count(), 0, 'a tenant key cannot decide')
  // The wrong key's 401 is the browser's only note: no admin-only route is called with the tenant's key.
  assert.deepEqual(watch.errors.filter((e) => !/status of 401/.test(e.text)), [])
})

test('console: open mode (no API keys, as `npm start` on a fresh clone): ' +
  'an empty key logs in as admin, sends no Authorization header, lists tools and invokes one, with no console errors', { skip: missing }, async (t) => {
  const { gateway, browser } = await setUp(t, { API_KEYS: '', API_KEYS_FILE: '' })
  const authorization: string[] = []
  const { page, watch } = await openConsole({ gateway, browser }, (p) => {
    p.on('request', (r) => { const h = r.headers().authorization; if (h !== undefined) authorization.push(`${r.url()}: ${h}`) })
  })
  await page.locator('form.login-card').waitFor()
  assert.equal(await page.inputValue('input[name=key]'), '')
  await page.click('button[type=submit]')
  await page.locator('.badge.role', { hasText: 'admin' }).waitFor()
  assert.deepEqual(await page.locator('nav a').allInnerTexts(), ['Tools', 'Servers', 'Playground', 'Journal', 'Approvals', 'Workspaces', 'Status'])

  // The example tools (LOAD_EXAMPLES defaults to true) in the catalog and in a listing.
  await view(page, 'Tools')
  for (const name of ['calculate', 'current_time', 'read_file']) await page.locator('#catalog td:first-child', { hasText: new RegExp(`^${name}$`) }).waitFor()
  await page.fill('input[name=functions]', 'calculate, current_time')
  await page.click('button:has-text("List tools")')
  await page.locator('#tools-listing').waitFor()
  assert.match(await page.locator('#tools-listing .tool-names').innerText(), /^calculate, current_time$/)

  // The playground invokes a function tool through its form.
  const tool = await loadPlayground(page, 'calculate', '')
  await tool.selectOption('calculate')
  await page.click('button[role=tab]:has-text("Form")')
  await page.fill('label[data-arg=expression] input', '6 * 7')
  await page.click('#invoke')
  await page.locator('#result-output', { hasText: '"result":42' }).waitFor()
  assert.equal(await page.locator('#result-is-error').innerText(), 'false')

  // The journal and status of an open gateway answer too.
  await view(page, 'Status')
  await page.locator('#status').waitFor()

  assert.deepEqual(authorization, [], 'an empty key sends no Authorization header')
  assert.deepEqual(watch.errors, [])
})

test('console: a key that stops working after login (replaced in the tab\'s session) shows the API\'s 401 in the view with "Log in again", ' +
  'and logging in again works', { skip: missing }, async (t) => {
  const { gateway, browser } = await setUp(t)
  const { page, watch } = await openConsole({ gateway, browser })
  await logIn(page, ADMIN)
  await page.locator('.badge.role', { hasText: 'admin' }).waitFor()
  await view(page, 'Tools')
  await page.locator('#catalog').waitFor()

  // The stored session keeps its admin role but its key is no longer one the gateway knows.
  watch.phase('revoked')
  // (A string expression through the DevTools protocol: the page's CSP does not apply to it.)
  await page.evaluate(`(() => {
    const name = 'tool-gateway.console.session'
    const s = JSON.parse(sessionStorage.getItem(name))
    s.key = 'revoked-key-0123456789'
    sessionStorage.setItem(name, JSON.stringify(s))
  })()`)
  await page.reload()
  await page.locator('.badge.role', { hasText: 'admin' }).waitFor()
  const refused = page.locator('#view-tools .error')
  await refused.waitFor()
  assert.match(await refused.innerText(), /GW_UNAUTHORIZED[\s\S]*Unknown API key/)
  assert.equal(await page.locator('#catalog').count(), 0)
  // Other views say the same instead of going blank.
  await view(page, 'Workspaces')
  await page.fill('.tenant-picker input', 'acme')
  await page.press('.tenant-picker input', 'Enter')
  await page.locator('main h1', { hasText: 'acme' }).waitFor()
  await page.locator('#view-workspaces .error', { hasText: 'GW_UNAUTHORIZED' }).first().waitFor()

  // The error offers to log in again: it goes back to the login form; a good key makes the views work again.
  watch.phase('again')
  await page.locator('#view-workspaces .error button.relogin', { hasText: 'Log in again' }).first().click()
  await page.locator('input[name=key]').waitFor()
  assert.equal(await page.locator('.badge.role').count(), 0, 'back on the login form')
  await logIn(page, ADMIN)
  await page.locator('.badge.role', { hasText: 'admin' }).waitFor()
  await view(page, 'Tools')
  await page.locator('#catalog').waitFor()

  // The only console errors: the browser's notes of the refused calls while the key was bad.
  assert.deepEqual(watch.errors.filter((e) => !(e.phase === 'revoked' && /status of 401/.test(e.text))), [])
  assert.ok(watch.errors.some((e) => e.phase === 'revoked'), 'the 401s were seen (the error watch works)')
})
