import { test } from 'node:test'
import assert from 'node:assert/strict'
import type { FastifyInstance } from 'fastify'
import { createMemoryRegistryStore } from '../../../src/registry/memory-store.js'
import { stdioFixture } from '../../../scripts/lib/mcp-fixtures/index.js'
import { buildTestApp } from '../../helpers/app.js'

interface Sample { name: string, labels: Record<string, string>, value: number }

/** Parses the Prometheus text format (one sample per line; label values have no escapes here). */
function parse (text: string): Sample[] {
  const samples: Sample[] = []
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line)
    assert.ok(m, `unparsable metrics line: ${line}`)
    const labels: Record<string, string> = {}
    for (const pair of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"/g)) labels[pair[1] as string] = pair[2] as string
    samples.push({ name: m[1] as string, labels, value: Number(m[3]) })
  }
  return samples
}

async function scrape (app: FastifyInstance, headers: Record<string, string> = {}): Promise<Sample[]> {
  const res = await app.inject({ method: 'GET', url: '/metrics', headers })
  assert.equal(res.statusCode, 200, res.body)
  assert.match(String(res.headers['content-type']), /^text\/plain; version=0\.0\.4/)
  return parse(res.body)
}

/** The value of one series (0 when absent: counters with no observation are not printed). */
function value (samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  const hit = samples.find((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v) &&
    Object.keys(s.labels).length === Object.keys(labels).length)
  return hit?.value ?? 0
}

const invoke = async (app: FastifyInstance, body: unknown): Promise<{ statusCode: number, json: any }> => {
  const res = await app.inject({ method: 'POST', url: '/invoke', payload: body as Record<string, unknown> })
  return { statusCode: res.statusCode, json: res.json() }
}

test('invocations are counted by endpoint, tier and outcome; latency is observed per tier for calls that reached a tool', async (t) => {
  const app = await buildTestApp(t)
  assert.equal((await invoke(app, { name: 'calculate', arguments: { expression: '2*3' } })).json.isError, false)
  assert.equal((await invoke(app, { name: 'calculate', arguments: { expression: '4+4' } })).json.isError, false)
  const bad = await invoke(app, { name: 'calculate', arguments: { expression: 42 } })
  assert.equal(bad.json.error.code, 'GW_INVALID_ARGUMENTS')
  assert.equal((await invoke(app, { name: 'no_such_tool' })).statusCode, 404)
  const batch = await app.inject({
    method: 'POST',
    url: '/invoke/batch',
    payload: { calls: [{ name: 'current_time' }, { name: 7 }, { name: 'read_file', arguments: { path: 'missing.txt' } }] }
  })
  assert.equal(batch.statusCode, 200)

  const m = await scrape(app)
  const inv = (endpoint: string, route: string, outcome: string): number => value(m, 'gateway_invocations_total', { endpoint, route, outcome })
  assert.equal(inv('/invoke', 'function', 'ok'), 2)
  assert.equal(inv('/invoke', 'function', 'GW_INVALID_ARGUMENTS'), 1)
  assert.equal(inv('/invoke', 'none', 'GW_TOOL_NOT_FOUND'), 1)
  assert.equal(inv('/invoke/batch', 'function', 'ok'), 1)
  assert.equal(inv('/invoke/batch', 'none', 'GW_BAD_REQUEST'), 1)
  assert.equal(inv('/invoke/batch', 'builtin', 'GW_TOOL_ERROR'), 1)
  // Every call that reached a tool has one latency observation under its tier; refused ones none.
  assert.equal(value(m, 'gateway_invoke_duration_seconds_count', { route: 'function' }), 4)
  assert.equal(value(m, 'gateway_invoke_duration_seconds_count', { route: 'builtin' }), 1)
  assert.ok(!m.some((s) => s.name === 'gateway_invoke_duration_seconds_count' && s.labels.route === 'none'))
})

test('tool calls over POST /mcp are counted under endpoint /mcp, like /invoke', async (t) => {
  const app = await buildTestApp(t)
  const rpc = async (id: number, name: string, args: Record<string, unknown>): Promise<any> => {
    const res = await app.inject({
      method: 'POST',
      url: '/mcp?functions=calculate',
      headers: { accept: 'application/json, text/event-stream', 'content-type': 'application/json' },
      payload: { jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } }
    })
    assert.equal(res.statusCode, 200, res.body)
    return res.json()
  }
  assert.equal((await rpc(1, 'calculate', { expression: '2*3' })).result.isError, false)
  assert.equal((await rpc(2, 'calculate', { expression: 42 })).result.isError, true)
  assert.ok((await rpc(3, 'read_file', { path: 'x' })).error, 'outside the allow-list is a JSON-RPC error')

  const m = await scrape(app)
  const inv = (route: string, outcome: string): number => value(m, 'gateway_invocations_total', { endpoint: '/mcp', route, outcome })
  assert.equal(inv('function', 'ok'), 1)
  assert.equal(inv('function', 'GW_INVALID_ARGUMENTS'), 1)
  assert.equal(inv('none', 'GW_NOT_ALLOWED'), 1)
  assert.ok(m.some((s) => s.name === 'gateway_invoke_duration_seconds_count' && s.labels.route === 'function' && s.value >= 1))
})

test('no userId, tool name or argument ever appears in the metrics; label names are a fixed set', async (t) => {
  const app = await buildTestApp(t)
  await invoke(app, { name: 'calculate', userId: 'tenant-zebra-41', arguments: { expression: '1234567+1' } })
  await invoke(app, { name: 'user_tenant-zebra-41_service_secretsrv_tool', userId: 'tenant-zebra-41' })
  await invoke(app, { name: 'write_file', userId: 'tenant-zebra-41', arguments: { path: 'marker-file-xyz.txt', content: 'payload-quokka' } })
  await app.inject({ method: 'GET', url: '/users/tenant-zebra-41/mcp/servers' })
  await app.inject({ method: 'GET', url: '/no/such/path-quokka' })
  const text = (await app.inject({ method: 'GET', url: '/metrics' })).body
  for (const secret of ['tenant-zebra-41', 'calculate', '1234567', 'secretsrv', 'write_file', 'marker-file-xyz', 'quokka']) {
    assert.ok(!text.includes(secret), `${secret} leaked into /metrics`)
  }
  const allowed = new Set(['endpoint', 'route', 'outcome', 'pool', 'state', 'le'])
  for (const s of parse(text).filter((x) => x.name.startsWith('gateway_'))) {
    for (const label of Object.keys(s.labels)) {
      // A global server's id (the operator's, a bounded set) labels its breaker state and nothing else.
      if (label === 'server' && s.name === 'gateway_mcp_breaker_state') continue
      assert.ok(allowed.has(label), `${s.name} has label ${label}`)
    }
  }
  // The registry route is observed by its pattern, never by the concrete URL.
  assert.ok(parse(text).some((s) => s.name === 'gateway_overhead_seconds_count' && s.labels.endpoint === '/users/:userId/mcp/servers'))
  assert.ok(parse(text).some((s) => s.name === 'gateway_overhead_seconds_count' && s.labels.endpoint === 'unmatched'))
})

test('the overhead histogram records exactly the x-gateway-overhead-ms header value', async (t) => {
  const app = await buildTestApp(t)
  const res = await app.inject({ method: 'GET', url: '/healthz' })
  const headerMs = Number(res.headers['x-gateway-overhead-ms'])
  assert.ok(Number.isFinite(headerMs))
  const m = await scrape(app)
  assert.equal(value(m, 'gateway_overhead_seconds_count', { endpoint: '/healthz' }), 1)
  assert.ok(Math.abs(value(m, 'gateway_overhead_seconds_sum', { endpoint: '/healthz' }) - headerMs / 1000) < 1e-9)
})

test('default Node process metrics are exposed next to the gateway metrics', async (t) => {
  const app = await buildTestApp(t)
  const m = await scrape(app)
  for (const name of ['process_cpu_user_seconds_total', 'process_resident_memory_bytes', 'nodejs_eventloop_lag_seconds', 'nodejs_heap_size_used_bytes']) {
    assert.ok(m.some((s) => s.name === name), `${name} missing`)
  }
  // Two apps in one process (tests, or two instances embedded) both render without a name clash.
  const other = await buildTestApp(t)
  await scrape(other)
  await scrape(app)
})

test('sandbox execs and timeouts and background processes are counted', async (t) => {
  const app = await buildTestApp(t)
  const bash = async (args: Record<string, unknown>): Promise<any> => (await invoke(app, { name: 'bash', arguments: args })).json
  let r = await bash({ action: 'exec', command: 'echo hi' })
  assert.equal(r.isError, false, r.output)
  r = await bash({ action: 'exec', command: 'sleep 30', timeoutMs: 200 })
  assert.match(r.output, /timed out/)
  r = await bash({ action: 'start', command: 'sleep 60' })
  assert.equal(r.isError, false, r.output)
  let m = await scrape(app)
  assert.equal(value(m, 'gateway_sandbox_execs_total'), 2)
  assert.equal(value(m, 'gateway_sandbox_timeouts_total'), 1)
  assert.equal(value(m, 'gateway_background_processes_started_total'), 1)
  assert.equal(value(m, 'gateway_background_processes_running'), 1)
  assert.equal(value(m, 'gateway_sandbox_running'), 1)
  const processId = JSON.parse(r.output).processId as string
  r = await bash({ action: 'stop', processId })
  assert.equal(r.isError, false, r.output)
  m = await scrape(app)
  assert.equal(value(m, 'gateway_background_processes_running'), 0)
  // Counters never go down.
  assert.equal(value(m, 'gateway_background_processes_started_total'), 1)
  assert.equal(value(m, 'gateway_sandbox_timeouts_total'), 1)
})

test('an unreachable registry is counted', async (t) => {
  const store = createMemoryRegistryStore()
  await store.close()
  const app = await buildTestApp(t, { overrides: { store } })
  // Start-up's background warm-up of global stdio servers may already have met the closed store.
  const before = value(await scrape(app), 'gateway_registry_unavailable_total')
  const res = await app.inject({ method: 'GET', url: '/mcp/servers' })
  assert.equal(res.statusCode, 503)
  assert.equal(value(await scrape(app), 'gateway_registry_unavailable_total'), before + 1)
})

test('MCP pool size and connect failures', async (t) => {
  // A stdio server started through tsx can take seconds on a loaded machine.
  const app = await buildTestApp(t, { env: { MCP_LIST_TIMEOUT_MS: '60000', MCP_CONNECT_TIMEOUT_MS: '60000' } })
  const put = async (serverId: string, body: unknown): Promise<void> => {
    const res = await app.inject({ method: 'PUT', url: `/mcp/servers/${serverId}`, payload: body as Record<string, unknown> })
    assert.equal(res.statusCode, 201, res.body)
  }
  // Port 9 (discard) on loopback: nothing listens, the connect is refused.
  await put('deadsrv', { type: 'streamable_http', url: 'http://127.0.0.1:9/mcp' })
  await put('livesrv', { type: 'stdio', ...stdioFixture() })
  let m = await scrape(app)
  assert.equal(value(m, 'gateway_mcp_connect_failures_total'), 0)
  assert.equal(value(m, 'gateway_mcp_clients_connected'), 0)

  const tools = (await app.inject({ method: 'GET', url: '/tools?mcp=deadsrv,livesrv' })).json()
  assert.deepEqual(tools.unavailable.map((u: { serverId: string }) => u.serverId), ['deadsrv'])
  assert.ok(tools.tools.length > 0)
  m = await scrape(app)
  assert.ok(value(m, 'gateway_mcp_connect_failures_total') >= 1)
  assert.equal(value(m, 'gateway_mcp_clients_connected'), 1)
  assert.ok(value(m, 'gateway_mcp_clients', { pool: 'global' }) >= 1)
  assert.equal(value(m, 'gateway_mcp_clients', { pool: 'tenant' }), 0)
})

test('GET /metrics is public by default and needs a key with METRICS_REQUIRE_KEY', async (t) => {
  const keys = 'admin-key-0123456789abcdef:*,tenant-key-0123456789abcdef:scraper'
  const open = await buildTestApp(t, { env: { API_KEYS: keys } })
  assert.equal((await open.inject({ method: 'GET', url: '/metrics' })).statusCode, 200)
  assert.equal((await open.inject({ method: 'GET', url: '/status' })).statusCode, 401)

  const closed = await buildTestApp(t, { env: { API_KEYS: keys, METRICS_REQUIRE_KEY: 'true' } })
  const anon = await closed.inject({ method: 'GET', url: '/metrics' })
  assert.equal(anon.statusCode, 401)
  assert.equal(anon.json().code, 'GW_UNAUTHORIZED')
  assert.equal((await closed.inject({ method: 'GET', url: '/metrics', headers: { authorization: 'Bearer wrong-key-0123456789abcdef' } })).statusCode, 401)
  await scrape(closed, { authorization: 'Bearer tenant-key-0123456789abcdef' })
  await scrape(closed, { authorization: 'Bearer admin-key-0123456789abcdef' })
  // Health stays public either way.
  assert.equal((await closed.inject({ method: 'GET', url: '/healthz' })).statusCode, 200)
})
