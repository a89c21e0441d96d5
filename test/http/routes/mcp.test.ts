import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { TestContext } from 'node:test'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { ErrorCode, McpError, ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../../src/app.js'
import { loadConfig } from '../../../src/config.js'
import { ListChangedNotifier } from '../../../src/mcp-server/notifier.js'
import { MemoryRegistryStore } from '../../../src/registry/memory-store.js'
import type { RegistryStore } from '../../../src/registry/types.js'
import { startStreamableHttpFixture } from '../../../scripts/lib/mcp-fixtures/index.js'
import type { HttpFixture } from '../../../scripts/lib/mcp-fixtures/index.js'
import { TEST_QUOTA } from '../../helpers/app.js'

const ADMIN = 'admin-key-0123456789'
const ACME = 'acme-key-0123456789'
const GLOBEX = 'globex-key-0123456789'
const KEYS = `${ADMIN}:*,${ACME}:acme,${GLOBEX}:globex`

interface Gateway {
  app: FastifyInstance
  base: string
  /** An SDK client on /mcp?{query}, closed before the gateway. */
  connect: (query: string, opts?: { key?: string, onListChanged?: () => void }) => Promise<{ client: Client, streamOpen: Promise<void> }>
  /** The fixture and the gateway's own HTTP API, with a key when given. */
  http: (
    method: string,
    path: string,
    opts?: { key?: string, body?: unknown, headers?: Record<string, string> }
  ) => Promise<{ status: number, headers: Headers, json: any }>
}

/**
 * A real listening gateway (loopback, port 0). Clients are closed before the app, so no
 * stream is left reconnecting; the app closes every socket it holds.
 */
async function startGateway (t: TestContext, env: Record<string, string> = {}, store?: RegistryStore): Promise<Gateway> {
  const workspaces = await mkdtemp(join(tmpdir(), 'tg-mcp-'))
  const config = loadConfig({ SANDBOX: 'none', ...TEST_QUOTA, LOG_LEVEL: 'silent', WORKSPACES_DIR: workspaces, EGRESS_ALLOW: '127.0.0.1/32', ...env })
  const app = await buildApp(config, { logger: false, ...(store ? { overrides: { store } } : {}) })
  const clients: Client[] = []
  t.after(async () => {
    for (const c of clients) await c.close()
    await app.close()
    await rm(workspaces, { recursive: true, force: true })
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const address = app.server.address()
  assert.ok(address !== null && typeof address === 'object')
  const base = `http://127.0.0.1:${address.port}`
  const http: Gateway['http'] = async (method, path, opts = {}) => {
    const headers: Record<string, string> = { ...(opts.key ? { authorization: `Bearer ${opts.key}` } : {}), ...opts.headers }
    let body: string | undefined
    if (opts.body !== undefined) {
      body = typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body)
      headers['content-type'] ??= 'application/json'
    }
    const res = await fetch(base + path, { method, headers, ...(body !== undefined ? { body } : {}) })
    const text = await res.text()
    return { status: res.status, headers: res.headers, json: text === '' ? undefined : JSON.parse(text) }
  }
  const connect: Gateway['connect'] = async (query, opts = {}) => {
    let opened!: () => void
    const streamOpen = new Promise<void>((resolve) => { opened = resolve })
    // Tells the test when the client's GET notification stream is open (its listing is then known).
    const watchingFetch = async (url: string | URL, init?: RequestInit): Promise<Response> => {
      const res = await fetch(url, init)
      if (init?.method === 'GET' && res.status === 200) opened()
      return res
    }
    const transport = new StreamableHTTPClientTransport(new URL(`${base}/mcp${query === '' ? '' : '?' + query}`), {
      fetch: watchingFetch,
      ...(opts.key ? { requestInit: { headers: { authorization: `Bearer ${opts.key}` } } } : {})
    })
    const client = new Client({ name: 'test', version: '1.0.0' })
    if (opts.onListChanged) {
      const onListChanged = opts.onListChanged
      client.setNotificationHandler(ToolListChangedNotificationSchema, async () => { onListChanged() })
    }
    await client.connect(transport)
    clients.push(client)
    return { client, streamOpen }
  }
  return { app, base, connect, http }
}

async function fixture (t: TestContext, marker: string): Promise<HttpFixture> {
  const f = await startStreamableHttpFixture({ marker })
  t.after(async () => await f.close())
  return f
}

function text (result: any): string {
  assert.equal(result.content.length, 1)
  assert.equal(result.content[0].type, 'text')
  return result.content[0].text
}

async function rejectsWith (work: Promise<unknown>, rpcCode: number, gwCode?: string): Promise<void> {
  await assert.rejects(work, (err: unknown) => {
    assert.ok(err instanceof McpError, String(err))
    assert.equal(err.code, rpcCode, err.message)
    if (gwCode !== undefined) assert.equal((err.data as { code?: string } | undefined)?.code, gwCode, err.message)
    return true
  })
}

/** Resolves when `ready` does, or fails the test after `ms` (a bound, not a timing assertion). */
async function within<T> (ready: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_resolve, reject) => { timer = setTimeout(() => reject(new Error(`no ${what} within ${ms} ms`)), ms) })
  try {
    return await Promise.race([ready, timeout])
  } finally {
    clearTimeout(timer)
  }
}

test('tools/list is GET /tools?format=mcp; tools/call is /invoke with the allow-list: a built-in, a function, a tenant remote tool', async (t) => {
  const remote = await fixture(t, 'acme')
  const gw = await startGateway(t, { OUTPUT_MAX_CHARS: '1000' })
  assert.equal((await gw.http('PUT', '/users/acme/mcp/servers/s', { body: { type: 'streamable_http', url: remote.url } })).status, 201)

  const query = 'functions=calculate,write_file,read_file&mcp=s&userId=acme'
  const { client } = await gw.connect(query)
  assert.equal(client.getServerVersion()?.name, 'tool-gateway')
  assert.deepEqual(client.getServerCapabilities()?.tools, { listChanged: true })
  const listed = await client.listTools()
  const rest = await gw.http('GET', `/tools?${query}&format=mcp`)
  assert.deepEqual(listed.tools, rest.json.tools)
  const names = listed.tools.map((x) => x.name)
  assert.ok(names.includes('calculate') && names.includes('read_file') && names.includes('user_acme_tool_echo'), names.join(','))
  assert.ok(!names.includes('current_time'))

  // Each call gives exactly the /invoke output and isError for the same call with the same allow-list
  // (an MCP tool's text result is its text; its own isError result is its own content, below).
  const allow = { functions: ['calculate', 'write_file', 'read_file'], mcp: ['s'] }
  assert.equal(JSON.parse(text(await client.callTool({ name: 'write_file', arguments: { path: 'notes.txt', content: 'hello from mcp' } }))).created, true)
  const calls: Array<[string, Record<string, unknown>]> = [
    ['calculate', { expression: '(2 + 3) * 4' }],
    ['read_file', { path: 'notes.txt' }],
    ['user_acme_tool_echo', { text: 'hi' }],
    ['user_acme_tool_big', { chars: 5000 }],
    ['calculate', { expression: 5 }]
  ]
  for (const [name, args] of calls) {
    const viaMcp = await client.callTool({ name, arguments: args })
    const viaRest = await gw.http('POST', '/invoke', { body: { name, arguments: args, userId: 'acme', allow } })
    assert.equal(viaRest.status, 200, JSON.stringify(viaRest.json))
    const sameCallId = (s: string): string => s.replace(/call_[0-9a-f]{32}/g, 'call_X')
    assert.equal(sameCallId(text(viaMcp)), sameCallId(viaRest.json.output), name)
    assert.equal(viaMcp.isError, viaRest.json.isError, name)
    assert.equal(viaMcp.structuredContent, undefined)
  }
  assert.equal(JSON.parse(text(await client.callTool({ name: 'calculate', arguments: { expression: '1 + 1' } }))).result, 2)
  assert.equal(text(await client.callTool({ name: 'user_acme_tool_echo', arguments: { text: 'z' } })), 'acme:z')
  // The MCP tool's own failure reaches an MCP client as its server sent it (/invoke wraps it in TOOL_ERROR for models).
  const failed = await client.callTool({ name: 'user_acme_tool_fail', arguments: { message: 'nope' } })
  assert.equal(failed.isError, true)
  assert.equal(text(failed), 'nope')
  // A built-in's failure is /invoke's TOOL_ERROR output.
  const badPath = await client.callTool({ name: 'read_file', arguments: { path: 'missing.txt' } })
  assert.equal(badPath.isError, true)
  assert.match(text(badPath), /^TOOL_ERROR: /)
  const big = text(await client.callTool({ name: 'user_acme_tool_big', arguments: { chars: 5000 } }))
  assert.ok(big.length < 5000, 'truncated to OUTPUT_MAX_CHARS')

  // Request-level refusals are JSON-RPC errors (-32602) with the gateway's code; the trace never reaches the client.
  await rejectsWith(client.callTool({ name: 'no_such_tool', arguments: {} }), ErrorCode.InvalidParams, 'GW_TOOL_NOT_FOUND')
  await rejectsWith(client.callTool({ name: 'current_time', arguments: {} }), ErrorCode.InvalidParams, 'GW_NOT_ALLOWED')
  // An MCP tool's items pass through as they are (the image's bytes included); no trace key.
  const mixed = await client.callTool({ name: 'user_acme_tool_mixed', arguments: {} })
  assert.deepEqual(Object.keys(mixed).sort(), ['content', 'isError'])
  assert.equal(mixed.isError, false)
  assert.deepEqual((mixed.content as Array<{ type: string }>).map((c) => c.type), ['text', 'image', 'resource_link', 'resource'])
  const viaRest = await gw.http('POST', '/invoke', { body: { name: 'user_acme_tool_mixed', arguments: {}, userId: 'acme', allow, trace: true } })
  assert.deepEqual(mixed.content, viaRest.json.trace.content)
  // No content item: the text is /invoke's output (the structuredContent as JSON) beside the structuredContent itself.
  const structured = await client.callTool({ name: 'user_acme_tool_structured', arguments: {} })
  assert.deepEqual(structured.structuredContent, { ok: true, n: 42 })
  assert.equal(text(structured), '{"ok":true,"n":42}')
})

test('with API keys: /mcp needs a key; tenant A cannot list or call tenant B\'s tools by userId, server name or encoded tool name', async (t) => {
  const acmeServer = await fixture(t, 'acme')
  const globexServer = await fixture(t, 'globex')
  const gw = await startGateway(t, { API_KEYS: KEYS })
  assert.equal((await gw.http('PUT', '/users/acme/mcp/servers/s', { key: ADMIN, body: { type: 'http', url: acmeServer.url } })).status, 201)
  assert.equal((await gw.http('PUT', '/users/globex/mcp/servers/s', { key: ADMIN, body: { type: 'http', url: globexServer.url } })).status, 201)

  // Not a public route: no key, a bad key -> 401 (a JSON-RPC body, WWW-Authenticate like everywhere).
  const init = {
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'curl', version: '0' } }
  }
  const accept = { accept: 'application/json, text/event-stream' }
  for (const key of [undefined, 'wrong-key-0123456789']) {
    const res = await gw.http('POST', '/mcp?mcp=s', { ...(key ? { key } : {}), body: init, headers: accept })
    assert.equal(res.status, 401)
    assert.match(res.headers.get('www-authenticate') ?? '', /^Bearer/)
    assert.equal(res.json.error.data.code, 'GW_UNAUTHORIZED')
    assert.equal(res.json.jsonrpc, '2.0')
  }
  assert.equal((await gw.http('GET', '/mcp?mcp=s', { headers: { accept: 'text/event-stream' } })).status, 401)
  await assert.rejects(gw.connect('mcp=s'), /401/)

  // The tenant key lists its own server's tools (encoded names), never the other tenant's.
  const { client: acme } = await gw.connect('mcp=s', { key: ACME })
  const names = (await acme.listTools()).tools.map((x) => x.name)
  assert.ok(names.includes('user_acme_tool_echo'), names.join(','))
  assert.ok(!names.some((n) => n.includes('globex')), names.join(','))
  assert.deepEqual((await acme.listTools()).tools, (await gw.http('GET', '/tools?mcp=s&format=mcp', { key: ACME })).json.tools)
  assert.equal(text(await acme.callTool({ name: 'user_acme_tool_echo', arguments: { text: 'a' } })), 'acme:a')

  // Another tenant through the URL: refused before any MCP message (403), for POST and GET.
  for (const query of ['mcp=s&userId=globex', 'mcp=user_globex_service_s']) {
    await assert.rejects(gw.connect(query, { key: ACME }), /403/)
    const res = await gw.http('POST', `/mcp?${query}`, { key: ACME, body: init, headers: accept })
    assert.equal(res.status, 403)
    assert.equal(res.json.error.data.code, 'GW_TENANT_MISMATCH')
    assert.equal((await gw.http('GET', `/mcp?${query}`, { key: ACME, headers: { accept: 'text/event-stream' } })).status, 403)
  }
  // ... and through an encoded tool name: a JSON-RPC error, and nothing reached globex's server.
  const before = globexServer.stats.toolCalls
  await rejectsWith(acme.callTool({ name: 'user_globex_tool_echo', arguments: { text: 'x' } }), ErrorCode.InvalidParams)
  assert.equal(globexServer.stats.toolCalls, before)

  // The admin may act for a tenant through the URL: it sees that tenant's tools only.
  const { client: admin } = await gw.connect('mcp=s&userId=globex', { key: ADMIN })
  assert.equal(text(await admin.callTool({ name: 'user_globex_tool_echo', arguments: { text: 'g' } })), 'globex:g')
  await rejectsWith(admin.callTool({ name: 'user_acme_tool_echo', arguments: { text: 'x' } }), ErrorCode.InvalidParams, 'GW_TENANT_MISMATCH')
})

test('notifications/tools/list_changed reaches an open client when its tenant\'s servers change, and the new tools are listed', async (t) => {
  const first = await fixture(t, 'one')
  const second = await fixture(t, 'two')
  const gw = await startGateway(t, { API_KEYS: KEYS })
  assert.equal((await gw.http('PUT', '/users/acme/mcp/servers/s', { key: ACME, body: { type: 'http', url: first.url } })).status, 201)

  let changes = 0
  let changed!: () => void
  const notified = new Promise<void>((resolve) => { changed = resolve })
  const { client, streamOpen } = await gw.connect('mcp=s,t', { key: ACME, onListChanged: () => { changes++; changed() } })
  await within(streamOpen, 10_000, 'GET notification stream')
  assert.ok(!(await client.listTools()).tools.some((x) => x.name.startsWith('user_acme_tool_t__')))

  // Another tenant's server of the same id changes nothing in this listing (not asserted: absence would need a wait);
  assert.equal((await gw.http('PUT', '/users/globex/mcp/servers/t', { key: GLOBEX, body: { type: 'http', url: second.url } })).status, 201)
  // its own tenant's does.
  assert.equal((await gw.http('PUT', '/users/acme/mcp/servers/t', { key: ACME, body: { type: 'http', url: second.url } })).status, 201)
  await within(notified, 30_000, 'notifications/tools/list_changed')
  const names = (await client.listTools()).tools.map((x) => x.name)
  assert.deepEqual(names, (await gw.http('GET', '/tools?mcp=s,t&format=mcp', { key: ACME })).json.tools.map((x: any) => x.name))
  assert.ok(names.some((n) => n.includes('two') || n.startsWith('user_acme_tool_t')), names.join(','))
  assert.ok(changes >= 1)
})

test('the notifier checks a watched listing at once on a registry change event of its scope (no poll needed)', async (t) => {
  const remote = await fixture(t, 'ev')
  const store = new MemoryRegistryStore()
  const gw = await startGateway(t, {}, store)
  const notifier = new ListChangedNotifier({ gateway: gw.app.services.gateway, pollMs: 3_600_000, subscribe: (listener) => store.subscribe(listener) })
  t.after(() => notifier.close())
  let sent = 0
  let changed!: () => void
  const notified = new Promise<void>((resolve) => { changed = resolve })
  const target = { sendToolListChanged: async () => { sent++; changed() } }
  const unwatch = await notifier.watch({ mcp: 'w', userId: 'acme' }, 'acme', { userId: undefined, isAdmin: true }, target, ['w'])
  // A server the listing does not name, and another tenant's: no check is triggered that could notify.
  assert.equal((await gw.http('PUT', '/users/acme/mcp/servers/other', { body: { type: 'http', url: remote.url } })).status, 201)
  assert.equal((await gw.http('PUT', '/users/globex/mcp/servers/w', { body: { type: 'http', url: remote.url } })).status, 201)
  await notifier.checkAll()
  assert.equal(sent, 0, 'nothing in the watched listing changed')
  assert.equal((await gw.http('PUT', '/users/acme/mcp/servers/w', { body: { type: 'http', url: remote.url } })).status, 201)
  await within(notified, 10_000, 'a notification after the change event')
  assert.equal(sent, 1)
  await notifier.checkAll()
  assert.equal(sent, 1, 'an unchanged listing is not notified again')
  unwatch()
  assert.equal(notifier.streams, 0)
})

test('malformed JSON, invalid JSON-RPC, unknown methods, oversized bodies, wrong media types: JSON-RPC errors, and the endpoint keeps serving', async (t) => {
  const gw = await startGateway(t, { BODY_LIMIT_BYTES: '4096' })
  const { client } = await gw.connect('functions=calculate')
  const headers = { accept: 'application/json, text/event-stream' }

  const malformed = await gw.http('POST', '/mcp', { body: '{"jsonrpc": "2.0", "id": 1, "method": ', headers })
  assert.equal(malformed.status, 400)
  assert.equal(malformed.json.error.code, -32700)
  assert.equal(malformed.json.id, null)
  const empty = await gw.http('POST', '/mcp', { body: ' ', headers })
  assert.equal(empty.json.error.code, -32700)
  const notRpc = await gw.http('POST', '/mcp', { body: { hello: 'world' }, headers })
  assert.equal(notRpc.status, 400)
  assert.ok([-32700, -32600].includes(notRpc.json.error.code), JSON.stringify(notRpc.json))

  const unknown = await gw.http('POST', '/mcp', { body: { jsonrpc: '2.0', id: 7, method: 'no/such/method', params: {} }, headers })
  assert.equal(unknown.status, 200)
  assert.equal(unknown.json.id, 7)
  assert.equal(unknown.json.error.code, ErrorCode.MethodNotFound)
  // resources/list is served (mcp.resources.test.ts); subscribing is not (the endpoint is stateless).
  await rejectsWith(client.request({ method: 'resources/subscribe', params: { uri: 'mem://x' } }, ToolListChangedNotificationSchema.passthrough() as any), ErrorCode.MethodNotFound)

  const badParams = await gw.http('POST', '/mcp?functions=calculate', {
    body: { jsonrpc: '2.0', id: 8, method: 'tools/call', params: { arguments: {} } },
    headers
  })
  // The SDK rejects a tools/call without a name before any handler runs.
  assert.ok([ErrorCode.InvalidParams, ErrorCode.InternalError].includes(badParams.json.error.code), JSON.stringify(badParams.json))
  assert.equal(badParams.json.id, 8)

  const oversized = await gw.http('POST', '/mcp', {
    body: { jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'calculate', arguments: { expression: '1+'.repeat(5000) + '1' } } },
    headers
  })
  assert.equal(oversized.status, 413)
  assert.equal(oversized.json.error.data.code, 'GW_PAYLOAD_TOO_LARGE')
  const wrongType = await gw.http('POST', '/mcp', { body: 'hello', headers: { ...headers, 'content-type': 'text/plain' } })
  assert.equal(wrongType.status, 415)
  assert.equal(wrongType.json.jsonrpc, '2.0')
  const noAccept = await gw.http('POST', '/mcp', { body: { jsonrpc: '2.0', id: 10, method: 'tools/list' }, headers: { accept: 'application/json' } })
  assert.equal(noAccept.status, 406)
  const badQuery = await gw.http('POST', '/mcp?format=openai', { body: { jsonrpc: '2.0', id: 11, method: 'tools/list' }, headers })
  assert.equal(badQuery.status, 400)
  assert.equal(badQuery.json.error.data.code, 'GW_BAD_REQUEST')
  const del = await gw.http('DELETE', '/mcp')
  assert.equal(del.status, 405)
  assert.equal(del.headers.get('allow'), 'GET, POST')

  // A stateless POST without initialize works (any instance answers any request), and the client still works.
  const list = await gw.http('POST', '/mcp?functions=calculate', { body: { jsonrpc: '2.0', id: 12, method: 'tools/list' }, headers })
  assert.deepEqual(list.json.result.tools.map((x: any) => x.name), ['calculate'])
  assert.equal(list.headers.get('mcp-session-id'), null)
  assert.match(list.headers.get('x-gateway-overhead-ms') ?? '', /^\d+\.\d{3}$/)
  assert.equal(JSON.parse(text(await client.callTool({ name: 'calculate', arguments: { expression: '6 * 7' } }))).result, 42)
})

test('every method /mcp does not take is 405 with a JSON-RPC error body and the same Allow header, which its message names', async (t) => {
  const gw = await startGateway(t, { API_KEYS: KEYS })
  // PUT and OPTIONS were answered with the gateway's plain error body; HEAD's Allow said DELETE while DELETE's said GET, POST.
  // (fetch sends no TRACE: inject does, below.)
  for (const method of ['PUT', 'PATCH', 'OPTIONS', 'DELETE', 'HEAD', 'QUERY']) {
    const res = await fetch(`${gw.base}/mcp`, { method, headers: { authorization: `Bearer ${ACME}`, 'content-type': 'application/json' } })
    const text = await res.text()
    assert.equal(res.status, 405, `${method}: ${text}`)
    assert.equal(res.headers.get('allow'), 'GET, POST', method)
    assert.match(res.headers.get('content-type') ?? '', /^application\/json/, method)
    if (method === 'HEAD') {
      assert.equal(text, '')
      continue
    }
    const body = JSON.parse(text)
    assert.equal(body.jsonrpc, '2.0', method)
    assert.equal(body.id, null)
    assert.equal(body.error.code, -32000)
    assert.deepEqual(body.error.data, { statusCode: 405, code: 'GW_METHOD_NOT_ALLOWED' })
    assert.match(body.error.message, new RegExp(`^${method} is not allowed on /mcp: it takes GET, POST`))
  }
  // With a body too; without a key, a 401 first, as on every route.
  const put = await gw.http('PUT', '/mcp', { key: ACME, body: { jsonrpc: '2.0', id: 1, method: 'tools/list' } })
  assert.equal(put.status, 405)
  assert.equal(put.json.error.data.code, 'GW_METHOD_NOT_ALLOWED')
  assert.equal((await gw.http('PUT', '/mcp', { body: {} })).status, 401)
  const del = await gw.http('DELETE', '/mcp', { key: ACME })
  assert.match(del.json.error.message, /stateless: there is no session to terminate/)
  const trace = await gw.app.inject({ method: 'TRACE', url: '/mcp', headers: { authorization: `Bearer ${ACME}` } })
  assert.equal(trace.statusCode, 405)
  assert.equal(trace.headers.allow, 'GET, POST')
  assert.equal(trace.json().error.data.code, 'GW_METHOD_NOT_ALLOWED')
})

test('a batch with two requests of one id is refused whole with -32600, before any of them runs: no request is lost silently', async (t) => {
  const gw = await startGateway(t)
  const headers = { accept: 'application/json, text/event-stream' }
  const call = (id: unknown, expression: string): Record<string, unknown> =>
    ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'calculate', arguments: { expression } } })
  // The SDK matched answers to requests by id: the first answer of id 1 was sent alone (not even as an array), the
  // other request ran all the same and its answer was dropped.
  let calls = 0
  gw.app.services.gateway.calls.subscribe(() => { calls++ })
  for (const batch of [
    [{ jsonrpc: '2.0', id: 1, method: 'tools/list' }, call(1, '1+1')],
    [call('a', '1+1'), call(2, '2+2'), call('a', '3+3'), { jsonrpc: '2.0', method: 'notifications/initialized' }]
  ]) {
    const res = await gw.http('POST', '/mcp?functions=calculate', { body: batch, headers })
    assert.equal(res.status, 400, JSON.stringify(res.json))
    assert.equal(res.json.jsonrpc, '2.0')
    assert.equal(res.json.id, null)
    assert.equal(res.json.error.code, -32600)
    assert.deepEqual(res.json.error.data, { statusCode: 400, code: 'GW_DUPLICATE_REQUEST_ID' })
    assert.match(res.json.error.message, /^Invalid Request: the batch holds two requests of id (1|"a"): none of its requests ran/)
  }
  assert.equal(calls, 0, 'no tools/call of a refused batch ran')
  // The same id as a number and as a string are two ids (JSON-RPC matches them exactly), and a notification has none.
  const distinct = await gw.http('POST', '/mcp?functions=calculate', { body: [call(1, '1+1'), call('1', '2+2')], headers })
  assert.equal(distinct.status, 200)
  assert.deepEqual(distinct.json.map((a: { id: unknown }) => a.id).sort(), [1, '1'].sort())
  assert.equal(calls, 2)
})

test('a batch is answered with an array, one of one request included (JSON-RPC 2.0); a single request with the response alone', async (t) => {
  const gw = await startGateway(t)
  const headers = { accept: 'application/json, text/event-stream' }
  // The SDK's transport answered a batch of one request with the bare response object.
  for (const batch of [
    [{ jsonrpc: '2.0', id: 7, method: 'ping' }],
    [{ jsonrpc: '2.0', id: 8, method: 'tools/call', params: { name: 'calculate', arguments: { expression: '1+2' } } }],
    [{ jsonrpc: '2.0', method: 'notifications/initialized' }, { jsonrpc: '2.0', id: 9, method: 'tools/list' }]
  ]) {
    const res = await gw.http('POST', '/mcp?functions=calculate', { body: batch, headers })
    assert.equal(res.status, 200, JSON.stringify(res.json))
    assert.ok(Array.isArray(res.json), JSON.stringify(res.json).slice(0, 300))
    assert.equal(res.json.length, 1)
    assert.equal(res.json[0].id, batch.at(-1)?.id)
    assert.ok(res.json[0].result !== undefined)
  }
  const single = await gw.http('POST', '/mcp?functions=calculate', { body: { jsonrpc: '2.0', id: 10, method: 'ping' }, headers })
  assert.deepEqual(single.json, { result: {}, jsonrpc: '2.0', id: 10 })
})

test('a GET /mcp the SDK refuses (no event stream accepted, a revision it does not speak) builds no listing and counts no stream', async (t) => {
  const gw = await startGateway(t)
  const gateway = gw.app.services.gateway
  let listings = 0
  const listTools = gateway.listTools.bind(gateway)
  gateway.listTools = async (...args) => { listings++; return await listTools(...args) }
  const refused: Array<Record<string, string>> = [{ accept: 'application/json' }, { accept: 'text/event-stream', 'mcp-protocol-version': '1999-01-01' }]
  for (const headers of refused) {
    const res = await gw.http('GET', '/mcp?functions=calculate', { headers })
    assert.ok(res.status === 406 || res.status === 400, `${res.status} ${JSON.stringify(res.json)}`)
    assert.equal(res.json.jsonrpc, '2.0')
  }
  assert.equal(listings, 0, 'a refused GET built the listing')
  // An accepted GET still watches its listing (the stream is closed by the test's end).
  const open = await fetch(`${gw.base}/mcp?functions=calculate`, { headers: { accept: 'text/event-stream' } })
  assert.equal(open.status, 200)
  assert.equal(listings, 1)
  await open.body?.cancel()
})
