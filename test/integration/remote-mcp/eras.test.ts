/**
 * The gateway's upstream client in both protocol eras, through GET /tools and POST /invoke, against
 * real servers: SDK v2 servers served by `createMcpHandler` (2026-07-28 only, and dual-era), and raw
 * legacy (2025-11-25) servers that end a tools/call's SSE stream early, with and without event ids.
 * What each server received (methods, headers) is recorded at the server.
 */
import { test } from 'node:test'
import type { TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { createServer } from 'node:http'
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { createMcpHandler, fromJsonSchema, McpServer } from '@modelcontextprotocol/server'
import type { FastifyInstance } from 'fastify'
import { buildTestApp } from '../../helpers/app.js'

const ENV = { MCP_CONNECT_TIMEOUT_MS: '5000', MCP_LIST_TIMEOUT_MS: '5000', MCP_CALL_TIMEOUT_MS: '60000', LOAD_EXAMPLES: 'false' }

interface Seen { method: string, headers: IncomingHttpHeaders, body: any }

interface V2Fixture {
  url: string
  seen: Seen[]
  /** The `wait` tool's calls the server saw aborted. */
  aborted: () => number
  /** Resolves once a `wait` call is running at the server. */
  waiting: Promise<void>
}

type JsonSchema = Parameters<typeof fromJsonSchema>[0]
// `x-mcp-header` mirrors `region` into Mcp-Param-Region (2026-07-28); `$defs`/`$ref` must reach the listing whole.
const ECHO_SCHEMA = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  properties: { text: { type: 'string' }, region: { type: 'string', 'x-mcp-header': 'Region' }, where: { $ref: '#/$defs/place' } },
  $defs: { place: { type: 'object', properties: { city: { type: 'string' } } } }
} as unknown as JsonSchema

/** A v2 McpServer behind createMcpHandler on a loopback node:http server (`legacy`: 'reject' = 2026-07-28 only). */
async function startV2 (t: TestContext, legacy: 'reject' | 'stateless'): Promise<V2Fixture> {
  const seen: Seen[] = []
  let aborted = 0
  let onWaiting: () => void = () => {}
  const waiting = new Promise<void>((resolve) => { onWaiting = resolve })
  const handler = createMcpHandler(() => {
    const server = new McpServer({ name: 'eras-fixture', version: '1.0.0' }, { capabilities: { tools: {} } })
    server.registerTool('echo', { description: 'echoes text', inputSchema: fromJsonSchema<{ text?: string, region?: string }>(ECHO_SCHEMA) },
      async (args) => ({ content: [{ type: 'text', text: `echo:${args.text ?? ''}@${args.region ?? ''}` }] }))
    const noArgs = fromJsonSchema({ type: 'object' } as unknown as JsonSchema)
    server.registerTool('wait', { description: 'waits until cancelled', inputSchema: noArgs }, async (_args, ctx) => {
      onWaiting()
      await new Promise<void>((resolve) => {
        const signal = ctx.mcpReq.signal
        if (signal.aborted) resolve()
        signal.addEventListener('abort', () => resolve(), { once: true })
      })
      aborted++
      return { content: [{ type: 'text', text: 'cancelled' }] }
    })
    return server
  }, { legacy })
  const http = createServer((req, res) => { serve(req, res).catch(() => { if (!res.headersSent) res.writeHead(500); res.end() }) })
  async function serve (req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = []
    for await (const c of req) chunks.push(c as Buffer)
    const raw = Buffer.concat(chunks)
    let body: any
    try { body = raw.length > 0 ? JSON.parse(raw.toString('utf8')) : undefined } catch {}
    seen.push({ method: typeof body?.method === 'string' ? body.method : req.method ?? '', headers: req.headers, body })
    const headers = new Headers()
    for (const [k, v] of Object.entries(req.headers)) if (v !== undefined) headers.set(k, Array.isArray(v) ? v.join(', ') : v)
    const abort = new AbortController()
    res.once('close', () => { if (!res.writableFinished) abort.abort() })
    const request = new Request(`http://127.0.0.1${req.url ?? '/'}`, {
      method: req.method,
      headers,
      signal: abort.signal,
      ...(req.method === 'POST' ? { body: new Uint8Array(raw) } : {})
    })
    const response = await handler.fetch(request, { parsedBody: body })
    res.writeHead(response.status, Object.fromEntries(response.headers))
    if (response.body === null) { res.end(); return }
    const reader = response.body.getReader()
    res.once('close', () => { reader.cancel().catch(() => {}) })
    try {
      for (;;) {
        const { done, value } = await reader.read()
        if (done) break
        res.write(value)
      }
    } catch {}
    res.end()
  }
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
  t.after(async () => {
    http.closeAllConnections()
    await new Promise<void>((resolve) => http.close(() => resolve()))
    await handler.close?.()
  })
  return { url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`, seen, aborted: () => aborted, waiting }
}

async function register (gw: FastifyInstance, id: string, url: string): Promise<void> {
  const res = await gw.inject({ method: 'PUT', url: `/mcp/servers/${id}`, payload: { type: 'http', url } })
  assert.ok(res.statusCode === 201 || res.statusCode === 200, `register ${id}: ${res.statusCode} ${res.body}`)
}

async function invoke (gw: FastifyInstance, name: string, args: Record<string, unknown>): Promise<any> {
  const res = await gw.inject({ method: 'POST', url: '/invoke', payload: { name, arguments: args } })
  assert.notEqual(res.statusCode, 500, res.body)
  return res.json()
}

async function listing (gw: FastifyInstance, id: string): Promise<any> {
  const res = await gw.inject({ method: 'GET', url: `/tools?format=mcp&mcp=${id}` })
  assert.equal(res.statusCode, 200, res.body)
  return res.json()
}

for (const transport of ['lean', 'sdk'] as const) {
  test(`a 2026-07-28-only server (${transport} transport): listed and called in the modern era, with the 2026 headers and no session; ` +
    'one server/discover across reconnects', async (t) => {
    const fx = await startV2(t, 'reject')
    const gw = await buildTestApp(t, { env: { ...ENV, MCP_HTTP_TRANSPORT: transport } })
    await register(gw, 'modern', fx.url)

    const list = await listing(gw, 'modern')
    assert.deepEqual(list.unavailable, [], JSON.stringify(list.unavailable))
    const echo = list.tools.find((x: any) => x.name === 'modern__echo' || x.name === 'echo')
    assert.ok(echo !== undefined, JSON.stringify(list.tools.map((x: any) => x.name)))
    // JSON Schema 2020-12 kept whole: no dereferencing, $defs and $ref as the server wrote them.
    assert.deepEqual(echo.inputSchema.$defs, { place: { type: 'object', properties: { city: { type: 'string' } } } })
    assert.equal(echo.inputSchema.properties.where.$ref, '#/$defs/place')

    const out = await invoke(gw, 'modern__echo', { text: 'héllo', region: 'eu-west' })
    assert.equal(out.isError, false, JSON.stringify(out))
    assert.equal(out.output, 'echo:héllo@eu-west')

    assert.ok(!fx.seen.some((s) => s.method === 'initialize'), 'never initialize')
    const call = fx.seen.find((s) => s.method === 'tools/call')
    assert.ok(call !== undefined)
    assert.equal(call.headers['mcp-method'], 'tools/call')
    assert.equal(call.headers['mcp-name'], 'echo')
    assert.equal(call.headers['mcp-param-region'], 'eu-west')
    assert.equal(call.headers['mcp-protocol-version'], '2026-07-28')
    assert.equal(call.headers['mcp-session-id'], undefined)
    assert.equal(call.body.params._meta['io.modelcontextprotocol/protocolVersion'], '2026-07-28')
    const list2 = fx.seen.find((s) => s.method === 'tools/list')
    assert.equal(list2?.headers['mcp-method'], 'tools/list')
    assert.equal(list2?.headers['mcp-name'], undefined)
    assert.ok(!fx.seen.some((s) => s.method === 'GET' || s.method === 'DELETE'), 'no GET stream, no DELETE')

    // Re-registering the same config retires the client; the new one connects from the remembered verdict.
    await register(gw, 'modern', fx.url)
    assert.equal((await invoke(gw, 'modern__echo', { text: 'again', region: 'x' })).output, 'echo:again@x')
    assert.equal(fx.seen.filter((s) => s.method === 'server/discover').length, 1, 'one discover per server config across reconnects')
  })
}

test('a dual-era v2 server is spoken to in the 2026-07-28 era; an argument that is not a plain field value is base64 in Mcp-Param-*', async (t) => {
  const fx = await startV2(t, 'stateless')
  const gw = await buildTestApp(t, { env: ENV })
  await register(gw, 'dual', fx.url)
  const out = await invoke(gw, 'dual__echo', { text: 'x', region: ' padded ' })
  assert.equal(out.output, 'echo:x@ padded ')
  assert.ok(fx.seen.some((s) => s.method === 'server/discover'))
  assert.ok(!fx.seen.some((s) => s.method === 'initialize'), 'modern, not legacy')
  const call = fx.seen.find((s) => s.method === 'tools/call')
  assert.equal(call?.headers['mcp-param-region'], `=?base64?${Buffer.from(' padded ').toString('base64')}?=`)
})

test('a 2026-07-28 call is cancelled at the server when the /invoke client goes away', async (t) => {
  const fx = await startV2(t, 'reject')
  const gw = await buildTestApp(t, { env: ENV })
  await register(gw, 'modern', fx.url)
  await listing(gw, 'modern')
  const address = await gw.listen({ port: 0, host: '127.0.0.1' })
  const leave = new AbortController()
  const pending = fetch(`${address}/invoke`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'modern__wait', arguments: {} }),
    signal: leave.signal
  }).catch((err: unknown) => err)
  await fx.waiting
  leave.abort()
  await pending
  for (let i = 0; i < 200 && fx.aborted() === 0; i++) await new Promise((resolve) => setTimeout(resolve, 25))
  assert.equal(fx.aborted(), 1, 'the server saw the call aborted')
  assert.ok(!fx.seen.some((s) => s.method === 'notifications/cancelled'), '2026-07-28 cancels by closing the request, not by a notification')
})

interface LegacyFixture { url: string, gets: Array<string | undefined>, calls: () => number }

/**
 * A legacy (2025-11-25) streamable-HTTP server with a session that answers tools/call on an SSE
 * stream it closes after a priming event (`withIds`: `id: e1` and `retry: 100`; else neither). A GET
 * with Last-Event-ID gets the answer; a GET without one gets 405 (no standalone stream).
 */
async function startLegacy (t: TestContext, withIds: boolean): Promise<LegacyFixture> {
  const gets: Array<string | undefined> = []
  let pendingId: unknown
  let calls = 0
  const json = (res: ServerResponse, body: unknown): void => {
    res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 'sess-1' }).end(JSON.stringify(body))
  }
  const http = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      if (req.method === 'GET') {
        const last = req.headers['last-event-id'] as string | undefined
        gets.push(last)
        if (last === undefined || pendingId === undefined) { res.writeHead(405).end(); return }
        res.writeHead(200, { 'content-type': 'text/event-stream' })
        res.write(`id: e2\nevent: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: pendingId, result: { content: [{ type: 'text', text: 'resumed' }] } })}\n\n`)
        pendingId = undefined
        return
      }
      if (req.method !== 'POST') { res.writeHead(405).end(); return }
      const m = JSON.parse(Buffer.concat(chunks).toString('utf8'))
      if (m.method === 'initialize') {
        const result = { protocolVersion: '2025-11-25', capabilities: { tools: {} }, serverInfo: { name: 'legacy', version: '1' } }
        json(res, { jsonrpc: '2.0', id: m.id, result })
      } else if (m.method === 'tools/list') {
        json(res, { jsonrpc: '2.0', id: m.id, result: { tools: [{ name: 'slow', inputSchema: { type: 'object' } }] } })
      } else if (m.method === 'tools/call') {
        calls++
        pendingId = m.id
        res.writeHead(200, { 'content-type': 'text/event-stream', 'mcp-session-id': 'sess-1' })
        res.write(withIds ? 'id: e1\nretry: 100\ndata: \n\n' : 'data: \n\n')
        setTimeout(() => res.end(), 20)
      } else if (m.method === 'ping') {
        json(res, { jsonrpc: '2.0', id: m.id, result: {} })
      } else if (m.id === undefined) {
        res.writeHead(202).end()
      } else {
        // server/discover and anything else: a legacy server does not know it.
        const error = { code: -32601, message: 'Method not found' }
        res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: m.id, error }))
      }
    })
  })
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
  t.after(async () => {
    http.closeAllConnections()
    await new Promise<void>((resolve) => http.close(() => resolve()))
  })
  return { url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`, gets, calls: () => calls }
}

test('legacy: a tools/call stream closed after a priming event with an id and retry: 100 is resumed by a GET with Last-Event-ID', async (t) => {
  const fx = await startLegacy(t, true)
  const gw = await buildTestApp(t, { env: ENV })
  await register(gw, 'legacy', fx.url)
  const out = await invoke(gw, 'legacy__slow', {})
  assert.equal(out.isError, false, JSON.stringify(out))
  assert.equal(out.output, 'resumed')
  assert.ok(fx.gets.includes('e1'), `GETs: ${JSON.stringify(fx.gets)}`)
  assert.equal(fx.calls(), 1, 'resumed, not replayed')
})

test('legacy: a tools/call stream closed without event ids fails the call at once with a clear error, not at the 60 s timeout', async (t) => {
  const fx = await startLegacy(t, false)
  const gw = await buildTestApp(t, { env: ENV })
  await register(gw, 'legacy', fx.url)
  const started = Date.now()
  const out = await invoke(gw, 'legacy__slow', {})
  const took = Date.now() - started
  assert.equal(out.isError, true, JSON.stringify(out))
  assert.equal(out.error.code, 'GW_UPSTREAM_ERROR')
  assert.match(out.error.message, /closed the response stream before answering and gave no event id/)
  // Generous: the call's timeout is 60 s; failing fast is seconds at most on any machine.
  assert.ok(took < 10_000, `failed after ${took} ms`)
  assert.equal(fx.calls(), 1, 'not replayed')
})
