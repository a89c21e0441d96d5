/**
 * Remote MCP resilience through the whole gateway, against real MCP servers on loopback: a
 * read-only or idempotent tool whose call failed in transport before any answer is retried once
 * on a fresh connection (others never), and a server that keeps failing is cut off by its
 * circuit breaker (fail fast without touching the network, listed unavailable with retryAt,
 * probed half-open, reset by a registry change). Outcomes and counters are asserted, never
 * durations; waits are generous polls.
 */
import { test } from 'node:test'
import type { TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { createServer } from 'node:net'
import type { Server as NetServer, Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import type { FastifyInstance } from 'fastify'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import * as z from 'zod'
import { buildTestApp } from '../../helpers/app.js'
import { startStreamableHttpFixture } from '../../../scripts/lib/mcp-fixtures/index.js'
import type { FixtureCounters, HttpFixture } from '../../../scripts/lib/mcp-fixtures/index.js'

const ENV = {
  MCP_CONNECT_TIMEOUT_MS: '2000',
  MCP_LIST_TIMEOUT_MS: '2000',
  MCP_CALL_TIMEOUT_MS: '5000',
  LOAD_EXAMPLES: 'false'
}

const TSX_IMPORT = import.meta.resolve('tsx')
const CRASH_FIXTURE = fileURLToPath(new URL('../../../scripts/lib/mcp-fixtures/faulty/stdio-crash.ts', import.meta.url))

/** Per-tool executions, across every session of a fixture. */
type Runs = Record<'lookup' | 'upsert' | 'write', number>

/**
 * A server with three tools: `lookup` (readOnlyHint), `upsert` (idempotentHint) and `write`
 * (no annotations). `lookup {fail: true}` throws (the server answers with an error result).
 */
function annotatedServer (runs: Runs): (counters: FixtureCounters) => McpServer {
  return (counters) => {
    const server = new McpServer({ name: 'annotated', version: '1.0.0' })
    server.registerTool('lookup', {
      description: 'Reads a key.',
      inputSchema: { key: z.string(), fail: z.boolean().optional() },
      annotations: { readOnlyHint: true }
    }, async ({ key, fail }) => {
      counters.toolCalls++
      runs.lookup++
      if (fail === true) throw new Error('lookup failed on purpose')
      return { content: [{ type: 'text' as const, text: `value-of-${key}` }] }
    })
    server.registerTool('upsert', {
      description: 'Sets a key (same result when repeated).',
      inputSchema: { key: z.string() },
      annotations: { idempotentHint: true, readOnlyHint: false }
    }, async ({ key }) => {
      counters.toolCalls++
      runs.upsert++
      return { content: [{ type: 'text' as const, text: `set-${key}` }] }
    })
    server.registerTool('write', {
      description: 'Appends (not safe to repeat).',
      inputSchema: { key: z.string() }
    }, async ({ key }) => {
      counters.toolCalls++
      runs.write++
      return { content: [{ type: 'text' as const, text: `wrote-${key}` }] }
    })
    return server
  }
}

async function register (gw: FastifyInstance, serverId: string, config: Record<string, unknown>): Promise<void> {
  const res = await gw.inject({ method: 'PUT', url: `/mcp/servers/${serverId}`, payload: config })
  assert.ok(res.statusCode === 201 || res.statusCode === 200, `register ${serverId}: ${res.statusCode} ${res.body}`)
}

async function invoke (gw: FastifyInstance, name: string, args: Record<string, unknown>): Promise<any> {
  const res = await gw.inject({ method: 'POST', url: '/invoke', payload: { name, arguments: args } })
  assert.equal(res.statusCode, 200, res.body)
  return res.json()
}

async function status (gw: FastifyInstance): Promise<any> {
  const res = await gw.inject({ method: 'GET', url: '/status' })
  assert.equal(res.statusCode, 200, res.body)
  return res.json()
}

async function metrics (gw: FastifyInstance): Promise<string> {
  const res = await gw.inject({ method: 'GET', url: '/metrics' })
  assert.equal(res.statusCode, 200)
  return res.body
}

function metricValue (text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `))
  return line === undefined ? undefined : Number(line.slice(series.length + 1))
}

/** A TCP listener that accepts and at once resets every connection: a server that is down but whose port answers. */
async function deadListener (t: TestContext, port: number): Promise<{ connections: () => number, close: () => Promise<void> }> {
  let connections = 0
  const sockets = new Set<Socket>()
  const server: NetServer = createServer((socket) => {
    connections++
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
    socket.on('error', () => {})
    socket.destroy()
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, '127.0.0.1', () => resolve())
  })
  let closed = false
  const close = async (): Promise<void> => {
    if (closed) return
    closed = true
    for (const s of sockets) s.destroy()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  }
  t.after(close)
  return { connections: () => connections, close }
}

async function until<T> (check: () => Promise<T>, ok: (v: T) => boolean, ms = 15_000): Promise<T> {
  const end = Date.now() + ms
  let value = await check()
  while (!ok(value) && Date.now() < end) {
    await sleep(50)
    value = await check()
  }
  return value
}

test('a read-only or idempotent tool whose session is gone is retried once on a fresh connection; ' +
  'a tool without those hints and a server-side error are never retried', async (t) => {
  const runs: Runs = { lookup: 0, upsert: 0, write: 0 }
  let fx: HttpFixture = await startStreamableHttpFixture({ factory: annotatedServer(runs) })
  t.after(async () => await fx.close())
  const gw = await buildTestApp(t, { env: ENV })
  await register(gw, 'kv', { type: 'http', url: fx.url })

  assert.equal((await invoke(gw, 'kv__lookup', { key: 'a' })).output, 'value-of-a')
  assert.equal((await status(gw)).remoteMcp.retries, 0)

  // The server forgets its sessions (an expiry, a restart behind a proxy): the pooled connection's
  // next request gets 404 before anything runs. Read-only: retried on a new session, runs once.
  await fx.forgetSessions()
  const read = await invoke(gw, 'kv__lookup', { key: 'b' })
  assert.equal(read.isError, false, JSON.stringify(read))
  assert.equal(read.output, 'value-of-b')
  assert.ok(fx.stats.staleSessionRequests >= 1, 'the first attempt met the dead session')
  assert.equal(runs.lookup, 2, 'the tool ran once per successful call')
  assert.equal((await status(gw)).remoteMcp.retries, 1)

  // Idempotent (not read-only): retried too.
  await fx.forgetSessions()
  const upsert = await invoke(gw, 'kv__upsert', { key: 'c' })
  assert.equal(upsert.output, 'set-c', JSON.stringify(upsert))
  assert.equal(runs.upsert, 1)
  assert.equal((await status(gw)).remoteMcp.retries, 2)

  // No hints: the same failure is final (GW_UPSTREAM_ERROR) and the server never ran it.
  await fx.forgetSessions()
  const write = await invoke(gw, 'kv__write', { key: 'd' })
  assert.equal(write.isError, true, JSON.stringify(write))
  assert.equal(write.error.code, 'GW_UPSTREAM_ERROR')
  assert.equal(runs.write, 0, 'not replayed')
  assert.equal((await status(gw)).remoteMcp.retries, 2)
  assert.equal((await invoke(gw, 'kv__write', { key: 'e' })).output, 'wrote-e', 'the next call reconnects')
  assert.equal(runs.write, 1)

  // The server answered with an error: a response, never retried.
  const failed = await invoke(gw, 'kv__lookup', { key: 'x', fail: true })
  assert.equal(failed.isError, true)
  assert.equal(runs.lookup, 3, 'ran exactly once')
  assert.equal((await status(gw)).remoteMcp.retries, 2)

  // A restart on the same port: the read-only call still succeeds, and ran exactly once.
  const port = fx.port
  await fx.close()
  fx = await startStreamableHttpFixture({ port, factory: annotatedServer(runs) })
  const afterRestart = await invoke(gw, 'kv__lookup', { key: 'r' })
  assert.equal(afterRestart.output, 'value-of-r', JSON.stringify(afterRestart))
  assert.equal(runs.lookup, 4)
  // Whether the broken connection was noticed before the call (no retry needed) or by it
  // (one retry) depends on when the old event stream's break was seen: either is correct.
  const retries = (await status(gw)).remoteMcp.retries
  assert.ok(retries === 2 || retries === 3, `retries ${String(retries)}`)
  assert.equal(metricValue(await metrics(gw), 'gateway_mcp_retries_total'), retries)
})

test('a server that keeps failing opens its breaker: calls fail fast with GW_UPSTREAM_UNAVAILABLE without touching the network, ' +
  'listed unavailable with retryAt; a failed probe reopens it, a good one closes it', { timeout: 60_000 }, async (t) => {
  let fx: HttpFixture = await startStreamableHttpFixture({ marker: 'br' })
  t.after(async () => await fx.close())
  const gw = await buildTestApp(t, { env: { ...ENV, MCP_BREAKER_FAILURES: '3', MCP_BREAKER_WINDOW_MS: '60000', MCP_BREAKER_OPEN_MS: '1500' } })
  await register(gw, 'br', { type: 'http', url: fx.url })
  assert.equal((await invoke(gw, 'br__echo', { text: 'up' })).output, 'br:up')

  const port = fx.port
  await fx.close()
  const dead = await deadListener(t, port)
  for (let i = 0; i < 3; i++) {
    const r = await invoke(gw, 'br__echo', { text: `down-${i}` })
    assert.equal(r.isError, true, JSON.stringify(r))
    assert.equal(r.error.code, 'GW_UPSTREAM_ERROR', JSON.stringify(r))
  }
  const st = await status(gw)
  const breaker = st.remoteMcp.breakers.find((b: any) => b.server === 'br')
  assert.equal(breaker?.state, 'open', JSON.stringify(st.remoteMcp))
  assert.equal(breaker.consecutiveFailures, 3)
  assert.equal(breaker.pool, 'global')
  assert.ok(Date.parse(breaker.retryAt) > Date.parse(breaker.openedAt), JSON.stringify(breaker))
  assert.equal(st.remoteMcp.breakerOpens, 1)

  // Open: nothing reaches the port, calls and listings alike.
  const reached = dead.connections()
  assert.ok(reached >= 1, 'the failures did dial the dead port')
  for (let i = 0; i < 3; i++) {
    const r = await invoke(gw, 'br__echo', { text: 'fast' })
    assert.equal(r.isError, true)
    assert.equal(r.error.code, 'GW_UPSTREAM_UNAVAILABLE', JSON.stringify(r))
    assert.match(r.error.message, /circuit breaker.*tried again after \d{4}-\d\d-\d\dT/, r.error.message)
    assert.match(r.output, /^TOOL_ERROR: .*UpstreamUnavailable/)
  }
  const listing = await gw.inject({ method: 'GET', url: '/tools?mcp=br' })
  assert.equal(listing.statusCode, 200, listing.body)
  const unavailable = listing.json().unavailable
  assert.equal(unavailable.length, 1, listing.body)
  assert.equal(unavailable[0].serverId, 'br')
  assert.match(unavailable[0].reason, /circuit breaker/)
  assert.equal(unavailable[0].retryAt, breaker.retryAt)
  assert.equal(dead.connections(), reached, 'no connection attempt while open')
  const text = await metrics(gw)
  assert.equal(metricValue(text, 'gateway_mcp_breaker_state{server="br"}'), 2)
  assert.equal(metricValue(text, 'gateway_mcp_breakers{pool="global",state="open"}'), 1)
  assert.equal(metricValue(text, 'gateway_mcp_breaker_open_total'), 1)

  // Past the open period, still down: one probe dials, fails, and the breaker reopens.
  await sleep(1600)
  // (The probe may be the listing that resolves the name: then the call itself fails fast.)
  const probe = await invoke(gw, 'br__echo', { text: 'probe' })
  assert.ok(['GW_UPSTREAM_ERROR', 'GW_UPSTREAM_UNAVAILABLE'].includes(probe.error?.code), JSON.stringify(probe))
  assert.ok(dead.connections() > reached, 'the probe dialled')
  const reopened = (await status(gw)).remoteMcp
  assert.equal(reopened.breakers.find((b: any) => b.server === 'br')?.state, 'open', JSON.stringify(reopened))
  assert.equal(reopened.breakerOpens, 2)
  assert.equal((await invoke(gw, 'br__echo', { text: 'fast' })).error?.code, 'GW_UPSTREAM_UNAVAILABLE')

  // Back up: after the open period the probe succeeds and closes the breaker.
  await dead.close()
  fx = await startStreamableHttpFixture({ port, marker: 'br' })
  const back = await until(async () => await invoke(gw, 'br__echo', { text: 'back' }), (r) => r.isError === false)
  assert.equal(back.output, 'br:back', JSON.stringify(back))
  const closed = await status(gw)
  assert.equal(closed.remoteMcp.breakers.find((b: any) => b.server === 'br'), undefined, JSON.stringify(closed.remoteMcp))
  assert.equal(closed.remoteMcp.openBreakers, 0)
  assert.equal((await invoke(gw, 'br__echo', { text: 'again' })).output, 'br:again')
  const listed = (await gw.inject({ method: 'GET', url: '/tools?mcp=br' })).json()
  assert.deepEqual(listed.unavailable, [])
  assert.equal(metricValue(await metrics(gw), 'gateway_mcp_breaker_state{server="br"}'), undefined, 'a closed breaker leaves no series')
})

test('a registry change of the server resets its open breaker; tool-level errors never open it', { timeout: 60_000 }, async (t) => {
  const fx = await startStreamableHttpFixture({ marker: 'rc' })
  t.after(async () => await fx.close())
  const gw = await buildTestApp(t, { env: { ...ENV, MCP_BREAKER_FAILURES: '2', MCP_BREAKER_OPEN_MS: '600000' } })
  await register(gw, 'rc', { type: 'http', url: fx.url })

  // isError results (the tool failed, the server is fine) do not count.
  for (let i = 0; i < 4; i++) assert.equal((await invoke(gw, 'rc__fail', { message: 'no' })).isError, true)
  assert.deepEqual((await status(gw)).remoteMcp.breakers, [])

  const port = fx.port
  await fx.close()
  const dead = await deadListener(t, port)
  for (let i = 0; i < 2; i++) assert.equal((await invoke(gw, 'rc__echo', { text: 'x' })).error?.code, 'GW_UPSTREAM_ERROR')
  assert.equal((await invoke(gw, 'rc__echo', { text: 'x' })).error?.code, 'GW_UPSTREAM_UNAVAILABLE')
  const reached = dead.connections()

  // A new config (here a timeout) is a new server as far as the breaker goes: it is dialled again.
  await register(gw, 'rc', { type: 'http', url: `http://127.0.0.1:${port}/mcp`, timeoutMs: 4000 })
  const afterChange = await until(async () => await invoke(gw, 'rc__echo', { text: 'y' }), (r) => r.error?.code !== 'GW_UPSTREAM_UNAVAILABLE')
  assert.equal(afterChange.error?.code, 'GW_UPSTREAM_ERROR', JSON.stringify(afterChange))
  assert.ok(dead.connections() > reached, 'the changed server was dialled')
})

test('a read-only tool that runs past its timeout is not retried, and tool timeouts never open the breaker', { timeout: 60_000 }, async (t) => {
  let runs = 0
  const fx = await startStreamableHttpFixture({
    factory: (counters) => {
      const server = new McpServer({ name: 'slow-reader', version: '1.0.0' })
      server.registerTool('scan', {
        description: 'Reads slowly.',
        inputSchema: { ms: z.number().int().min(0) },
        annotations: { readOnlyHint: true }
      }, async ({ ms }, extra) => {
        counters.toolCalls++
        runs++
        await sleep(ms, undefined, { signal: extra.signal }).catch(() => {})
        return { content: [{ type: 'text' as const, text: `scanned ${ms}` }] }
      })
      return server
    }
  })
  t.after(async () => await fx.close())
  const gw = await buildTestApp(t, { env: { ...ENV, MCP_BREAKER_FAILURES: '2' } })
  await register(gw, 'sr', { type: 'http', url: fx.url, timeoutMs: 300 })

  for (let i = 1; i <= 3; i++) {
    const r = await invoke(gw, 'sr__scan', { ms: 5000 })
    assert.equal(r.error?.code, 'GW_TOOL_TIMEOUT', JSON.stringify(r))
    assert.equal(runs, i, 'each timed-out call ran once')
  }
  const st = (await status(gw)).remoteMcp
  assert.equal(st.retries, 0)
  assert.deepEqual(st.breakers, [])
  assert.equal((await invoke(gw, 'sr__scan', { ms: 1 })).output, 'scanned 1')
})

test('a tenant server\'s breaker is its own (keyed by tenant) and reaches /metrics only as a count, ' +
  'never by userId or serverId', { timeout: 60_000 }, async (t) => {
  const fx = await startStreamableHttpFixture({ marker: 'tn' })
  t.after(async () => await fx.close())
  const gw = await buildTestApp(t, { env: { ...ENV, EGRESS_ALLOW: '127.0.0.1/32', MCP_BREAKER_FAILURES: '2', MCP_BREAKER_OPEN_MS: '600000' } })
  const put = async (userId: string): Promise<void> => {
    const res = await gw.inject({ method: 'PUT', url: `/users/${userId}/mcp/servers/notes-zebra`, payload: { type: 'http', url: fx.url } })
    assert.equal(res.statusCode, 201, res.body)
  }
  await put('tenant-quokka')
  await put('tenant-okapi')
  const call = async (userId: string): Promise<any> => {
    const res = await gw.inject({ method: 'POST', url: '/invoke', payload: { name: `user_${userId}_tool_echo`, userId, arguments: { text: 'x' } } })
    assert.equal(res.statusCode, 200, res.body)
    return res.json()
  }
  assert.equal((await call('tenant-quokka')).output, 'tn:x')
  assert.equal((await call('tenant-okapi')).output, 'tn:x')

  const port = fx.port
  await fx.close()
  await deadListener(t, port)
  for (let i = 0; i < 2; i++) assert.equal((await call('tenant-quokka')).error?.code, 'GW_UPSTREAM_ERROR')
  assert.equal((await call('tenant-quokka')).error?.code, 'GW_UPSTREAM_UNAVAILABLE')
  // The other tenant's client of the same URL has a breaker of its own: still closed, still dialled.
  assert.equal((await call('tenant-okapi')).error?.code, 'GW_UPSTREAM_ERROR')

  const breakers = (await status(gw)).remoteMcp.breakers
  assert.deepEqual(breakers.map((b: any) => [b.pool, b.server, b.state]).sort(), [
    ['tenant', 'user_tenant-okapi_service_notes-zebra', 'closed'],
    ['tenant', 'user_tenant-quokka_service_notes-zebra', 'open']
  ])
  const text = await metrics(gw)
  assert.equal(metricValue(text, 'gateway_mcp_breakers{pool="tenant",state="open"}'), 1)
  for (const secret of ['quokka', 'okapi', 'zebra']) assert.ok(!text.includes(secret), `${secret} leaked into /metrics`)
})

test('a stdio server that exits before answering a read-only tool: retried once on a fresh child; ' +
  'the crash of a tool without hints is not', { timeout: 90_000 }, async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'tg-retry-'))
  t.after(async () => await rm(dir, { recursive: true, force: true }))
  const callLog = join(dir, 'calls.log')
  const gw = await buildTestApp(t, { env: { ...ENV, MCP_CONNECT_TIMEOUT_MS: '15000', MCP_LIST_TIMEOUT_MS: '15000' } })
  await register(gw, 'crashy', {
    type: 'stdio',
    command: process.execPath,
    args: ['--import', TSX_IMPORT, CRASH_FIXTURE, 'crashy'],
    env: { CALL_LOG: callLog },
    timeoutMs: 20_000
  })

  const once = await invoke(gw, 'crashy__crash_once', {})
  assert.equal(once.isError, false, JSON.stringify(once))
  assert.equal(once.output, 'crashy:survived')
  const lines = (await readFile(callLog, 'utf8')).trim().split('\n')
  assert.equal(lines.length, 2, lines.join(' | '))
  assert.notEqual(lines[0]?.split(' ')[1], lines[1]?.split(' ')[1], 'the retry ran in a fresh child')
  assert.equal((await status(gw)).remoteMcp.retries, 1)

  const crash = await invoke(gw, 'crashy__crash', {})
  assert.equal(crash.error?.code, 'GW_UPSTREAM_ERROR', JSON.stringify(crash))
  assert.equal((await readFile(callLog, 'utf8')).trim().split('\n').filter((l) => l.startsWith('crash ')).length, 1, 'not replayed')
  assert.equal((await status(gw)).remoteMcp.retries, 1)
})
