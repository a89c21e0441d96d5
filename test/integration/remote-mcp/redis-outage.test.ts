/**
 * Redis stopped and restarted while the gateway runs: registry
 * routes answer 503 with a clear message, already-known tools keep working, nothing registered is
 * lost when Redis returns, reconnect and pub/sub resubscription are automatic.
 *
 * Runs its own redis-server on a free loopback port (never the shared one on 6379), with an
 * append-only file in a temp dir so a SIGKILLed server comes back with its data.
 */
import { test } from 'node:test'
import type { TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyInstance } from 'fastify'
import { Redis } from 'ioredis'
import { buildTestApp } from '../../helpers/app.js'
import { freePort, killRedisServer, requireRedisServer, startRedisServer } from '../../helpers/redis-server.js'
import { startStreamableHttpFixture } from '../../../scripts/lib/mcp-fixtures/index.js'
import type { HttpFixture } from '../../../scripts/lib/mcp-fixtures/index.js'

const PREFIX = 'tg-outage:'

async function fixture (t: TestContext, marker: string): Promise<HttpFixture> {
  const f = await startStreamableHttpFixture({ marker })
  t.after(async () => await f.close())
  return f
}

async function req (
  gw: FastifyInstance,
  method: 'GET' | 'PUT' | 'DELETE' | 'POST',
  url: string,
  payload?: Record<string, unknown>
): Promise<{ status: number, json: any }> {
  const res = await gw.inject({ method, url, ...(payload ? { payload } : {}) })
  assert.notEqual(res.statusCode, 500, `${method} ${url}: ${res.body}`)
  return { status: res.statusCode, json: res.json() }
}

async function echo (gw: FastifyInstance, name: string, text: string, userId?: string): Promise<string> {
  const r = await req(gw, 'POST', '/invoke', { name, arguments: { text }, ...(userId ? { userId } : {}) })
  assert.equal(r.status, 200, JSON.stringify(r.json))
  assert.equal(r.json.isError, false, JSON.stringify(r.json))
  return r.json.output
}

async function toolNames (gw: FastifyInstance, query: string): Promise<string[]> {
  const r = await req(gw, 'GET', `/tools?format=mcp&${query}`)
  assert.equal(r.status, 200, JSON.stringify(r.json))
  return r.json.tools.map((x: any) => x.name)
}

/** Polls until `ok` or `ms` elapse; the caller asserts the returned value. */
async function until<T> (check: () => Promise<T>, ok: (v: T) => boolean, ms = 15_000): Promise<T> {
  const end = Date.now() + ms
  let value = await check()
  while (!ok(value) && Date.now() < end) {
    await sleep(100)
    value = await check()
  }
  return value
}

test('Redis killed and restarted under a running gateway: 503 on the registry, known tools keep working, data and pub/sub come back', async (t) => {
  if (!requireRedisServer(t)) return
  const dir = await mkdtemp(join(tmpdir(), 'tg-redis-outage-'))
  t.after(async () => await rm(dir, { recursive: true, force: true }))
  const port = await freePort()
  let redis = await startRedisServer(t, port, dir)

  const glob = await fixture(t, 'G')
  const ten = await fixture(t, 'T')
  const late = await fixture(t, 'L')
  const env = {
    REDIS_URL: `redis://127.0.0.1:${port}`,
    REDIS_KEY_PREFIX: PREFIX,
    EGRESS_ALLOW: '127.0.0.1/32',
    LOAD_EXAMPLES: 'false',
    MCP_CONNECT_TIMEOUT_MS: '2000',
    MCP_LIST_TIMEOUT_MS: '2000'
  }
  // Two instances on one Redis: B's changes reach A only over pub/sub.
  const a = await buildTestApp(t, { env })
  const b = await buildTestApp(t, { env })

  assert.equal((await req(a, 'PUT', '/mcp/servers/glob', { type: 'http', url: glob.url })).status, 201)
  assert.equal((await req(a, 'PUT', '/users/u1/mcp/servers/ten', { type: 'http', url: ten.url })).status, 201)
  // warm: A has listed and called both once
  assert.ok((await toolNames(a, 'mcp=glob')).includes('echo'))
  assert.equal(await echo(a, 'glob__echo', 'warm'), 'G:warm')
  assert.ok((await toolNames(a, 'mcp=ten&userId=u1')).includes('user_u1_tool_echo'))
  assert.equal(await echo(a, 'user_u1_tool_echo', 'warm', 'u1'), 'T:warm')

  await killRedisServer(redis)

  // Registry routes: 503 with a clear message, for reads and writes, global and tenant.
  const outage: Array<['GET' | 'PUT' | 'DELETE', string, Record<string, unknown>?]> = [
    ['GET', '/mcp/servers'],
    ['PUT', '/mcp/servers/other', { type: 'http', url: late.url }],
    ['DELETE', '/mcp/servers/glob'],
    ['GET', '/users/u1/mcp/servers'],
    ['PUT', '/users/u1/mcp/servers/other', { type: 'http', url: late.url }]
  ]
  for (const [method, url, body] of outage) {
    const r = await req(a, method, url, body)
    assert.equal(r.status, 503, `${method} ${url}: ${JSON.stringify(r.json)}`)
    assert.equal(r.json.code, 'GW_REGISTRY_UNAVAILABLE')
    assert.match(r.json.message, /registry unavailable/i)
    // no host, port or key names in the message
    assert.doesNotMatch(r.json.message, new RegExp(`${port}|127\\.0\\.0\\.1|${PREFIX}`))
  }
  const ready = await a.inject({ method: 'GET', url: '/readyz' })
  assert.equal(ready.statusCode, 503, ready.body)

  // The directory serves the last known servers: listing and invoking keep working.
  assert.ok((await toolNames(a, 'mcp=glob')).includes('echo'))
  assert.equal(await echo(a, 'glob__echo', 'during'), 'G:during')
  assert.equal(await echo(a, 'echo', 'raw'), 'G:raw')
  assert.ok((await toolNames(a, 'mcp=ten&userId=u1')).includes('user_u1_tool_echo'))
  assert.equal(await echo(a, 'user_u1_tool_echo', 'during', 'u1'), 'T:during')

  // Back on the same port with the same data dir: nothing registered is lost, reconnect is automatic.
  redis = await startRedisServer(t, port, dir)
  const servers = await until(async () => await req(a, 'GET', '/mcp/servers'), (r) => r.status === 200)
  assert.equal(servers.status, 200, JSON.stringify(servers.json))
  assert.deepEqual(servers.json.servers.map((s: any) => s.serverId), ['glob'])
  assert.equal(servers.json.servers[0].config.url, glob.url)
  const tenant = await req(a, 'GET', '/users/u1/mcp/servers')
  assert.deepEqual(tenant.json.servers.map((s: any) => s.serverId), ['ten'])
  assert.equal((await a.inject({ method: 'GET', url: '/readyz' })).statusCode, 200)

  // Both instances resubscribed (they do it by themselves on reconnect).
  const probe = new Redis(`redis://127.0.0.1:${port}`, { lazyConnect: true, maxRetriesPerRequest: 0 })
  probe.on('error', () => {})
  t.after(() => { probe.disconnect() })
  await probe.connect()
  const subscribers = await until(async () => {
    const reply = await probe.pubsub('NUMSUB', `${PREFIX}events`) as [string, number]
    return Number(reply[1])
  }, (n) => n >= 2)
  assert.equal(subscribers, 2, 'A and B subscribed again')

  // A caches the global scope now; a server registered through B must show on A at once,
  // which only the resubscribed pub/sub channel can tell A.
  // (fresh and glob offer the same 9 tools: one gets the raw names, the other qualified ones)
  assert.equal((await toolNames(a, 'mcp=glob,fresh')).length, 9)
  assert.equal((await req(b, 'PUT', '/mcp/servers/fresh', { type: 'http', url: late.url })).status, 201)
  // Pub/sub delivery is asynchronous, so a short bounded wait; without the subscription A's
  // fresh cache would keep answering 9 tools for good.
  const names = await until(async () => await toolNames(a, 'mcp=glob,fresh'), (n) => n.length === 18, 3000)
  assert.equal(names.length, 18, names.join(','))
  assert.equal(await echo(a, 'fresh__echo', 'new'), 'L:new')
  assert.equal(await echo(a, 'glob__echo', 'after'), 'G:after')
  // And writes through A work again too.
  assert.equal((await req(a, 'PUT', '/users/u1/mcp/servers/ten2', { type: 'http', url: late.url })).status, 201)
  assert.equal(await echo(b, 'user_u1_tool_echo', 'b', 'u1'), 'T:b')

  probe.disconnect()
  await killRedisServer(redis)
})
