import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { connect } from 'node:net'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { TestContext } from 'node:test'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { buildTestApp } from '../../helpers/app.js'

const ADMIN = 'admin-key-0123456789abcdef'
const ACME = 'acme-key-0123456789abcdef'
const GLOBEX = 'globex-key-0123456789abcd'
const API_KEYS = `${ADMIN}:*,${ACME}:acme,${GLOBEX}:globex`

async function keyed (t: TestContext, env: Record<string, string> = {}): Promise<FastifyInstance> {
  return await buildTestApp(t, { env: { API_KEYS, FUNCTIONS_DIR: 'test/fixtures/functions/behaviours', ...env } })
}

const bearer = (key: string): Record<string, string> => ({ authorization: `Bearer ${key}` })

function assertError (res: LightMyRequestResponse, status: number, code: string): Record<string, unknown> {
  assert.equal(res.statusCode, status, res.body)
  const body = res.json()
  assert.deepEqual(Object.keys(body).sort(), ['code', 'error', 'message', 'statusCode'])
  assert.equal(body.code, code)
  for (const key of [ADMIN, ACME, GLOBEX]) assert.ok(!res.body.includes(key), 'a key leaked into the response')
  return body
}

function assertUnauthorized (res: LightMyRequestResponse, message: RegExp): void {
  assert.match(String(assertError(res, 401, 'GW_UNAUTHORIZED').message), message)
  assert.match(String(res.headers['www-authenticate']), /^Bearer realm="tool-gateway"/)
}

test('open mode (no keys): every caller is admin, no header needed', async (t) => {
  const a = await buildTestApp(t)
  assert.equal(a.authMode, 'open')
  let res = await a.inject({ method: 'GET', url: '/catalog?userId=anyone' })
  assert.equal(res.statusCode, 200, res.body)
  res = await a.inject({ method: 'POST', url: '/invoke', payload: { name: 'calculate', arguments: { expression: '1+2' } } })
  assert.equal(JSON.parse(res.json().output).result, 3)
  // A header is ignored rather than refused: there is nothing to check it against.
  res = await a.inject({ method: 'GET', url: '/catalog', headers: bearer('whatever') })
  assert.equal(res.statusCode, 200)
})

test('missing, wrong-scheme, empty and unknown keys: 401 GW_UNAUTHORIZED with WWW-Authenticate: Bearer', async (t) => {
  const a = await keyed(t)
  assert.equal(a.authMode, 'keyed')
  assert.deepEqual(a.apiKeyCounts, { admin: 1, tenant: 2, approver: 0 })
  const routes: Array<{ method: 'GET' | 'POST', url: string, payload?: Record<string, unknown> }> = [
    { method: 'GET', url: '/tools?functions=calculate' },
    { method: 'GET', url: '/catalog' },
    { method: 'POST', url: '/invoke', payload: { name: 'calculate', arguments: { expression: '1' } } },
    { method: 'POST', url: '/invoke/batch', payload: { calls: [{ name: 'calculate' }] } }
  ]
  for (const route of routes) {
    assertUnauthorized(await a.inject(route), /Missing Authorization header/)
    assertUnauthorized(await a.inject({ ...route, headers: { authorization: '' } }), /Missing Authorization header/)
    assertUnauthorized(await a.inject({ ...route, headers: { authorization: `Basic ${Buffer.from(`x:${ADMIN}`).toString('base64')}` } }), /scheme: use Bearer/)
    assertUnauthorized(await a.inject({ ...route, headers: { authorization: ADMIN } }), /scheme: use Bearer/)
    assertUnauthorized(await a.inject({ ...route, headers: { authorization: `Token ${ADMIN}` } }), /scheme: use Bearer/)
    assertUnauthorized(await a.inject({ ...route, headers: { authorization: 'Bearer' } }), /Empty API key/)
    assertUnauthorized(await a.inject({ ...route, headers: { authorization: 'Bearer    ' } }), /Empty API key/)
    assertUnauthorized(await a.inject({ ...route, headers: bearer(ADMIN.slice(0, -1)) }), /Unknown API key/)
    assertUnauthorized(await a.inject({ ...route, headers: bearer(ADMIN + 'x') }), /Unknown API key/)
    assertUnauthorized(await a.inject({ ...route, headers: bearer(`${ADMIN} ${ADMIN}`) }), /Unknown API key/)
  }
  // Unknown routes also need a key: an anonymous caller learns nothing about which routes exist.
  assertUnauthorized(await a.inject({ method: 'GET', url: '/nope' }), /Missing/)
  // The scheme is case-insensitive (RFC 7235); extra spaces around the key are tolerated.
  for (const header of [`bearer ${ADMIN}`, `BEARER  ${ADMIN} `]) {
    const res = await a.inject({ method: 'GET', url: '/catalog', headers: { authorization: header } })
    assert.equal(res.statusCode, 200, header)
  }
})

test('key guessing: after AUTH_FAILURES_PER_MINUTE wrong keys an address gets 429 for that key prefix for the rest of the minute; ' +
  'other prefixes and addresses are unaffected', async (t) => {
  const app = await keyed(t, { AUTH_FAILURES_PER_MINUTE: '5' })
  const attacker = { remoteAddress: '203.0.113.7' }
  const guess = async (key: string, from = attacker): Promise<LightMyRequestResponse> =>
    await app.inject({ method: 'GET', url: '/tools', headers: bearer(key), ...from })
  for (let i = 0; i < 5; i++) assertUnauthorized(await guess(`guessing-${i}-0123456789abcdef`), /Unknown API key/)
  // The sixth attempt with that prefix is refused before the key is looked at: a right guess
  // with that prefix now cannot be told apart. Keys of another prefix (a tenant behind the same
  // NAT) are still served (the per-address ceiling is in test/security/http-log-auth.test.ts).
  assert.equal((await guess(ADMIN)).statusCode, 200)
  for (const key of ['guessing-5-0123456789abcdef']) {
    const res = await guess(key)
    assert.match(String(assertError(res, 429, 'GW_RATE_LIMITED').message), /failed authentications/)
    const retryAfter = Number(res.headers['retry-after'])
    assert.ok(retryAfter >= 1 && retryAfter <= 60, `retry-after ${String(res.headers['retry-after'])}`)
  }
  // Another address, the right key: served. Public routes stay open to the blocked address.
  assert.equal((await guess(ADMIN, { remoteAddress: '198.51.100.1' })).statusCode, 200)
  assert.equal((await app.inject({ method: 'GET', url: '/healthz', ...attacker })).statusCode, 200)
  // A missing header is a misconfigured client, not a guess: it does not count.
  const other = { remoteAddress: '198.51.100.2' }
  for (let i = 0; i < 10; i++) assertUnauthorized(await app.inject({ method: 'GET', url: '/tools', ...other }), /Missing Authorization/)
  assert.equal((await guess(ACME, other)).statusCode, 200)
})

test('AUTH_FAILURES_PER_MINUTE=0 turns the key-guessing guard off', async (t) => {
  const app = await keyed(t, { AUTH_FAILURES_PER_MINUTE: '0' })
  for (let i = 0; i < 50; i++) {
    assertUnauthorized(await app.inject({ method: 'GET', url: '/tools', headers: bearer(`guess-${i}-0123456789abcdef`) }), /Unknown API key/)
  }
  assert.equal((await app.inject({ method: 'GET', url: '/tools', headers: bearer(ADMIN) })).statusCode, 200)
})

test('header injection and oversize Authorization headers: a clean 400, never a 500 or a pass', async (t) => {
  const a = await keyed(t)
  for (const header of [`Bearer ${ADMIN}\r\nX-Injected: 1`, `Bearer ${ADMIN}\n`, `Bearer ${ADMIN}\u0000`, `Bearer\t${ADMIN}`, `Bearer ${ADMIN}\u007f`]) {
    const res = await a.inject({ method: 'GET', url: '/catalog', headers: { authorization: header } })
    assert.match(String(assertError(res, 400, 'GW_BAD_REQUEST').message), /Control characters/, JSON.stringify(header))
    assert.match(String(res.headers['www-authenticate']), /error="invalid_request"/)
    assert.equal(res.headers['x-injected'], undefined)
  }
  const long = await a.inject({ method: 'GET', url: '/catalog', headers: { authorization: `Bearer ${'a'.repeat(8 * 1024)}` } })
  assert.match(String(assertError(long, 400, 'GW_BAD_REQUEST').message), /longer than 8192/)
  // Just under the cap: an ordinary unknown key.
  assertUnauthorized(await a.inject({ method: 'GET', url: '/catalog', headers: { authorization: `Bearer ${'a'.repeat(8 * 1024 - 8)}` } }), /Unknown API key/)
  // Two Authorization headers: only the first counts (as in Node's parser), so a second one
  // can never smuggle a key past a proxy that checked the first.
  assertUnauthorized(await a.inject({ method: 'GET', url: '/catalog', headers: { authorization: ['Bearer x', `Bearer ${ADMIN}`] as unknown as string } }), /Unknown API key/)
})

test('over a real socket: CR/LF in the header and 20 KiB headers are refused by the HTTP parser, and the server keeps serving', async (t) => {
  const a = await keyed(t)
  await a.listen({ port: 0, host: '127.0.0.1' })
  const address = a.server.address()
  assert.ok(address !== null && typeof address === 'object')
  const raw = async (request: string): Promise<string> => await new Promise((resolve, reject) => {
    const socket = connect(address.port, '127.0.0.1')
    let data = ''
    const timer = setTimeout(() => { socket.destroy(); reject(new Error(`no answer: ${data}`)) }, 5000)
    socket.on('data', (chunk) => { data += chunk.toString() })
    socket.on('close', () => { clearTimeout(timer); resolve(data) })
    socket.on('error', () => {})
    socket.end(request)
  })
  const bareCr = await raw(`GET /catalog HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${ADMIN}\rX-Injected: 1\r\nConnection: close\r\n\r\n`)
  assert.match(bareCr, /^HTTP\/1\.1 400 /)
  const huge = await raw(`GET /catalog HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${'a'.repeat(20 * 1024)}\r\nConnection: close\r\n\r\n`)
  assert.match(huge, /^HTTP\/1\.1 431 /)
  const ok = await raw(`GET /catalog HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${ADMIN}\r\nConnection: close\r\n\r\n`)
  assert.match(ok, /^HTTP\/1\.1 200 /)
})

test('public routes need no key: health, docs and their assets, the OpenAPI document; lookalikes do', async (t) => {
  const a = await keyed(t)
  assert.deepEqual((await a.inject({ method: 'GET', url: '/healthz' })).json(), { status: 'ok' })
  assert.equal((await a.inject({ method: 'HEAD', url: '/healthz' })).statusCode, 200)
  assert.equal((await a.inject({ method: 'GET', url: '/openapi.json' })).statusCode, 200)
  assert.ok([200, 302].includes((await a.inject({ method: 'GET', url: '/docs' })).statusCode))
  assert.equal((await a.inject({ method: 'GET', url: '/docs/static/swagger-ui.css' })).statusCode, 200)
  // A wrong key on a public route is not an error: the route does not look at it.
  assert.equal((await a.inject({ method: 'GET', url: '/healthz', headers: bearer('nope') })).statusCode, 200)
  for (const url of ['/healthz/../catalog', '/docsx', '/healthz-not', '/catalog?x=/healthz']) {
    const res = await a.inject({ method: 'GET', url })
    assert.equal(res.statusCode, 401, url)
  }
})

test('admin key: any tenant, or none; may name the tenant through an encoded tool name', async (t) => {
  const a = await keyed(t)
  let res = await a.inject({ method: 'GET', url: '/catalog?userId=acme', headers: bearer(ADMIN) })
  assert.equal(res.statusCode, 200)
  res = await a.inject({ method: 'GET', url: '/tools?functions=calculate&userId=globex', headers: bearer(ADMIN) })
  assert.equal(res.statusCode, 200)
  res = await a.inject({
    method: 'POST',
    url: '/invoke',
    headers: bearer(ADMIN),
    payload: { name: 'calculate', userId: 'acme', arguments: { expression: '2*3' } }
  })
  assert.equal(JSON.parse(res.json().output).result, 6)
  // The encoded name names the tenant: the admin reaches tier 2 of acme (nothing registered: 404, not 403).
  res = await a.inject({ method: 'POST', url: '/invoke', headers: bearer(ADMIN), payload: { name: 'user_acme_tool_x' } })
  assertError(res, 404, 'GW_TOOL_NOT_FOUND')
})

test('tenant key, the four places a userId can be named: another tenant is 403, its own works', async (t) => {
  const a = await keyed(t)
  const acme = bearer(ACME)

  // 1. the query of GET /tools and GET /catalog
  for (const url of ['/tools?functions=calculate&userId=globex', '/catalog?userId=globex', '/tools?functions=calculate&userId=ACME']) {
    assertError(await a.inject({ method: 'GET', url, headers: acme }), 403, 'GW_TENANT_MISMATCH')
  }
  let res = await a.inject({ method: 'GET', url: '/tools?functions=calculate&userId=acme', headers: acme })
  assert.deepEqual(res.json().tools.map((x: any) => x.function.name), ['calculate'])
  res = await a.inject({ method: 'GET', url: '/tools?functions=calculate', headers: acme })
  assert.deepEqual(res.json().tools.map((x: any) => x.function.name), ['calculate'])
  assert.equal((await a.inject({ method: 'GET', url: '/catalog?userId=acme', headers: acme })).statusCode, 200)
  assert.equal((await a.inject({ method: 'GET', url: '/catalog', headers: acme })).statusCode, 200)

  // 2. the body of /invoke, and of each /invoke/batch entry
  assertError(await a.inject({
    method: 'POST',
    url: '/invoke',
    headers: acme,
    payload: { name: 'calculate', userId: 'globex', arguments: { expression: '1' } }
  }), 403, 'GW_TENANT_MISMATCH')
  res = await a.inject({ method: 'POST', url: '/invoke', headers: acme, payload: { name: 'calculate', userId: 'acme', arguments: { expression: '4*5' } } })
  assert.equal(JSON.parse(res.json().output).result, 20)
  res = await a.inject({
    method: 'POST',
    url: '/invoke/batch',
    headers: acme,
    payload: {
      calls: [
        { name: 'calculate', userId: 'globex', arguments: { expression: '1' }, callId: 'other' },
        { name: 'calculate', userId: 'acme', arguments: { expression: '1+1' }, callId: 'own' },
        { name: 'calculate', arguments: { expression: '2+2' }, callId: 'none' },
        { name: 'user_globex_tool_x', callId: 'encoded' },
        { name: 'calculate', arguments: { expression: '1' }, allow: { mcp: ['user_globex_service_s'] }, callId: 'allow' }
      ]
    }
  })
  assert.equal(res.statusCode, 200)
  const results = res.json().results
  assert.deepEqual(results.map((r: any) => r.statusCode ?? 200), [403, 200, 200, 403, 403])
  assert.equal(results[0].error.code, 'GW_TENANT_MISMATCH')
  assert.equal(JSON.parse(results[1].output).result, 2)
  assert.equal(JSON.parse(results[2].output).result, 4)

  // 3. an encoded tool name, with or without a body userId
  assertError(await a.inject({ method: 'POST', url: '/invoke', headers: acme, payload: { name: 'user_globex_tool_x' } }), 403, 'GW_TENANT_MISMATCH')
  assertError(await a.inject({
    method: 'POST',
    url: '/invoke',
    headers: acme,
    payload: { name: 'user_globex_tool_x', userId: 'acme' }
  }), 403, 'GW_TENANT_MISMATCH')
  // the tenant's own encoded name passes tenancy (nothing registered: 404)
  assertError(await a.inject({ method: 'POST', url: '/invoke', headers: acme, payload: { name: 'user_acme_tool_x' } }), 404, 'GW_TOOL_NOT_FOUND')

  // 4. an encoded server name in mcp=, in the query and in an invoke's allow
  assertError(await a.inject({ method: 'GET', url: '/tools?mcp=user_globex_service_s', headers: acme }), 403, 'GW_TENANT_MISMATCH')
  assertError(await a.inject({
    method: 'POST',
    url: '/invoke',
    headers: acme,
    payload: { name: 'calculate', arguments: { expression: '1' }, allow: { functions: ['calculate'], mcp: ['user_globex_service_s'] } }
  }), 403, 'GW_TENANT_MISMATCH')
  res = await a.inject({ method: 'GET', url: '/tools?mcp=user_acme_service_s', headers: acme })
  assert.equal(res.statusCode, 200, res.body)
  assert.deepEqual(res.json().tools, [])
})

test('tenant key on the registry routes: only its own /users/{userId}, never the global servers\' admin routes', async (t) => {
  const a = await keyed(t)
  const acme = bearer(ACME)
  assertError(await a.inject({ method: 'GET', url: '/users/globex/mcp/servers', headers: acme }), 403, 'GW_TENANT_MISMATCH')
  assertError(await a.inject({ method: 'DELETE', url: '/users/globex/mcp/servers/s', headers: acme }), 403, 'GW_TENANT_MISMATCH')
  assertError(await a.inject({ method: 'PUT', url: '/users/globex/mcp/servers/s', headers: acme, payload: { type: 'streamable_http', url: 'https://example.com/mcp' } }), 403, 'GW_TENANT_MISMATCH')
  assertError(await a.inject({ method: 'PUT', url: '/mcp/servers/s', headers: acme, payload: { type: 'streamable_http', url: 'https://example.com/mcp' } }), 403, 'GW_FORBIDDEN')
  assert.deepEqual((await a.inject({ method: 'GET', url: '/users/acme/mcp/servers', headers: acme })).json(), { servers: [] })
  assert.equal((await a.inject({ method: 'GET', url: '/users/globex/mcp/servers', headers: bearer(ADMIN) })).statusCode, 200)
  assert.equal((await a.inject({ method: 'GET', url: '/users/globex/mcp/servers' })).statusCode, 401)
})

test('a tenant key without any userId acts as its own tenant: its workspace, not the admin\'s or another tenant\'s', async (t) => {
  const a = await keyed(t)
  const write = await a.inject({
    method: 'POST',
    url: '/invoke',
    headers: bearer(ACME),
    payload: { name: 'write_file', arguments: { path: 'notes.md', content: 'acme only' } }
  })
  assert.equal(write.json().isError, false, write.body)
  const read = async (key: string, userId?: string): Promise<any> => (await a.inject({
    method: 'POST', url: '/invoke', headers: bearer(key), payload: { name: 'read_file', arguments: { path: 'notes.md' }, ...(userId ? { userId } : {}) }
  })).json()
  assert.match((await read(ACME)).output, /acme only/)
  assert.match((await read(ADMIN, 'acme')).output, /acme only/, 'the admin acting for acme sees the same workspace')
  assert.equal((await read(GLOBEX)).isError, true, 'another tenant does not see it')
  assert.equal((await read(ADMIN)).isError, true, 'the admin without a userId has a workspace of its own')
  // workspaceRoot is admin-only: a tenant key is refused.
  const root = await a.inject({
    method: 'POST',
    url: '/invoke',
    headers: bearer(ACME),
    payload: { name: 'read_file', arguments: { path: 'x' }, context: { workspaceRoot: tmpdir() } }
  })
  assert.equal(root.json().error?.code, 'GW_PATH_FORBIDDEN', root.body)
})

test('keys never reach the logs of a real server (pino JSON on stdout), at trace level, whatever the outcome', async (t) => {
  const workspaces = await mkdtemp(join(tmpdir(), 'tg-auth-log-'))
  t.after(async () => await rm(workspaces, { recursive: true, force: true }))
  const wrong = 'wrong-key-should-not-be-logged-123'
  const server = spawn(process.execPath, ['--import', 'tsx', 'src/server.ts'], {
    env: {
      ...process.env,
      PORT: '0',
      HOST: '127.0.0.1',
      WORKSPACES_DIR: workspaces,
      LOG_LEVEL: 'trace',
      API_KEYS,
      API_KEYS_FILE: '',
      REDIS_URL: '',
      SANDBOX: 'none'
    },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  t.after(() => { server.kill('SIGKILL') })
  let logs = ''
  server.stderr.on('data', (chunk: Buffer) => { logs += chunk.toString() })
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${logs}`)), 60_000)
    server.stdout.on('data', (chunk: Buffer) => {
      logs += chunk.toString()
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(logs)
      if (m) { clearTimeout(timer); resolve(Number(m[1])) }
    })
    server.on('exit', (code) => { clearTimeout(timer); reject(new Error(`server exited ${code}:\n${logs}`)) })
  })
  assert.match(logs, /API keys required .*1 admin, 2 tenant, 0 approver key/)
  assert.doesNotMatch(logs, /running OPEN/)
  const base = `http://127.0.0.1:${port}`
  const statuses: number[] = []
  for (const [key, path] of [[ADMIN, '/catalog'], [ACME, '/catalog?userId=globex'], [wrong, '/catalog'], [GLOBEX, '/nope']] as const) {
    statuses.push((await fetch(base + path, { headers: { authorization: `Bearer ${key}`, 'x-api-key': key } })).status)
  }
  statuses.push((await fetch(`${base}/invoke`, { method: 'POST', headers: { authorization: `Bearer ${ACME}`, 'content-type': 'application/json' }, body: '{"name": ' })).status)
  assert.deepEqual(statuses, [200, 403, 401, 404, 400])
  // Let the last lines be flushed, then look for every key and any fragment of one.
  await new Promise((resolve) => setTimeout(resolve, 300))
  assert.match(logs, /"statusCode":401/)
  for (const key of [ADMIN, ACME, GLOBEX, wrong]) {
    assert.ok(!logs.includes(key.slice(0, 12)), `a key fragment appears in the logs:\n${logs}`)
  }
})
