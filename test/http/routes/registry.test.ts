import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { TestContext } from 'node:test'
import type { FastifyInstance } from 'fastify'
import { buildTestApp } from '../../helpers/app.js'
import { MemoryRegistryStore } from '../../../src/registry/memory-store.js'
import { startSseFixture, startStreamableHttpFixture, stdioFixture } from '../../../scripts/lib/mcp-fixtures/index.js'
import type { HttpFixture } from '../../../scripts/lib/mcp-fixtures/index.js'

async function fixture (t: TestContext, kind: 'http' | 'sse', marker: string): Promise<HttpFixture> {
  const f = kind === 'http' ? await startStreamableHttpFixture({ marker }) : await startSseFixture({ marker })
  t.after(async () => await f.close())
  return f
}

async function put (app: FastifyInstance, url: string, body: unknown): Promise<{ status: number, json: any }> {
  const res = await app.inject({ method: 'PUT', url, payload: body as Record<string, unknown> })
  return { status: res.statusCode, json: res.json() }
}

async function invoke (app: FastifyInstance, body: Record<string, unknown>): Promise<any> {
  return (await app.inject({ method: 'POST', url: '/invoke', payload: body })).json()
}

test('global servers over streamable HTTP, SSE and stdio: register, list, invoke, remove', async (t) => {
  const http = await fixture(t, 'http', 'H')
  const sse = await fixture(t, 'sse', 'S')
  // A stdio server under tsx can take seconds to start on a loaded machine: a generous deadline.
  const app = await buildTestApp(t, { env: { MCP_LIST_TIMEOUT_MS: '30000', MCP_CONNECT_TIMEOUT_MS: '30000' } })
  let r = await put(app, '/mcp/servers/web', { type: 'http', url: http.url, priority: 2 })
  assert.equal(r.status, 201, JSON.stringify(r.json))
  assert.equal(r.json.created, true)
  assert.equal(r.json.server.config.type, 'streamable_http')
  r = await put(app, '/mcp/servers/events', { type: 'sse', url: sse.url, priority: 1 })
  assert.equal(r.status, 201)
  r = await put(app, '/mcp/servers/local', { type: 'stdio', ...stdioFixture('stdio-server.ts', ['D']) })
  assert.equal(r.status, 201, JSON.stringify(r.json))

  const listing = (await app.inject({ method: 'GET', url: '/tools?mcp=web,events,local&format=mcp' })).json()
  assert.deepEqual(listing.unavailable, [])
  const names = listing.tools.map((x: any) => x.name)
  assert.ok(names.includes('echo'), names.join(','))
  assert.ok(names.includes('events__echo') && names.includes('local__echo'), names.join(','))
  assert.ok(listing.tools.find((x: any) => x.name === 'echo').inputSchema.properties.text)

  // `echo` goes to the highest priority server; the others by qualified name
  assert.equal((await invoke(app, { name: 'echo', arguments: { text: 'a' } })).output, 'H:a')
  assert.equal((await invoke(app, { name: 'events__echo', arguments: { text: 'b' } })).output, 'S:b')
  assert.equal((await invoke(app, { name: 'local__echo', arguments: { text: 'c' } })).output, 'D:c')
  const viaStdio = await invoke(app, { name: 'local__echo', arguments: { text: 'c' } })
  assert.equal(viaStdio.route, 'global_mcp')

  // flattening: image placeholder, resource placeholder, structuredContent, the tool's own isError
  const mixed = await invoke(app, { name: 'mixed', arguments: {}, trace: true })
  assert.match(mixed.output, /^here you go\n\[image image\/png \d+ bytes\]\n\[resource file:\/\/\/docs\/readme\.md\]/)
  assert.equal(mixed.trace.content.length, 4)
  assert.equal((await invoke(app, { name: 'structured', arguments: {} })).output, '{"ok":true,"n":42}')
  const failed = await invoke(app, { name: 'fail', arguments: { message: 'nope' } })
  assert.equal(failed.isError, true)
  assert.equal(failed.error.code, 'GW_TOOL_ERROR')
  assert.match(failed.output, /^TOOL_ERROR: .*nope/)
  // invalid arguments never reach the server
  const calls = http.stats.toolCalls
  const invalid = await invoke(app, { name: 'echo', arguments: { text: 5 } })
  assert.equal(invalid.error.code, 'GW_INVALID_ARGUMENTS')
  assert.equal(http.stats.toolCalls, calls)

  const status = (await app.inject({ method: 'GET', url: '/status' })).json()
  assert.equal(status.globalClients, 3)
  assert.equal(status.userClients, 0)
  assert.ok(status.totalTools >= 27)
  assert.equal(status.registry.backend, 'memory')
  assert.equal(status.sandbox.mode, 'none')

  let del = await app.inject({ method: 'DELETE', url: '/mcp/servers/web' })
  assert.equal(del.statusCode, 200)
  assert.equal(del.json().deleted, true)
  del = await app.inject({ method: 'DELETE', url: '/mcp/servers/web' })
  assert.equal(del.statusCode, 404)
  assert.equal(del.json().code, 'GW_SERVER_NOT_FOUND')
  const after = (await app.inject({ method: 'GET', url: '/tools?mcp=web' })).json()
  assert.deepEqual(after.unresolved.map((u: any) => u.name), ['web'])
  // the removed server's client was closed
  assert.equal((await app.inject({ method: 'GET', url: '/status' })).json().globalClients, 2)
  // echo now resolves to the next server by priority
  assert.equal((await invoke(app, { name: 'echo', arguments: { text: 'x' } })).output, 'S:x')
})

test('tenant servers: SSRF guard at registration, EGRESS_ALLOW, encoded names, isolation of 1 and 1-2', async (t) => {
  const one = await fixture(t, 'http', 'one')
  const oneTwo = await fixture(t, 'http', 'one-two')
  const closed = await buildTestApp(t)
  const blocked = await put(closed, '/users/1/mcp/servers/s', { type: 'streamable_http', url: one.url })
  assert.equal(blocked.status, 403)
  assert.equal(blocked.json.code, 'GW_EGRESS_BLOCKED')

  const app = await buildTestApp(t, { env: { EGRESS_ALLOW: '127.0.0.1/32' } })
  assert.equal((await put(app, '/users/1/mcp/servers/s', { type: 'streamable_http', url: one.url })).status, 201)
  assert.equal((await put(app, '/users/1-2/mcp/servers/s', { type: 'streamable_http', url: oneTwo.url })).status, 201)
  const l1 = (await app.inject({ method: 'GET', url: '/users/1/mcp/servers' })).json()
  assert.deepEqual(l1.servers.map((s: any) => s.config.url), [one.url])
  assert.equal((await invoke(app, { name: 'user_1_tool_echo', userId: '1', arguments: { text: 'z' } })).output, 'one:z')
  assert.equal((await invoke(app, { name: 'user_1-2_tool_echo', userId: '1-2', arguments: { text: 'z' } })).output, 'one-two:z')
  assert.equal((await invoke(app, { name: 'echo', userId: '1', arguments: { text: 'raw' } })).output, 'one:raw')
  const live = (await app.inject({ method: 'GET', url: '/users/1/mcp/servers/s/tools' })).json()
  assert.ok(live.tools.some((x: any) => x.name === 'echo'))
  assert.equal((await app.inject({ method: 'GET', url: '/users/1/mcp/servers/nope/tools' })).statusCode, 404)
  // removing user 1's server leaves user 1-2's untouched
  assert.equal((await app.inject({ method: 'DELETE', url: '/users/1/mcp/servers/s' })).statusCode, 200)
  assert.equal((await app.inject({ method: 'GET', url: '/users/1-2/mcp/servers' })).json().servers.length, 1)
  assert.equal((await invoke(app, { name: 'user_1-2_tool_echo', userId: '1-2', arguments: { text: 'still' } })).output, 'one-two:still')
  const gone = await app.inject({ method: 'POST', url: '/invoke', payload: { name: 'user_1_tool_echo', userId: '1', arguments: { text: 'z' } } })
  assert.equal(gone.statusCode, 404)
})

test('bad registrations: unknown type, missing url/command, non-http urls, blocked ranges, bad ids', async (t) => {
  const app = await buildTestApp(t)
  const cases: Array<[string, unknown, number, RegExp]> = [
    ['/mcp/servers/a', { type: 'websocket', url: 'http://example.com' }, 400, /type/],
    ['/mcp/servers/a', { type: 'sse' }, 400, /url/],
    ['/mcp/servers/a', { type: 'stdio' }, 400, /command/],
    ['/mcp/servers/a', { type: 'http', url: 'file:///etc/passwd' }, 400, /http/],
    ['/mcp/servers/a', { type: 'http', url: 'http://x', bogus: 1 }, 400, /bogus/],
    ['/mcp/servers/a_b', { type: 'http', url: 'http://example.com' }, 400, /serverId/],
    ['/users/a_b/mcp/servers/a', { type: 'http', url: 'http://example.com' }, 400, /userId/]
  ]
  for (const [url, body, status, message] of cases) {
    const r = await put(app, url, body)
    assert.equal(r.status, status, `${url} ${JSON.stringify(body)}: ${JSON.stringify(r.json)}`)
    assert.match(r.json.message, message, JSON.stringify(r.json))
  }
  for (const target of ['http://127.0.0.1:9/mcp', 'http://10.0.0.1/', 'http://192.168.1.1/', 'http://172.16.0.1/', 'http://169.254.169.254/latest',
    'http://100.64.0.1/', 'http://[::1]/', 'http://[fc00::1]/', 'http://[fe80::1]/', 'http://[::ffff:127.0.0.1]/', 'http://0.0.0.0/',
    'http://2130706433/', 'http://0177.0.0.1/', 'http://0x7f.1/', 'http://localhost/', 'http://224.0.0.1/']) {
    const r = await put(app, '/users/u/mcp/servers/s', { type: 'http', url: target })
    assert.equal(r.status, 403, `${target}: ${JSON.stringify(r.json)}`)
    assert.equal(r.json.code, 'GW_EGRESS_BLOCKED')
  }
  assert.equal((await app.inject({ method: 'GET', url: '/users/u/mcp/servers' })).json().servers.length, 0)
})

test('secrets: encrypted at rest, masked on read, sent to the server, kept when a masked value comes back', async (t) => {
  const http = await fixture(t, 'http', 'sec')
  const key = Buffer.alloc(32, 7).toString('base64')
  // The app's own store (the default without Redis), kept here to read what is at rest.
  const store = new MemoryRegistryStore()
  const app = await buildTestApp(t, { env: { SECRETS_KEY: key, EGRESS_ALLOW: '127.0.0.1/32' }, overrides: { store } })
  const r = await put(app, '/users/acme/mcp/servers/gh', { type: 'http', url: http.url, headers: { Authorization: 'Bearer super-secret-token' } })
  assert.equal(r.status, 201)
  assert.equal(r.json.server.config.headers.Authorization, 'Bearer ****')
  assert.doesNotMatch(JSON.stringify(r.json), /super-secret-token/)
  const listed = await app.inject({ method: 'GET', url: '/users/acme/mcp/servers' })
  assert.doesNotMatch(listed.body, /super-secret-token/)
  assert.equal(listed.json().servers[0].config.headers.Authorization, 'Bearer ****')
  // at rest: the store holds ciphertext
  const stored = await store.get({ kind: 'user', userId: 'acme' }, 'gh')
  assert.ok(stored)
  assert.doesNotMatch(JSON.stringify(stored), /super-secret-token/)
  assert.match(JSON.stringify(stored), /enc:v1:/)
  // the call works (the fixture server would not care, but the pool must have opened the secret to connect)
  assert.equal((await invoke(app, { name: 'user_acme_tool_echo', userId: 'acme', arguments: { text: 'ok' } })).output, 'sec:ok')
  // a client that GETs, edits and PUTs back the masked value keeps the secret
  const again = await put(app, '/users/acme/mcp/servers/gh', { type: 'http', url: http.url, headers: { Authorization: 'Bearer ****' }, description: 'edited' })
  assert.equal(again.status, 200)
  assert.equal(again.json.created, false)
  const status = (await app.inject({ method: 'GET', url: '/status' })).json()
  assert.equal(status.registry.secretsEncrypted, true)
})

test('MCP_SERVERS_FILE loads global servers at start-up; a broken file stops start-up naming the entry', async (t) => {
  const http = await fixture(t, 'http', 'F')
  const dir = await mkdtemp(join(tmpdir(), 'tg-servers-'))
  t.after(async () => await rm(dir, { recursive: true, force: true }))
  const file = join(dir, 'servers.json')
  await writeFile(file, JSON.stringify({
    mcpServers: {
      fromfile: { type: 'streamable-http', url: http.url, somethingClaudeDesktopAdds: true },
      cli: { command: stdioFixture().command, args: stdioFixture().args }
    }
  }))
  const app = await buildTestApp(t, { env: { MCP_SERVERS_FILE: file } })
  const servers = (await app.inject({ method: 'GET', url: '/mcp/servers' })).json().servers
  assert.deepEqual(servers.map((s: any) => [s.serverId, s.config.type]), [['cli', 'stdio'], ['fromfile', 'streamable_http']])
  assert.equal((await invoke(app, { name: 'fromfile__echo', arguments: { text: 'f' } })).output, 'F:f')

  await writeFile(file, JSON.stringify({ mcpServers: { bad: { type: 'carrier-pigeon', url: 'http://x' } } }))
  await assert.rejects(buildTestApp(t, { env: { MCP_SERVERS_FILE: file } }), /server 'bad'.*type/s)
})

test('listings are cached, and follow a server\'s notifications/tools/list_changed', async (t) => {
  const http = await fixture(t, 'http', 'L')
  const app = await buildTestApp(t)
  assert.equal((await put(app, '/mcp/servers/live', { type: 'http', url: http.url })).status, 201)
  const names = async (): Promise<string[]> => (await app.inject({ method: 'GET', url: '/tools?mcp=live' })).json().tools.map((x: any) => x.function.name)
  assert.ok(!(await names()).includes('brand_new'))
  const requestsBefore = http.stats.requests
  await names()
  await names()
  assert.equal(http.stats.requests, requestsBefore, 'warm listings do not touch the server')
  http.addTool('brand_new')
  let seen = false
  for (let i = 0; i < 50 && !seen; i++) {
    seen = (await names()).includes('brand_new')
    if (!seen) await new Promise((resolve) => setTimeout(resolve, 50))
  }
  assert.ok(seen, 'the new tool is listed after list_changed')
  assert.equal((await invoke(app, { name: 'brand_new', arguments: {} })).output, 'L:brand_new')
})

test('with API keys: a tenant registers stdio -> 403, manages only its own servers, and cannot manage global ones', async (t) => {
  const app = await buildTestApp(t, { env: { API_KEYS: 'admin-key-0123456789:*,acme-key-0123456789:acme', EGRESS_ALLOW: '127.0.0.1/32' } })
  const as = (key: string) => ({ authorization: `Bearer ${key}` })
  const tenant = as('acme-key-0123456789')
  let res = await app.inject({ method: 'PUT', url: '/users/acme/mcp/servers/cli', headers: tenant, payload: { type: 'stdio', command: '/bin/true' } })
  assert.equal(res.statusCode, 403, res.body)
  assert.match(res.json().message, /stdio/)
  res = await app.inject({ method: 'PUT', url: '/users/other/mcp/servers/x', headers: tenant, payload: { type: 'http', url: 'http://127.0.0.1:9/mcp' } })
  assert.equal(res.statusCode, 403)
  assert.equal(res.json().code, 'GW_TENANT_MISMATCH')
  res = await app.inject({ method: 'GET', url: '/users/other/mcp/servers', headers: tenant })
  assert.equal(res.statusCode, 403)
  res = await app.inject({ method: 'PUT', url: '/mcp/servers/g', headers: tenant, payload: { type: 'http', url: 'http://127.0.0.1:9/mcp' } })
  assert.equal(res.statusCode, 403)
  res = await app.inject({ method: 'GET', url: '/status', headers: tenant })
  assert.equal(res.statusCode, 403)
  res = await app.inject({ method: 'GET', url: '/mcp/servers', headers: tenant })
  assert.equal(res.statusCode, 403)
  res = await app.inject({ method: 'PUT', url: '/users/acme/mcp/servers/web', headers: tenant, payload: { type: 'http', url: 'http://127.0.0.1:9/mcp' } })
  assert.equal(res.statusCode, 201, res.body)
  // the admin may register stdio for a tenant, and global servers
  res = await app.inject({
    method: 'PUT',
    url: '/users/acme/mcp/servers/cli',
    headers: as('admin-key-0123456789'),
    payload: { type: 'stdio', command: '/bin/true' }
  })
  assert.equal(res.statusCode, 201, res.body)
  res = await app.inject({ method: 'PUT', url: '/users/acme/mcp/servers/cli2', payload: { type: 'stdio', command: '/bin/true' } })
  assert.equal(res.statusCode, 401)
})

test('a tenant cannot grow the registry without bound: TENANT_MAX_SERVERS servers, each config at most 64 KiB', async (t) => {
  const keys = 'admin-key-0123456789:*,acme-key-0123456789:acme'
  const app = await buildTestApp(t, { env: { API_KEYS: keys, EGRESS_ALLOW: '127.0.0.1/32', TENANT_MAX_SERVERS: '3' } })
  const tenant = { authorization: 'Bearer acme-key-0123456789' }
  const admin = { authorization: 'Bearer admin-key-0123456789' }
  const putAs = async (headers: Record<string, string>, url: string, payload: Record<string, unknown>): Promise<{ status: number, json: any }> => {
    const res = await app.inject({ method: 'PUT', url, headers, payload })
    return { status: res.statusCode, json: res.json() }
  }
  const server = { type: 'http', url: 'http://127.0.0.1:9/mcp' }
  // The attack: 32 headers of 8,000 characters each (every field within its own bound), ~256 KB per config.
  const heavy = { ...server, headers: Object.fromEntries(Array.from({ length: 32 }, (_v, i) => [`x-h${i}`, 'v'.repeat(8000)])) }
  let r = await putAs(tenant, '/users/acme/mcp/servers/heavy', heavy)
  assert.equal(r.status, 413, JSON.stringify(r.json))
  assert.equal(r.json.code, 'GW_PAYLOAD_TOO_LARGE')
  assert.match(r.json.message, /at most 65536/)
  // A config with one long token still fits.
  r = await putAs(tenant, '/users/acme/mcp/servers/s1', { ...server, headers: { authorization: `Bearer ${'t'.repeat(8000)}` } })
  assert.equal(r.status, 201, JSON.stringify(r.json))

  for (const id of ['s2', 's3']) assert.equal((await putAs(tenant, `/users/acme/mcp/servers/${id}`, server)).status, 201)
  r = await putAs(tenant, '/users/acme/mcp/servers/s4', server)
  assert.equal(r.status, 403, JSON.stringify(r.json))
  assert.equal(r.json.code, 'GW_TENANT_QUOTA_EXCEEDED')
  assert.match(r.json.message, /TENANT_MAX_SERVERS/)
  // An admin registering for the tenant is held by the same bound; the global scope is not.
  assert.equal((await putAs(admin, '/users/acme/mcp/servers/s4', server)).json.code, 'GW_TENANT_QUOTA_EXCEEDED')
  assert.equal((await putAs(admin, '/mcp/servers/g1', server)).status, 201)
  // Nothing of the refused writes was stored.
  const listed = (await app.inject({ method: 'GET', url: '/users/acme/mcp/servers', headers: tenant })).json()
  assert.deepEqual(listed.servers.map((s: { serverId: string }) => s.serverId), ['s1', 's2', 's3'])
  // Replacing one at the bound is allowed; a delete makes room for a new one.
  assert.equal((await putAs(tenant, '/users/acme/mcp/servers/s2', { ...server, description: 'replaced' })).status, 200)
  assert.equal((await app.inject({ method: 'DELETE', url: '/users/acme/mcp/servers/s3', headers: tenant })).statusCode, 200)
  assert.equal((await putAs(tenant, '/users/acme/mcp/servers/s4', server)).status, 201)
})
