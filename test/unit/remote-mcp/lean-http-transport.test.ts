import { test } from 'node:test'
import type { TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { createServer } from 'node:http'
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Agent } from 'undici'
import { Client, ProtocolError, ProtocolErrorCode, SdkError, SdkErrorCode, SdkHttpError } from '@modelcontextprotocol/client'
import { LeanHttpTransport, MessageTooLargeError, ResponseStreamEndedError, SseParser } from '../../../src/remote-mcp/lean-http-transport.js'
import type { SseEvent } from '../../../src/remote-mcp/lean-http-transport.js'
import { createTransport } from '../../../src/remote-mcp/transports.js'
import { RedirectRefusedError } from '../../../src/remote-mcp/http-fetch.js'
import { createEgressPolicy, EgressBlockedError, guardedFetch } from '../../../src/egress/ssrf.js'
import { breakerVerdict, toUpstreamError } from '../../../src/remote-mcp/classify.js'
import { DEFAULT_MAX_MESSAGE_BYTES, ResponseBudget } from '../../../src/remote-mcp/response-limits.js'
import { startStreamableHttpFixture } from '../../../scripts/lib/mcp-fixtures/index.js'

function textOf (result: unknown): string {
  const content = (result as { content: Array<{ type: string, text?: string }> }).content
  return content.map((c) => c.text ?? '').join('\n')
}

const agent = new Agent({ pipelining: 1 })
test.after(async () => { await agent.close() })

function lean (url: string, extra: Partial<ConstructorParameters<typeof LeanHttpTransport>[1]> = {}): LeanHttpTransport {
  return new LeanHttpTransport(new URL(url), { dispatcher: () => agent, redirectError: (s) => new RedirectRefusedError(s), ...extra })
}

// --- SSE parser on raw buffers ---------------------------------------------------------------

const SSE_TEXT = '\uFEFF: comment\r\nretry: 1500\nevent: message\ndata: {"a":"é€😀"}\r\nid: 7\r\n\r' +
  'data: line1\ndata: line2\n\n' +
  'event: other\ndata: x\n\n' +
  'data:nospace\rid\r\r' +
  'data: last\n\n' +
  'data: unfinished'

const EXPECTED: SseEvent[] = [
  { event: 'message', data: '{"a":"é€😀"}', id: '7' },
  { event: 'message', data: 'line1\nline2', id: undefined },
  { event: 'other', data: 'x', id: undefined },
  { event: 'message', data: 'nospace', id: '' },
  { event: 'message', data: 'last', id: undefined }
]

function parseChunks (chunks: Buffer[]): { events: SseEvent[], retry: number[] } {
  const events: SseEvent[] = []
  const retry: number[] = []
  const p = new SseParser((e) => events.push(e), (ms) => retry.push(ms))
  for (const c of chunks) p.push(c)
  p.end()
  return { events, retry }
}

test('SSE parser: the same events whatever the byte boundary (LF, CRLF, CR, BOM, UTF-8, comments)', () => {
  const bytes = Buffer.from(SSE_TEXT, 'utf8')
  const whole = parseChunks([bytes])
  assert.deepEqual(whole.events, EXPECTED)
  assert.deepEqual(whole.retry, [1500])
  for (let i = 0; i <= bytes.length; i++) {
    for (const j of [i, Math.min(bytes.length, i + 1), Math.min(bytes.length, i + 7)]) {
      const got = parseChunks([bytes.subarray(0, i), bytes.subarray(i, j), bytes.subarray(j)])
      assert.deepEqual(got.events, EXPECTED, `split at ${i}/${j}`)
    }
  }
  const oneByOne = parseChunks([...bytes].map((b) => Buffer.from([b])))
  assert.deepEqual(oneByOne.events, EXPECTED)
})

test('SSE parser: an event larger than the bound throws, also when it never ends a line', () => {
  const p = new SseParser(() => {}, () => {}, 1024)
  assert.throws(() => { p.push(Buffer.from(`data: ${'x'.repeat(600)}\ndata: ${'y'.repeat(600)}\n`)) }, MessageTooLargeError)
  const q = new SseParser(() => {}, () => {}, 1024)
  q.push(Buffer.from('data: '))
  assert.throws(() => { for (let i = 0; i < 20; i++) q.push(Buffer.alloc(100, 0x61)) }, MessageTooLargeError)
})

// --- against the SDK's server side -------------------------------------------------------------

test('lean transport against the SDK server: ' +
  'initialize, list, call, session id kept and sent, list_changed on the GET stream, DELETE on terminate', async (t) => {
  const fx = await startStreamableHttpFixture({ marker: 'lean' })
  t.after(() => fx.close())
  const transport = lean(fx.url, { headers: { Authorization: 'Bearer s3cret' } })
  const client = new Client({ name: 't', version: '1' })
  let changed = 0
  client.setNotificationHandler('notifications/tools/list_changed', () => { changed++ })
  await client.connect(transport)
  t.after(() => client.close())
  assert.equal(typeof transport.sessionId, 'string')
  assert.ok(transport.protocolVersion !== undefined)
  const { tools } = await client.listTools()
  assert.ok(tools.some((x) => x.name === 'echo'))
  // The fixture answers with SSE (no enableJsonResponse): the incremental parser path.
  assert.equal(textOf(await client.callTool({ name: 'echo', arguments: { text: 'hi' } })), 'lean:hi')
  const many = await Promise.all(Array.from({ length: 20 }, async (_, i) => await client.callTool({ name: 'echo', arguments: { text: String(i) } })))
  assert.deepEqual(many.map(textOf), Array.from({ length: 20 }, (_, i) => `lean:${i}`))
  assert.equal(fx.stats.sessions, 1, 'one session: the id was sent with every request')
  fx.addTool('extra')
  const changes = (): number => changed
  for (let i = 0; i < 100 && changes() === 0; i++) await new Promise((resolve) => setTimeout(resolve, 20))
  assert.equal(changed, 1, 'notifications/tools/list_changed arrived on the GET stream')
  assert.equal(transport.abortListenerCount(), 1, 'only the GET stream holds a listener once the calls are done')
  await transport.terminateSession()
  assert.equal(transport.sessionId, undefined)
  for (let i = 0; i < 50 && fx.stats.activeSessions > 0; i++) await new Promise((resolve) => setTimeout(resolve, 20))
  assert.equal(fx.stats.activeSessions, 0, 'DELETE ended the session on the server')
})

test('lean transport: a forgotten session answers 404, surfaced as SdkHttpError 404', async (t) => {
  const fx = await startStreamableHttpFixture()
  t.after(() => fx.close())
  const transport = lean(fx.url)
  const client = new Client({ name: 't', version: '1' })
  const errors: Error[] = []
  await client.connect(transport)
  transport.onerror = (err) => { errors.push(err) }
  t.after(() => client.close())
  await fx.forgetSessions()
  await assert.rejects(client.callTool({ name: 'echo', arguments: { text: 'x' } }), (err: unknown) => err instanceof SdkHttpError && err.status === 404 && /session expired/.test(err.message))
  assert.ok(errors.some((e) => e instanceof SdkHttpError))
})

test('lean transport: a GET stream the server ends is reopened on the schedule; failed reopens are reported, then given up', async (t) => {
  const fx = await startStreamableHttpFixture()
  t.after(() => fx.close())
  const transport = lean(fx.url, { reconnect: { initialDelayMs: 20, maxDelayMs: 50, growFactor: 1.5, maxRetries: 2 } })
  const client = new Client({ name: 't', version: '1' })
  await client.connect(transport)
  t.after(() => client.close())
  const errors: string[] = []
  transport.onerror = (err) => { errors.push(err.message) }
  // The GET stream opens in the background after initialize: let it be established first.
  await client.listTools()
  await new Promise((resolve) => setTimeout(resolve, 200))
  const requestsBefore = fx.stats.requests
  await fx.forgetSessions()
  const gaveUp = (): boolean => errors.some((m) => /Maximum reconnection attempts \(2\)/.test(m))
  for (let i = 0; i < 200 && !gaveUp(); i++) await new Promise((resolve) => setTimeout(resolve, 20))
  assert.ok(gaveUp(), errors.join('; '))
  assert.equal(errors.filter((m) => /Failed to reconnect SSE stream/.test(m)).length, 2, errors.join('; '))
  assert.ok(fx.stats.staleSessionRequests >= 2 && fx.stats.requests > requestsBefore, 'the reopens reached the server (and got 404)')
})

test('lean transport: cancellation via AbortSignal reaches the server; a timeout is RequestTimeout', async (t) => {
  const fx = await startStreamableHttpFixture()
  t.after(() => fx.close())
  const client = new Client({ name: 't', version: '1' })
  await client.connect(lean(fx.url))
  t.after(() => client.close())
  const ac = new AbortController()
  const call = client.callTool({ name: 'slow', arguments: { ms: 10_000 } }, { signal: ac.signal })
  setTimeout(() => ac.abort(new Error('caller left')), 100)
  await assert.rejects(call, /caller left/)
  for (let i = 0; i < 100 && fx.stats.cancelled === 0; i++) await new Promise((resolve) => setTimeout(resolve, 20))
  assert.equal(fx.stats.cancelled, 1, 'the server saw notifications/cancelled')
  await assert.rejects(
    client.callTool({ name: 'slow', arguments: { ms: 10_000 } }, { timeout: 150 }),
    (err: unknown) => err instanceof SdkError && err.code === SdkErrorCode.RequestTimeout
  )
  // Still usable afterwards.
  assert.equal(textOf(await client.callTool({ name: 'echo', arguments: { text: 'after' } })), 'fixture:after')
})

// --- hand-written servers: JSON answers, chunked SSE, broken streams, redirects ----------------

type Handler = (req: IncomingMessage, res: ServerResponse, body: { id?: unknown, method?: string }) => void

async function rawServer (
  t: { after: (fn: () => Promise<void>) => void },
  handler: Handler
): Promise<{ url: string, seen: Array<{ method: string, sid: string | undefined, version: string | undefined }> }> {
  const seen: Array<{ method: string, sid: string | undefined, version: string | undefined }> = []
  const server = createServer((req, res) => {
    let raw = ''
    req.on('data', (c: Buffer) => { raw += c.toString() })
    req.on('end', () => {
      const body = raw === '' ? {} : JSON.parse(raw) as { id?: unknown, method?: string }
      seen.push({ method: `${req.method ?? ''} ${body.method ?? ''}`, sid: req.headers['mcp-session-id'] as string | undefined, version: req.headers['mcp-protocol-version'] as string | undefined })
      if (req.method === 'GET') { res.writeHead(405).end(); return }
      if (req.method === 'DELETE') { res.writeHead(200).end(); return }
      if (body.method === 'initialize') {
        res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 'sess-1' })
        res.end(JSON.stringify({
          jsonrpc: '2.0',
          id: body.id,
          result: { protocolVersion: '2025-06-18', capabilities: { tools: {} }, serverInfo: { name: 'raw', version: '1' } }
        }))
        return
      }
      if (body.id === undefined) { res.writeHead(202).end(); return }
      handler(req, res, body)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(async () => { await new Promise<void>((resolve) => { server.close(() => resolve()); server.closeAllConnections() }) })
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`, seen }
}

function toolResult (id: unknown, text: string): string {
  return JSON.stringify({ jsonrpc: '2.0', id, result: { content: [{ type: 'text', text }] } })
}

test('lean transport: JSON answers (fast path), session id and protocol version sent after initialize', async (t) => {
  const srv = await rawServer(t, (_req, res, body) => {
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' }).end(toolResult(body.id, 'json:ok'))
  })
  const client = new Client({ name: 't', version: '1' })
  await client.connect(lean(srv.url))
  t.after(() => client.close())
  assert.equal(textOf(await client.callTool({ name: 'x', arguments: {} })), 'json:ok')
  const call = srv.seen.find((s) => s.method === 'POST tools/call')
  assert.equal(call?.sid, 'sess-1')
  assert.equal(call?.version, '2025-06-18')
  assert.equal(srv.seen[0]?.sid, undefined, 'no session id before the server gave one')
})

test('lean transport: an SSE answer written one byte at a time, with a notification before the result', async (t) => {
  const srv = await rawServer(t, (_req, res, body) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    const text = 'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hello"}}\n\n' +
      `id: 1\r\ndata: ${toolResult(body.id, 'sse:é😀')}\r\n\r\n`
    const bytes = Buffer.from(text)
    let i = 0
    const step = (): void => {
      if (i >= bytes.length) { res.end(); return }
      res.write(bytes.subarray(i, i + 1))
      i++
      setImmediate(step)
    }
    step()
  })
  const client = new Client({ name: 't', version: '1' }, { capabilities: {} })
  const logs: unknown[] = []
  client.fallbackNotificationHandler = async (n) => { logs.push(n.method) }
  await client.connect(lean(srv.url))
  t.after(() => client.close())
  assert.equal(textOf(await client.callTool({ name: 'x', arguments: {} })), 'sse:é😀')
  assert.deepEqual(logs, ['notifications/message'])
})

test('lean transport: a 5 MB event written in 1 KB chunks arrives whole', async (t) => {
  const big = 'z'.repeat(5 * 1024 * 1024)
  const srv = await rawServer(t, (_req, res, body) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    const bytes = Buffer.from(`data: ${toolResult(body.id, big)}\n\n`)
    for (let i = 0; i < bytes.length; i += 1024) res.write(bytes.subarray(i, i + 1024))
    res.end()
  })
  const client = new Client({ name: 't', version: '1' })
  await client.connect(lean(srv.url, { maxMessageBytes: 8 * 1024 * 1024 }))
  t.after(() => client.close())
  const started = process.hrtime.bigint()
  assert.equal(textOf(await client.callTool({ name: 'x', arguments: {} })).length, big.length)
  console.log(`5 MB SSE event in 1 KB chunks: ${Number(process.hrtime.bigint() - started) / 1e6} ms`)
})

test('lean transport: a server closing mid-stream without event ids fails the call at once and reports a transport error; ' +
  'an oversized event is cut off', async (t) => {
  let mode = 'cut'
  const srv = await rawServer(t, (_req, res, body) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    if (mode === 'cut') {
      res.write('data: {"jsonrpc":"2.0","id":')
      setTimeout(() => res.destroy(), 20)
    } else {
      res.write(`data: ${'x'.repeat(4096)}`)
      res.write(`${'y'.repeat(4096)}\n\n`)
      res.end(toolResult(body.id, 'never'))
    }
  })
  const transport = lean(srv.url, { maxMessageBytes: 2048 })
  const client = new Client({ name: 't', version: '1' })
  await client.connect(transport)
  t.after(() => client.close())
  const errors: Error[] = []
  client.onerror = (err) => { errors.push(err) }
  // Nothing to resume from (no event id): the call fails now, not at its 60 s timeout.
  await assert.rejects(
    client.callTool({ name: 'x', arguments: {} }, { timeout: 60_000 }),
    (err: unknown) => err instanceof ProtocolError && err.data instanceof ResponseStreamEndedError && /gave no event id/.test(err.message)
  )
  assert.ok(errors.some((e) => /SSE stream (disconnected|ended)/.test(e.message)), errors.map((e) => e.message).join('; '))
  mode = 'big'
  errors.length = 0
  // Failed at once with the reason, not left to its timeout.
  await assert.rejects(client.callTool({ name: 'x', arguments: {} }, { timeout: 60_000 }), (err: unknown) => err instanceof ProtocolError && err.code === ProtocolErrorCode.InternalError && /exceeds 2048 bytes/.test(err.message))
  assert.ok(errors.some((e) => /exceeds 2048 bytes/.test(e.message)), errors.map((e) => e.message).join('; '))
})

test('lean transport: redirects are refused and never followed; close() aborts a pending request', async (t) => {
  let followed = 0
  const server = createServer((req, res) => {
    if (req.url === '/elsewhere') followed++
    res.writeHead(307, { location: '/elsewhere' }).end()
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => new Promise<void>((resolve) => { server.close(() => resolve()); server.closeAllConnections() }))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`
  const client = new Client({ name: 't', version: '1' })
  await assert.rejects(client.connect(lean(url), { timeout: 5000 }), RedirectRefusedError)
  assert.equal(followed, 0)

  const hang = await rawServer(t, () => { /* never answers */ })
  const transport = lean(hang.url)
  const c2 = new Client({ name: 't', version: '1' })
  await c2.connect(transport)
  const pending = c2.callTool({ name: 'x', arguments: {} })
  await new Promise((resolve) => setTimeout(resolve, 50))
  await c2.close()
  await assert.rejects(pending, (err: unknown) => err instanceof SdkError && err.code === SdkErrorCode.ConnectionClosed)
  assert.equal(transport.abortListenerCount(), 0)
})

test('createTransport lean: the SSRF guard refuses a blocked address before connecting; sdk stays selectable', async (t) => {
  const fx = await startStreamableHttpFixture()
  t.after(() => fx.close())
  const blocked = guardedFetch(createEgressPolicy([]))
  t.after(() => blocked.close())
  const handle = createTransport({ type: 'streamable_http', url: fx.url }, { fetch: blocked, httpTransport: 'lean' })
  assert.ok(handle.transport instanceof LeanHttpTransport)
  await assert.rejects(new Client({ name: 't', version: '1' }).connect(handle.transport, { timeout: 5000 }), EgressBlockedError)
  assert.equal(fx.stats.requests, 0, 'nothing reached the loopback server')

  // A name resolving to loopback is refused at connect time too (not just literals).
  const byName = guardedFetch(createEgressPolicy([], { resolve: async () => [{ address: '127.0.0.1', family: 4 }] }))
  t.after(() => byName.close())
  const named = createTransport({ type: 'streamable_http', url: fx.url.replace('127.0.0.1', 'looks-public.example') }, { fetch: byName, httpTransport: 'lean' })
  await assert.rejects(new Client({ name: 't', version: '1' }).connect(named.transport, { timeout: 5000 }), EgressBlockedError)
  assert.equal(fx.stats.requests, 0)

  const allowed = guardedFetch(createEgressPolicy(['127.0.0.1/32']))
  t.after(() => allowed.close())
  const ok = createTransport({ type: 'streamable_http', url: fx.url }, { fetch: allowed, httpTransport: 'lean' })
  const client = new Client({ name: 't', version: '1' })
  await client.connect(ok.transport)
  t.after(() => client.close())
  assert.equal(textOf(await client.callTool({ name: 'echo', arguments: { text: 'g' } })), 'fixture:g')

  assert.ok(!(createTransport({ type: 'streamable_http', url: fx.url }, { httpTransport: 'sdk' }).transport instanceof LeanHttpTransport))
  assert.ok(
    !(createTransport({ type: 'streamable_http', url: fx.url }, {
      fetch: async (u, i) => await fetch(u, i),
      httpTransport: 'lean'
    }).transport instanceof LeanHttpTransport),
    'a custom fetch without a dispatcher keeps the SDK transport'
  )
})

// --- limits: the size of one answer, and the budget of answers in flight -------

/** Streams `data: {...,"text":"zzz...` of `size` bytes in 16 KiB chunks, one per tick; counts what it wrote. */
function streamBig (res: ServerResponse, id: unknown, size: number, written: { bytes: number, closed: number }, end = true): void {
  res.writeHead(200, { 'content-type': 'text/event-stream' })
  res.write(`data: {"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":{"content":[{"type":"text","text":"`)
  const chunk = Buffer.alloc(16 * 1024, 0x7a)
  let left = size
  let closed = false
  res.on('close', () => { if (left > 0) { closed = true; written.closed++ } })
  const step = (): void => {
    if (closed) return
    if (left <= 0) { if (end) res.end('"}]}}\n\n'); return }
    const n = Math.min(left, chunk.length)
    left -= n
    written.bytes += n
    res.write(chunk.subarray(0, n))
    setTimeout(step, 1)
  }
  step()
}

test('limits: an SSE answer past maxMessageBytes stops being read and fails its call with GW_UPSTREAM_TOO_LARGE', async (t) => {
  const written = { bytes: 0, closed: 0 }
  const srv = await rawServer(t, (_req, res, body) => { streamBig(res, body.id, 64 * 1024 * 1024, written) })
  const client = new Client({ name: 't', version: '1' })
  await client.connect(lean(srv.url, { maxMessageBytes: 256 * 1024 }))
  t.after(() => client.close())
  const err = await client.callTool({ name: 'x', arguments: {} }).then(() => undefined, (e: unknown) => e)
  const upstream = toUpstreamError(err, 'call', 1000, (e) => (e as Error).message)
  assert.equal(upstream.code, 'GW_UPSTREAM_TOO_LARGE', upstream.message)
  assert.match(upstream.message, /answer exceeds 262144 bytes \(MCP_MAX_MESSAGE_BYTES\)/)
  assert.equal(breakerVerdict(err, 'call'), 'answered', 'a server that answers too much is alive: not a breaker failure')
  for (let i = 0; i < 100 && written.closed === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10))
  assert.equal(written.closed, 1, 'the gateway stopped reading (closed the stream) instead of reading to the end')
  assert.ok(written.bytes < 8 * 1024 * 1024, `${written.bytes} bytes were sent before the stream was closed`)
})

test('limits: a JSON answer past maxMessageBytes fails with GW_UPSTREAM_TOO_LARGE; a JSON answer under it arrives whole', async (t) => {
  let size = 300 * 1024
  const srv = await rawServer(t, (_req, res, body) => {
    res.writeHead(200, { 'content-type': 'application/json' }).end(toolResult(body.id, 'j'.repeat(size)))
  })
  const client = new Client({ name: 't', version: '1' })
  await client.connect(lean(srv.url, { maxMessageBytes: 256 * 1024 }))
  t.after(() => client.close())
  const err = await client.callTool({ name: 'x', arguments: {} }).then(() => undefined, (e: unknown) => e)
  assert.equal(toUpstreamError(err, 'call', 1000, (e) => (e as Error).message).code, 'GW_UPSTREAM_TOO_LARGE')
  size = 200 * 1024
  assert.equal(textOf(await client.callTool({ name: 'x', arguments: {} })).length, size)
})

test('limits: an answer holding an object of more than 10,000 members is not parsed: its call fails with GW_UPSTREAM_TOO_LARGE, JSON or SSE', async (t) => {
  // A tenant's server could answer a structuredContent of 200,000 distinct keys (2.4 MB, under MCP_MAX_MESSAGE_BYTES):
  // hundreds of milliseconds of the event loop to parse it and walk it (output schema, guardrails, journal), for every call.
  let members = 200_000
  const answer = (id: unknown): string => {
    const wide: Record<string, number> = {}
    for (let i = 0; i < members; i++) wide[i.toString(36)] = 0
    return JSON.stringify({ jsonrpc: '2.0', id, result: { content: [{ type: 'text', text: 'ok' }], structuredContent: wide } })
  }
  let sse = false
  const srv = await rawServer(t, (_req, res, body) => {
    if (sse) res.writeHead(200, { 'content-type': 'text/event-stream' }).end(`data: ${answer(body.id)}\n\n`)
    else res.writeHead(200, { 'content-type': 'application/json' }).end(answer(body.id))
  })
  const client = new Client({ name: 't', version: '1' })
  await client.connect(lean(srv.url))
  t.after(() => client.close())
  for (const asSse of [false, true]) {
    sse = asSse
    members = 200_000
    const err = await client.callTool({ name: 'x', arguments: {} }).then(() => undefined, (e: unknown) => e)
    assert.notEqual(err, undefined, `${asSse ? 'SSE' : 'JSON'}: the wide answer was parsed and passed on`)
    const upstream = toUpstreamError(err, 'call', 1000, (e) => (e as Error).message)
    assert.equal(upstream.code, 'GW_UPSTREAM_TOO_LARGE', `${asSse ? 'SSE' : 'JSON'}: ${upstream.message}`)
    assert.match(upstream.message, /an object of more than 10000 members/)
    assert.equal(breakerVerdict(err, 'call'), 'answered', 'the server answered: not a breaker failure')
    members = 10_000
    const ok = await client.callTool({ name: 'x', arguments: {} }) as { structuredContent: Record<string, number> }
    assert.equal(Object.keys(ok.structuredContent).length, 10_000)
  }
})

/**
 * A lean transport on `url` whose `call(id)` sends a tools/call and answers what came back for it (within 30 s);
 * `delivered()` counts the messages with a method (notifications, the server's requests) the last call's stream delivered.
 */
async function countingCaller (t: TestContext, url: string): Promise<{ call: (id: number) => Promise<any>, delivered: () => number }> {
  const transport = lean(url)
  const got: { methods: number, answers: any[] } = { methods: 0, answers: [] }
  transport.onmessage = (m) => { if ('method' in m) got.methods++; else got.answers.push(m) }
  transport.onerror = () => {}
  await transport.start()
  t.after(async () => { await transport.close() })
  const call = async (id: number): Promise<any> => {
    got.methods = 0
    got.answers = []
    await transport.send({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'x', arguments: {} } })
    for (let i = 0; i < 3000 && got.answers.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10))
    return got.answers[0]
  }
  return { call, delivered: () => got.methods }
}

test('limits: a call\'s stream delivers at most 10,000 notifications and carries at most 100,000 messages, then fails its call', async (t) => {
  // A server streaming progress at loopback speed cost the gateway ~50-65 us of CPU per notification (the Client's
  // validation and dispatch): 200,000 during one call were 10 s of it, and a tenant runs 32 calls at once.
  let notes = 0
  const srv = await rawServer(t, (_req, res, body) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    const event = `data: ${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 1, progress: 1 } })}\n\n`
    let left = notes
    const step = (): void => {
      if (left <= 0) { res.end(`data: ${toolResult(body.id, 'done')}\n\n`); return }
      const n = Math.min(left, 1000)
      left -= n
      if (res.write(event.repeat(n))) setImmediate(step)
      else res.once('drain', step)
    }
    step()
  })
  const { call, delivered } = await countingCaller(t, srv.url)
  notes = 12_000
  const answered = await call(1)
  assert.equal(answered?.result?.content?.[0]?.text, 'done')
  assert.equal(delivered(), 10_000, 'the notifications past 10,000 were dropped')
  notes = 100_000
  const cut = await call(2)
  assert.match(cut?.error?.message ?? '', /more than 100000 messages on one call's stream/)
  assert.equal(toUpstreamError(cut.error.data, 'call', 1000, (e) => (e as Error).message).code, 'GW_UPSTREAM_TOO_LARGE')
})

test('limits: a call\'s stream carries at most 100 requests of the server (each is answered or held), then fails its call', async (t) => {
  // Each request a server sends on a call's stream makes the gateway answer it (a POST back, on a connection of its
  // own while the others are busy) or hold it for the call's client: 20,000 pings on one call opened 15,000-19,000
  // sockets and took ~15 s of the gateway's CPU; 30,000 questions held for a REST caller took 4.7 s (an audit).
  let requests = 0
  const srv = await rawServer(t, (_req, res, body) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    let events = ''
    for (let i = 0; i < requests; i++) events += `data: ${JSON.stringify({ jsonrpc: '2.0', id: `s${i}`, method: 'ping' })}\n\n`
    res.end(`${events}data: ${toolResult(body.id, 'done')}\n\n`)
  })
  const { call, delivered } = await countingCaller(t, srv.url)
  requests = 100
  assert.equal((await call(1))?.result?.content?.[0]?.text, 'done')
  assert.equal(delivered(), 100)
  requests = 5000
  const cut = await call(2)
  assert.match(cut?.error?.message ?? '', /more than 100 requests on one call's stream/)
  assert.equal(delivered(), 100, 'no request past the bound was delivered')
  assert.equal(toUpstreamError(cut.error.data, 'call', 1000, (e) => (e as Error).message).code, 'GW_UPSTREAM_TOO_LARGE')
})

test('limits: a POST that only tells (a reply to the server\'s request, a notification) waits 10 s at most for the server\'s 202', {
  timeout: 40_000
}, async (t) => {
  // A server that keeps the gateway's replies unanswered held a socket per reply for undici's 300 s (an audit).
  const srv = await rawServer(t, (_req, res, body) => {
    // A request is answered; anything else (the reply below) is held, never answered.
    if (body.id !== undefined && body.method !== undefined) res.writeHead(200, { 'content-type': 'application/json' }).end(toolResult(body.id, 'ok'))
  })
  const transport = lean(srv.url)
  transport.onerror = () => {}
  await transport.start()
  t.after(async () => { await transport.close() })
  const started = Date.now()
  const err = await transport.send({ jsonrpc: '2.0', id: 's1', result: {} }).then(() => undefined, (e: unknown) => e)
  const waited = Date.now() - started
  assert.ok(err !== undefined, 'the unanswered reply did not fail')
  assert.ok(waited >= 9_000 && waited < 20_000, `the reply waited ${waited} ms`)
  // A call (which expects its answer) is not bounded so: it answers as usual.
  await transport.send({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'x', arguments: {} } })
})

/**
 * A server whose GET stream sends `batch(n)` (50-100 events, `n` counting batches) as fast as the gateway reads, and a
 * lean transport that opens that stream: what it delivered, and how often the stream was opened and closed, half a
 * second after the gateway first closed it.
 */
async function floodedGetStream (
  t: TestContext,
  batch: (n: number) => string,
  options: Parameters<typeof lean>[1] = {}
): Promise<{ gets: number, closed: number, delivered: number }> {
  const seen = { gets: 0, closed: 0, delivered: 0 }
  const server = createServer((req, res) => {
    if (req.method === 'GET') {
      seen.gets++
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.write('retry: 0\n\n')
      let n = 0
      let open = true
      res.on('close', () => { open = false; seen.closed++ })
      const step = (): void => { if (!open) return; if (res.write(batch(n++))) setImmediate(step); else res.once('drain', step) }
      step()
      return
    }
    let raw = ''
    req.on('data', (c: Buffer) => { raw += c.toString() })
    req.on('end', () => {
      const body = JSON.parse(raw) as { id?: unknown }
      if (body.id === undefined) { res.writeHead(202).end(); return }
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: body.id, result: {} }))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(async () => { await new Promise<void>((resolve) => { server.close(() => resolve()); server.closeAllConnections() }) })
  const transport = lean(`http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`, options)
  transport.onmessage = () => { seen.delivered++ }
  transport.onerror = () => {}
  await transport.start()
  t.after(async () => { await transport.close() })
  // A notification after initialize opens the GET stream (as the SDK's transport does).
  await transport.send({ jsonrpc: '2.0', method: 'notifications/initialized' })
  for (let i = 0; i < 300; i++) {
    if (seen.closed > 0) break
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
  await new Promise((resolve) => setTimeout(resolve, 500))
  return seen
}

test('limits: a standalone GET stream past 300 requests of the server in a minute is closed, and not opened again within it', async (t) => {
  const ping = (id: string): string => `data: ${JSON.stringify({ jsonrpc: '2.0', id, method: 'ping' })}\n\n`
  const seen = await floodedGetStream(t, (n) => Array.from({ length: 50 }, (_, i) => ping(`g${n}-${i}`)).join(''))
  assert.equal(seen.closed, 1, 'the stream was closed by the gateway')
  assert.equal(seen.delivered, 300, 'the requests within the minute were delivered, none after')
  assert.equal(seen.gets, 1, 'not opened again within the minute')
})

test('limits: a standalone GET stream past its messages per minute is closed, and opened again only after the minute', async (t) => {
  // A tenant's server flooding notifications/tools/list_changed on its GET stream took a whole gateway's CPU (17 s of
  // CPU in 5 s of wall time, measured), for as long as the client lived: each one is dispatched, and refreshes the list.
  const events = `data: ${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' })}\n\n`.repeat(100)
  const seen = await floodedGetStream(t, () => events, { getStreamMessagesPerMinute: 500 })
  assert.equal(seen.closed, 1, 'the flooding stream was closed by the gateway')
  assert.equal(seen.delivered, 500, 'the messages within the minute were delivered, none after')
  assert.equal(seen.gets, 1, 'not opened again within the minute, whatever the server\'s retry')
})

test('limits: the budget of answers in flight per owner and per instance; a call that cannot get budget fails at once with GW_UPSTREAM_BUDGET_EXHAUSTED; ' +
  'released after', async (t) => {
  const written = { bytes: 0, closed: 0 }
  // Answers of 600 KiB, slowly: several in flight at once hold more than one owner's budget.
  const srv = await rawServer(t, (_req, res, body) => { streamBig(res, body.id, 600 * 1024, written) })
  const budget = new ResponseBudget({ totalBytes: 3 * 1024 * 1024, ownerBytes: 1024 * 1024 })
  const connect = async (owner: string): Promise<Client> => {
    const client = new Client({ name: 't', version: '1' })
    await client.connect(lean(srv.url, { maxMessageBytes: 1024 * 1024, budget, budgetOwner: owner }))
    t.after(() => client.close())
    return client
  }
  const [a1, a2] = [await connect('tenant:a'), await connect('tenant:a')]
  const outcome = async (c: Client): Promise<string> => await c.callTool({ name: 'x', arguments: {} }).then(
    (r) => `ok:${textOf(r).length}`,
    (e: unknown) => toUpstreamError(e, 'call', 1000, (x) => (x as Error).message).code)
  // Four answers of 600 KiB for one owner with a 1 MiB budget: they cannot all be held at once.
  const results = await Promise.all([outcome(a1), outcome(a1), outcome(a2), outcome(a2)])
  assert.ok(results.includes('GW_UPSTREAM_BUDGET_EXHAUSTED'), results.join(', '))
  assert.ok(results.includes(`ok:${600 * 1024}`), results.join(', '))
  assert.equal(budget.usedBytes(), 0, 'every charge was released')
  assert.equal(budget.usedBytes('tenant:a'), 0)

  // The instance budget: three owners of 1 MiB each under a 2 MiB total.
  const small = new ResponseBudget({ totalBytes: 2 * 1024 * 1024, ownerBytes: 1024 * 1024 })
  const clients: Client[] = []
  for (const owner of ['o1', 'o2', 'o3', 'o4']) {
    const client = new Client({ name: 't', version: '1' })
    await client.connect(lean(srv.url, { maxMessageBytes: 1024 * 1024, budget: small, budgetOwner: owner }))
    t.after(() => client.close())
    clients.push(client)
  }
  const spread = await Promise.all(clients.flatMap((c) => [outcome(c), outcome(c)]))
  assert.ok(spread.includes('GW_UPSTREAM_BUDGET_EXHAUSTED'), spread.join(', '))
  assert.equal(small.usedBytes(), 0)
  const err = await clients[0]?.callTool({ name: 'x', arguments: {} }).then(() => undefined, (e: unknown) => e)
  assert.equal(err, undefined, 'once the others are done, the budget is there again')
})

test('limits: an owner that never ends an event cannot hold more than its budget; the message names the budget', async (t) => {
  const written = { bytes: 0, closed: 0 }
  const srv = await rawServer(t, (_req, res, body) => { streamBig(res, body.id, 64 * 1024 * 1024, written, false) })
  const budget = new ResponseBudget({ totalBytes: 8 * 1024 * 1024, ownerBytes: 512 * 1024 })
  const client = new Client({ name: 't', version: '1' })
  await client.connect(lean(srv.url, { maxMessageBytes: 4 * 1024 * 1024, budget, budgetOwner: 'tenant:m' }))
  t.after(() => client.close())
  const err = await client.callTool({ name: 'x', arguments: {} }).then(() => undefined, (e: unknown) => e)
  const upstream = toUpstreamError(err, 'call', 1000, (e) => (e as Error).message)
  assert.equal(upstream.code, 'GW_UPSTREAM_BUDGET_EXHAUSTED', upstream.message)
  assert.match(upstream.message, /answers in flight.*MCP_RESPONSE_BUDGET_TENANT_BYTES/)
  assert.equal(breakerVerdict(err, 'call'), 'neutral')
  assert.ok(written.bytes < 4 * 1024 * 1024, `${written.bytes} bytes were sent`)
  assert.equal(budget.usedBytes(), 0)
})

test('limits: the default bound per message is derived for the gateway, not 64 MiB', () => {
  assert.ok(DEFAULT_MAX_MESSAGE_BYTES <= 8 * 1024 * 1024, String(DEFAULT_MAX_MESSAGE_BYTES))
})
