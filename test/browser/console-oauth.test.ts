import { test } from 'node:test'
import type { TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { chromium } from 'playwright-core'
import type { Locator, Page } from 'playwright-core'
import { startGateway } from '../../scripts/lib/gateway-process.js'
import type { GatewayProcess } from '../../scripts/lib/gateway-process.js'
import { browser as signIn, startAuthorizationServer, startProtectedMcpServer } from '../../scripts/lib/oauth-fixtures/index.js'
import type { AuthorizationServer, ProtectedMcpServer } from '../../scripts/lib/oauth-fixtures/index.js'
import { freePort } from '../helpers/redis-server.js'
import { CHROMIUM, api, logIn, missingChromium, view, watchErrors } from '../helpers/console-browser.js'

// The console's OAuth connection of a server (SPEC 16 "Console") in a real browser, against the real
// gateway process, a real authorization server (oidc-provider) and an OAuth-protected MCP server
// (scripts/lib/oauth-fixtures). The user's sign-in at the authorization server is the fixtures'
// browser(): the console opens the authorization URL in a new tab, as it would for a person.
const ADMIN = 'console-oauth-admin-key-0123456789'
const ACME = 'console-oauth-acme-key-0123456789'
const PRE = { id: 'console-client', secret: 'console-client-secret-4711' }

interface Setup { gateway: GatewayProcess, as: AuthorizationServer, mcp: ProtectedMcpServer, page: Page, watch: ReturnType<typeof watchErrors> }

async function setUp (t: TestContext): Promise<Setup> {
  const dir = await mkdtemp(join(tmpdir(), 'tg-console-oauth-'))
  t.after(async () => await rm(dir, { recursive: true, force: true }))
  // The redirect URI is {PUBLIC_URL}/oauth/callback, so the gateway's port is chosen before it starts
  // (the pre-registered client names that URI too).
  const port = await freePort()
  const publicUrl = `http://127.0.0.1:${port}`
  const as = await startAuthorizationServer({
    clients: [{
      client_id: PRE.id,
      client_secret: PRE.secret,
      token_endpoint_auth_method: 'client_secret_basic',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      redirect_uris: [`${publicUrl}/oauth/callback`]
    }]
  })
  t.after(async () => { await as.close() })
  const mcp = await startProtectedMcpServer({ issuer: as.issuer, marker: 'docs' })
  t.after(async () => { await mcp.close() })
  const gateway = await startGateway(t, {
    PORT: String(port),
    PUBLIC_URL: publicUrl,
    API_KEYS: `${ADMIN}:*,${ACME}:acme`,
    SANDBOX: 'none',
    WORKSPACES_DIR: join(dir, 'workspaces'),
    EGRESS_ALLOW: '127.0.0.1'
  })
  t.after(async () => { await gateway.stop() })
  assert.equal(gateway.url, publicUrl)
  const chrome = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'], headless: true })
  t.after(async () => { await chrome.close() })
  const page = await chrome.newPage({ viewport: { width: 1280, height: 900 } })
  const watch = watchErrors(page)
  await page.goto(`${gateway.url}/console`)
  return { gateway, as, mcp, page, watch }
}

/**
 * Clicks Connect (or Reconnect) on a row: the console POSTs the authorize route and opens its answer's
 * authorizationUrl in a new tab. Returns that URL, read from the tab the console opened.
 */
async function connect (page: Page, row: Locator, label: 'Connect' | 'Reconnect', issuer: string): Promise<string> {
  const [tab, answer] = await Promise.all([
    page.context().waitForEvent('page'),
    page.waitForResponse((r) => r.request().method() === 'POST' && r.url().endsWith('/oauth/authorize')),
    row.locator(`button:has-text("${label}")`).click()
  ])
  const { authorizationUrl } = await answer.json() as { authorizationUrl: string }
  assert.equal(new URL(authorizationUrl).origin, issuer)
  // The tab loads the authorization server's page (its sign-in); the fixtures' browser signs in instead of it.
  await tab.waitForURL((u) => u.origin === issuer)
  await tab.close()
  await row.locator('.oauth-waiting').waitFor()
  return authorizationUrl
}

/** The user signs in as alice and the authorization server sends them to the gateway's callback: its "connected" page. */
async function completeAs (authorizationUrl: string, serverId: string): Promise<void> {
  const callback = await signIn(authorizationUrl, { account: 'alice', follow: true })
  const text = await callback.text()
  assert.equal(callback.status, 200, text)
  assert.match(text, new RegExp(`${serverId} is connected`))
}

test('console: Connect opens the authorization in a new tab and turns the badge to connected; the tenant\'s tool works; ' +
  'Disconnect (confirmed) turns it back; no token on the page', { skip: missingChromium }, async (t) => {
  const { gateway, as, mcp, page, watch } = await setUp(t)
  await logIn(page, ACME)
  await page.locator('.badge', { hasText: 'tenant acme' }).waitFor()
  await view(page, 'Servers')
  const scope = page.locator('section', { has: page.locator('h2', { hasText: 'Servers of acme' }) })

  // Registered through the form: OAuth with nothing else (the gateway registers itself with the authorization server).
  watch.phase('register')
  await scope.locator('button:has-text("Add")').first().click()
  await scope.locator('input[name=serverId]').fill('docs')
  await scope.locator('input[name=url]').fill(mcp.url)
  assert.equal(await scope.locator('input[name=clientId]').count(), 0, 'the OAuth fields show once OAuth is ticked')
  await scope.locator('input[name=oauth]').check()
  await scope.locator('input[name=scopes]').fill('mcp:read')
  await scope.locator('button:has-text("Add server")').click()
  const row = scope.locator('tr[data-server=docs]')
  await row.locator('[data-oauth-status=authorization_required]').waitFor()
  assert.match(await row.innerText(), /authorization required/)
  assert.equal(await row.locator('button:has-text("Disconnect")').count(), 0, 'nothing to disconnect yet')
  const stored = await api(gateway, ACME, 'GET', '/users/acme/mcp/servers/docs/oauth')
  assert.deepEqual(stored.json, { status: 'authorization_required' })
  const config = (await api(gateway, ACME, 'GET', '/users/acme/mcp/servers')).json.servers[0].config
  assert.deepEqual(config.auth, { type: 'oauth', grant: 'authorization_code', scopes: ['mcp:read'] })
  const before = await api(gateway, ACME, 'GET', '/tools?mcp=docs&userId=acme')
  assert.equal(before.json.unavailable[0]?.code, 'GW_OAUTH_REQUIRED', JSON.stringify(before.json))
  // The Tools view's listing says so too, and leads to the Servers view where Connect is.
  await view(page, 'Tools')
  await page.fill('input[name=functions]', '')
  await page.fill('input[name=mcp]', 'docs')
  await page.click('button:has-text("List tools")')
  await page.locator('#tools-listing tr[data-unavailable=docs] button:has-text("Connect in Servers")').click()
  await page.locator('main h1', { hasText: 'Servers' }).waitFor()

  watch.phase('connect')
  const url = await connect(page, row, 'Connect', as.issuer)
  assert.equal(await row.locator('button:has-text("Connect")').count(), 0, 'no second Connect while it waits')
  await completeAs(url, 'docs')
  // The console's poll (every 2 s) sees the connection and shows it.
  await row.locator('[data-oauth-status=connected]').waitFor()
  await row.locator('.oauth-waiting').waitFor({ state: 'detached' })
  assert.match(await row.locator('.oauth-scopes').innerText(), /mcp:read/)
  assert.match(await row.locator('.oauth-expiry').innerText(), /token until/)
  assert.equal(await row.locator('button:has-text("Reconnect")').count(), 0)
  assert.equal(as.stats().logins.alice, 1)
  // The tenant's tool now answers as alice.
  const call = await api(gateway, ACME, 'POST', '/invoke', { name: 'user_acme_tool_whoami', arguments: {} })
  assert.equal(call.status, 200, JSON.stringify(call.json))
  assert.equal(call.json.isError, false, call.json.output)
  assert.equal(JSON.parse(call.json.output).sub, 'alice')
  // Never a token on the page (a JWT starts eyJ... in both its parts).
  assert.doesNotMatch(await page.content(), /eyJ[\w-]+\.eyJ/)

  watch.phase('disconnect')
  const revoked = as.stats().revocations
  await row.locator('button:has-text("Disconnect")').click()
  await row.locator('button:has-text("Yes, disconnect")').click()
  await row.locator('[data-oauth-status=authorization_required]').waitFor()
  await row.locator('button:has-text("Connect")').waitFor()
  assert.equal((await api(gateway, ACME, 'GET', '/users/acme/mcp/servers/docs/oauth')).json.status, 'authorization_required')
  assert.ok(as.stats().revocations > revoked, 'the tokens were revoked at the authorization server')
  assert.ok(mcp.seen.requests.some((r) => r.sub === 'alice'), 'the protected server saw alice\'s token')

  assert.deepEqual(watch.errors, [])
})

test('console: a pre-registered client\'s secret stays masked and survives an edit (the code exchange needs it); ' +
  'a refresh that fails shows "refresh failed" and Reconnect; a client_credentials global server shows its status only',
{ skip: missingChromium }, async (t) => {
  const { gateway, as, mcp, page, watch } = await setUp(t)
  await logIn(page, ADMIN)
  await page.locator('.badge.role', { hasText: 'admin' }).waitFor()
  await page.fill('.tenant-picker input', 'acme')
  await page.press('.tenant-picker input', 'Enter')
  await page.locator('main h1', { hasText: 'acme' }).waitFor()
  await view(page, 'Servers')
  const scope = page.locator('section', { has: page.locator('h2', { hasText: 'Servers of acme' }) })

  watch.phase('register')
  await scope.locator('button:has-text("Add")').first().click()
  await scope.locator('input[name=serverId]').fill('crm')
  await scope.locator('input[name=url]').fill(mcp.url)
  await scope.locator('input[name=oauth]').check()
  assert.equal(await scope.locator('select[name=grant]').count(), 0, 'a tenant server has no client_credentials grant')
  await scope.locator('input[name=clientId]').fill(PRE.id)
  await scope.locator('input[name=clientSecret]').fill(PRE.secret)
  await scope.locator('button:has-text("Add server")').click()
  const row = scope.locator('tr[data-server=crm]')
  await row.locator('[data-oauth-status=authorization_required]').waitFor()
  const listed = (await api(gateway, ADMIN, 'GET', '/users/acme/mcp/servers')).json.servers[0].config.auth
  assert.equal(listed.clientSecret, '****')
  // Edit and save: the masked secret goes back as shown, and the stored one is kept.
  await row.locator('button:has-text("Edit")').click()
  assert.equal(await scope.locator('input[name=oauth]').isChecked(), true)
  assert.equal(await scope.locator('input[name=clientId]').inputValue(), PRE.id)
  assert.equal(await scope.locator('input[name=clientSecret]').getAttribute('type'), 'password')
  await scope.locator('input[name=description]').fill('the CRM')
  await scope.locator('button:has-text("Save")').click()
  await scope.locator('tr[data-server=crm]', { hasText: 'the CRM' }).waitFor()
  assert.doesNotMatch(await page.content(), new RegExp(PRE.secret))

  watch.phase('connect')
  // Tokens that expire at once: the next call refreshes, and a forgotten grant makes that refresh fail.
  as.setAccessTokenTtl(1)
  await completeAs(await connect(page, row, 'Connect', as.issuer), 'crm')
  await row.locator('[data-oauth-status=connected]').waitFor()
  assert.equal(as.stats().registrations, 0, 'the pre-registered client was used (its secret was kept)')
  assert.equal(as.stats().grants.authorization_code, 1)

  watch.phase('refresh-failed')
  as.forgetGrants()
  await new Promise((resolve) => setTimeout(resolve, 1_100))
  // A listing needs the expired token refreshed: refused, the server is unavailable until the user connects again.
  const listing = await api(gateway, ADMIN, 'GET', '/tools?mcp=crm&userId=acme')
  assert.equal(listing.json.unavailable[0]?.code, 'GW_OAUTH_REQUIRED', JSON.stringify(listing.json))
  await scope.locator('button:has-text("Refresh")').click()
  // The gateway forgot the refused tokens: the status is refresh_failed, or authorization_required once a
  // request without a token met the server's 401; either way the reason is shown and the button says Reconnect.
  await row.locator('[data-oauth-status]:not([data-oauth-status=connected])').waitFor()
  assert.match(await row.locator('.oauth-error').innerText(), /refresh failed/)
  as.setAccessTokenTtl(300)
  await completeAs(await connect(page, row, 'Reconnect', as.issuer), 'crm')
  await row.locator('[data-oauth-status=connected]').waitFor()
  assert.equal(await row.locator('.oauth-error').count(), 0)

  watch.phase('global')
  assert.equal((await api(gateway, ADMIN, 'PUT', '/mcp/servers/service', {
    url: mcp.url,
    auth: { type: 'oauth', grant: 'client_credentials', clientId: 'service-id', clientSecret: 'service-secret', authorizationServer: as.issuer }
  })).status, 201)
  const global = page.locator('section', { has: page.locator('h2', { hasText: 'Global servers' }) })
  await global.locator('button:has-text("Refresh")').click()
  const service = global.locator('tr[data-server=service]')
  await service.locator('[data-oauth-status]').waitFor()
  assert.match(await service.innerText(), /client credentials/)
  assert.equal(await service.locator('.oauth button').count(), 0, 'no Connect or Disconnect for the gateway\'s own grant')

  assert.deepEqual(watch.errors, [])
})
