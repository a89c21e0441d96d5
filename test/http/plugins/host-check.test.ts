import { test } from 'node:test'
import type { TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { request } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { FastifyInstance, InjectOptions } from 'fastify'
import { startGateway } from '../../../scripts/lib/gateway-process.js'
import { buildTestApp } from '../../helpers/app.js'

// DNS rebinding: a page at http://evil.example:8080 whose name its owner
// rebinds to 127.0.0.1 calls the gateway same-origin; its requests carry `Host: evil.example:8080`.
// A page of another site posting to http://localhost:8080 carries its own `Origin`.

const ADMIN = 'admin-key-0123456789'
const KEYED = { API_KEYS: `${ADMIN}:*` }
const BEARER = { authorization: `Bearer ${ADMIN}` }

const writeMarker = (headers: Record<string, string>): InjectOptions => ({
  method: 'POST',
  url: '/invoke',
  headers,
  payload: { name: 'write_file', userId: 'victim', arguments: { path: 'pwned.txt', content: 'rebound\n' } }
})

/** Whether the marker file was written (read back through an accepted request). */
async function markerWritten (app: FastifyInstance, headers: Record<string, string> = {}): Promise<boolean> {
  const res = await app.inject({ method: 'POST', url: '/invoke', headers, payload: { name: 'read_file', userId: 'victim', arguments: { path: 'pwned.txt' } } })
  assert.equal(res.statusCode, 200, res.body)
  return res.json().isError !== true
}

/** 403 GW_HOST_NOT_ALLOWED, in the gateway's error shape or (on /mcp) as a JSON-RPC error with data.code. */
function assertRefused (res: { statusCode: number, json: () => any, body: string }, header: RegExp): void {
  assert.equal(res.statusCode, 403, res.body)
  const body = res.json()
  const error = body.jsonrpc === '2.0' ? { ...body.error, code: body.error.data.code } : body
  assert.equal(error.code, 'GW_HOST_NOT_ALLOWED')
  assert.match(error.message, header)
  assert.match(error.message, /ALLOWED_HOSTS/)
}

test('open mode: a rebinding request (Host: evil.example) to /invoke is refused and no tool runs', async (t) => {
  const app = await buildTestApp(t)
  for (const host of ['evil.example', 'evil.example:8080', 'localhost.evil.example', '192.168.1.20:8080']) {
    assertRefused(await app.inject(writeMarker({ host })), /^Host /)
  }
  const bash = await app.inject({
    method: 'POST',
    url: '/invoke',
    headers: { host: 'evil.example' },
    payload: { name: 'bash', arguments: { command: 'exec', input: 'echo ran' } }
  })
  assertRefused(bash, /^Host /)
  assert.equal(await markerWritten(app), false)
  // Every route: listings, the MCP endpoint (the MCP spec's DNS rebinding protection), the console, unknown routes.
  for (const [method, url] of [
    ['GET', '/tools?functions=calculate'],
    ['POST', '/mcp'],
    ['GET', '/mcp'],
    ['GET', '/status'],
    ['GET', '/console'],
    ['GET', '/nope']
  ] as const) {
    const res = await app.inject({
      method,
      url,
      headers: { host: 'evil.example', 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      ...(method === 'POST' ? { payload: { jsonrpc: '2.0', id: 1, method: 'tools/list' } } : {})
    })
    assertRefused(res, /^Host /)
  }
})

test('open mode: a request of another site (foreign Origin) is refused, a loopback Origin accepted', async (t) => {
  const app = await buildTestApp(t)
  for (const origin of ['https://evil.example', 'http://localhost.evil.example', 'null']) {
    assertRefused(await app.inject(writeMarker({ origin })), /^Origin /)
  }
  assert.equal(await markerWritten(app), false)
  const mcp = await app.inject({ method: 'POST', url: '/mcp', headers: { origin: 'https://evil.example', accept: 'application/json, text/event-stream' }, payload: { jsonrpc: '2.0', id: 1, method: 'tools/list' } })
  assertRefused(mcp, /^Origin /)
  const ok = await app.inject(writeMarker({ origin: 'http://localhost:5173' }))
  assert.equal(ok.statusCode, 200, ok.body)
  assert.equal(await markerWritten(app), true)
})

test('open mode: loopback Hosts on any port are accepted', async (t) => {
  const app = await buildTestApp(t)
  for (const host of ['localhost', 'localhost:8080', '127.0.0.1:3000', '[::1]:8080', 'gateway.localhost:8080']) {
    const res = await app.inject({ method: 'GET', url: '/tools?functions=calculate', headers: { host } })
    assert.equal(res.statusCode, 200, `${host}: ${res.body}`)
  }
})

test('X-Forwarded-Host does not get a foreign Host through, with TRUST_PROXY or without', async (t) => {
  for (const env of [{}, { TRUST_PROXY: '1' }] as Array<Record<string, string>>) {
    const app = await buildTestApp(t, { env })
    assertRefused(await app.inject(writeMarker({ host: 'evil.example', 'x-forwarded-host': 'localhost' })), /^Host /)
    assert.equal(await markerWritten(app), false)
  }
  // Behind a trusted proxy, the name the client used (X-Forwarded-Host) is judged too.
  const proxied = await buildTestApp(t, { env: { TRUST_PROXY: '1' } })
  assertRefused(await proxied.inject(writeMarker({ host: '127.0.0.1:8080', 'x-forwarded-host': 'evil.example' })), /^X-Forwarded-Host /)
})

test('ALLOWED_HOSTS: in open mode it adds names; in keyed mode it is enforced, health probes by pod IP pass', async (t) => {
  const open = await buildTestApp(t, { env: { ALLOWED_HOSTS: 'devbox.lan:8080' } })
  assert.equal((await open.inject({ method: 'GET', url: '/tools?functions=calculate', headers: { host: 'devbox.lan:8080' } })).statusCode, 200)
  assertRefused(await open.inject({ method: 'GET', url: '/tools?functions=calculate', headers: { host: 'devbox.lan:9090' } }), /^Host /)

  // Keyed mode without ALLOWED_HOSTS: the key protects it; no Host check.
  const keyed = await buildTestApp(t, { env: KEYED })
  assert.equal((await keyed.inject({ method: 'GET', url: '/tools?functions=calculate', headers: { ...BEARER, host: 'evil.example' } })).statusCode, 200)

  const app = await buildTestApp(t, { env: { ...KEYED, ALLOWED_HOSTS: 'gw.example.com,*.gw.internal' } })
  const get = async (headers: Record<string, string>, url = '/tools?functions=calculate'): Promise<any> => await app.inject({
    method: 'GET',
    url,
    headers: { ...BEARER, ...headers }
  })
  assert.equal((await get({ host: 'gw.example.com' })).statusCode, 200)
  assert.equal((await get({ host: 'a.gw.internal:8080', origin: 'https://a.gw.internal:8080' })).statusCode, 200)
  assert.equal((await get({ host: 'localhost:8080' })).statusCode, 200)
  assertRefused(await get({ host: 'evil.example' }), /^Host /)
  assertRefused(await get({ host: 'gw.example.com', origin: 'https://evil.example' }), /^Origin /)
  assertRefused(await app.inject({ method: 'POST', url: '/mcp', headers: { ...BEARER, host: 'evil.example', accept: 'application/json, text/event-stream' }, payload: { jsonrpc: '2.0', id: 1, method: 'tools/list' } }), /^Host /)
  // Kubernetes probes address the pod IP: /healthz and /readyz answer whatever the Host.
  assert.equal((await app.inject({ method: 'GET', url: '/healthz', headers: { host: '10.42.0.17:8080' } })).statusCode, 200)
  assert.equal((await app.inject({ method: 'GET', url: '/readyz', headers: { host: '10.42.0.17:8080' } })).statusCode, 200)
  assertRefused(await app.inject({ method: 'GET', url: '/metrics', headers: { host: '10.42.0.17:8080' } }), /^Host /)
})

test('a bad ALLOWED_HOSTS entry stops start-up, naming it', async (t) => {
  await assert.rejects(buildTestApp(t, { env: { ALLOWED_HOSTS: 'https://gw.example.com' } }), /ALLOWED_HOSTS/)
})

test('the real server (npm start, open mode) refuses a rebinding request over the socket', async (t: TestContext) => {
  const workspaces = await mkdtemp(join(tmpdir(), 'tg-hc-'))
  t.after(async () => await rm(workspaces, { recursive: true, force: true }))
  const gw = await startGateway(t, { SANDBOX: 'none', WORKSPACES_DIR: workspaces })
  const send = async (host: string): Promise<{ status: number, body: string }> => await new Promise((resolve, reject) => {
    const body = JSON.stringify({ name: 'calculate', arguments: { expression: '6*7' } })
    const req = request({
      host: '127.0.0.1',
      port: gw.port,
      method: 'POST',
      path: '/invoke',
      headers: { host, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }
    }, (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (c: string) => { text += c })
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }))
    })
    req.on('error', reject)
    req.end(body)
  })
  const evil = await send('evil.example:8080')
  assert.equal(evil.status, 403, evil.body)
  assert.equal(JSON.parse(evil.body).code, 'GW_HOST_NOT_ALLOWED')
  const local = await send(`localhost:${gw.port}`)
  assert.equal(local.status, 200, local.body)
  assert.match(local.body, /42/)
})
