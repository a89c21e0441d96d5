/**
 * Faults of remote MCP servers seen through the whole gateway (POST /invoke, GET /tools, the
 * registry routes): hangs, late answers, crashes mid-call, malformed JSON-RPC, 3 MB and 50 MB results,
 * a server gone between list and call, a stdio server dying at start. Each test asserts the
 * outcome (never a duration), that no request got a 500, and that the gateway keeps serving.
 */
import { test } from 'node:test'
import type { TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import type { FastifyInstance } from 'fastify'
import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js'
import { buildTestApp } from '../../helpers/app.js'
import { allProcesses } from '../../../scripts/lib/proc.js'
import type { ProcInfo } from '../../../scripts/lib/proc.js'
import { startStreamableHttpFixture, stdioFixture } from '../../../scripts/lib/mcp-fixtures/index.js'
import type { HttpFixture } from '../../../scripts/lib/mcp-fixtures/index.js'
import { MANY_TOOLS, startFaultyHttpServer } from '../../../scripts/lib/mcp-fixtures/faulty/raw-http.js'
import type { FaultMode, FaultyHttpServer } from '../../../scripts/lib/mcp-fixtures/faulty/raw-http.js'

/**
 * Small deadlines so every fault resolves quickly; assertions never depend on them. Not lower:
 * a healthy server's first listing (cold SDK code, a loaded CI machine) must fit comfortably.
 */
const ENV = {
  MCP_CONNECT_TIMEOUT_MS: '2000',
  MCP_LIST_TIMEOUT_MS: '2000',
  MCP_CALL_TIMEOUT_MS: '3000',
  LOAD_EXAMPLES: 'false'
}

/** Stdio fixtures start Node with tsx (hundreds of ms): their connect needs more room. */
const STDIO_ENV = { MCP_CONNECT_TIMEOUT_MS: '15000', MCP_LIST_TIMEOUT_MS: '15000' }

/** Codes a tool-level failure of a remote server may carry. */
const UPSTREAM_CODES = ['GW_UPSTREAM_ERROR', 'GW_UPSTREAM_CONNECT', 'GW_UPSTREAM_TIMEOUT', 'GW_TOOL_TIMEOUT']

async function app (t: TestContext, env: Record<string, string> = {}): Promise<FastifyInstance> {
  return await buildTestApp(t, { env: { ...ENV, ...env } })
}

async function goodFixture (t: TestContext, marker = 'good'): Promise<HttpFixture> {
  const f = await startStreamableHttpFixture({ marker })
  t.after(async () => await f.close())
  return f
}

async function faulty (t: TestContext, mode: FaultMode): Promise<FaultyHttpServer> {
  const f = await startFaultyHttpServer(mode)
  t.after(async () => await f.close())
  return f
}

async function register (gw: FastifyInstance, serverId: string, config: Record<string, unknown>, userId?: string): Promise<void> {
  const url = userId === undefined ? `/mcp/servers/${serverId}` : `/users/${userId}/mcp/servers/${serverId}`
  const res = await gw.inject({ method: 'PUT', url, payload: config })
  assert.equal(res.statusCode, 201, `register ${serverId}: ${res.body}`)
}

async function invoke (gw: FastifyInstance, body: Record<string, unknown>): Promise<{ status: number, json: any }> {
  const res = await gw.inject({ method: 'POST', url: '/invoke', payload: body })
  assert.notEqual(res.statusCode, 500, res.body)
  return { status: res.statusCode, json: res.json() }
}

async function listTools (gw: FastifyInstance, query: string): Promise<any> {
  const res = await gw.inject({ method: 'GET', url: `/tools?format=mcp&${query}` })
  assert.equal(res.statusCode, 200, res.body)
  return res.json()
}

/** A tool-level failure of a remote server: 200, isError, an upstream/timeout code, TOOL_ERROR output. */
function assertUpstreamFailure (r: { status: number, json: any }, codes: readonly string[] = UPSTREAM_CODES): void {
  assert.equal(r.status, 200, JSON.stringify(r.json))
  assert.equal(r.json.isError, true, JSON.stringify(r.json))
  assert.ok(codes.includes(r.json.error?.code), `code ${String(r.json.error?.code)} not in ${codes.join(',')}: ${JSON.stringify(r.json)}`)
  assert.match(r.json.output, /^TOOL_ERROR: /)
  // No stack traces or host paths in what the model sees (docs/ARCHITECTURE.md#errors)
  assert.doesNotMatch(r.json.output, /\n\s+at |node_modules/)
}

/** The gateway still serves: a call to a healthy server works end to end. */
async function assertServing (gw: FastifyInstance, serverId: string, marker: string): Promise<void> {
  const ok = await invoke(gw, { name: `${serverId}__echo`, arguments: { text: 'still-here' } })
  assert.equal(ok.status, 200, JSON.stringify(ok.json))
  assert.equal(ok.json.isError, false, JSON.stringify(ok.json))
  assert.equal(ok.json.output, `${marker}:still-here`)
  const health = await gw.inject({ method: 'GET', url: '/healthz' })
  assert.equal(health.statusCode, 200)
}

/** resources/list through the gateway's /mcp (a 2026-07-28 request: no session), for `query`'s allow-list. */
async function mcpResources (gw: FastifyInstance, query: string): Promise<unknown[]> {
  const meta = {
    'io.modelcontextprotocol/protocolVersion': '2026-07-28',
    'io.modelcontextprotocol/clientCapabilities': {},
    'io.modelcontextprotocol/clientInfo': { name: 't', version: '1' }
  }
  const res = await gw.inject({
    method: 'POST',
    url: `/mcp?${query}`,
    headers: { accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'resources/list' },
    payload: { jsonrpc: '2.0', id: 1, method: 'resources/list', params: { _meta: meta } }
  })
  assert.equal(res.statusCode, 200, res.body)
  return res.json().result.resources
}

/** Polls `check` until it holds or `ms` elapse; returns the last value (outcome asserted by the caller). */
async function until<T> (check: () => T | Promise<T>, ok: (v: T) => boolean, ms = 5000): Promise<T> {
  const end = Date.now() + ms
  let value = await check()
  while (!ok(value) && Date.now() < end) {
    await sleep(25)
    value = await check()
  }
  return value
}

/** Direct children of this process (state Z is a zombie: exited, not reaped). */
async function children (): Promise<ProcInfo[]> {
  return (await allProcesses()).filter((p) => p.ppid === process.pid)
}

const TSX_IMPORT = import.meta.resolve('tsx')
const CRASH_FIXTURE = fileURLToPath(new URL('../../../scripts/lib/mcp-fixtures/faulty/stdio-crash.ts', import.meta.url))

test('a server that hangs on initialize (HTTP and stdio): ' +
  'unavailable with a timeout reason within the listing deadline, the rest keeps working, no socket or child left', async (t) => {
  const good = await goodFixture(t)
  const stuck = await faulty(t, 'hang')
  // The listing deadline fires before the connect timeout: the reason must still say timeout.
  const gw = await app(t, { MCP_CONNECT_TIMEOUT_MS: '4000' })
  await register(gw, 'good', { type: 'http', url: good.url })
  await register(gw, 'stuck', { type: 'http', url: stuck.url })
  await register(gw, 'stuckio', { type: 'stdio', ...stdioFixture('stdio-hang.ts') })

  const listing = await listTools(gw, 'mcp=good,stuck,stuckio')
  const names = listing.tools.map((x: any) => x.name)
  assert.ok(names.includes('good__echo') || names.includes('echo'), names.join(','))
  assert.deepEqual(listing.unavailable.map((u: any) => u.serverId).sort(), ['stuck', 'stuckio'])
  // The deadline is reported as such, not as a cancellation by the caller.
  for (const u of listing.unavailable) {
    if (u.serverId === 'stuckio') {
      // A stdio server's first start has its own, longer deadline (npx may be downloading it):
      // until then it is starting, not timed out.
      assert.match(u.reason, /^starting: first connection in progress/, u.reason)
      continue
    }
    // Normally the listing deadline; on a machine stalled for seconds the connect timeout was
    // once reported instead (seen once in CI under a parallel soak): both are timeouts.
    assert.match(u.reason, /within 2000 ms|timed out after 4000 ms/, u.reason)
    assert.doesNotMatch(u.reason, /cancelled/, u.reason)
  }
  assert.ok(stuck.requests() >= 1, 'the gateway did reach the hung server')
  // A second listing hits the same deadline again and still answers (no stuck single-flight).
  assert.deepEqual((await listTools(gw, 'mcp=good,stuck')).unavailable.map((u: any) => u.serverId), ['stuck'])
  // (the tool-level outcome of invoking it is the todo test at the end of this file)
  assert.notEqual((await invoke(gw, { name: 'stuck__echo', arguments: { text: 'x' } })).status, 500)
  await assertServing(gw, 'good', 'good')

  await gw.close()
  // The gateway aborted every request it had open on the hung server.
  assert.equal(await until(() => stuck.openSockets(), (n) => n === 0), 0, 'sockets to the hung server closed')
  const left = await until(children, (c) => !c.some((p) => p.cmdline.includes('stdio-hang.ts') || p.state === 'Z'), 10_000)
  assert.deepEqual(left.filter((p) => p.cmdline.includes('stdio-hang.ts') || p.state === 'Z'), [], 'the hung stdio child was killed and reaped')
})

test('a server that answers tools/call after its timeoutMs: GW_TOOL_TIMEOUT, the call is cancelled at the server, the next call works', async (t) => {
  const slow = await goodFixture(t, 'slowpoke')
  const gw = await app(t)
  await register(gw, 'slowpoke', { type: 'http', url: slow.url, timeoutMs: 300 })

  const before = slow.stats.toolCalls
  const late = await invoke(gw, { name: 'slowpoke__slow', arguments: { ms: 5000 } })
  assertUpstreamFailure(late, ['GW_TOOL_TIMEOUT'])
  assert.match(late.json.error.message, /timed out/)
  assert.equal(slow.stats.toolCalls, before + 1, 'the call reached the server once')
  // The SDK sends notifications/cancelled on timeout; the fixture's slow handler counts it.
  assert.equal(await until(() => slow.stats.cancelled, (n) => n >= 1), 1, 'the server saw the cancellation')

  const next = await invoke(gw, { name: 'slowpoke__slow', arguments: { ms: 10 } })
  assert.equal(next.json.isError, false, JSON.stringify(next.json))
  assert.equal(next.json.output, 'slept 10')
  await assertServing(gw, 'slowpoke', 'slowpoke')
  assert.equal(slow.stats.toolCalls, before + 3, 'nothing was replayed')
})

test('a stdio server that crashes mid-call: GW_UPSTREAM_ERROR, never replayed, the next call spawns a fresh child', async (t) => {
  const good = await goodFixture(t)
  const dir = await mkdtemp(join(tmpdir(), 'tg-crash-'))
  t.after(async () => await rm(dir, { recursive: true, force: true }))
  const callLog = join(dir, 'calls.log')
  const gw = await app(t, STDIO_ENV)
  await register(gw, 'good', { type: 'http', url: good.url })
  await register(gw, 'crashy', {
    type: 'stdio',
    command: process.execPath,
    args: ['--import', TSX_IMPORT, CRASH_FIXTURE, 'crashy'],
    env: { CALL_LOG: callLog },
    timeoutMs: 20_000
  })

  assert.equal((await invoke(gw, { name: 'crashy__echo', arguments: { text: 'a' } })).json.output, 'crashy:a')
  const crashed = await invoke(gw, { name: 'crashy__crash', arguments: {} })
  assertUpstreamFailure(crashed, ['GW_UPSTREAM_ERROR'])
  assert.match(crashed.json.error.message, /not replayed|closed|lost/i)

  const fresh = await invoke(gw, { name: 'crashy__echo', arguments: { text: 'b' } })
  assert.equal(fresh.json.output, 'crashy:b', JSON.stringify(fresh.json))
  const calls = (await readFile(callLog, 'utf8')).trim().split('\n')
  assert.equal(calls.length, 1, `crash reached a server exactly once: ${calls.join(' | ')}`)
  await assertServing(gw, 'good', 'good')

  await gw.close()
  const left = await until(children, (c) => !c.some((p) => p.cmdline.includes('stdio-crash.ts') || p.state === 'Z'), 10_000)
  assert.deepEqual(left.filter((p) => p.cmdline.includes('stdio-crash.ts') || p.state === 'Z'), [], 'no child or zombie left')
})

test('an HTTP server closed while a call is in flight: GW_UPSTREAM_ERROR, never replayed, a restarted server on the same port works', async (t) => {
  const good = await goodFixture(t)
  let flaky = await startStreamableHttpFixture({ marker: 'flaky' })
  t.after(async () => await flaky.close())
  const gw = await app(t)
  await register(gw, 'good', { type: 'http', url: good.url })
  await register(gw, 'flaky', { type: 'http', url: flaky.url, timeoutMs: 20_000 })

  assert.equal((await invoke(gw, { name: 'flaky__echo', arguments: { text: 'a' } })).json.output, 'flaky:a')
  const before = flaky.stats.toolCalls
  const inFlight = invoke(gw, { name: 'flaky__slow', arguments: { ms: 15_000 } })
  assert.equal(await until(() => flaky.stats.toolCalls, (n) => n > before), before + 1, 'the slow call reached the server')
  await flaky.close()
  const lost = await inFlight
  assertUpstreamFailure(lost, ['GW_UPSTREAM_ERROR'])

  const port = flaky.port
  flaky = await startStreamableHttpFixture({ port, marker: 'flaky' })
  const next = await invoke(gw, { name: 'flaky__echo', arguments: { text: 'b' } })
  assert.equal(next.json.output, 'flaky:b', JSON.stringify(next.json))
  assert.equal(flaky.stats.toolCalls, 1, 'the restarted server saw only the new call (no replay of slow)')
  await assertServing(gw, 'good', 'good')
})

test('malformed JSON-RPC (not JSON-RPC, invalid JSON, HTML, 500, wrong id, bad SSE, cut body, a listing nested 10,000 deep): ' +
  'unavailable in listings, tool-level upstream error on invoke', async (t) => {
  const good = await goodFixture(t)
  const gw = await app(t)
  await register(gw, 'good', { type: 'http', url: good.url })
  const modes: FaultMode[] = ['not-jsonrpc', 'invalid-json', 'html', 'status-500', 'wrong-id', 'sse-garbage', 'cut-body', 'deep-json']
  const servers: Array<[string, FaultyHttpServer]> = []
  for (const mode of modes) {
    const f = await faulty(t, mode)
    await register(gw, mode, { type: 'http', url: f.url })
    servers.push([mode, f])
  }

  const listing = await listTools(gw, `mcp=good,${modes.join(',')}`)
  assert.ok(listing.tools.some((x: any) => x.name === 'echo' || x.name === 'good__echo'))
  assert.deepEqual(listing.unavailable.map((u: any) => u.serverId).sort(), [...modes].sort())
  for (const u of listing.unavailable) assert.ok(typeof u.reason === 'string' && u.reason.length > 0, JSON.stringify(u))
  // A listing too deep to walk says so, not the engine's "Maximum call stack size exceeded".
  const deep = listing.unavailable.find((u: any) => u.serverId === 'deep-json')
  assert.match(deep.reason, /nested too deeply to be read/, deep.reason)
  for (const [mode, f] of servers) assert.ok(f.requests() >= 1, `${mode} was reached`)

  // Invoking one of their tools never gives a 500 (the tool-level outcome is the todo test below).
  for (const mode of modes) assert.notEqual((await invoke(gw, { name: `${mode}__echo`, arguments: { text: 'x' } })).status, 500)
  await assertServing(gw, 'good', 'good')
})

test('a server listing more than a listing may keep (6,000 tools; or, under a small MCP_MAX_MESSAGE_BYTES, more bytes than one answer): ' +
  'unavailable, saying why, and nothing of it is kept', async (t) => {
  const many = await faulty(t, 'many-tools')
  const good = await goodFixture(t)
  // The gateway's own pace: its first listing may take seconds on a loaded machine.
  const gw = await app(t, { MCP_LIST_TIMEOUT_MS: '30000' })
  await register(gw, 'many', { type: 'http', url: many.url })
  await register(gw, 'good', { type: 'http', url: good.url })
  let listing = await listTools(gw, 'mcp=many,good')
  assert.deepEqual(listing.unavailable.map((u: any) => u.serverId), ['many'], JSON.stringify(listing.unavailable))
  assert.match(listing.unavailable[0].reason, new RegExp(`lists ${MANY_TOOLS} tools; at most 5000 are kept`), listing.unavailable[0].reason)
  assert.ok(listing.tools.length > 0 && listing.tools.every((x: any) => !/^(many__)?t\d+$/.test(x.name)), 'none of its tools is listed')
  assert.ok(many.requests() >= 7, 'every page was read')
  await assertServing(gw, 'good', 'good')
  // Its resources, through /mcp: the same bound (the good server has none).
  const asked = many.requests()
  assert.deepEqual(await mcpResources(gw, 'mcp=many,good'), [])
  assert.ok(many.requests() >= asked + 6, 'its resources were read, every page')

  // Bytes: 3,000 tools, each page within MCP_MAX_MESSAGE_BYTES (~150 KB), the whole list (~450 KB) not.
  const small = await app(t, { MCP_LIST_TIMEOUT_MS: '30000', MCP_MAX_MESSAGE_BYTES: '400000' })
  await register(small, 'many', { type: 'http', url: `${many.url}?tools=3000` })
  listing = await listTools(small, 'mcp=many')
  assert.equal(listing.unavailable.length, 1, JSON.stringify(listing))
  assert.match(listing.unavailable[0].reason, /tools take \d+ bytes as JSON \(all pages together\); at most 400000 \(MCP_MAX_MESSAGE_BYTES\)/, listing.unavailable[0].reason)
})

test('a tenant keeps at most MCP_TENANT_LIST_BYTES of tool lists: past it, unavailable saying why; a removed server gives room back', async (t) => {
  const many = await faulty(t, 'many-tools')
  // Each list ~320 KB (1,500 tools), within MCP_MAX_MESSAGE_BYTES; two fit the tenant's 700 KB, three do not.
  const gw = await app(t, { MCP_LIST_TIMEOUT_MS: '30000', MCP_MAX_MESSAGE_BYTES: '400000', MCP_TENANT_LIST_BYTES: '700000', EGRESS_ALLOW: '127.0.0.1/32' })
  for (const id of ['s1', 's2']) await register(gw, id, { type: 'http', url: `${many.url}?tools=1500&for=${id}` }, 'acme')
  let listing = await listTools(gw, 'mcp=s1,s2&userId=acme')
  assert.deepEqual(listing.unavailable, [])
  assert.equal(listing.tools.length, 3000)
  // The lists kept first stay kept (a new one waits for room: a server removed, a client idle).
  await register(gw, 's3', { type: 'http', url: `${many.url}?tools=1500&for=s3` }, 'acme')
  listing = await listTools(gw, 'mcp=s1,s2,s3&userId=acme')
  assert.deepEqual(listing.unavailable.map((u: any) => u.serverId), ['s3'], JSON.stringify(listing.unavailable))
  assert.match(listing.unavailable[0].reason, /the tenant's servers would keep \d+ bytes of lists together; at most 700000 \(MCP_TENANT_LIST_BYTES\)/)
  // Another tenant has room of its own.
  await register(gw, 's1', { type: 'http', url: `${many.url}?tools=1500&for=globex` }, 'globex')
  assert.deepEqual((await listTools(gw, 'mcp=s1&userId=globex')).unavailable, [])
  // A removed server's client closes and its list leaves the tenant's account.
  assert.equal((await gw.inject({ method: 'DELETE', url: '/users/acme/mcp/servers/s1' })).statusCode, 200)
  listing = await until(async () => await listTools(gw, 'mcp=s2,s3&userId=acme'), (l) => l.unavailable.length === 0)
  assert.deepEqual(listing.unavailable, [])
  assert.equal(listing.tools.length, 3000)
  // /mcp's lists count too: s2's 1,500 resources (~150 KB) would take the tenant past its 700 KB.
  const resources = async (allow: string): Promise<unknown[]> => await mcpResources(gw, `mcp=${allow}&userId=acme`)
  assert.deepEqual(await resources('s2'), [])
  assert.equal((await gw.inject({ method: 'DELETE', url: '/users/acme/mcp/servers/s3' })).statusCode, 200)
  assert.equal((await until(async () => await resources('s2'), (r) => r.length > 0)).length, 1500)
})

test('a tenant keeps at most MCP_TENANT_LIST_ITEMS tools of its servers together (and as many of each other kind): ' +
  'past it, unavailable saying why', async (t) => {
  const many = await faulty(t, 'many-tools')
  // 20 servers of 5,000 small tools (100,000 tools, 32 MB: within MCP_TENANT_LIST_BYTES) made each GET /tools of the tenant
  // hold the event loop ~1.1-1.4 s (merging, policing, pinning and rendering 100,000 tools), and each of its searches too.
  const gw = await app(t, { MCP_LIST_TIMEOUT_MS: '30000', MCP_TENANT_LIST_ITEMS: '5000', EGRESS_ALLOW: '127.0.0.1/32' })
  // The lists kept first stay kept: s1's (a registration lists the server at once).
  await register(gw, 's1', { type: 'http', url: `${many.url}?tools=3000&for=s1` }, 'acme')
  assert.equal((await listTools(gw, 'mcp=s1&userId=acme')).tools.length, 3000)
  await register(gw, 's2', { type: 'http', url: `${many.url}?tools=3000&for=s2` }, 'acme')
  let listing = await listTools(gw, 'mcp=s1,s2&userId=acme')
  assert.equal(listing.tools.length, 3000)
  assert.deepEqual(listing.unavailable.map((u: any) => u.serverId), ['s2'], JSON.stringify(listing.unavailable))
  assert.match(listing.unavailable[0].reason, /the tenant's servers would keep 6000 tools together; at most 5000 \(MCP_TENANT_LIST_ITEMS\)/)
  // A refused list is remembered like a kept one (MCP_TOOLS_TTL_MS, a list change, or room made): the next listings do
  // not fetch it again (before, each fetched and parsed the whole refused list, ~650 KB here, and refused it again).
  const asked = many.requests()
  for (let i = 0; i < 3; i++) assert.deepEqual((await listTools(gw, 'mcp=s1,s2&userId=acme')).unavailable.map((u: any) => u.serverId), ['s2'])
  assert.equal(many.requests(), asked, 'the refused list was fetched again')
  // Another tenant has room of its own.
  await register(gw, 's2', { type: 'http', url: `${many.url}?tools=3000&for=globex` }, 'globex')
  assert.deepEqual((await listTools(gw, 'mcp=s2&userId=globex')).unavailable, [])
  // Each kind of list has its own count: s1's 3,000 resources fit beside its 3,000 tools.
  assert.equal((await mcpResources(gw, 'mcp=s1&userId=acme')).length, 3000)
  // A removed server gives its room back.
  assert.equal((await gw.inject({ method: 'DELETE', url: '/users/acme/mcp/servers/s1' })).statusCode, 200)
  listing = await until(async () => await listTools(gw, 'mcp=s2&userId=acme'), (l) => l.unavailable.length === 0)
  assert.equal(listing.tools.length, 3000)
})

test('arguments nested 10,000 deep: the call fails at the gateway\'s MCP client, saying why; repeated, they do not open the server\'s breaker', async (t) => {
  const good = await goodFixture(t)
  const gw = await app(t)
  await register(gw, 'good', { type: 'http', url: good.url })
  assert.ok((await listTools(gw, 'mcp=good')).tools.length > 0)
  // Valid JSON that JSON.parse reads; the MCP SDK's request validation walks it recursively and runs out of stack.
  const deep = '{"a":'.repeat(10_000) + '1' + '}'.repeat(10_000)
  const res = await gw.inject({
    method: 'POST',
    url: '/invoke',
    headers: { 'content-type': 'application/json' },
    payload: `{"name":"good__echo","arguments":{"text":"x","more":${deep}}}`
  })
  const r = { status: res.statusCode, json: res.json() }
  assertUpstreamFailure(r)
  assert.match(r.json.output, /the call's arguments or the server's answer nest JSON too deeply/, r.json.output)
  // A caller cannot take a (shared) server out of service with them: more than the breaker's 5 failures in a row.
  for (let i = 0; i < 6; i++) {
    await gw.inject({ method: 'POST', url: '/invoke', headers: { 'content-type': 'application/json' }, payload: `{"name":"good__echo","arguments":{"text":"x","more":${deep}}}` })
  }
  await assertServing(gw, 'good', 'good')
})

test('a server that refuses a call\'s body as too large (413) answered: callers with big arguments do not open its breaker', async (t) => {
  // express.json() answers 413 past 100 KB by default: a caller must not take a shared server out of service with 5 such calls.
  const small = await startStreamableHttpFixture({ marker: 'small', maxBodyBytes: 100_000 })
  t.after(async () => await small.close())
  const gw = await app(t)
  await register(gw, 'small', { type: 'http', url: small.url })
  for (let i = 0; i < 6; i++) {
    const r = await invoke(gw, { name: 'small__echo', arguments: { text: 'x'.repeat(150_000) } })
    assertUpstreamFailure(r)
    assert.match(r.json.output, /HTTP 413/, r.json.output)
  }
  await assertServing(gw, 'small', 'small')
})

test('a 3 MB result is capped at OUTPUT_MAX_CHARS with truncated: true; ' +
  'a 50 MB result is the tool error GW_UPSTREAM_TOO_LARGE (not read past MCP_MAX_MESSAGE_BYTES); the gateway stays healthy', async (t) => {
  const big = await goodFixture(t, 'big')
  const gw = await app(t, { OUTPUT_MAX_CHARS: '100000', MCP_CALL_TIMEOUT_MS: '30000' })
  await register(gw, 'bigs', { type: 'http', url: big.url })

  // Under the bound (4 x OUTPUT_MAX_CHARS + 4 MiB by default): read whole, then cut to the output cap.
  const r = await invoke(gw, { name: 'bigs__big', arguments: { chars: 3_000_000 } })
  assert.equal(r.status, 200)
  assert.equal(r.json.isError, false, JSON.stringify(r.json).slice(0, 500))
  assert.equal(r.json.truncated, true)
  assert.ok(r.json.output.length <= 100_000, `output length ${r.json.output.length}`)
  assert.match(r.json.output, /^x+\n\[\.\.\. truncated \d+ chars \.\.\.\]\nx+$/)

  // Past it: reading stops at the bound and the call is a tool error saying why (README, Remote MCP servers).
  const huge = await invoke(gw, { name: 'bigs__big', arguments: { chars: 50_000_000 } })
  assert.equal(huge.status, 200)
  assert.equal(huge.json.isError, true)
  assert.equal(huge.json.error.code, 'GW_UPSTREAM_TOO_LARGE', JSON.stringify(huge.json).slice(0, 500))
  assert.match(huge.json.error.message, /answer exceeds 4594304 bytes \(MCP_MAX_MESSAGE_BYTES\)/)
  assert.match(huge.json.output, /^TOOL_ERROR: .*"errorType":"UpstreamTooLarge"/)
  // A sanity log, never a threshold: memory depends on GC timing.
  t.diagnostic(`rss after the 50 MB result: ${Math.round(process.memoryUsage().rss / 1e6)} MB`)
  await assertServing(gw, 'bigs', 'big')
})

test('a server that disappears between list and call (global and tenant pools): tool-level upstream error, no hang', async (t) => {
  const good = await goodFixture(t)
  const gone = await startStreamableHttpFixture({ marker: 'gone' })
  t.after(async () => await gone.close())
  const tenantGone = await startStreamableHttpFixture({ marker: 'tgone' })
  t.after(async () => await tenantGone.close())
  const gw = await app(t, { EGRESS_ALLOW: '127.0.0.1/32' })
  await register(gw, 'good', { type: 'http', url: good.url })
  await register(gw, 'gone', { type: 'http', url: gone.url })
  await register(gw, 'tgone', { type: 'http', url: tenantGone.url }, 'u1')

  const listing = await listTools(gw, 'mcp=good,gone')
  assert.deepEqual(listing.unavailable, [])
  // Same tools on both: one server gets the raw names, the other the qualified ones.
  assert.equal(listing.tools.length, 18, JSON.stringify(listing.tools.map((x: any) => x.name)))
  const tenantListing = await listTools(gw, 'mcp=tgone&userId=u1')
  assert.ok(tenantListing.tools.some((x: any) => x.name === 'user_u1_tool_echo'))

  await gone.close()
  await tenantGone.close()
  assertUpstreamFailure(await invoke(gw, { name: 'gone__echo', arguments: { text: 'x' } }))
  assertUpstreamFailure(await invoke(gw, { name: 'user_u1_tool_echo', userId: 'u1', arguments: { text: 'x' } }))
  await assertServing(gw, 'good', 'good')
  // A second listing now reports them unavailable (or from the last known list), never a 500.
  await listTools(gw, 'mcp=good,gone')
})

test('a stdio server that exits at start: unavailable with a clear reason, no child or zombie left', async (t) => {
  const good = await goodFixture(t)
  const gw = await app(t, STDIO_ENV)
  await register(gw, 'good', { type: 'http', url: good.url })
  await register(gw, 'dies', { type: 'stdio', ...stdioFixture('stdio-exit.ts') })

  const listing = await listTools(gw, 'mcp=good,dies')
  assert.deepEqual(listing.unavailable.map((u: any) => u.serverId), ['dies'])
  assert.match(listing.unavailable[0].reason, /connect/i, listing.unavailable[0].reason)
  assert.match(listing.unavailable[0].reason, /closed/i, listing.unavailable[0].reason)
  assert.notEqual((await invoke(gw, { name: 'dies__echo', arguments: { text: 'x' } })).status, 500)
  await assertServing(gw, 'good', 'good')

  // Checked while the gateway still runs: the dead child must have been reaped, not just the app closed.
  const left = await until(children, (c) => !c.some((p) => p.cmdline.includes('stdio-exit.ts') || p.state === 'Z'))
  assert.deepEqual(left.filter((p) => p.cmdline.includes('stdio-exit.ts') || p.state === 'Z'), [], 'no child or zombie left')
})

test('a qualified name on a registered server that cannot be listed is a tool-level upstream error, not a 404', async (t) => {
  const good = await goodFixture(t)
  const gw = await app(t)
  await register(gw, 'good', { type: 'http', url: good.url })
  const modes: FaultMode[] = ['hang', 'html', 'status-500', 'not-jsonrpc']
  for (const mode of modes) await register(gw, mode, { type: 'http', url: (await faulty(t, mode)).url })
  await register(gw, 'dies', { type: 'stdio', ...stdioFixture('stdio-exit.ts') })
  for (const serverId of [...modes, 'dies']) {
    const r = await invoke(gw, { name: `${serverId}__echo`, arguments: { text: 'x' } })
    assertUpstreamFailure(r)
    // the server's HTML page is not handed to the model verbatim
    assert.doesNotMatch(r.json.output, /<html/i)
  }
  await assertServing(gw, 'good', 'good')
})

test('a server whose tools/list turns slow after the cache TTL: ' +
  'the listing serves the previous list within its deadline, calls keep working, the slow refresh lands later', { timeout: 60_000 }, async (t) => {
  let listDelayMs = 0
  let lists = 0
  const tools = [{ name: 'echo', description: 'echo', inputSchema: { type: 'object' as const, properties: { text: { type: 'string' } } } }]
  const fx = await startStreamableHttpFixture({
    factory: () => {
      const server = new Server({ name: 'slow-list', version: '1.0.0' }, { capabilities: { tools: {} } })
      server.setRequestHandler(ListToolsRequestSchema, async () => {
        lists++
        await sleep(listDelayMs)
        return { tools: lists === 1 ? tools : [...tools, { ...tools[0], name: 'echo2' }] }
      })
      server.setRequestHandler(CallToolRequestSchema, async (req) => ({ content: [{ type: 'text' as const, text: `slow-list:${String(req.params.arguments?.text)}` }] }))
      return server
    }
  })
  t.after(async () => await fx.close())
  const gw = await app(t, { MCP_TOOLS_TTL_MS: '1000', MCP_LIST_TIMEOUT_MS: '1000' })
  await register(gw, 'sl', { type: 'streamable_http', url: fx.url })
  const first = await listTools(gw, 'mcp=sl')
  assert.deepEqual(first.tools.map((x: { name: string }) => x.name), ['echo'])

  listDelayMs = 4000
  await sleep(1200) // past the TTL: the next listing refreshes, and the refresh outlasts the deadline
  const stale = await listTools(gw, 'mcp=sl')
  assert.deepEqual(stale.unavailable, [], JSON.stringify(stale.unavailable))
  assert.deepEqual(stale.tools.map((x: { name: string }) => x.name), ['echo'])
  const call = await invoke(gw, { name: 'echo', arguments: { text: 'meanwhile' } })
  assert.equal(call.json.output, 'slow-list:meanwhile', JSON.stringify(call.json))

  // The refresh was not abandoned: once it answers, listings show the new list.
  listDelayMs = 0
  // Until the refresh has landed everywhere a listing looks (the listed catalog and the resolver
  // that checks each listed name routes to it), a listing may briefly show echo2 under its
  // qualified name: still a name that routes to it. Wait for the settled state.
  const fresh = await until(
    async () => await listTools(gw, 'mcp=sl'),
    (l) => l.tools.length === 2 && l.tools.every((x: { name: string }) => !x.name.includes('__')),
    15_000
  )
  assert.deepEqual(fresh.tools.map((x: { name: string }) => x.name).sort(), ['echo', 'echo2'])
})
