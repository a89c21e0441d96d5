import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createServer, request as httpRequest } from 'node:http'
import type { AddressInfo } from 'node:net'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { TestContext } from 'node:test'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { SignJWT, base64url } from 'jose'
import { buildApp } from '../../../src/app.js'
import type { BuildOptions } from '../../../src/app.js'
import { loadConfig } from '../../../src/config.js'
import { TEST_QUOTA } from '../../helpers/app.js'
import { startTestIssuer } from '../../helpers/oauth-issuer.js'
import type { TestIssuer } from '../../helpers/oauth-issuer.js'
import { startStreamableHttpFixture } from '../../../scripts/lib/mcp-fixtures/index.js'
import { testUidRange } from '../../../scripts/lib/uid-range.js'

// Incoming OAuth (README "Incoming OAuth"): JWT access tokens of a real issuer on loopback (its
// metadata and JWKS over HTTP, keys and tokens made with jose) beside the API keys.

const PUBLIC_URL = 'https://gateway.example'
const METADATA = `${PUBLIC_URL}/.well-known/oauth-protected-resource/mcp`
const ADMIN_KEY = 'admin-key-0123456789abcdef'
const ADMIN_SCOPE = 'gateway:admin'
const APPROVER_SCOPE = 'gateway:approve'

async function issuerFor (t: TestContext): Promise<TestIssuer> {
  const issuer = await startTestIssuer()
  t.after(async () => await issuer.close())
  return issuer
}

async function gateway (t: TestContext, issuer: TestIssuer, env: Record<string, string> = {}, opts: BuildOptions = {}): Promise<FastifyInstance> {
  const workspaces = await mkdtemp(join(tmpdir(), 'tg-oauth-'))
  t.after(async () => await rm(workspaces, { recursive: true, force: true }))
  const all = {
    SANDBOX: 'none',
    LOG_LEVEL: 'silent',
    WORKSPACES_DIR: workspaces,
    EGRESS_ALLOW: '127.0.0.1/32',
    PUBLIC_URL,
    OAUTH_ISSUER: issuer.issuer,
    OAUTH_ADMIN_SCOPE: ADMIN_SCOPE,
    OAUTH_APPROVER_SCOPE: APPROVER_SCOPE,
    ...TEST_QUOTA,
    ...env
  }
  const app = await buildApp(loadConfig({ ...all, ...testUidRange(all) }), { logger: false, ...opts })
  t.after(async () => await app.close())
  return app
}

const bearer = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` })
const now = (): number => Math.floor(Date.now() / 1000)

/** A 401 as an OAuth client needs it: the challenge names the metadata, says invalid_token and why, and echoes no token. */
function assertRefused (res: LightMyRequestResponse, token: string | undefined, description: RegExp | undefined): void {
  assert.equal(res.statusCode, 401, res.body)
  const challenge = String(res.headers['www-authenticate'])
  assert.ok(challenge.startsWith(`Bearer realm="tool-gateway", resource_metadata="${METADATA}"`), challenge)
  if (description === undefined) {
    assert.ok(!challenge.includes('error='), challenge)
  } else {
    assert.ok(challenge.includes(', error="invalid_token", error_description="'), challenge)
    assert.match(challenge, description)
    assert.match(String(res.json().message), description)
  }
  assert.equal(res.json().code, 'GW_UNAUTHORIZED')
  if (token !== undefined) {
    // Not the token, nor any of its three parts.
    for (const part of [token, ...token.split('.').filter((p) => p.length > 8)]) {
      assert.ok(!res.body.includes(part) && !challenge.includes(part), 'the token leaked into the answer')
    }
  }
}

test('a token of the issuer is accepted on REST and /mcp; its tenant comes from the claim; another tenant is 403', async (t) => {
  const issuer = await issuerFor(t)
  const app = await gateway(t, issuer)
  const acme = await issuer.sign({ sub: 'acme', aud: `${PUBLIC_URL}/mcp` })

  const whoami = await app.inject({ method: 'GET', url: '/whoami', headers: bearer(acme) })
  assert.equal(whoami.statusCode, 200, whoami.body)
  const me = whoami.json()
  assert.equal(me.role, 'tenant')
  assert.equal(me.userId, 'acme')
  assert.equal(me.auth, 'keyed')
  assert.match(me.keyId, /^oauth:[0-9a-f]{16}$/)

  const tools = await app.inject({ method: 'GET', url: '/tools?functions=calculate&userId=acme', headers: bearer(acme) })
  assert.equal(tools.statusCode, 200, tools.body)
  assert.deepEqual(tools.json().tools.map((x: { function: { name: string } }) => x.function.name), ['calculate'])
  const invoked = await app.inject({ method: 'POST', url: '/invoke', headers: bearer(acme), payload: { name: 'calculate', arguments: { expression: '6*7' } } })
  assert.equal(JSON.parse(invoked.json().output).result, 42)

  const mismatch = await app.inject({ method: 'GET', url: '/tools?functions=calculate&userId=globex', headers: bearer(acme) })
  assert.equal(mismatch.statusCode, 403)
  assert.equal(mismatch.json().code, 'GW_TENANT_MISMATCH')
  // A tenant token is no admin.
  assert.equal((await app.inject({ method: 'GET', url: '/status', headers: bearer(acme) })).json().code, 'GW_FORBIDDEN')

  const mcp = await app.inject({
    method: 'POST',
    url: '/mcp?functions=calculate',
    headers: { ...bearer(acme), accept: 'application/json, text/event-stream', 'content-type': 'application/json' },
    payload: { jsonrpc: '2.0', id: 1, method: 'tools/list' }
  })
  assert.equal(mcp.statusCode, 200, mcp.body)
  assert.deepEqual(mcp.json().result.tools.map((x: { name: string }) => x.name), ['calculate'])
  const mcpOther = await app.inject({
    method: 'POST',
    url: '/mcp?functions=calculate&userId=globex',
    headers: { ...bearer(acme), accept: 'application/json, text/event-stream', 'content-type': 'application/json' },
    payload: { jsonrpc: '2.0', id: 2, method: 'tools/list' }
  })
  assert.equal(mcpOther.statusCode, 403)
  assert.equal(mcpOther.json().error.data.code, 'GW_TENANT_MISMATCH')

  // The root resource is an accepted audience too (no OAUTH_AUDIENCE set); other claims name the tenant with OAUTH_TENANT_CLAIM.
  const root = await issuer.sign({ sub: 'acme', aud: PUBLIC_URL })
  assert.equal((await app.inject({ method: 'GET', url: '/whoami', headers: bearer(root) })).statusCode, 200)
})

test('OAUTH_TENANT_CLAIM and OAUTH_AUDIENCE: the tenant from another claim, only the configured audience', async (t) => {
  const issuer = await issuerFor(t)
  const app = await gateway(t, issuer, { OAUTH_TENANT_CLAIM: 'org_id', OAUTH_AUDIENCE: 'urn:tool-gateway' })
  const token = await issuer.sign({ sub: 'user|12345', org_id: 'initech', aud: 'urn:tool-gateway' })
  const res = await app.inject({ method: 'GET', url: '/whoami', headers: bearer(token) })
  assert.equal(res.statusCode, 200, res.body)
  assert.equal(res.json().userId, 'initech')
  assertRefused(
    await app.inject({ method: 'GET', url: '/whoami', headers: bearer(await issuer.sign({ sub: 'initech', org_id: 'initech', aud: `${PUBLIC_URL}/mcp` })) }),
    undefined,
    /audience \(aud\) must be urn:tool-gateway/
  )
  assertRefused(
    await app.inject({ method: 'GET', url: '/whoami', headers: bearer(await issuer.sign({ sub: 'initech', aud: 'urn:tool-gateway' })) }),
    undefined,
    /org_id claim \(the tenant\) is missing/
  )
})

test('the admin scope acts as admin; the approver scope reaches only its tenant\'s approvals', async (t) => {
  const issuer = await issuerFor(t)
  const app = await gateway(t, issuer)
  const admin = await issuer.sign({ sub: 'ops-robot', aud: `${PUBLIC_URL}/mcp`, scope: `openid ${ADMIN_SCOPE}` })
  const me = (await app.inject({ method: 'GET', url: '/whoami', headers: bearer(admin) })).json()
  assert.equal(me.role, 'admin')
  assert.equal(me.userId, null)
  assert.equal((await app.inject({ method: 'GET', url: '/status', headers: bearer(admin) })).statusCode, 200)
  assert.equal((await app.inject({ method: 'GET', url: '/tools?functions=calculate&userId=globex', headers: bearer(admin) })).statusCode, 200)

  // `scp` as an array (as some issuers write it) works like `scope`.
  const approver = await issuer.sign({ sub: 'acme', aud: `${PUBLIC_URL}/mcp`, scp: [APPROVER_SCOPE] })
  const who = (await app.inject({ method: 'GET', url: '/whoami', headers: bearer(approver) })).json()
  assert.deepEqual([who.role, who.userId], ['approver', 'acme'])
  const approvals = await app.inject({ method: 'GET', url: '/approvals', headers: bearer(approver) })
  assert.equal(approvals.statusCode, 200, approvals.body)
  for (const url of ['/tools?functions=calculate', '/status', '/catalog']) {
    const res = await app.inject({ method: 'GET', url, headers: bearer(approver) })
    assert.equal(res.statusCode, 403, url)
    assert.equal(res.json().code, 'GW_FORBIDDEN')
  }
  const invoke = await app.inject({ method: 'POST', url: '/invoke', headers: bearer(approver), payload: { name: 'calculate', arguments: { expression: '1' } } })
  assert.equal(invoke.statusCode, 403)
  // The admin scope is not granted by a look-alike scope.
  const lookalike = await issuer.sign({ sub: 'acme', aud: `${PUBLIC_URL}/mcp`, scope: `${ADMIN_SCOPE}s x${ADMIN_SCOPE}` })
  assert.equal((await app.inject({ method: 'GET', url: '/whoami', headers: bearer(lookalike) })).json().role, 'tenant')
})

test('refused with 401 invalid_token and resource_metadata: audience, issuer, expired, nbf, HS256, none, unknown kid, another key, no tenant', async (t) => {
  const issuer = await issuerFor(t)
  const app = await gateway(t, issuer)
  const aud = `${PUBLIC_URL}/mcp`
  const key = issuer.current()
  const other = await issuer.newKey()

  const hs256 = await new SignJWT({ sub: 'acme', aud, iss: issuer.issuer, exp: now() + 300 })
    .setProtectedHeader({ alg: 'HS256', kid: key.kid })
    .sign(new TextEncoder().encode(key.publicPem))
  const encode = (value: unknown): string => base64url.encode(JSON.stringify(value))
  const none = `${encode({ alg: 'none', kid: key.kid })}.${encode({ sub: 'acme', aud, iss: issuer.issuer, exp: now() + 300 })}.`
  const forgedKid = await issuer.sign({ sub: 'acme', aud }, { key: { ...other, kid: key.kid } })

  const cases: Array<[string, string, RegExp]> = [
    ['wrong audience', await issuer.sign({ sub: 'acme', aud: 'https://other.example/mcp' }), /audience \(aud\) must be https:\/\/gateway\.example\/mcp or https:\/\/gateway\.example/],
    ['no audience', await issuer.sign({ sub: 'acme' }), /aud/],
    ['wrong issuer', await issuer.sign({ sub: 'acme', aud, iss: 'https://evil.example' }), /not issued by this gateway's authorization server/],
    ['expired', await issuer.sign({ sub: 'acme', aud, exp: now() - 120 }), /expired/],
    ['no exp', await issuer.sign({ sub: 'acme', aud, exp: undefined }), /no exp claim/],
    ['nbf in the future', await issuer.sign({ sub: 'acme', aud, nbf: now() + 3600 }), /not valid yet/],
    ['HS256 with the public key as secret', hs256, /algorithm is not accepted/],
    ['alg none', none, /algorithm is not accepted/],
    ['unknown kid', await issuer.sign({ sub: 'acme', aud }, { key: other }), /kid\) is not one of the issuer's keys/],
    ['another key under the issuer\'s kid', forgedKid, /signature does not verify/],
    ['no tenant claim', await issuer.sign({ aud }), /sub claim \(the tenant\) is missing/],
    ['a tenant claim that is no userId', await issuer.sign({ sub: 'acme_corp', aud }), /not a userId/],
    ['a tenant claim that is no string', await issuer.sign({ sub: 42 as unknown as string, aud }), /sub claim \(the tenant\) is missing or not a userId/]
  ]
  for (const [what, token, description] of cases) {
    await t.test(what, async () => {
      assertRefused(await app.inject({ method: 'GET', url: '/tools?functions=calculate', headers: bearer(token) }), token, description)
      const mcp = await app.inject({
        method: 'POST',
        url: '/mcp?functions=calculate',
        headers: { ...bearer(token), accept: 'application/json, text/event-stream', 'content-type': 'application/json' },
        payload: { jsonrpc: '2.0', id: 1, method: 'tools/list' }
      })
      assert.equal(mcp.statusCode, 401)
      assert.equal(mcp.json().error.data.code, 'GW_UNAUTHORIZED')
      assert.match(String(mcp.headers['www-authenticate']), new RegExp(`resource_metadata="${METADATA}", error="invalid_token"`))
    })
  }
  // A missing header: the challenge without error= (RFC 6750 section 3.1), so the client starts authorization.
  assertRefused(await app.inject({ method: 'GET', url: '/tools?functions=calculate' }), undefined, undefined)
  // A credential that is neither a key nor JWT-shaped is an unknown one.
  assertRefused(await app.inject({ method: 'GET', url: '/tools', headers: bearer('not-a-key-0123456789') }), undefined, /Unknown API key or access token/)
  // The issuer's own keys are still good: the refusals were about the tokens.
  assert.equal((await app.inject({ method: 'GET', url: '/whoami', headers: bearer(await issuer.sign({ sub: 'acme', aud })) })).statusCode, 200)
})

test('key rotation: a token signed with the issuer\'s new key (new kid) is accepted without a restart, the old key\'s no longer', async (t) => {
  const issuer = await issuerFor(t)
  // A JWKS cooldown of 0: the production default (30 s) would only delay the refetch.
  const app = await gateway(t, issuer, {}, { oauth: { jwksCooldownMs: 0 } })
  const aud = `${PUBLIC_URL}/mcp`
  const old = await issuer.sign({ sub: 'acme', aud })
  assert.equal((await app.inject({ method: 'GET', url: '/whoami', headers: bearer(old) })).statusCode, 200)
  assert.equal((await app.inject({ method: 'GET', url: '/whoami', headers: bearer(old) })).statusCode, 200)
  // Discovery once, the JWKS once: the keys are cached between requests.
  assert.equal(issuer.hits.get('/.well-known/oauth-authorization-server'), 1)
  assert.equal(issuer.hits.get('/jwks'), 1)

  await issuer.rotate()
  const rotated = await issuer.sign({ sub: 'acme', aud })
  const res = await app.inject({ method: 'GET', url: '/whoami', headers: bearer(rotated) })
  assert.equal(res.statusCode, 200, res.body)
  assert.equal(issuer.hits.get('/jwks'), 2)
  assertRefused(await app.inject({ method: 'GET', url: '/whoami', headers: bearer(old) }), old, /kid\) is not one of the issuer's keys/)
})

test('the issuer is not needed at start-up; while it is down a token gets 503 GW_ISSUER_UNAVAILABLE (not a 401), then works once it is back', async (t) => {
  const issuer = await issuerFor(t)
  issuer.setDown(true)
  const app = await gateway(t, issuer, { API_KEYS: `${ADMIN_KEY}:*` }, { oauth: { discoveryRetryMs: 0 } })
  const token = await issuer.sign({ sub: 'acme', aud: `${PUBLIC_URL}/mcp` })
  const down = await app.inject({ method: 'GET', url: '/whoami', headers: bearer(token) })
  assert.equal(down.statusCode, 503, down.body)
  assert.equal(down.json().code, 'GW_ISSUER_UNAVAILABLE')
  assert.equal(down.headers['retry-after'], '5')
  assert.ok(!down.body.includes(token))
  // API keys do not depend on the issuer.
  assert.equal((await app.inject({ method: 'GET', url: '/whoami', headers: bearer(ADMIN_KEY) })).json().role, 'admin')

  issuer.setDown(false)
  const up = await app.inject({ method: 'GET', url: '/whoami', headers: bearer(token) })
  assert.equal(up.statusCode, 200, up.body)
  assert.equal(up.json().userId, 'acme')
})

test('a JWKS document larger than 256 KiB is not read: 503 GW_ISSUER_UNAVAILABLE, and a normal one works again', async (t) => {
  const issuer = await issuerFor(t)
  issuer.setJwksPadding(4 * 1024 * 1024)
  const app = await gateway(t, issuer, { API_KEYS: `${ADMIN_KEY}:*` }, { oauth: { discoveryRetryMs: 0, jwksCooldownMs: 0 } })
  const token = await issuer.sign({ sub: 'acme', aud: `${PUBLIC_URL}/mcp` })
  const big = await app.inject({ method: 'GET', url: '/whoami', headers: bearer(token) })
  assert.equal(big.statusCode, 503, big.body)
  assert.equal(big.json().code, 'GW_ISSUER_UNAVAILABLE')
  issuer.setJwksPadding(0)
  const ok = await app.inject({ method: 'GET', url: '/whoami', headers: bearer(token) })
  assert.equal(ok.statusCode, 200, ok.body)
})

test('API keys keep working beside tokens; with OAUTH_ISSUER and no API keys the gateway is not open', async (t) => {
  const issuer = await issuerFor(t)
  const keyed = await gateway(t, issuer, { API_KEYS: `${ADMIN_KEY}:*,acme-key-0123456789abcdef:acme` })
  assert.equal((await keyed.inject({ method: 'GET', url: '/whoami', headers: bearer(ADMIN_KEY) })).json().role, 'admin')
  assert.equal((await keyed.inject({ method: 'GET', url: '/whoami', headers: bearer('acme-key-0123456789abcdef') })).json().userId, 'acme')
  assertRefused(await keyed.inject({ method: 'GET', url: '/whoami', headers: bearer('acme-key-0123456789abcdeX') }), undefined, /Unknown API key or access token/)

  const tokensOnly = await gateway(t, issuer)
  assert.equal(tokensOnly.authMode, 'keyed')
  assertRefused(await tokensOnly.inject({ method: 'GET', url: '/tools?functions=calculate' }), undefined, undefined)
  const invoke = await tokensOnly.inject({ method: 'POST', url: '/invoke', payload: { name: 'calculate', arguments: { expression: '1' } } })
  assertRefused(invoke, undefined, undefined)
  // Public routes stay public.
  assert.equal((await tokensOnly.inject({ method: 'GET', url: '/healthz' })).statusCode, 200)
})

test('failed tokens count in the key-guess guard per token, so one client\'s expired token does not lock out the others behind its address', async (t) => {
  const issuer = await issuerFor(t)
  const app = await gateway(t, issuer, { AUTH_FAILURES_PER_MINUTE: '3' })
  const aud = `${PUBLIC_URL}/mcp`
  const expired = await issuer.sign({ sub: 'acme', aud, exp: now() - 120 })
  for (let i = 0; i < 3; i++) assertRefused(await app.inject({ method: 'GET', url: '/whoami', headers: bearer(expired) }), expired, /expired/)
  const blocked = await app.inject({ method: 'GET', url: '/whoami', headers: bearer(expired) })
  assert.equal(blocked.statusCode, 429)
  assert.equal(blocked.json().code, 'GW_RATE_LIMITED')
  const good = await issuer.sign({ sub: 'globex', aud })
  assert.equal((await app.inject({ method: 'GET', url: '/whoami', headers: bearer(good) })).statusCode, 200)
  // The address ceiling (10 x 3) still bounds a client that sends ever new bad tokens.
  let last = 0
  for (let i = 0; i < 40 && last !== 429; i++) {
    last = (await app.inject({ method: 'GET', url: '/whoami', headers: bearer(await issuer.sign({ sub: 'acme', aud: 'x', jti: String(i) })) })).statusCode
  }
  assert.equal(last, 429)
  assert.equal((await app.inject({ method: 'GET', url: '/whoami', headers: bearer(good) })).statusCode, 429)
})

test('the client\'s token is never passed upstream: the MCP server sees no Authorization header and no part of the token', async (t) => {
  const issuer = await issuerFor(t)
  const fixture = await startStreamableHttpFixture({ marker: 'up' })
  t.after(async () => await fixture.close())
  // A recording proxy in front of the fixture: every header and body byte the gateway sends upstream.
  const seen: string[] = []
  const proxy = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      const body = Buffer.concat(chunks)
      seen.push(`${req.method} ${req.url}\n${JSON.stringify(req.headers)}\n${body.toString('utf8')}`)
      const upstream = httpRequest({ host: '127.0.0.1', port: fixture.port, path: req.url, method: req.method, headers: req.headers }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers)
        answer.pipe(res)
      })
      upstream.end(body)
    })
  })
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve))
  t.after(async () => {
    proxy.closeAllConnections()
    await new Promise<void>((resolve) => proxy.close(() => resolve()))
  })
  const upstreamUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}/mcp`

  const app = await gateway(t, issuer)
  const token = await issuer.sign({ sub: 'acme', aud: `${PUBLIC_URL}/mcp` })
  const registration = { type: 'streamable_http', url: upstreamUrl }
  const put = await app.inject({ method: 'PUT', url: '/users/acme/mcp/servers/up', headers: bearer(token), payload: registration })
  assert.equal(put.statusCode, 201, put.body)
  const call = { name: 'user_acme_tool_echo', arguments: { text: 'hi' } }
  const invoked = await app.inject({ method: 'POST', url: '/invoke', headers: bearer(token), payload: call })
  assert.equal(invoked.json().output, 'up:hi', invoked.body)
  const mcp = await app.inject({
    method: 'POST',
    url: '/mcp?mcp=up',
    headers: { ...bearer(token), accept: 'application/json, text/event-stream', 'content-type': 'application/json' },
    payload: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'user_acme_tool_echo', arguments: { text: 'there' } } }
  })
  assert.match(mcp.body, /up:there/)

  assert.ok(seen.length >= 2, `upstream saw ${seen.length} requests`)
  const [header, payload, signature] = token.split('.') as [string, string, string]
  for (const request of seen) {
    assert.ok(!/"authorization"/i.test(request.split('\n')[1] ?? ''), `an Authorization header went upstream: ${request.slice(0, 200)}`)
    for (const part of [token, header, payload, signature]) assert.ok(!request.includes(part), 'a part of the client\'s token went upstream')
  }
})
