/**
 * The gateway as an OAuth client of tenants' MCP servers (SPEC 16), against a real authorization
 * server (oidc-provider) and an MCP server that validates its JWTs (scripts/lib/oauth-fixtures):
 * connecting per tenant, GW_OAUTH_REQUIRED before, refresh, step-up, disconnect, the callback's
 * state and returnTo rules, tenancy, the egress guard on the flow, and no token anywhere.
 */
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { createServer } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import type { AddressInfo } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify'
import { browser, startAuthorizationServer, startProtectedMcpServer } from '../../../scripts/lib/oauth-fixtures/index.js'
import type { AuthorizationServer, ProtectedMcpServer } from '../../../scripts/lib/oauth-fixtures/index.js'
import { buildApp } from '../../../src/app.js'
import { loadConfig } from '../../../src/config.js'
import { TEST_QUOTA, buildTestApp } from '../../helpers/app.js'

const ADMIN = 'oauth-admin-key-0123456789'
const ALICE = 'oauth-alice-key-0123456789'
const BOB = 'oauth-bob-key-0123456789'
const SERVICE = { id: 'gateway-service', secret: 'service-secret-0123456789abcdef' }
// A loopback http redirect URI (a native client, RFC 8252): the authorization server accepts it; a deployment's is https.
const PUBLIC_URL = 'http://127.0.0.1:9'
const RETURN_ORIGIN = 'https://app.example'
/** Anything shaped like a JWT (the fixture's access tokens are JWTs): none may leave the gateway. */
const JWT = /eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}/

let as: AuthorizationServer
let mcp: ProtectedMcpServer

before(async () => {
  as = await startAuthorizationServer({
    clients: [{
      client_id: SERVICE.id,
      client_secret: SERVICE.secret,
      grant_types: ['client_credentials'],
      response_types: [],
      redirect_uris: [],
      token_endpoint_auth_method: 'client_secret_basic'
    }]
  })
  mcp = await startProtectedMcpServer({ issuer: as.issuer })
})

after(async () => {
  await mcp.close()
  await as.close()
})

const env = {
  API_KEYS: `${ADMIN}:*,${ALICE}:alice,${BOB}:bob`,
  EGRESS_ALLOW: '127.0.0.1/32',
  PUBLIC_URL,
  OAUTH_RETURN_ALLOW: RETURN_ORIGIN,
  LOAD_EXAMPLES: 'false',
  SECRETS_KEY: 'YSdqi4D+lk82wD8geYaX6FXtLlow49URdGkDN/icEME='
}

/** Every answer the test got, to look for tokens afterwards. */
type Inject = (o: InjectOptions) => Promise<LightMyRequestResponse>

function recorder (app: FastifyInstance): { inject: Inject, bodies: string[] } {
  const bodies: string[] = []
  return {
    bodies,
    inject: async (o) => {
      const res = await app.inject(o)
      bodies.push(`${JSON.stringify(res.headers)}\n${res.body}`)
      return res
    }
  }
}

const auth = (key: string): Record<string, string> => ({ authorization: `Bearer ${key}` })

async function register (app: FastifyInstance, user: string, key: string, serverId = 'docs', extra: Record<string, unknown> = {}): Promise<void> {
  const res = await app.inject({ method: 'PUT', url: `/users/${user}/mcp/servers/${serverId}`, headers: auth(key), payload: { url: mcp.url, auth: { type: 'oauth' }, ...extra } })
  assert.ok(res.statusCode === 201 || res.statusCode === 200, res.body)
}

/** The user's whole authorization: authorize, the user at the authorization server, the callback at the gateway. */
async function connect (
  inject: Inject, user: string, key: string, account: string, serverId = 'docs'
): Promise<LightMyRequestResponse> {
  const started = await inject({ method: 'POST', url: `/users/${user}/mcp/servers/${serverId}/oauth/authorize`, headers: auth(key), payload: {} })
  assert.equal(started.statusCode, 200, started.body)
  const { authorizationUrl } = started.json() as { authorizationUrl: string }
  const back = new URL(await browser(authorizationUrl, { account }))
  assert.equal(back.origin, PUBLIC_URL, 'the authorization server sends the user to the gateway\'s PUBLIC_URL')
  return await inject({ method: 'GET', url: `${back.pathname}${back.search}` })
}

async function invoke (
  inject: Inject, user: string, key: string, tool: string, args: Record<string, unknown> = {}
): Promise<{ isError: boolean, output: string, error?: { code: string, message: string } }> {
  const res = await inject({ method: 'POST', url: '/invoke', headers: auth(key), payload: { name: `user_${user}_tool_${tool}`, userId: user, arguments: args } })
  assert.equal(res.statusCode, 200, res.body)
  return res.json()
}

test('two tenants connect the same server and each calls it as its own user; before that, GW_OAUTH_REQUIRED in listings and calls', async (t) => {
  const app = await buildTestApp(t, { env })
  const { inject, bodies } = recorder(app)
  await register(app, 'alice', ALICE)
  await register(app, 'bob', BOB)

  const listing = await inject({ method: 'GET', url: '/tools?mcp=docs&userId=alice', headers: auth(ALICE) })
  const unavailable = (listing.json() as { unavailable: Array<{ serverId: string, code?: string, authorize?: string }> }).unavailable
  assert.deepEqual(unavailable.map((u) => [u.serverId, u.code, u.authorize]), [['docs', 'GW_OAUTH_REQUIRED', '/users/alice/mcp/servers/docs/oauth/authorize']])
  // Not listed yet, so only its qualified name routes to it.
  const before = await invoke(inject, 'alice', ALICE, 'docs__whoami')
  assert.equal(before.isError, true)
  assert.equal(before.error?.code, 'GW_OAUTH_REQUIRED')
  assert.match(before.error?.message ?? '', /connect/)
  assert.equal((await inject({ method: 'GET', url: '/users/alice/mcp/servers/docs/oauth', headers: auth(ALICE) })).json().status, 'authorization_required')
  const live = await inject({ method: 'GET', url: '/users/alice/mcp/servers/docs/tools', headers: auth(ALICE) })
  assert.equal(live.statusCode, 409)
  assert.equal(live.json().code, 'GW_OAUTH_REQUIRED')

  const done = await connect(inject, 'alice', ALICE, 'alice-account')
  assert.equal(done.statusCode, 200, done.body)
  assert.match(done.body, /docs is connected/)
  assert.equal((await connect(inject, 'bob', BOB, 'bob-account')).statusCode, 200)

  const alice = await invoke(inject, 'alice', ALICE, 'whoami')
  assert.equal(alice.isError, false, alice.output)
  assert.equal(JSON.parse(alice.output).sub, 'alice-account')
  const bob = await invoke(inject, 'bob', BOB, 'whoami')
  assert.equal(JSON.parse(bob.output).sub, 'bob-account')
  const listed = await inject({ method: 'GET', url: '/tools?mcp=docs&userId=alice', headers: auth(ALICE) })
  assert.deepEqual((listed.json() as { unavailable: unknown[] }).unavailable, [])

  const status = (await inject({ method: 'GET', url: '/users/alice/mcp/servers/docs/oauth', headers: auth(ALICE) })).json()
  assert.equal(status.status, 'connected')
  assert.equal(status.issuer, as.issuer)
  assert.ok(status.scopes.includes('mcp:read'), JSON.stringify(status))
  assert.ok(Date.parse(status.expiresAt) > Date.now())
  // The tenant's own journal and the metrics carry no token either.
  await inject({ method: 'GET', url: '/users/alice/invocations', headers: auth(ALICE) })
  await inject({ method: 'GET', url: '/metrics', headers: auth(ADMIN) })
  await inject({ method: 'GET', url: '/users/alice/mcp/servers', headers: auth(ALICE) })
  for (const body of bodies) assert.doesNotMatch(body, JWT)
  // Every request the server saw came with a token of this issuer for this resource.
  assert.ok(mcp.seen.requests.filter((r) => r.status === 200).every((r) => r.aud === mcp.url))
})

test('a tenant key reaches only its own servers\' authorizations; the callback\'s state is single-use and cannot be forged', async (t) => {
  const app = await buildTestApp(t, { env })
  await register(app, 'alice', ALICE)
  const foreign = await app.inject({ method: 'POST', url: '/users/alice/mcp/servers/docs/oauth/authorize', headers: auth(BOB), payload: {} })
  assert.equal(foreign.statusCode, 403)
  assert.equal(foreign.json().code, 'GW_TENANT_MISMATCH')
  assert.equal((await app.inject({ method: 'DELETE', url: '/users/alice/mcp/servers/docs/oauth', headers: auth(BOB) })).statusCode, 403)
  const global = await app.inject({ method: 'POST', url: '/mcp/servers/docs/oauth/authorize', headers: auth(ALICE), payload: {} })
  assert.equal(global.statusCode, 403)

  const started = await app.inject({ method: 'POST', url: '/users/alice/mcp/servers/docs/oauth/authorize', headers: auth(ALICE), payload: {} })
  const back = new URL(await browser(started.json().authorizationUrl, { account: 'alice-account' }))
  const forged = new URL(back)
  forged.searchParams.set('state', 'forged-state')
  const refused = await app.inject({ method: 'GET', url: `${forged.pathname}${forged.search}` })
  assert.equal(refused.statusCode, 400)
  assert.equal(refused.json().code, 'GW_OAUTH_STATE_INVALID')
  assert.equal((await app.inject({ method: 'GET', url: `${back.pathname}${back.search}` })).statusCode, 200)
  const replayed = await app.inject({ method: 'GET', url: `${back.pathname}${back.search}` })
  assert.equal(replayed.statusCode, 400)
  assert.equal(replayed.json().code, 'GW_OAUTH_STATE_INVALID')
  // The callback is public (the user's browser has no key) and says nothing of the tenant on failure.
  assert.doesNotMatch(replayed.body, /alice/)
})

test('returnTo: an allowed origin gets the user back there, any other is refused before anything starts', async (t) => {
  const app = await buildTestApp(t, { env })
  await register(app, 'alice', ALICE)
  for (const returnTo of ['https://evil.example/cb', 'https://app.example.evil.example/', 'http://app.example/', 'javascript:alert(1)', '/relative']) {
    const res = await app.inject({ method: 'POST', url: '/users/alice/mcp/servers/docs/oauth/authorize', headers: auth(ALICE), payload: { returnTo } })
    assert.equal(res.statusCode, 400, returnTo)
    assert.equal(res.json().code, 'GW_RETURN_NOT_ALLOWED', returnTo)
  }
  const started = await app.inject({ method: 'POST', url: '/users/alice/mcp/servers/docs/oauth/authorize', headers: auth(ALICE), payload: { returnTo: `${RETURN_ORIGIN}/settings?x=1` } })
  assert.equal(started.statusCode, 200, started.body)
  const back = new URL(await browser(started.json().authorizationUrl, { account: 'alice-account' }))
  const done = await app.inject({ method: 'GET', url: `${back.pathname}${back.search}` })
  assert.equal(done.statusCode, 302)
  assert.equal(done.headers.location, `${RETURN_ORIGIN}/settings?x=1`)
})

test('an expired token is refreshed before the call; a refresh the server refuses asks the user again', async (t) => {
  const app = await buildTestApp(t, { env })
  await register(app, 'alice', ALICE)
  as.setAccessTokenTtl(2)
  t.after(() => { as.setAccessTokenTtl(300) })
  assert.equal((await connect(app.inject.bind(app), 'alice', ALICE, 'alice-account')).statusCode, 200)
  const refreshes = as.stats().grants.refresh_token
  await sleep(2200)
  const call = await invoke(app.inject.bind(app), 'alice', ALICE, 'whoami')
  assert.equal(call.isError, false, call.output)
  assert.equal(as.stats().grants.refresh_token, refreshes + 1)

  as.forgetGrants()
  await sleep(2200)
  const refused = await invoke(app.inject.bind(app), 'alice', ALICE, 'whoami')
  assert.equal(refused.error?.code, 'GW_OAUTH_REQUIRED', refused.output)
  // Later requests go without a token and get the server's 401: the status still says why.
  await app.inject({ method: 'GET', url: '/tools?mcp=docs&userId=alice', headers: auth(ALICE) })
  const later = await invoke(app.inject.bind(app), 'alice', ALICE, 'whoami')
  assert.equal(later.error?.code, 'GW_OAUTH_REQUIRED', later.output)
  const status = (await app.inject({ method: 'GET', url: '/users/alice/mcp/servers/docs/oauth', headers: auth(ALICE) })).json()
  assert.equal(status.status, 'refresh_failed')
  assert.match(status.error, /refused the refresh token|invalid_grant/)
})

test('scope step-up: a 403 insufficient_scope asks the user for the union of scopes, and the call passes after', async (t) => {
  const app = await buildTestApp(t, { env })
  await register(app, 'alice', ALICE)
  assert.equal((await connect(app.inject.bind(app), 'alice', ALICE, 'alice-account')).statusCode, 200)
  const denied = await invoke(app.inject.bind(app), 'alice', ALICE, 'admin_action')
  assert.equal(denied.error?.code, 'GW_OAUTH_REQUIRED', denied.output)
  assert.match(denied.error?.message ?? '', /mcp:admin/)
  assert.deepEqual((await app.inject({ method: 'GET', url: '/users/alice/mcp/servers/docs/oauth', headers: auth(ALICE) })).json().requiredScopes, ['mcp:admin'])
  const started = await app.inject({ method: 'POST', url: '/users/alice/mcp/servers/docs/oauth/authorize', headers: auth(ALICE), payload: {} })
  const scope = new URL(started.json().authorizationUrl).searchParams.get('scope')?.split(' ') ?? []
  assert.ok(scope.includes('mcp:admin') && scope.includes('mcp:read'), `step-up keeps the granted scope: ${scope.join(' ')}`)
  const back = new URL(await browser(started.json().authorizationUrl, { account: 'alice-account' }))
  assert.equal((await app.inject({ method: 'GET', url: `${back.pathname}${back.search}` })).statusCode, 200)
  const allowed = await invoke(app.inject.bind(app), 'alice', ALICE, 'admin_action')
  assert.equal(allowed.isError, false, allowed.output)
  assert.match(allowed.output, /admin done by alice-account/)
})

test('disconnect revokes and forgets the tokens: the next call asks the user again', async (t) => {
  const app = await buildTestApp(t, { env })
  await register(app, 'alice', ALICE)
  assert.equal((await connect(app.inject.bind(app), 'alice', ALICE, 'alice-account')).statusCode, 200)
  assert.equal((await invoke(app.inject.bind(app), 'alice', ALICE, 'whoami')).isError, false)
  const revocations = as.stats().revocations
  const res = await app.inject({ method: 'DELETE', url: '/users/alice/mcp/servers/docs/oauth', headers: auth(ALICE) })
  assert.equal(res.statusCode, 204)
  assert.ok(as.stats().revocations > revocations, 'the tokens were revoked at the authorization server')
  assert.equal((await app.inject({ method: 'GET', url: '/users/alice/mcp/servers/docs/oauth', headers: auth(ALICE) })).json().status, 'authorization_required')
  const call = await invoke(app.inject.bind(app), 'alice', ALICE, 'whoami')
  assert.equal(call.error?.code, 'GW_OAUTH_REQUIRED', call.output)
})

test('a server without auth, or a gateway without PUBLIC_URL, has no OAuth to start', async (t) => {
  const app = await buildTestApp(t, { env })
  await app.inject({ method: 'PUT', url: '/users/alice/mcp/servers/plain', headers: auth(ALICE), payload: { url: mcp.url } })
  const plain = await app.inject({ method: 'POST', url: '/users/alice/mcp/servers/plain/oauth/authorize', headers: auth(ALICE), payload: {} })
  assert.equal(plain.json().code, 'GW_OAUTH_NOT_CONFIGURED')
  const missing = await app.inject({ method: 'GET', url: '/users/alice/mcp/servers/nothing/oauth', headers: auth(ALICE) })
  assert.equal(missing.json().code, 'GW_SERVER_NOT_FOUND')
  const noPublic = await buildTestApp(t, { env: { ...env, PUBLIC_URL: '' } })
  await register(noPublic, 'alice', ALICE)
  const started = await noPublic.inject({ method: 'POST', url: '/users/alice/mcp/servers/docs/oauth/authorize', headers: auth(ALICE), payload: {} })
  assert.equal(started.json().code, 'GW_OAUTH_NOT_CONFIGURED')
  assert.match(started.json().message, /PUBLIC_URL/)
  // A tenant may not give its server the gateway's own identity.
  const cc = await app.inject({
    method: 'PUT',
    url: '/users/alice/mcp/servers/cc',
    headers: auth(ALICE),
    payload: { url: mcp.url, auth: { type: 'oauth', grant: 'client_credentials', clientId: 'x', clientSecret: 'y' } }
  })
  assert.equal(cc.statusCode, 403)
})

test('the flow passes the egress guard: a server whose metadata names a loopback authorization server is not followed there', async (t) => {
  // An authorization server that answers on 127.0.0.2 (outside EGRESS_ALLOW): without the guard the
  // gateway would fetch its metadata and register there; with it, nothing reaches it.
  let reached = 0
  const inner = createServer((req, res) => {
    reached++
    const base = `http://127.0.0.2:${(inner.address() as AddressInfo).port}`
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({
      issuer: base,
      authorization_endpoint: `${base}/authorize`,
      token_endpoint: `${base}/token`,
      registration_endpoint: `${base}/register`,
      response_types_supported: ['code'],
      code_challenge_methods_supported: ['S256'],
      ...(req.url === '/register' ? { client_id: 'c' } : {})
    }))
  })
  await new Promise<void>((resolve) => inner.listen(0, '127.0.0.2', resolve))
  t.after(() => { inner.close() })
  const innerUrl = `http://127.0.0.2:${(inner.address() as AddressInfo).port}`
  // A tenant's server on an allowed address whose protected resource metadata points the gateway there.
  const evil = createServer((req, res) => {
    if (req.url?.startsWith('/.well-known/oauth-protected-resource') === true) {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ resource: `http://127.0.0.1:${port}/mcp`, authorization_servers: [innerUrl] }))
      return
    }
    res.writeHead(401, { 'www-authenticate': `Bearer resource_metadata="http://127.0.0.1:${port}/.well-known/oauth-protected-resource/mcp"` }).end()
  })
  await new Promise<void>((resolve) => evil.listen(0, '127.0.0.1', resolve))
  const port = (evil.address() as AddressInfo).port
  t.after(() => { evil.close() })
  const app = await buildTestApp(t, { env })
  const put = await app.inject({ method: 'PUT', url: '/users/alice/mcp/servers/evil', headers: auth(ALICE), payload: { url: `http://127.0.0.1:${port}/mcp`, auth: { type: 'oauth' } } })
  assert.equal(put.statusCode, 201, put.body)
  const res = await app.inject({ method: 'POST', url: '/users/alice/mcp/servers/evil/oauth/authorize', headers: auth(ALICE), payload: {} })
  assert.equal(res.statusCode, 502, res.body)
  assert.equal(reached, 0, 'no request of the flow reached the authorization server outside EGRESS_ALLOW')
  // The same server allowed: the flow does reach it (the test can tell the two apart).
  const open = await buildTestApp(t, { env: { ...env, EGRESS_ALLOW: '127.0.0.1/32,127.0.0.2/32' } })
  await open.inject({ method: 'PUT', url: '/users/alice/mcp/servers/evil', headers: auth(ALICE), payload: { url: `http://127.0.0.1:${port}/mcp`, auth: { type: 'oauth' } } })
  await open.inject({ method: 'POST', url: '/users/alice/mcp/servers/evil/oauth/authorize', headers: auth(ALICE), payload: {} })
  assert.ok(reached > 0, 'allowed, the flow reaches it')
})

test('client credentials: a global server gets the gateway\'s own token, and the client secret is never shown', async (t) => {
  const app = await buildTestApp(t, { env })
  const put = await app.inject({
    method: 'PUT',
    url: '/mcp/servers/service',
    headers: auth(ADMIN),
    payload: {
      url: mcp.url,
      auth: {
        type: 'oauth', grant: 'client_credentials', clientId: SERVICE.id, clientSecret: SERVICE.secret, scopes: ['mcp:read'], authorizationServer: as.issuer
      }
    }
  })
  assert.equal(put.statusCode, 201, put.body)
  assert.doesNotMatch(put.body, new RegExp(SERVICE.secret))
  const shown = await app.inject({ method: 'GET', url: '/mcp/servers', headers: auth(ADMIN) })
  assert.doesNotMatch(shown.body, new RegExp(SERVICE.secret))
  assert.match(shown.body, /"clientSecret":"\*\*\*\*"/)
  const res = await app.inject({ method: 'POST', url: '/invoke', headers: auth(ALICE), payload: { name: 'whoami', userId: 'alice', arguments: {} } })
  const body = res.json() as { isError: boolean, output: string }
  assert.equal(body.isError, false, body.output)
  assert.equal(JSON.parse(body.output).sub, SERVICE.id)
  assert.equal((await app.inject({ method: 'GET', url: '/mcp/servers/service/oauth', headers: auth(ADMIN) })).json().status, 'connected')
})

test('no token in any log line, at debug level, through connect, call, refresh and disconnect', async (t) => {
  const lines: string[] = []
  const stream = new Writable({ write (chunk: Buffer, _enc, done) { lines.push(chunk.toString()); done() } })
  const workspaces = await mkdtemp(join(tmpdir(), 'tg-oauth-logs-'))
  t.after(async () => await rm(workspaces, { recursive: true, force: true }))
  const config = loadConfig({ SANDBOX: 'none', ...TEST_QUOTA, WORKSPACES_DIR: workspaces, ...env, LOG_LEVEL: 'debug' })
  const app = await buildApp(config, { logger: { level: 'debug', stream } })
  t.after(async () => await app.close())
  await register(app, 'alice', ALICE)
  as.setAccessTokenTtl(2)
  t.after(() => { as.setAccessTokenTtl(300) })
  assert.equal((await connect(app.inject.bind(app), 'alice', ALICE, 'alice-account')).statusCode, 200)
  assert.equal((await invoke(app.inject.bind(app), 'alice', ALICE, 'whoami')).isError, false)
  await sleep(2200)
  assert.equal((await invoke(app.inject.bind(app), 'alice', ALICE, 'whoami')).isError, false)
  assert.equal((await app.inject({ method: 'DELETE', url: '/users/alice/mcp/servers/docs/oauth', headers: auth(ALICE) })).statusCode, 204)
  assert.ok(lines.length > 10, 'the app logged')
  for (const line of lines) assert.doesNotMatch(line, JWT)
  // The callback's code and state are credentials of the flow too: the request log keeps the path only.
  assert.ok(lines.some((l) => l.includes('/oauth/callback')))
  for (const line of lines.filter((l) => l.includes('/oauth/callback'))) assert.doesNotMatch(line, /code=|state=/)
})
