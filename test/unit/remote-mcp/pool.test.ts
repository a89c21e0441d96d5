import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { McpClientPool } from '../../../src/remote-mcp/pool.js'
import type { McpClientPoolOptions } from '../../../src/remote-mcp/pool.js'
import { UpstreamError } from '../../../src/remote-mcp/errors.js'
import { ResponseBudget } from '../../../src/remote-mcp/response-limits.js'
import { waitUntil } from '../../../scripts/lib/proc.js'
import type { ConnectSpec } from '../../../src/remote-mcp/transport.js'
import type { Logger } from '../../../src/logger.js'
import {
  createPagedServer, minimalStdioFixture, startSseFixture, startStreamableHttpFixture, stdioFixture
} from '../../../scripts/lib/mcp-fixtures/index.js'

function recordingLogger (): Logger & { lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = []
  const push = (obj: Record<string, unknown>, msg?: string): void => { lines.push({ ...obj, msg }) }
  return { lines, debug: push, info: push, warn: push, error: push }
}

function makePool (t: { after: (fn: () => Promise<void>) => void }, overrides: Partial<McpClientPoolOptions> = {}): McpClientPool {
  const pool = new McpClientPool({
    connectTimeoutMs: 30_000,
    listTimeoutMs: 10_000,
    callTimeoutMs: 10_000,
    idleMs: 60_000,
    maxClients: 50,
    toolsTtlMs: 60_000,
    clientInfo: { name: 'tool-gateway-test', version: '0.0.0' },
    // The gateway's default transport (MCP_HTTP_TRANSPORT=lean); MCP_HTTP_TRANSPORT=sdk runs this file against the SDK's.
    httpTransport: process.env.MCP_HTTP_TRANSPORT === 'sdk' ? 'sdk' as const : 'lean' as const,
    ...overrides
  })
  t.after(async () => { await pool.close() })
  return pool
}

function textOf (result: { content?: unknown }): string {
  return (result.content as Array<{ text?: string }>).map((c) => c.text ?? '').join('\n')
}

/** Polls `check` until it holds; fails after `tries` rounds (bounded, never a timing assertion). */
async function eventually (check: () => boolean | Promise<boolean>, what: string, tries = 400): Promise<void> {
  for (let i = 0; i < tries; i++) {
    if (await check()) return
    await sleep(25)
  }
  assert.fail(`never happened: ${what}`)
}

/** Live child processes (zombies included) of this process, from /proc. */
function childPids (): number[] {
  const pids: number[] = []
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8')
      // Field 4 (ppid) comes after the parenthesised command, which may itself contain spaces.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      // tsx's own esbuild service is a child of the test runner, not of the pool.
      if (ppid === process.pid && !readFileSync(`/proc/${name}/cmdline`, 'utf8').includes('esbuild')) pids.push(Number(name))
    } catch {
      // The process ended while we were reading.
    }
  }
  return pids
}

async function assertUpstream (promise: Promise<unknown>, code: string, message?: RegExp): Promise<UpstreamError> {
  try {
    await promise
  } catch (err) {
    assert.ok(err instanceof UpstreamError, `expected UpstreamError, got ${String(err)}`)
    assert.equal(err.code, code, err.message)
    if (message) assert.match(err.message, message)
    return err
  }
  assert.fail(`expected ${code}`)
}

test('100 concurrent first calls share one connect (single-flight)', async (t) => {
  const fx = await startStreamableHttpFixture()
  t.after(() => fx.close())
  const pool = makePool(t)
  const spec: ConnectSpec = { type: 'streamable_http', url: fx.url }
  const lists = await Promise.all(Array.from({ length: 100 }, async () => await pool.listTools('github', spec)))
  assert.equal(fx.stats.sessions, 1)
  for (const tools of lists) assert.ok(tools.some((x) => x.name === 'echo'))
  const calls = await Promise.all(Array.from({ length: 100 }, async (_, i) => await pool.callTool('other', spec, 'echo', { text: String(i) })))
  assert.equal(fx.stats.sessions, 2, 'a second key got exactly one more session')
  assert.equal(textOf(calls[42] ?? {}), 'fixture:42')
  const stats = pool.stats()
  assert.equal(stats.totalClients, 2)
  assert.equal(stats.connectedClients, 2)
  assert.equal(stats.clients.github?.tools, lists[0]?.length)
  assert.equal(stats.clients.github?.type, 'streamable_http')
})

test('a changed config gets a new client and the old one is closed', async (t) => {
  const fx = await startStreamableHttpFixture()
  t.after(() => fx.close())
  const pool = makePool(t)
  await pool.listTools('s1', { type: 'streamable_http', url: fx.url, headers: { 'x-token': 'one' } })
  await pool.listTools('s1', { type: 'streamable_http', url: fx.url, headers: { 'x-token': 'two' } })
  assert.equal(fx.stats.sessions, 2)
  assert.equal(pool.stats().totalClients, 1)
  await eventually(() => fx.stats.activeSessions === 1, 'the old session is terminated')
})

test('tool lists are cached, paginated, refreshed on list_changed and after the TTL', async (t) => {
  const fx = await startStreamableHttpFixture()
  const paged = await startStreamableHttpFixture({ factory: () => createPagedServer({ tools: 25, pageSize: 10 }) })
  t.after(async () => { await fx.close(); await paged.close() })
  const pool = makePool(t)
  const spec: ConnectSpec = { type: 'streamable_http', url: fx.url }

  const pages = await pool.listTools('paged', { type: 'streamable_http', url: paged.url })
  assert.deepEqual(pages.map((x) => x.name), Array.from({ length: 25 }, (_, i) => `tool_${String(i).padStart(3, '0')}`))

  const first = await pool.listTools('fx', spec)
  const requests = fx.stats.requests
  assert.equal(await pool.listTools('fx', spec), first, 'served from the cache')
  assert.equal(fx.stats.requests, requests)

  fx.addTool('extra')
  await eventually(async () => (await pool.listTools('fx', spec)).some((x) => x.name === 'extra'), 'list_changed refresh')

  const ttlPool = makePool(t, { toolsTtlMs: 0 })
  await ttlPool.listTools('fx', spec)
  const before = fx.stats.requests
  await ttlPool.listTools('fx', spec)
  assert.ok(fx.stats.requests > before, 'an expired list is fetched again')
})

test('a failed refresh keeps the previous list and logs', async (t) => {
  const fx = await startStreamableHttpFixture()
  const logger = recordingLogger()
  const pool = makePool(t, { toolsTtlMs: 0, logger })
  const spec: ConnectSpec = { type: 'streamable_http', url: fx.url }
  const good = await pool.listTools('k', spec)
  await fx.close()
  assert.deepEqual(await pool.listTools('k', spec), good)
  assert.ok(logger.lines.some((l) => String(l.msg).includes('keeping the previous list')))
  // A cancelled caller gets a cancellation, and the cache still holds the good list.
  await assertUpstream(pool.listTools('k', spec, { signal: AbortSignal.abort() }), 'GW_CANCELLED')
  assert.equal(pool.stats().clients.k?.tools, good.length)
})

test('callTool returns the raw result; isError is a value, not an exception', async (t) => {
  const fx = await startStreamableHttpFixture({ marker: 'm' })
  t.after(() => fx.close())
  const pool = makePool(t)
  const spec: ConnectSpec = { type: 'streamable_http', url: fx.url }
  assert.equal(textOf(await pool.callTool('k', spec, 'echo', { text: 'hi' })), 'm:hi')
  const add = await pool.callTool('k', spec, 'add', { a: 2, b: 3 })
  assert.deepEqual(add.structuredContent, { sum: 5 })
  const fail = await pool.callTool('k', spec, 'fail', { message: 'nope' })
  assert.equal(fail.isError, true)
  assert.equal(textOf(fail), 'nope')
  const thrown = await pool.callTool('k', spec, 'throw', { message: 'kaboom' })
  assert.equal(thrown.isError, true)
  assert.match(textOf(thrown), /kaboom/)
})

test('call timeout and caller cancellation are forwarded to the server', async (t) => {
  const fx = await startStreamableHttpFixture()
  t.after(() => fx.close())
  const pool = makePool(t)
  const spec: ConnectSpec = { type: 'streamable_http', url: fx.url }
  await assertUpstream(pool.callTool('k', spec, 'slow', { ms: 60_000 }, { timeoutMs: 200 }), 'GW_UPSTREAM_TIMEOUT', /timed out after 200 ms/)
  await eventually(() => fx.stats.cancelled === 1, 'the server saw the timeout as a cancellation')

  const ac = new AbortController()
  const call = pool.callTool('k', spec, 'slow', { ms: 60_000 }, { signal: ac.signal })
  await eventually(() => fx.stats.toolCalls === 2, 'the slow call reached the server')
  ac.abort()
  await assertUpstream(call, 'GW_CANCELLED')
  await eventually(() => fx.stats.cancelled === 2, 'the server saw the cancellation')

  // A spec's own timeoutMs applies when the call gives none.
  await assertUpstream(pool.callTool('k2', { ...spec, timeoutMs: 150 }, 'slow', { ms: 60_000 }), 'GW_UPSTREAM_TIMEOUT', /150 ms/)
  // The connection survived all of that.
  assert.equal(textOf(await pool.callTool('k', spec, 'echo', { text: 'still' })), 'fixture:still')
})

test('stale session (404): tools/list is re-initialised and retried, tools/call is not replayed', async (t) => {
  const fx = await startStreamableHttpFixture()
  t.after(() => fx.close())
  const pool = makePool(t, { toolsTtlMs: 0 })
  const spec: ConnectSpec = { type: 'streamable_http', url: fx.url }
  await pool.listTools('k', spec)
  assert.equal(fx.stats.sessions, 1)

  await fx.forgetSessions()
  assert.ok((await pool.listTools('k', spec)).some((x) => x.name === 'echo'))
  assert.ok(fx.stats.staleSessionRequests >= 1, 'the old session id was presented and refused with 404')
  assert.equal(fx.stats.sessions, 2, 'one fresh session')

  await fx.forgetSessions()
  const calls = fx.stats.toolCalls
  await assertUpstream(pool.callTool('k', spec, 'echo', { text: 'b' }), 'GW_UPSTREAM_ERROR', /HTTP 404.*not replayed/)
  assert.equal(fx.stats.toolCalls, calls, 'the call was not replayed on a new session')
  assert.equal(fx.stats.sessions, 2, 'no session was opened to replay it')
  assert.equal(textOf(await pool.callTool('k', spec, 'echo', { text: 'c' })), 'fixture:c', 'the next call uses a fresh session')
  assert.equal(fx.stats.sessions, 3)
})

test('server restarted on the same port: tools/list recovers, tools/call fails once and is not replayed', async (t) => {
  let fx = await startStreamableHttpFixture({ marker: 'v1' })
  t.after(() => fx.close())
  const pool = makePool(t, { toolsTtlMs: 0 })
  const spec: ConnectSpec = { type: 'streamable_http', url: fx.url }
  assert.equal(textOf(await pool.callTool('k', spec, 'echo', { text: 'a' })), 'v1:a')

  await fx.close()
  fx = await startStreamableHttpFixture({ port: fx.port, marker: 'v2' })
  assert.ok((await pool.listTools('k', spec)).some((x) => x.name === 'echo'))
  assert.equal(fx.stats.sessions, 1)

  await fx.close()
  fx = await startStreamableHttpFixture({ port: fx.port, marker: 'v3' })
  await assertUpstream(pool.callTool('k', spec, 'echo', { text: 'b' }), 'GW_UPSTREAM_ERROR', /not replayed/)
  assert.equal(fx.stats.toolCalls, 0, 'the restarted server never ran the failed call')
  assert.equal(textOf(await pool.callTool('k', spec, 'echo', { text: 'c' })), 'v3:c')
  assert.equal(fx.stats.toolCalls, 1)
  assert.equal(fx.stats.sessions, 1)
})

test('SSE: a server that drops its sessions gets a fresh one on the next request', async (t) => {
  const fx = await startSseFixture({ marker: 'sse' })
  t.after(() => fx.close())
  const pool = makePool(t)
  const spec: ConnectSpec = { type: 'sse', url: fx.url }
  assert.equal(textOf(await pool.callTool('s', spec, 'echo', { text: '1' })), 'sse:1')
  await fx.forgetSessions()
  // The broken stream is noticed asynchronously; the call made meanwhile may fail (never replayed).
  await eventually(async () => {
    try {
      return textOf(await pool.callTool('s', spec, 'echo', { text: '2' })) === 'sse:2'
    } catch (err) {
      assert.ok(err instanceof UpstreamError && err.code === 'GW_UPSTREAM_ERROR', String(err))
      return false
    }
  }, 'a fresh SSE session')
  assert.ok(fx.stats.sessions >= 2)
})

test('idle clients are closed, and the pool is bounded (LRU)', async (t) => {
  const fx = await startStreamableHttpFixture()
  t.after(() => fx.close())
  const spec: ConnectSpec = { type: 'streamable_http', url: fx.url }
  const idlePool = makePool(t, { idleMs: 50 })
  await idlePool.listTools('k', spec)
  await eventually(() => idlePool.stats().totalClients === 0, 'the idle client is closed')
  await eventually(() => fx.stats.activeSessions === 0, 'its session is terminated')

  const small = makePool(t, { maxClients: 2 })
  await small.listTools('a', spec)
  await small.listTools('b', spec)
  await small.listTools('a', spec)
  await small.listTools('c', spec)
  assert.deepEqual(Object.keys(small.stats().clients).sort(), ['a', 'c'], 'b was the least recently used')
  await eventually(() => fx.stats.activeSessions === 2, 'the evicted client was closed')
})

test('invalidate: exact keys, explicit prefixes, predicates; user 1 never drops user 1-2', async (t) => {
  const fx = await startStreamableHttpFixture()
  t.after(() => fx.close())
  const pool = makePool(t)
  const spec: ConnectSpec = { type: 'streamable_http', url: fx.url }
  for (const key of ['gh', 'gh2', 'user_1_service_gh', 'user_1_service_db', 'user_1-2_service_gh']) await pool.listTools(key, spec)
  assert.equal(await pool.invalidate('gh'), 1)
  assert.equal(await pool.invalidate({ prefix: 'user_1_service_' }), 2)
  assert.deepEqual(Object.keys(pool.stats().clients).sort(), ['gh2', 'user_1-2_service_gh'])
  assert.equal(await pool.invalidate((k) => k.startsWith('user_')), 1)
  assert.deepEqual(Object.keys(pool.stats().clients), ['gh2'])
  // The next use reconnects lazily.
  assert.ok((await pool.listTools('gh', spec)).length > 0)
})

test('invalidate and a config change retire a busy client: its running calls finish, new calls get a new client, it closes after the last call', async (t) => {
  const fx = await startStreamableHttpFixture()
  t.after(() => fx.close())
  const pool = makePool(t)
  const spec: ConnectSpec = { type: 'streamable_http', url: fx.url }
  // invalidate (a registry change, or a resync after a Redis reconnect) while a call runs
  const running = pool.callTool('k', spec, 'slow', { ms: 1500 })
  await waitUntil('fx.stats.toolCalls === 1', () => fx.stats.toolCalls === 1)
  assert.equal(await pool.invalidate('k'), 1)
  assert.deepEqual(Object.keys(pool.stats().clients), [])
  assert.equal(textOf(await pool.callTool('k', spec, 'echo', { text: 'new' })), 'fixture:new')
  assert.equal(fx.stats.sessions, 2, 'the new call did not reuse the retired client')
  assert.equal(textOf(await running), 'slept 1500')
  await waitUntil('fx.stats.activeSessions === 1', () => fx.stats.activeSessions === 1)

  // a changed config (same key) while a call runs on the old one
  const again = pool.callTool('k', spec, 'slow', { ms: 1500 })
  await waitUntil('fx.stats.toolCalls === 3', () => fx.stats.toolCalls === 3)
  const changed: ConnectSpec = { ...spec, headers: { 'x-v': '2' } }
  assert.equal(textOf(await pool.callTool('k', changed, 'echo', { text: 'v2' })), 'fixture:v2')
  assert.equal(textOf(await again), 'slept 1500')
  await waitUntil('fx.stats.activeSessions === 1', () => fx.stats.activeSessions === 1)
  assert.equal(fx.stats.sessions, 3)

  // pool.close() does not wait for a retired client's calls: they are cut off, nothing stays open. The
  // rejection is expected before close() runs: the lean transport fails the call before close() resolves.
  const cut = assert.rejects(pool.callTool('k', changed, 'slow', { ms: 30_000 }), UpstreamError)
  await waitUntil('fx.stats.toolCalls === 5', () => fx.stats.toolCalls === 5)
  await pool.invalidate('k')
  await pool.close()
  await cut
  await waitUntil('fx.stats.activeSessions === 0', () => fx.stats.activeSessions === 0)
})

test('connect failures are GW_UPSTREAM_CONNECT, and stdio children are reaped', async (t) => {
  const pool = makePool(t, { connectTimeoutMs: 3000 })
  await assertUpstream(pool.listTools('exit', { type: 'stdio', ...stdioFixture('stdio-exit.ts') }), 'GW_UPSTREAM_CONNECT')
  await assertUpstream(pool.listTools('hang', { type: 'stdio', ...stdioFixture('stdio-hang.ts') }), 'GW_UPSTREAM_CONNECT', /timed out after 3000 ms/)
  await assertUpstream(pool.listTools('nope', { type: 'stdio', command: '/nonexistent/mcp-server' }), 'GW_UPSTREAM_CONNECT')
  const closed = createServer()
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve))
  const port = (closed.address() as AddressInfo).port
  await new Promise<void>((resolve) => closed.close(() => resolve()))
  await assertUpstream(pool.listTools('refused', { type: 'streamable_http', url: `http://127.0.0.1:${port}/mcp` }), 'GW_UPSTREAM_CONNECT')
  await eventually(() => childPids().length === 0, 'no child process left')
})

test('error messages never contain header or env values', async (t) => {
  const server = createServer((req, res) => {
    res.writeHead(500, { 'content-type': 'text/plain' })
    res.end(`bad token ${String(req.headers.authorization)}`)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => new Promise<void>((resolve) => { server.close(() => resolve()); server.closeAllConnections() }))
  const pool = makePool(t)
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`
  const err = await assertUpstream(
    pool.listTools('k', { type: 'streamable_http', url, headers: { Authorization: 'Bearer top-secret-value' } }),
    'GW_UPSTREAM_CONNECT'
  )
  assert.doesNotMatch(err.message, /top-secret-value/)
  assert.match(err.message, /\[redacted\]/, 'the server did echo it; the pool redacted it')
})

test('stdio through the pool: calls work, a crash mid-call fails only that call, close kills the child', async (t) => {
  const pool = makePool(t)
  const spec: ConnectSpec = { type: 'stdio', ...stdioFixture('stdio-server.ts', ['st']) }
  assert.equal(textOf(await pool.callTool('st', spec, 'echo', { text: 'x' })), 'st:x')
  assert.equal(childPids().length, 1)
  await assertUpstream(pool.callTool('st', spec, 'exit', {}), 'GW_UPSTREAM_ERROR')
  assert.equal(textOf(await pool.callTool('st', spec, 'echo', { text: 'y' })), 'st:y', 'the next call respawns')
  await pool.close()
  await eventually(() => childPids().length === 0, 'the child is gone after close')
  await assertUpstream(pool.listTools('st', spec), 'GW_UPSTREAM_ERROR', /closed/)
})

test('SSE through the pool', async (t) => {
  const fx = await startSseFixture({ marker: 'sse' })
  t.after(() => fx.close())
  const pool = makePool(t)
  const spec: ConnectSpec = { type: 'sse', url: fx.url }
  assert.ok((await pool.listTools('s', spec)).some((x) => x.name === 'image'))
  assert.equal(textOf(await pool.callTool('s', spec, 'echo', { text: 'z' })), 'sse:z')
  assert.equal(fx.stats.sessions, 1)
})

test('2,000 calls through one pooled client: no MaxListenersExceededWarning, listeners bounded', async (t) => {
  const fx = await startStreamableHttpFixture()
  t.after(() => fx.close())
  const warnings: string[] = []
  const onWarning = (w: Error): void => { if (w.name === 'MaxListenersExceededWarning') warnings.push(w.message) }
  process.on('warning', onWarning)
  t.after(() => { process.off('warning', onWarning) })
  const pool = makePool(t)
  const spec: ConnectSpec = { type: 'streamable_http', url: fx.url }
  const caller = new AbortController() // one long-lived caller signal, as a server shutdown signal would be
  let maxListeners = 0
  for (let i = 0; i < 2000; i++) {
    await pool.callTool('soak', spec, 'echo', { text: 'x' }, { signal: caller.signal })
    maxListeners = Math.max(maxListeners, pool.stats().clients.soak?.abortListeners ?? 0)
  }
  await new Promise((resolve) => setImmediate(resolve))
  assert.deepEqual(warnings, [])
  assert.ok(maxListeners <= 2, `transport signal had ${maxListeners} listeners`)
  assert.equal(fx.stats.sessions, 1)
  assert.equal(fx.stats.toolCalls, 2000)
})

test('1,000 stdio connect/close cycles leave no child process', async (t) => {
  const pool = makePool(t, { maxClients: 1000 })
  const spec: ConnectSpec = { type: 'stdio', ...minimalStdioFixture() }
  const concurrency = 20
  let next = 0
  let peak = 0
  const worker = async (): Promise<void> => {
    while (next < 1000) {
      const key = `cycle-${next++}`
      const tools = await pool.listTools(key, spec)
      assert.equal(tools[0]?.name, 'noop')
      peak = Math.max(peak, childPids().length)
      assert.equal(await pool.invalidate(key), 1)
    }
  }
  await Promise.all(Array.from({ length: concurrency }, worker))
  assert.equal(pool.stats().totalClients, 0)
  assert.ok(peak <= concurrency + 1, `at most one child per worker at a time, saw ${peak}`)
  await eventually(() => childPids().length === 0, 'every child reaped')
})

test('stdio first start: a longer first-connect deadline, starting() while it runs, a failed warm-up kept as the next attempt\'s lastError', async (t) => {
  // The fixture sleeps 1.5 s before serving; the normal connect deadline is 100 ms.
  const slow = (first: number): { pool: McpClientPool, spec: ConnectSpec } => ({
    pool: makePool(t, { connectTimeoutMs: 100, stdioFirstConnectTimeoutMs: first }),
    spec: { type: 'stdio', ...stdioFixture('stdio-server.ts', ['W']), env: { FIXTURE_START_DELAY_MS: '1500' } }
  })

  // A deadline long enough: warm() connects and lists once, starting() says so meanwhile and not after.
  const ok = slow(120_000)
  assert.equal(ok.pool.starting('w', ok.spec), undefined)
  const warming = ok.pool.warm('w', ok.spec)
  assert.deepEqual(ok.pool.starting('w', ok.spec), { lastError: undefined })
  await warming
  assert.equal(ok.pool.starting('w', ok.spec), undefined)
  assert.ok(ok.pool.cachedTools('w', ok.spec)?.some((tool) => tool.name === 'echo'))
  assert.equal(ok.pool.stats().clients.w?.connected, true)

  // A first-connect deadline shorter than the start: warm() fails without throwing, and the retry
  // the next use starts reports that failure while it runs.
  const failing = slow(100)
  await failing.pool.warm('w', failing.spec)
  assert.equal(failing.pool.stats().clients.w?.connected, false)
  const retry = failing.pool.listTools('w', failing.spec)
  retry.catch(() => {})
  const state = failing.pool.starting('w', failing.spec)
  assert.match(state?.lastError ?? '', /tim/i, JSON.stringify(state))
  await assert.rejects(retry, (err: unknown) => err instanceof UpstreamError)
})

test('response limits: lean streamable HTTP answers past the bound are GW_UPSTREAM_TOO_LARGE; legacy SSE drops the connection at once; ' +
  'the budget is given back and the clients keep working', async (t) => {
  const budget = new ResponseBudget({ totalBytes: 16 * 1024 * 1024, ownerBytes: 4 * 1024 * 1024 })
  const pool = makePool(t, { httpTransport: 'lean', callTimeoutMs: 30_000, responseLimits: { maxMessageBytes: 1024 * 1024, budget, owner: (key) => `tenant:${key}` } })
  const http = await startStreamableHttpFixture({ marker: 'h' })
  t.after(() => http.close())
  const sse = await startSseFixture({ marker: 's' })
  t.after(() => sse.close())
  for (const [key, spec] of [['h', { type: 'streamable_http', url: http.url }], ['s', { type: 'sse', url: sse.url }]] as Array<[string, ConnectSpec]>) {
    assert.equal(textOf(await pool.callTool(key, spec, 'big', { chars: 500_000 })).length, 500_000, `${key}: an answer under the bound`)
    const started = Date.now()
    const err = await pool.callTool(key, spec, 'big', { chars: 20_000_000 }).then(() => undefined, (e: unknown) => e)
    assert.ok(err instanceof UpstreamError, String(err))
    if (key === 'h') {
      assert.equal(err.code, 'GW_UPSTREAM_TOO_LARGE', err.message)
    } else {
      // The legacy SSE stream carries every answer: cut, it is a dead connection (documented in the README).
      assert.equal(err.code, 'GW_UPSTREAM_ERROR', err.message)
      assert.match(err.message, /connection to the MCP server was lost/)
    }
    assert.ok(Date.now() - started < 25_000, `${key}: failed at once, not at the call's timeout`)
    assert.equal(budget.usedBytes(), 0, `${key}: the budget was given back`)
    assert.equal(textOf(await pool.callTool(key, spec, 'echo', { text: 'again' })), `${key}:again`, `${key}: works afterwards`)
  }
  assert.equal(pool.resilience().breakerOpens, 0)
})
