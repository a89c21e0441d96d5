/**
 * POST /mcp in the 2026-07-28 revision (routes/mcp.ts, src/mcp-server/modern.ts): the SDK v2
 * client pinned to it and in auto mode, raw requests for the wire rules (the `_meta` envelope,
 * Mcp-Method / Mcp-Name checks, error codes with the request id kept, removed methods), and
 * the same tenancy as the legacy revisions. A legacy client on the same URL is served as before.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { TestContext } from 'node:test'
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client'
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { buildApp } from '../../../src/app.js'
import { loadConfig } from '../../../src/config.js'
import { startStreamableHttpFixture } from '../../../scripts/lib/mcp-fixtures/index.js'
import { startConformanceServer } from '../../../scripts/lib/mcp-fixtures/conformance/server.js'
import { TEST_QUOTA } from '../../helpers/app.js'
import { MODERN, postModernMcp } from '../../helpers/mcp-raw.js'
import type { RawMcpAnswer, RawMcpMessage, RawMcpOptions } from '../../helpers/mcp-raw.js'

const ADMIN = 'admin-key-0123456789'
const ACME = 'acme-key-0123456789'
const GLOBEX = 'globex-key-0123456789'

interface Gateway {
  base: string
  /** A v2 SDK client on /mcp?{query} with `key`, in the given negotiation mode. */
  client: (query: string, key: string, mode?: 'auto' | 'legacy' | { pin: string }) => Promise<Client>
  http: (method: string, path: string, key: string, body?: unknown) => Promise<{ status: number, json: any }>
  /** A raw 2026-07-28 POST /mcp: the envelope added to params unless `envelope: false`, headers as given. */
  rpc: (query: string, key: string, message: RawMcpMessage, opts?: RawMcpOptions) => Promise<RawMcpAnswer>
}

async function startGateway (t: TestContext, env: Record<string, string> = {}): Promise<Gateway> {
  const workspaces = await mkdtemp(join(tmpdir(), 'tg-mcp-modern-'))
  const config = loadConfig({
    SANDBOX: 'none',
    ...TEST_QUOTA,
    LOG_LEVEL: 'silent',
    WORKSPACES_DIR: workspaces,
    EGRESS_ALLOW: '127.0.0.1/32',
    API_KEYS: `${ADMIN}:*,${ACME}:acme,${GLOBEX}:globex`,
    ...env
  })
  const app = await buildApp(config, { logger: false })
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
  const auth = (key: string): Record<string, string> => ({ authorization: `Bearer ${key}` })
  return {
    base,
    async client (query, key, mode = { pin: MODERN }) {
      const client = new Client({ name: 'test-v2', version: '1.0.0' }, { versionNegotiation: { mode } })
      await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp?${query}`), { requestInit: { headers: auth(key) } }))
      clients.push(client)
      return client
    },
    async http (method, path, key, body) {
      const res = await fetch(base + path, {
        method,
        headers: { ...auth(key), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {})
      })
      const text = await res.text()
      return { status: res.status, json: text === '' ? undefined : JSON.parse(text) }
    },
    async rpc (query, key, message, opts = {}) {
      return await postModernMcp(`${base}/mcp?${query}`, key, message, opts)
    }
  }
}

test('2026-07-28 clients (pinned, negotiating) get the modern revision; tools/list is GET /tools?format=mcp, private; tools/call is /invoke', async (t) => {
  const remote = await startStreamableHttpFixture({ marker: 'acme' })
  t.after(async () => await remote.close())
  const gw = await startGateway(t)
  assert.equal((await gw.http('PUT', '/users/acme/mcp/servers/s', ACME, { type: 'streamable_http', url: remote.url })).status, 201)
  const query = 'functions=calculate,read_file&mcp=s'

  for (const mode of [{ pin: MODERN }, 'auto'] as const) {
    const client = await gw.client(query, ACME, mode)
    assert.equal(client.getProtocolEra(), 'modern', JSON.stringify(mode))
    assert.equal(client.getNegotiatedProtocolVersion(), MODERN)
    const listed = await client.listTools()
    const rest = await gw.http('GET', `/tools?${query}&format=mcp`, ACME)
    // The same but `execution.taskSupport` (kept as the servers list it), which the 2026-07-28 wire does
    // not have: SEP-2663 tasks are server-directed, and the SDK's codec drops it (and `execution` with it).
    const withoutTaskSupport = (tool: { execution?: { taskSupport?: unknown } }): unknown => {
      const { taskSupport: _gone, ...execution } = tool.execution ?? {}
      const { execution: _all, ...rest } = tool
      return Object.keys(execution).length > 0 ? { ...rest, execution } : rest
    }
    assert.ok(rest.json.tools.some((x: { execution?: { taskSupport?: unknown } }) => x.execution?.taskSupport !== undefined))
    assert.deepEqual(listed.tools, rest.json.tools.map(withoutTaskSupport))
    assert.ok(listed.tools.some((x) => x.name === 'user_acme_tool_echo'))

    const sum = await client.callTool({ name: 'calculate', arguments: { expression: '6*7' } })
    assert.deepEqual(sum.content, [{ type: 'text', text: '{"expression":"6*7","result":42}' }])
    assert.equal(sum.isError, false)
    const echo = await client.callTool({ name: 'user_acme_tool_echo', arguments: { text: 'hi' } })
    assert.deepEqual(echo.content, [{ type: 'text', text: 'acme:hi' }])
    // The upstream result as its server sent it: structuredContent with no content item gets the text too.
    const structured = await client.callTool({ name: 'user_acme_tool_structured', arguments: {} })
    assert.deepEqual(structured.structuredContent, { ok: true, n: 42 })
    const failed = await client.callTool({ name: 'user_acme_tool_fail', arguments: { message: 'nope' } })
    assert.equal(failed.isError, true)
  }

  // On the wire: resultType, the cache fields (every listing depends on the caller) and the server's identity.
  const raw = await gw.rpc(query, ACME, { id: 'list-1', method: 'tools/list' })
  assert.equal(raw.status, 200)
  assert.equal(raw.json.id, 'list-1')
  assert.equal(raw.json.result.resultType, 'complete')
  assert.equal(raw.json.result.cacheScope, 'private')
  assert.equal(raw.json.result.ttlMs, 0)
  assert.equal(raw.json.result._meta['io.modelcontextprotocol/serverInfo'].name, 'tool-gateway')
  // The same listing twice is in the same order.
  const again = await gw.rpc(query, ACME, { id: 'list-2', method: 'tools/list' })
  assert.deepEqual(again.json.result.tools.map((x: { name: string }) => x.name), raw.json.result.tools.map((x: { name: string }) => x.name))

  // server/discover: the gateway, the modern revision, its capabilities.
  const discover = await gw.rpc(query, ACME, { method: 'server/discover' })
  assert.equal(discover.status, 200)
  assert.deepEqual(discover.json.result.supportedVersions, [MODERN])
  assert.ok(discover.json.result.capabilities.tools !== undefined)
  assert.equal(discover.json.result._meta['io.modelcontextprotocol/serverInfo'].name, 'tool-gateway')
})

test('2026-07-28 wire rules: header and body agree, the envelope is required, an unknown revision is named; errors keep the request id', async (t) => {
  const gw = await startGateway(t)
  const q = 'functions=calculate'

  const mismatch = await gw.rpc(q, ACME, { id: 11, method: 'tools/list' }, { headers: { 'mcp-method': 'tools/call' } })
  assert.equal(mismatch.status, 400)
  assert.equal(mismatch.json.id, 11)
  assert.equal(mismatch.json.error.code, -32020)

  const call = { id: 12, method: 'tools/call', params: { name: 'calculate', arguments: { expression: '1' } } }
  const wrongName = await gw.rpc(q, ACME, call, { headers: { 'mcp-name': 'other' } })
  assert.equal(wrongName.status, 400)
  assert.equal(wrongName.json.id, 12)
  assert.equal(wrongName.json.error.code, -32020)
  assert.match(wrongName.json.error.message, /Mcp-Name/)

  const noEnvelope = await gw.rpc(q, ACME, { id: 13, method: 'tools/list', params: {} }, { envelope: false })
  assert.equal(noEnvelope.status, 400)
  assert.equal(noEnvelope.json.id, 13)
  assert.equal(noEnvelope.json.error.code, -32602)

  const future = await gw.rpc(q, ACME, { id: 14, method: 'tools/list' }, { version: '2099-01-01' })
  assert.equal(future.status, 400)
  assert.equal(future.json.id, 14)
  assert.equal(future.json.error.code, -32022)
  assert.deepEqual(future.json.error.data.supported, [MODERN])

  // Methods the revision removed: Method not found, HTTP 404.
  for (const method of ['ping', 'logging/setLevel']) {
    const removed = await gw.rpc(q, ACME, { id: 15, method, params: method === 'ping' ? {} : { level: 'info' } })
    assert.equal(removed.status, 404, method)
    assert.equal(removed.json.id, 15)
    assert.equal(removed.json.error.code, -32601)
  }

  // A tool outside the allow-list: an error of the call, with the gateway's code.
  const outsideCall = { id: 16, method: 'tools/call', params: { name: 'current_time', arguments: {} } }
  const outside = await gw.rpc(q, ACME, outsideCall, { headers: { 'mcp-name': 'current_time' } })
  assert.equal(outside.json.id, 16)
  assert.equal(outside.json.error.code, -32602)
  assert.equal(outside.json.error.data.code, 'GW_NOT_ALLOWED')
})

test('tenancy holds in the 2026-07-28 revision: another tenant\'s userId or server is refused before any message is read, with the request id', async (t) => {
  const remote = await startStreamableHttpFixture({ marker: 'globex' })
  t.after(async () => await remote.close())
  const gw = await startGateway(t)
  assert.equal((await gw.http('PUT', '/users/globex/mcp/servers/g', GLOBEX, { type: 'streamable_http', url: remote.url })).status, 201)

  const other = await gw.rpc('mcp=g&userId=globex', ACME, { id: 21, method: 'tools/list' })
  assert.equal(other.status, 403)
  assert.equal(other.json.id, 21)
  assert.equal(other.json.error.data.code, 'GW_TENANT_MISMATCH')

  const theirs = { id: 22, method: 'tools/call', params: { name: 'user_globex_tool_echo', arguments: { text: 'x' } } }
  const encoded = await gw.rpc('mcp=user_globex_service_g', ACME, theirs, { headers: { 'mcp-name': 'user_globex_tool_echo' } })
  assert.equal(encoded.status, 403)
  assert.equal(encoded.json.id, 22)

  // Acme's own URL does not see globex's server either: its name resolves in acme's registry.
  const own = await gw.rpc('mcp=g', ACME, { id: 23, method: 'tools/list' })
  assert.equal(own.status, 200)
  assert.equal(own.json.result.tools.some((x: { name: string }) => x.name.includes('globex')), false)

  // Globex itself gets its tools.
  const client = await gw.client('mcp=g', GLOBEX)
  const names = (await client.listTools()).tools.map((x) => x.name)
  assert.ok(names.includes('user_globex_tool_echo'), names.join(','))
  const unauthenticated = await fetch(`${gw.base}/mcp?mcp=g`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 24, method: 'tools/list', params: {} })
  })
  // Refused before the body is read (no key, no parsing): no id to keep.
  assert.equal(unauthenticated.status, 401)
  assert.equal((await unauthenticated.json() as { error: { data: { code: string } } }).error.data.code, 'GW_UNAUTHORIZED')
})

test('a legacy client on the same URL is served the legacy revision as before (initialize, 2025-11-25, JSON answers)', async (t) => {
  const gw = await startGateway(t)
  const legacy = new LegacyClient({ name: 'test-v1', version: '1.0.0' })
  await legacy.connect(new LegacyTransport(new URL(`${gw.base}/mcp?functions=calculate`), { requestInit: { headers: { authorization: `Bearer ${ACME}` } } }))
  t.after(async () => await legacy.close())
  assert.equal(legacy.getServerVersion()?.name, 'tool-gateway')
  assert.deepEqual(legacy.getServerCapabilities()?.tools, { listChanged: true })
  const listed = await legacy.listTools()
  assert.deepEqual(listed.tools.map((x) => x.name), ['calculate'])
  assert.equal((listed as Record<string, unknown>).resultType, undefined, 'no 2026 fields on a legacy answer')
  assert.equal((listed as Record<string, unknown>).cacheScope, undefined)

  const v2legacy = await gw.client('functions=calculate', ACME, 'legacy')
  assert.equal(v2legacy.getProtocolEra(), 'legacy')
  const called = await v2legacy.callTool({ name: 'calculate', arguments: { expression: '2^10' } })
  assert.deepEqual(called.content, [{ type: 'text', text: '{"expression":"2^10","result":1024}' }])
})

test('subscriptions/listen: a 2026-07-28 client hears tools/list_changed when its own listing changes; the stream ends with the client', async (t) => {
  const first = await startStreamableHttpFixture({ marker: 'one' })
  const second = await startStreamableHttpFixture({ marker: 'two' })
  t.after(async () => { await first.close(); await second.close() })
  const gw = await startGateway(t)
  assert.equal((await gw.http('PUT', '/users/acme/mcp/servers/s', ACME, { type: 'streamable_http', url: first.url })).status, 201)

  const client = await gw.client('mcp=s,t', ACME)
  let changes = 0
  let changed!: () => void
  const notified = new Promise<void>((resolve) => { changed = resolve })
  client.setNotificationHandler('notifications/tools/list_changed', async () => { changes++; changed() })
  const subscription = await client.listen({ toolsListChanged: true, promptsListChanged: true })
  // Only what the gateway offers is honoured: tool list changes.
  assert.deepEqual(subscription.honoredFilter, { toolsListChanged: true })
  const before = (await client.listTools()).tools.map((x) => x.name)

  // Another tenant's server of the same name is not in this listing; acme's own is.
  assert.equal((await gw.http('PUT', '/users/globex/mcp/servers/t', GLOBEX, { type: 'streamable_http', url: second.url })).status, 201)
  assert.equal((await gw.http('PUT', '/users/acme/mcp/servers/t', ACME, { type: 'streamable_http', url: second.url })).status, 201)
  let timer: NodeJS.Timeout | undefined
  const deadline = new Promise((_resolve, reject) => { timer = setTimeout(() => reject(new Error('no list_changed within 30 s')), 30_000) })
  await Promise.race([notified, deadline])
  clearTimeout(timer)
  assert.ok(changes >= 1)
  const after = (await client.listTools()).tools.map((x) => x.name)
  assert.ok(after.length > before.length, `${before.join(',')} -> ${after.join(',')}`)

  await subscription.close()
  assert.equal(await subscription.closed, 'local')
})

test('subscriptions/listen on the wire: the acknowledgement first, as an SSE stream, with a subscription id; it holds no concurrency slot', async (t) => {
  const gw = await startGateway(t, { MAX_CONCURRENT_PER_TENANT: '3' })
  const controller = new AbortController()
  const listen = async (id: number): Promise<{ status: number, first: any }> => {
    const res = await fetch(`${gw.base}/mcp?functions=calculate`, {
      method: 'POST',
      signal: controller.signal,
      headers: {
        authorization: `Bearer ${ACME}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': MODERN,
        'mcp-method': 'subscriptions/listen'
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id,
        method: 'subscriptions/listen',
        params: {
          notifications: { toolsListChanged: true },
          _meta: { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': {} }
        }
      })
    })
    if (!/text\/event-stream/.test(res.headers.get('content-type') ?? '')) assert.fail(`listen ${id}: ${res.status} ${await res.text()}`)
    const reader = res.body!.getReader()
    let text = ''
    while (!text.includes('\n\n')) {
      const { value, done } = await reader.read()
      if (done) break
      text += new TextDecoder().decode(value)
    }
    const data = text.split('\n').find((l) => l.startsWith('data: '))
    return { status: res.status, first: data === undefined ? undefined : JSON.parse(data.slice(6)) }
  }
  // More open streams than the tenant may run calls at once.
  const opened = []
  for (let i = 0; i < 5; i++) opened.push(await listen(i))
  t.after(() => controller.abort())
  for (const o of opened) {
    assert.equal(o.status, 200)
    assert.equal(o.first.method, 'notifications/subscriptions/acknowledged')
    const id: unknown = o.first.params._meta['io.modelcontextprotocol/subscriptionId']
    assert.ok(typeof id === 'string' || typeof id === 'number', JSON.stringify(o.first))
  }
  // And calls still run.
  const message = { id: 99, method: 'tools/call', params: { name: 'calculate', arguments: { expression: '1+1' } } }
  const call = await gw.rpc('functions=calculate', ACME, message, { headers: { 'mcp-name': 'calculate' } })
  assert.equal(call.status, 200)
  assert.equal(call.json.result.isError, false)
})

test('2026-07-28 Mcp-Param headers are checked against the tool\'s x-mcp-header parameters before dispatch: 400 -32020 with the request id', async (t) => {
  const upstream = await startConformanceServer()
  t.after(async () => await upstream.close())
  const gw = await startGateway(t)
  assert.equal((await gw.http('PUT', '/mcp/servers/conf', ADMIN, { type: 'streamable_http', url: upstream.url })).status, 201)
  const q = 'mcp=conf'
  const listed = await gw.rpc(q, ADMIN, { id: 1, method: 'tools/list' })
  const tool = listed.json.result.tools.find((x: { name: string }) => x.name === 'test_x_mcp_header')
  assert.equal(tool?.inputSchema.properties.region['x-mcp-header'], 'Region', 'the annotation is listed as the server wrote it')

  const call = async (id: number, region: string | undefined, header: Record<string, string>): ReturnType<Gateway['rpc']> => {
    const params = { name: 'test_x_mcp_header', arguments: region === undefined ? {} : { region } }
    return await gw.rpc(q, ADMIN, { id, method: 'tools/call', params }, { headers: { 'mcp-name': 'test_x_mcp_header', ...header } })
  }
  const ok = await call(2, 'us-west1', { 'mcp-param-region': 'us-west1' })
  assert.equal(ok.status, 200)
  assert.deepEqual(ok.json.result.content, [{ type: 'text', text: 'region=us-west1' }])
  const b64 = await call(3, 'Hello', { 'mcp-param-region': `=?base64?${Buffer.from('Hello').toString('base64')}?=` })
  assert.equal(b64.status, 200)

  for (const [id, header] of [[4, {}], [5, { 'mcp-param-region': 'eu-north1' }], [6, { 'mcp-param-region': '=?base64?SGVsbG8?=' }]] as const) {
    const refused = await call(id, 'us-west1', header)
    assert.equal(refused.status, 400, JSON.stringify(header))
    assert.equal(refused.json.id, id)
    assert.equal(refused.json.error.code, -32020)
    assert.equal(refused.json.error.data.mismatch.header, 'Mcp-Param-Region')
  }
  // No argument, no header expected.
  assert.equal((await call(7, undefined, {})).status, 200)
})

test('GET /mcp in the 2026-07-28 revision is 405 naming subscriptions/listen (it has no GET stream); an unknown revision is quoted cut', async (t) => {
  const gw = await startGateway(t)
  // The revision server/discover advertises was refused as "Unsupported protocol version" by the legacy stream's transport.
  const get = async (version: string): Promise<{ status: number, allow: string | null, json: any }> => {
    const res = await fetch(`${gw.base}/mcp?functions=calculate`, {
      headers: { authorization: `Bearer ${ACME}`, accept: 'text/event-stream', 'mcp-protocol-version': version }
    })
    return { status: res.status, allow: res.headers.get('allow'), json: await res.json() }
  }
  const modern = await get(MODERN)
  assert.equal(modern.status, 405)
  assert.equal(modern.allow, 'POST')
  assert.equal(modern.json.jsonrpc, '2.0')
  assert.equal(modern.json.id, null)
  assert.equal(modern.json.error.code, -32000)
  assert.deepEqual(modern.json.error.data, { statusCode: 405, code: 'GW_METHOD_NOT_ALLOWED' })
  assert.match(modern.json.error.message, /2026-07-28.*POST.*subscriptions\/listen/)
  const discover = await gw.rpc('functions=calculate', ACME, { method: 'server/discover' })
  assert.ok(discover.json.result.supportedVersions.includes(MODERN), JSON.stringify(discover.json))
  // A revision the gateway does not serve at all: 400, the header quoted at most 200 characters (a 5 KB one came back whole).
  const version = '1999-01-01'.padEnd(5000, '9')
  const unknown = await get(version)
  assert.equal(unknown.status, 400)
  const message: string = unknown.json.error.message
  assert.ok(message.includes(`${version.slice(0, 200)}...`) && message.length < 500, message)
})
