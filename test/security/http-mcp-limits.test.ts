/**
 * HTTP side of tenant isolation: /mcp must not let one tenant take more than its share.
 * - A JSON-RPC batch of tools/call counts each call, for MAX_CONCURRENT_PER_TENANT and for
 *   RATE_LIMIT_PER_MINUTE (before: four batches of 40 ran 160 upstream calls at once).
 * - GET /mcp notification streams: one tenant gets a share of the instance's streams, not all.
 * Against the real gateway process; the upstream is a loopback MCP server that counts how many
 * calls it runs at once.
 */
import { test } from 'node:test'
import type { TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { request as httpRequest } from 'node:http'
import type { ClientRequest, IncomingMessage } from 'node:http'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { z } from 'zod'
import { startGateway } from '../../scripts/lib/gateway-process.js'
import type { GatewayProcess } from '../../scripts/lib/gateway-process.js'
import { REDIS_URL, redisForTest } from '../helpers/redis.js'
import { startStreamableHttpFixture } from '../../scripts/lib/mcp-fixtures/index.js'

const ADMIN = 'admin-key-0123456789'
const ACME = 'acme-key-0123456789'
const GLOBEX = 'globex-key-0123456789'
const KEYS = `${ADMIN}:*,${ACME}:acme,${GLOBEX}:globex`
const ACCEPT = 'application/json, text/event-stream'

/** An upstream whose `hold {ms}` tool records the most calls it ever ran at once. */
async function countingUpstream (t: TestContext): Promise<{ url: string, stats: { now: number, max: number, total: number } }> {
  const stats = { now: 0, max: 0, total: 0 }
  const fixture = await startStreamableHttpFixture({
    factory: () => {
      const server = new McpServer({ name: 'counting', version: '1.0.0' })
      server.registerTool('hold', { description: 'Holds for ms', inputSchema: { ms: z.number().int().min(0) } }, async ({ ms }) => {
        stats.total++
        stats.now++
        stats.max = Math.max(stats.max, stats.now)
        try {
          await sleep(ms)
        } finally {
          stats.now--
        }
        return { content: [{ type: 'text' as const, text: 'held' }] }
      })
      return server
    }
  })
  t.after(() => fixture.close())
  return { url: fixture.url, stats }
}

async function gateway (t: TestContext, env: Record<string, string>): Promise<GatewayProcess> {
  const workspaces = await mkdtemp(join(tmpdir(), 'tg-sec-mcp-'))
  t.after(() => rm(workspaces, { recursive: true, force: true }))
  const gw = await startGateway(t, { API_KEYS: KEYS, SANDBOX: 'none', WORKSPACES_DIR: workspaces, EGRESS_ALLOW: '127.0.0.1/32', ...env })
  t.after(() => gw.stop())
  return gw
}

async function call (gw: GatewayProcess, method: string, path: string, key: string, body?: unknown): Promise<{ status: number, json: any }> {
  const res = await fetch(gw.url + path, {
    method,
    headers: { authorization: `Bearer ${key}`, accept: ACCEPT, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    signal: AbortSignal.timeout(60_000)
  })
  const text = await res.text()
  return { status: res.status, json: text === '' ? undefined : JSON.parse(text) }
}

function batch (n: number, name: string, args: Record<string, unknown>, firstId = 1): unknown[] {
  return Array.from({ length: n }, (_, i) => ({ jsonrpc: '2.0', id: firstId + i, method: 'tools/call', params: { name, arguments: args } }))
}

test('/mcp batches: every tools/call counts against MAX_CONCURRENT_PER_TENANT; the upstream never runs more than the cap', async (t) => {
  const upstream = await countingUpstream(t)
  const gw = await gateway(t, { MAX_CONCURRENT_PER_TENANT: '4', RATE_LIMIT_PER_MINUTE: '10000' })
  assert.equal((await call(gw, 'PUT', '/users/acme/mcp/servers/s', ADMIN, { type: 'http', url: upstream.url })).status, 201)

  // The attack: four batches of 40 calls, sent at once.
  const answers = await Promise.all(Array.from(
    { length: 4 },
    async (_, b) => await call(gw, 'POST', '/mcp?mcp=s', ACME, batch(40, 'user_acme_tool_hold', { ms: 150 }, b * 100))
  ))
  assert.ok(upstream.stats.max <= 4, `the upstream ran ${upstream.stats.max} calls at once (cap 4)`)
  assert.ok(upstream.stats.total >= 4, `only ${upstream.stats.total} calls ran`)

  // What did not run was refused clearly: a whole batch with HTTP 429, or single calls with a JSON-RPC error.
  let ran = 0
  for (const answer of answers) {
    if (answer.status === 429) {
      assert.equal(answer.json.error.data.code, 'GW_RATE_LIMITED')
      continue
    }
    assert.equal(answer.status, 200, JSON.stringify(answer.json))
    assert.ok(Array.isArray(answer.json) && answer.json.length === 40)
    for (const r of answer.json) {
      if (r.result !== undefined) {
        assert.equal(r.result.isError, false, JSON.stringify(r))
        ran++
      } else {
        assert.equal(r.error.data.code, 'GW_RATE_LIMITED', JSON.stringify(r))
      }
    }
  }
  assert.equal(ran, upstream.stats.total)
  t.diagnostic(`4 batches of 40: ${upstream.stats.total} calls ran, at most ${upstream.stats.max} at once; ${answers.filter((a) => a.status === 429).length} batches refused with 429`)

  // The tenant's slots are all back: another batch runs completely.
  const again = await call(gw, 'POST', '/mcp?mcp=s', ACME, batch(10, 'user_acme_tool_hold', { ms: 1 }))
  assert.equal(again.status, 200)
  assert.ok(again.json.every((r: any) => r.result?.isError === false), JSON.stringify(again.json))
})

for (const backend of ['memory', 'redis'] as const) {
  test(`/mcp batches (${backend} counters): every tools/call counts against RATE_LIMIT_PER_MINUTE; calls over the limit get a JSON-RPC error`, async (t) => {
    let redis = {}
    if (backend === 'redis') {
      const r = await redisForTest(t)
      if (r === undefined) return
      redis = { REDIS_URL, REDIS_KEY_PREFIX: r.prefix }
    }
    const upstream = await countingUpstream(t)
    const gw = await gateway(t, { MAX_CONCURRENT_PER_TENANT: '4', RATE_LIMIT_PER_MINUTE: '10', CLUSTER_SECRET: 'http-mcp-limits-cluster-secret', ...redis })
    assert.equal((await call(gw, 'PUT', '/users/acme/mcp/servers/s', ADMIN, { type: 'http', url: upstream.url })).status, 201)

    const answer = await call(gw, 'POST', '/mcp?mcp=s', ACME, batch(25, 'user_acme_tool_hold', { ms: 1 }))
    assert.equal(answer.status, 200, JSON.stringify(answer.json))
    const ok = answer.json.filter((r: any) => r.result !== undefined)
    const limited = answer.json.filter((r: any) => r.error?.data?.code === 'GW_RATE_LIMITED')
    assert.ok(upstream.stats.total <= 10, `${upstream.stats.total} calls ran in one minute (limit 10)`)
    assert.equal(ok.length, upstream.stats.total)
    assert.equal(ok.length + limited.length, 25, JSON.stringify(answer.json))
    assert.ok(ok.length >= 8, `only ${ok.length} calls ran`)
    assert.equal(limited[0].error.data.statusCode, 429)
    assert.match(limited[0].error.message, /rate limit/i)
    // Every answer keeps its id (a client matches answers to calls).
    assert.deepEqual(answer.json.map((r: any) => r.id).sort((a: number, b: number) => a - b), Array.from({ length: 25 }, (_, i) => i + 1))

    // The minute is used up: the next call, alone, is refused too.
    const next = await call(gw, 'POST', '/mcp?mcp=s', ACME, batch(1, 'user_acme_tool_hold', { ms: 1 }, 100))
    assert.equal(next.status, 429)
    assert.equal(upstream.stats.total, ok.length)
    // Another tenant has its own minute.
    const other = await call(gw, 'POST', '/invoke', GLOBEX, { name: 'current_time', arguments: {} })
    assert.notEqual(other.status, 429)
    // /invoke/batch counts each call too; a batch that does not fit in the minute is refused whole.
    const big = await call(gw, 'POST', '/invoke/batch', GLOBEX, {
      calls: Array.from({ length: 12 }, () => ({ name: 'user_globex_tool_hold', arguments: { ms: 1 } }))
    })
    assert.equal(big.status, 429, JSON.stringify(big.json))
    assert.equal(big.json.code, 'GW_RATE_LIMITED')
    assert.match(big.json.message, /batch of 12 calls/)
  })
}

/** Opens a GET /mcp notification stream; resolves with its status once the head arrived. */
async function openStream (gw: GatewayProcess, key: string, open: ClientRequest[]): Promise<number> {
  return await new Promise<number>((resolve, reject) => {
    const req = httpRequest(`${gw.url}/mcp?functions=current_time`, { agent: false, headers: { authorization: `Bearer ${key}`, accept: 'text/event-stream' } }, (res: IncomingMessage) => {
      res.resume()
      resolve(res.statusCode ?? 0)
    })
    req.on('error', reject)
    req.setTimeout(30_000, () => req.destroy(new Error('no answer')))
    req.end()
    open.push(req)
  })
}

test('GET /mcp streams: one tenant cannot hold every notification stream of the instance', async (t) => {
  const gw = await gateway(t, {})
  const open: ClientRequest[] = []
  t.after(() => { for (const r of open) r.destroy() })

  // Tenant acme opens streams until refused (the whole instance allows 1000).
  let opened = 0
  let refused = 0
  for (let i = 0; i < 150 && refused === 0; i++) {
    const status = await openStream(gw, ACME, open)
    if (status === 200) opened++
    else if (status === 429) refused++
    else assert.fail(`unexpected status ${status}`)
  }
  assert.equal(refused, 1, `tenant acme opened ${opened} streams and was never refused`)
  assert.ok(opened >= 4 && opened <= 100, `tenant acme holds ${opened} streams`)

  // Another tenant still gets its streams.
  assert.equal(await openStream(gw, GLOBEX, open), 200)
  assert.equal(await openStream(gw, GLOBEX, open), 200)

  // Closing one of acme's streams gives the slot back.
  open[0]?.destroy()
  let status = 0
  for (let i = 0; i < 50 && status !== 200; i++) {
    await sleep(50)
    status = await openStream(gw, ACME, open)
  }
  assert.equal(status, 200)
})
