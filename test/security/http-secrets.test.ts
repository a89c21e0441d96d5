/**
 * HTTP side of tenant isolation: secrets an operator provisions for a tenant's MCP server.
 * - A masked value (`Bearer ****`) sent back with a new URL must not carry the stored secret to
 *   the new origin (before: a tenant re-PUT its server with its own URL and got the operator's
 *   token sent there).
 * - An upstream echoing a secret without its scheme (`token=<token>`) must not leak it into the
 *   502 message, `unavailable[].reason` or the log.
 * Against the real gateway process.
 */
import { test } from 'node:test'
import type { TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startGateway } from '../../scripts/lib/gateway-process.js'
import type { GatewayProcess } from '../../scripts/lib/gateway-process.js'
import { startStreamableHttpFixture } from '../../scripts/lib/mcp-fixtures/index.js'

const ADMIN = 'admin-key-0123456789'
const ACME = 'acme-key-0123456789'
const KEYS = `${ADMIN}:*,${ACME}:acme`

async function gateway (t: TestContext): Promise<GatewayProcess> {
  const workspaces = await mkdtemp(join(tmpdir(), 'tg-sec-secrets-'))
  t.after(() => rm(workspaces, { recursive: true, force: true }))
  const gw = await startGateway(t, {
    API_KEYS: KEYS,
    SANDBOX: 'none',
    WORKSPACES_DIR: workspaces,
    EGRESS_ALLOW: '127.0.0.1/32',
    SECRETS_KEY: Buffer.alloc(32, 7).toString('base64'),
    LOG_LEVEL: 'debug'
  })
  t.after(() => gw.stop())
  return gw
}

async function call (gw: GatewayProcess, method: string, path: string, key: string, body?: unknown): Promise<{ status: number, json: any, text: string }> {
  const res = await fetch(gw.url + path, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    signal: AbortSignal.timeout(60_000)
  })
  const text = await res.text()
  return { status: res.status, json: text === '' ? undefined : JSON.parse(text), text }
}

/** A plain HTTP server that records every Authorization header it receives and answers `answer`. */
async function recorder (t: TestContext, answer: (auth: string) => { status: number, body: string }): Promise<{ url: string, seen: string[] }> {
  const seen: string[] = []
  const server = createServer((req, res) => {
    seen.push(String(req.headers.authorization ?? ''))
    req.resume()
    req.on('end', () => {
      const { status, body } = answer(String(req.headers.authorization ?? ''))
      res.writeHead(status, { 'content-type': 'text/plain' })
      res.end(body)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()) }))
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`, seen }
}

test('a masked secret is not carried to a new origin: re-PUT with another URL and `Bearer ****` is a 400', async (t) => {
  const SECRET = 'operator-provisioned-7f3a9c2e41d5'
  const legit = await startStreamableHttpFixture({ marker: 'legit' })
  t.after(() => legit.close())
  const attacker = await recorder(t, () => ({ status: 500, body: 'nope' }))
  const gw = await gateway(t)

  // The operator provisions the tenant's server, with a credential the tenant never sees.
  assert.equal((await call(gw, 'PUT', '/users/acme/mcp/servers/s', ADMIN, { type: 'http', url: legit.url, headers: { Authorization: `Bearer ${SECRET}` } })).status, 201)
  const shown = await call(gw, 'GET', '/users/acme/mcp/servers', ACME)
  assert.equal(shown.json.servers?.[0]?.config?.headers?.Authorization ?? shown.json[0]?.config?.headers?.Authorization, 'Bearer ****', shown.text)

  // The attack: the tenant sends the config back with its own URL and the masked value.
  for (const url of [attacker.url, 'http://127.0.0.1:9/other']) {
    const put = await call(gw, 'PUT', '/users/acme/mcp/servers/s', ACME, { type: 'http', url, headers: { authorization: 'Bearer ****' } })
    assert.equal(put.status, 400, put.text)
    assert.equal(put.json.code, 'GW_SECRET_ORIGIN_CHANGED')
    assert.match(put.json.message, /authorization/i)
    assert.match(put.json.message, /origin/i)
    assert.ok(!put.text.includes(SECRET))
  }
  // Whatever the gateway does next, the secret never reaches the tenant's server.
  await call(gw, 'GET', '/users/acme/mcp/servers/s/tools', ACME)
  await call(gw, 'GET', '/tools?mcp=s', ACME)
  assert.ok(!attacker.seen.some((h) => h.includes(SECRET)), `the secret was sent to the tenant's URL: ${attacker.seen.join(', ')}`)
  // The stored server is unchanged and still works with its secret.
  const tools = await call(gw, 'GET', '/users/acme/mcp/servers/s/tools', ACME)
  assert.equal(tools.status, 200, tools.text)

  // The same origin (another path, a query) keeps the masked value: a GET-edit-PUT still works.
  const samePlace = await call(gw, 'PUT', '/users/acme/mcp/servers/s', ACME, {
    type: 'http',
    url: legit.url,
    description: 'edited',
    headers: { Authorization: 'Bearer ****' }
  })
  assert.equal(samePlace.status, 200, samePlace.text)
  // A new origin with a new, real value is fine: it is the tenant's own secret.
  const own = await call(gw, 'PUT', '/users/acme/mcp/servers/s', ACME, {
    type: 'http',
    url: attacker.url,
    headers: { Authorization: 'Bearer tenant-own-token-123456' }
  })
  assert.equal(own.status, 200, own.text)
  await call(gw, 'GET', '/users/acme/mcp/servers/s/tools', ACME)
  assert.ok(attacker.seen.length > 0 && attacker.seen.every((h) => h === 'Bearer tenant-own-token-123456'), attacker.seen.join(', '))
})

test('secret redaction: an upstream echoing `token=<token>` (no scheme) leaks it nowhere (502, unavailable[].reason, log)', async (t) => {
  const TOKEN = 'sk-live-Zq81xW3vUe9TbR2p'
  const BASIC_PASSWORD = 'hunter2-correct-horse'
  const basic = Buffer.from(`svc:${BASIC_PASSWORD}`).toString('base64')
  const leaky = await recorder(t, () => ({ status: 500, body: `auth check failed for token=${TOKEN} (basic ${basic}, password=${BASIC_PASSWORD})` }))
  const gw = await gateway(t)
  assert.equal((await call(gw, 'PUT', '/users/acme/mcp/servers/s', ADMIN, {
    type: 'http',
    url: leaky.url,
    headers: { Authorization: `Bearer ${TOKEN}`, 'X-Upstream-Basic': `Basic ${basic}` }
  })).status, 201)

  const tools = await call(gw, 'GET', '/users/acme/mcp/servers/s/tools', ACME)
  assert.equal(tools.status, 502, tools.text)
  const listing = await call(gw, 'GET', '/tools?mcp=s', ACME)
  assert.equal(listing.status, 200, listing.text)
  const reasons = JSON.stringify(listing.json.unavailable)
  assert.match(reasons, /\[redacted\]/, reasons)
  assert.match(tools.json.message, /\[redacted\]/, tools.text)
  const invoked = await call(gw, 'POST', '/invoke', ACME, { name: 'user_acme_tool_anything', arguments: {} })

  for (const [where, text] of [['502 message', tools.text], ['unavailable[].reason', reasons], ['invoke', invoked.text], ['log', gw.logs()]] as const) {
    for (const secret of [TOKEN, basic, BASIC_PASSWORD]) {
      assert.ok(!text.includes(secret), `${where} leaks ${secret}: ${text.slice(0, 2000)}`)
    }
  }
})
