/**
 * POST /mcp's lean path (src/mcp-server/lean-transport.ts: one shared server per era, no Server
 * or transport object per request) against the SDK's per-request path it stands in for: the same
 * requests, sent to a gateway of each kind (`lean: false` serves everything through the SDK's
 * transports and per-request servers), must get the same status, the same headers that matter
 * and the same body, byte for byte, in both eras: results, errors (the gateway's, the SDK's
 * validation, the protocol layer's refusals, the revision's -32021 over HTTP 400), notifications
 * on the answer stream (log lines, progress), and a call cancelled by closing its request.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import type { TestContext } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { Server, fromJsonSchema, inputRequired } from '@modelcontextprotocol/server'
import { startAskingFixture } from '../../../scripts/lib/mcp-fixtures/asking-server.js'
import type { AskingFixture } from '../../../scripts/lib/mcp-fixtures/asking-server.js'
import { startModernFixture } from '../../../scripts/lib/mcp-fixtures/modern-server.js'
import { SERVER_INFO } from '../../../src/mcp-server/server.js'
import { buildTestApp, listenOnLoopback } from '../../helpers/app.js'
import { MODERN } from '../../helpers/mcp-raw.js'

const ADMIN = 'admin-key-0123456789'
const ACME = 'acme-key-0123456789'
const LEGACY = '2025-11-25'
const QUERY = '/mcp?mcp=modern,legacy'
/** The answer headers a client reads (x-gateway-overhead-ms and the date differ by nature). */
const HEADERS = ['content-type', 'cache-control', 'connection', 'x-accel-buffering', 'mcp-session-id']

interface Gateways {
  lean: string
  sdk: string
  legacyUpstream: AskingFixture
}

async function setup (t: TestContext): Promise<Gateways> {
  const noArgs = fromJsonSchema({ type: 'object' } as never)
  const modern = await startModernFixture({
    register: (server) => {
      server.registerTool('progress', { description: 'reports progress twice, then answers', inputSchema: noArgs }, async (_args, ctx) => {
        const token = ctx.mcpReq._meta?.progressToken
        for (const progress of [1, 2]) {
          if (token !== undefined) await ctx.mcpReq.notify({ method: 'notifications/progress', params: { progressToken: token, progress, total: 2, message: `step ${progress}` } })
        }
        return { content: [{ type: 'text', text: 'done' }] }
      })
      server.registerTool('greet', { description: 'asks for a name (elicitation)', inputSchema: noArgs }, async () => inputRequired({
        inputRequests: {
          who: { method: 'elicitation/create', params: { mode: 'form', message: 'Your name?', requestedSchema: { type: 'object', properties: {} } } } as never
        }
      }))
    }
  })
  t.after(async () => await modern.close())
  const legacyUpstream = await startAskingFixture()
  t.after(async () => await legacyUpstream.close())
  const env = { EGRESS_ALLOW: '127.0.0.1/32', API_KEYS: `${ADMIN}:*,${ACME}:acme` }
  const lean = await listenOnLoopback(await buildTestApp(t, { env }))
  const sdk = await listenOnLoopback(await buildTestApp(t, { env, mcp: { lean: false } }))
  for (const base of [lean, sdk]) {
    for (const [id, url] of [['modern', modern.url], ['legacy', legacyUpstream.url]]) {
      const put = await fetch(`${base}/mcp/servers/${id}`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ type: 'streamable_http', url })
      })
      assert.equal(put.status, 201, await put.text())
    }
  }
  return { lean, sdk, legacyUpstream }
}

interface Answer { status: number, headers: Record<string, string | null>, body: string }

async function post (url: string, headers: Record<string, string>, body: unknown, signal?: AbortSignal): Promise<Answer> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { authorization: `Bearer ${ACME}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: JSON.stringify(body),
    ...(signal !== undefined ? { signal } : {})
  })
  return { status: res.status, headers: Object.fromEntries(HEADERS.map((h) => [h, res.headers.get(h)])), body: await res.text() }
}

/** A legacy (2025-11-25, stateless) request as the SDK v1 client sends it after initialize. */
async function legacy (base: string, message: Record<string, unknown>, signal?: AbortSignal): Promise<Answer> {
  return await post(base + QUERY, { 'mcp-protocol-version': LEGACY }, { jsonrpc: '2.0', ...message }, signal)
}

/** A 2026-07-28 request: the `_meta` envelope and the revision's headers (Mcp-Name of a tools/call its name), unless `headers` says otherwise. */
async function modern (
  base: string,
  message: { id?: unknown, method: string, params?: Record<string, unknown> },
  headers: Record<string, string> = {},
  meta: Record<string, unknown> = {},
  signal?: AbortSignal
): Promise<Answer> {
  const envelope = {
    'io.modelcontextprotocol/protocolVersion': MODERN,
    'io.modelcontextprotocol/clientCapabilities': {},
    'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
    ...meta
  }
  const name = message.params?.name
  const std = { 'mcp-protocol-version': MODERN, 'mcp-method': message.method, ...(typeof name === 'string' ? { 'mcp-name': name } : {}) }
  const params = { ...message.params, _meta: { ...envelope, ...(message.params?._meta as object | undefined) } }
  return await post(base + QUERY, { ...std, ...headers }, { jsonrpc: '2.0', id: message.id ?? 1, method: message.method, params }, signal)
}

/** Sends the same request to both gateways (one after the other) and asserts the same answer; the lean gateway's. */
async function same (gw: Gateways, what: string, send: (base: string) => Promise<Answer>): Promise<Answer> {
  const lean = await send(gw.lean)
  const sdk = await send(gw.sdk)
  assert.deepEqual(lean, sdk, `${what}: the lean path answers as the SDK's`)
  return lean
}

test('legacy requests: the lean path answers every one as the SDK\'s transport does, byte for byte', async (t) => {
  const gw = await setup(t)
  const list = await same(gw, 'tools/list', (b) => legacy(b, { id: 1, method: 'tools/list' }))
  assert.match(list.body, /"name":"progress"/)
  const echo = await same(gw, 'tools/call', (b) => legacy(b, { id: 'call-a', method: 'tools/call', params: { name: 'echo', arguments: { text: 'hi' } } }))
  assert.equal(echo.headers['content-type'], 'application/json')
  assert.match(echo.body, /"id":"call-a"/)
  assert.match(echo.body, /modern:hi/)
  // Log lines before the result: an event stream.
  const chatty = await same(gw, 'tools/call with log lines', (b) => legacy(b, { id: 2, method: 'tools/call', params: { name: 'chatty', arguments: {} } }))
  assert.equal(chatty.headers['content-type'], 'text/event-stream')
  assert.match(chatty.body, /^event: message\ndata: \{"jsonrpc":"2.0","method":"notifications\/message"/)
  const progress = await same(gw, 'tools/call with progress', (b) =>
    legacy(b, { id: 3, method: 'tools/call', params: { name: 'progress', arguments: {}, _meta: { progressToken: 'p-1' } } }))
  assert.equal((progress.body.match(/"method":"notifications\/progress","params":\{"progressToken":"p-1"/g) ?? []).length, 2, progress.body)
  // Errors: the gateway's (an unknown tool), the SDK's validation, the protocol layer's refusal.
  const unknown = await same(gw, 'unknown tool', (b) => legacy(b, { id: 4, method: 'tools/call', params: { name: 'nope', arguments: {} } }))
  assert.match(unknown.body, /"error":\{"code":-32602/)
  await same(gw, 'invalid params', (b) => legacy(b, { id: 5, method: 'tools/call', params: { arguments: {} } }))
  await same(gw, 'unknown method', (b) => legacy(b, { id: 6, method: 'tools/nope' }))
  await same(gw, 'a method the SDK serves itself', (b) => legacy(b, { id: 7, method: 'ping' }))
  await same(gw, 'resources/list', (b) => legacy(b, { id: 8, method: 'resources/list' }))
  await same(gw, 'prompts/list', (b) => legacy(b, { id: 9, method: 'prompts/list' }))
  await same(gw, 'an unsupported protocol version', async (b) =>
    await post(b + QUERY, { 'mcp-protocol-version': '1999-01-01' }, { jsonrpc: '2.0', id: 10, method: 'tools/list' }))
  // Params the SDK validates before any handler runs: -32602 with what is wrong, not -32603 with the validator's raw text.
  const level = await same(gw, 'logging/setLevel with an unknown level', (b) => legacy(b, { id: 11, method: 'logging/setLevel', params: { level: 'loud' } }))
  assertInvalidParams(level, 11, /^Invalid params for logging\/setLevel: params\.level: expected one of "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"$/)
  const ref = await same(gw, 'completion/complete with an unknown ref.type', (b) =>
    legacy(b, { id: 12, method: 'completion/complete', params: { ref: { type: 'ref/tool', name: 'x' }, argument: { name: 'a', value: '' } } }))
  assertInvalidParams(ref, 12, /^Invalid params for completion\/complete: params\.ref\.type: expected one of "ref\/prompt", "ref\/resource"$/)
  // An unsupported MCP-Protocol-Version header is quoted cut, whichever check refuses it (a 5 KB header came back 5 KB, twice).
  for (const version of ['1999-01-01'.padEnd(5000, '9'), 'x'.repeat(5000)]) {
    const long = await same(gw, 'a long unsupported protocol version', async (b) =>
      await post(b + QUERY, { 'mcp-protocol-version': version }, { jsonrpc: '2.0', id: 13, method: 'tools/list' }))
    assertQuotedCut(long, version)
  }
})

/** A JSON-RPC -32602 answer (HTTP 200) to request `id`, its message matching `message`, with the gateway's code. */
function assertInvalidParams (answer: Answer, id: number, message: RegExp): void {
  assert.equal(answer.status, 200)
  const { error, id: answered } = JSON.parse(answer.body)
  assert.equal(answered, id)
  assert.equal(error.code, -32602, answer.body)
  assert.match(error.message, message)
  assert.equal(error.data.code, 'GW_BAD_REQUEST')
}

/** A 400 refusal that quotes at most the first 200 characters of `version`, marked as cut. */
function assertQuotedCut (answer: Answer, version: string): void {
  assert.equal(answer.status, 400, answer.body.slice(0, 300))
  assert.ok(answer.body.length < 1500, `the refusal is ${answer.body.length} bytes`)
  assert.ok(answer.body.includes(`${version.slice(0, 200)}...`), answer.body)
  assert.ok(!answer.body.includes(version.slice(0, 201)), answer.body)
}

test('2026-07-28 requests: the lean path answers every one as the SDK\'s entry does, byte for byte', async (t) => {
  const gw = await setup(t)
  const list = await same(gw, 'tools/list', (b) => modern(b, { method: 'tools/list' }))
  assert.match(list.body, /"resultType":"complete"/)
  const echo = await same(gw, 'tools/call', (b) => modern(b, { id: 'm-1', method: 'tools/call', params: { name: 'echo', arguments: { text: 'hi' } } }))
  assert.match(echo.body, /modern:hi/)
  const logged = await same(gw, 'tools/call with logLevel', (b) =>
    modern(b, { method: 'tools/call', params: { name: 'chatty', arguments: {} } }, {}, { 'io.modelcontextprotocol/logLevel': 'info' }))
  assert.equal(logged.headers['content-type'], 'text/event-stream')
  assert.match(logged.body, /progress made/)
  const progress = await same(gw, 'tools/call with progress', (b) =>
    modern(b, { method: 'tools/call', params: { name: 'progress', arguments: {}, _meta: { progressToken: 7 } } }))
  assert.equal((progress.body.match(/"method":"notifications\/progress"/g) ?? []).length, 2, progress.body)
  const missing = await same(gw, 'the server needs a capability the client did not declare', (b) =>
    modern(b, { method: 'tools/call', params: { name: 'greet', arguments: {} } }))
  assert.equal(missing.status, 400)
  assert.match(missing.body, /"code":-32021/)
  await same(gw, 'unknown tool', (b) => modern(b, { method: 'tools/call', params: { name: 'nope', arguments: {} } }))
  await same(gw, 'invalid params', (b) => modern(b, { method: 'tools/call', params: { name: 42 } }, { 'mcp-name': '42' }))
  await same(gw, 'logging/setLevel', (b) => modern(b, { method: 'logging/setLevel', params: { level: 'info' } }))
  // Refused by the protocol layer as it is handed to the server (the envelope lacks its clientCapabilities): the SDK's words.
  const headers = { 'mcp-protocol-version': MODERN, 'mcp-method': 'tools/call', 'mcp-name': 'echo' }
  const bare = { name: 'echo', arguments: { text: 'x' }, _meta: { 'io.modelcontextprotocol/protocolVersion': MODERN } }
  const envelope = await same(gw, 'an incomplete envelope', async (b) =>
    await post(b + QUERY, headers, { jsonrpc: '2.0', id: 9, method: 'tools/call', params: bare }))
  assert.match(envelope.body, /"id":9/)
  await same(gw, 'a Mcp-Name header that disagrees', (b) =>
    modern(b, { method: 'tools/call', params: { name: 'echo', arguments: { text: 'x' } } }, { 'mcp-name': 'other' }))
  await same(gw, 'no Mcp-Name header', async (b) =>
    await post(b + QUERY, { 'mcp-protocol-version': MODERN, 'mcp-method': 'tools/call' }, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: bare }))
  await same(gw, 'server/discover', (b) => modern(b, { method: 'server/discover' }))
  await same(gw, 'resources/list', (b) => modern(b, { method: 'resources/list' }))
  const ref = await same(gw, 'completion/complete with an unknown ref.type', (b) =>
    modern(b, { id: 20, method: 'completion/complete', params: { ref: { type: 'ref/tool', name: 'x' }, argument: { name: 'a', value: '' } } }))
  assertInvalidParams(ref, 20, /^Invalid params for completion\/complete: params\.ref\.type: expected one of "ref\/prompt", "ref\/resource"$/)
  // A long revision, in the header and the envelope alike, or in the envelope alone: quoted cut.
  const version = '2099-01-01'.padEnd(5000, '9')
  const long = await same(gw, 'a long unsupported revision', (b) =>
    modern(b, { id: 21, method: 'tools/list' }, { 'mcp-protocol-version': version }, { 'io.modelcontextprotocol/protocolVersion': version }))
  assertQuotedCut(long, version)
  assert.equal(JSON.parse(long.body).error.code, -32022)
  const claimed = await same(gw, 'a long revision in the envelope only', async (b) => {
    const meta = { 'io.modelcontextprotocol/protocolVersion': version, 'io.modelcontextprotocol/clientCapabilities': {} }
    return await post(b + QUERY, { 'mcp-method': 'tools/list' }, { jsonrpc: '2.0', id: 22, method: 'tools/list', params: { _meta: meta } })
  })
  assertQuotedCut(claimed, version)
})

test('a call cancelled by closing its request is cancelled upstream on the lean path too, in both eras', async (t) => {
  const gw = await setup(t)
  const waits = gw.legacyUpstream.waits
  const cancelOne = async (send: (signal: AbortSignal) => Promise<unknown>): Promise<void> => {
    const started = waits.started
    const cancelled = waits.cancelled
    const abort = new AbortController()
    const call = send(abort.signal).catch(() => {})
    for (let i = 0; i < 500 && waits.started === started; i++) await sleep(10)
    assert.equal(waits.started, started + 1, 'the call reached its server')
    abort.abort()
    await call
    for (let i = 0; i < 500 && waits.cancelled === cancelled; i++) await sleep(10)
    assert.equal(waits.cancelled, cancelled + 1, 'the server saw the call cancelled')
  }
  await cancelOne((signal) => legacy(gw.lean, { id: 1, method: 'tools/call', params: { name: 'wait', arguments: {} } }, signal))
  await cancelOne((signal) => modern(gw.lean, { method: 'tools/call', params: { name: 'wait', arguments: {} } }, {}, {}, signal))
  // The gateway's shared servers carry on: the next call is answered.
  const after = await legacy(gw.lean, { id: 2, method: 'tools/call', params: { name: 'echo', arguments: { text: 'again' } } })
  assert.match(after.body, /modern:again/)
})

test('single requests build no Server per request on the lean path (the SDK path connects one per request)', async (t) => {
  const gw = await setup(t)
  let connected = 0
  const connect = Server.prototype.connect
  // Only the gateway's own servers count (the fixtures' in-process servers are Servers too).
  Server.prototype.connect = async function (this: Server, transport) {
    if ((this as unknown as { _serverInfo?: unknown })._serverInfo === SERVER_INFO) connected++
    await connect.call(this, transport)
  }
  t.after(() => { Server.prototype.connect = connect })
  const calls = async (base: string): Promise<void> => {
    for (let i = 0; i < 3; i++) {
      assert.match((await legacy(base, { id: i, method: 'tools/call', params: { name: 'echo', arguments: { text: 'x' } } })).body, /modern:x/)
      assert.match((await modern(base, { id: i, method: 'tools/call', params: { name: 'echo', arguments: { text: 'y' } } })).body, /modern:y/)
    }
  }
  await calls(gw.lean)
  assert.equal(connected, 0)
  await calls(gw.sdk)
  assert.equal(connected, 6)
})

const APART = 'a shared server keeps tenants apart: concurrent requests of two tenants, with the same JSON-RPC ids, each get their own tenant\'s answer'
test(APART, { timeout: 60_000 }, async (t) => {
  // Attack: one server object now serves every tenant's single requests; if an exchange's state were found by the
  // client's id (every client counts from 1) or kept on the server, one tenant would get another's tools.
  const modernUp = await startModernFixture({})
  t.after(async () => await modernUp.close())
  const legacyUp = await startAskingFixture()
  t.after(async () => await legacyUp.close())
  const BETA = 'beta-key-0123456789'
  const base = await listenOnLoopback(await buildTestApp(t, { env: { EGRESS_ALLOW: '127.0.0.1/32', API_KEYS: `${ADMIN}:*,${ACME}:acme,${BETA}:beta` } }))
  const put = async (path: string, key: string, url: string): Promise<void> => {
    const res = await fetch(base + path, { method: 'PUT', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ type: 'streamable_http', url }) })
    assert.equal(res.status, 201, await res.text())
  }
  await put('/mcp/servers/legacy', ADMIN, legacyUp.url)
  // acme's own server: beta's allow-list names it too, and must not reach it.
  await put('/users/acme/mcp/servers/mine', ACME, modernUp.url)
  const ask = async (key: string, era: 'legacy' | 'modern', body: Record<string, unknown>): Promise<string> => {
    const headers: Record<string, string> = { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' }
    let message: Record<string, unknown> = { jsonrpc: '2.0', id: 1, ...body }
    if (era === 'legacy') {
      headers['mcp-protocol-version'] = LEGACY
    } else {
      headers['mcp-protocol-version'] = MODERN
      headers['mcp-method'] = body.method as string
      const params = (body.params ?? {}) as Record<string, unknown>
      if (typeof params.name === 'string') headers['mcp-name'] = params.name
      const _meta = {
        'io.modelcontextprotocol/protocolVersion': MODERN,
        'io.modelcontextprotocol/clientCapabilities': {},
        'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' }
      }
      message = { ...message, params: { ...params, _meta } }
    }
    const res = await fetch(`${base}/mcp?mcp=mine,legacy`, { method: 'POST', headers, body: JSON.stringify(message) })
    return `${res.status} ${await res.text()}`
  }
  for (const era of ['legacy', 'modern'] as const) {
    const list = { method: 'tools/list' }
    const baseline = { acme: await ask(ACME, era, list), beta: await ask(BETA, era, list) }
    assert.notEqual(baseline.acme, baseline.beta, `${era}: the two tenants' listings differ (acme has its own server)`)
    // acme's server's echo, under the name the gateway lists a tenant's server's tools by.
    const echo = /"name":"([a-z_]*echo)"/.exec(baseline.acme)?.[1] as string
    assert.ok(echo !== undefined && !baseline.beta.includes(echo), baseline.acme.slice(0, 300))
    const asks: Array<Promise<void>> = []
    for (let i = 0; i < 30; i++) {
      asks.push(ask(ACME, era, list).then((got) => { assert.equal(got, baseline.acme, `${era}: acme got another listing`) }))
      asks.push(ask(BETA, era, list).then((got) => { assert.equal(got, baseline.beta, `${era}: beta got another listing`) }))
      // beta calling acme's tool by name, concurrently with acme's own calls of it: refused every time.
      asks.push(ask(BETA, era, { method: 'tools/call', params: { name: echo, arguments: { text: 'beta' } } }).then((got) => {
        assert.doesNotMatch(got, /modern:beta/, `${era}: beta reached acme's server`)
      }))
      asks.push(ask(ACME, era, { method: 'tools/call', params: { name: echo, arguments: { text: `acme-${i}` } } }).then((got) => {
        assert.match(got, new RegExp(`modern:acme-${i}"`), `${era}: acme's call got another answer`)
      }))
    }
    await Promise.all(asks)
  }
})
