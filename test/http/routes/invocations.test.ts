import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import type { TestContext } from 'node:test'
import type { FastifyInstance } from 'fastify'
import { startStreamableHttpFixture } from '../../../scripts/lib/mcp-fixtures/index.js'
import { createMemoryRegistryStore } from '../../../src/registry/memory-store.js'
import { buildTestApp } from '../../helpers/app.js'
import { REDIS_URL, redisForTest } from '../../helpers/redis.js'
import { delay, TcpProxy } from '../../helpers/redis-utils.js'

const ADMIN = 'k-admin-0123456789'
const ACME = 'k-acme-0123456789'
const GLOBEX = 'k-globex-0123456789'
const KEYS = `${ADMIN}:*,${ACME}:acme,${GLOBEX}:globex`
const MCP_ACCEPT = 'application/json, text/event-stream'

const bearer = (key: string): Record<string, string> => ({ authorization: `Bearer ${key}` })
const keyId = (key: string): string => createHash('sha256').update(key).digest('hex').slice(0, 16)

async function app (t: TestContext, env: Record<string, string> = {}, overrides = {}): Promise<FastifyInstance> {
  return await buildTestApp(t, { env: { API_KEYS: KEYS, EGRESS_ALLOW: '127.0.0.1/32', CLUSTER_SECRET: 'invocations-test-cluster-secret', ...env }, overrides })
}

async function journal (a: FastifyInstance, userId: string, key: string, query = ''): Promise<{ status: number, body: any }> {
  await a.services.journal.flush()
  const res = await a.inject({ method: 'GET', url: `/users/${userId}/invocations${query === '' ? '' : '?' + query}`, headers: bearer(key) })
  return { status: res.statusCode, body: res.json() }
}

async function metric (a: FastifyInstance, name: string): Promise<number> {
  const text = (await a.inject({ method: 'GET', url: '/metrics' })).body
  const line = text.split('\n').find((l) => l.startsWith(name + ' '))
  return Number(line?.split(' ')[1] ?? Number.NaN)
}

async function mcpCall (a: FastifyInstance, key: string, query: string, name: string, args: unknown): Promise<any> {
  const res = await a.inject({
    method: 'POST',
    url: `/mcp?${query}`,
    headers: { ...bearer(key), accept: MCP_ACCEPT, 'content-type': 'application/json' },
    payload: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } }
  })
  assert.equal(res.statusCode, 200, res.body)
  return res.json()
}

test('/invoke, each call of /invoke/batch and /mcp tools/call are journaled under the tenant, newest first, with the key id and never the key', async (t) => {
  const remote = await startStreamableHttpFixture({ marker: 'acme' })
  t.after(async () => await remote.close())
  const a = await app(t)
  assert.equal((await a.inject({
    method: 'PUT',
    url: '/users/acme/mcp/servers/s',
    headers: bearer(ACME),
    payload: { type: 'streamable_http', url: remote.url }
  })).statusCode, 201)

  const one = await a.inject({
    method: 'POST',
    url: '/invoke',
    headers: bearer(ACME),
    payload: { name: 'calculate', arguments: { expression: '1+2' }, callId: 'c-invoke' }
  })
  assert.equal(one.statusCode, 200)
  assert.equal(one.json().trace, null, 'the journal records the trace without adding it to a result that did not ask')
  const batch = await a.inject({
    method: 'POST',
    url: '/invoke/batch',
    headers: bearer(ACME),
    payload: {
      calls: [{ name: 'calculate', arguments: { expression: '2*3' }, callId: 'c-batch-1' }, { name: 'no_such_tool', callId: 'c-batch-2' }, { bad: true }]
    }
  })
  assert.equal(batch.statusCode, 200)
  const rpc = await mcpCall(a, ACME, 'functions=calculate&mcp=s', 'user_acme_tool_echo', { text: 'hi', api_key: 'sk-should-not-be-stored' })
  assert.equal(rpc.result.content[0].text, 'acme:hi')

  const { status, body } = await journal(a, 'acme', ACME)
  assert.equal(status, 200)
  const byId = body.invocations.map((e: any) => e.callId)
  assert.equal(byId.length, 4, `the invalid batch entry never became a call: ${byId.join(',')}`)
  assert.equal(byId[3], 'c-invoke')
  assert.deepEqual(new Set(byId.slice(1, 3)), new Set(['c-batch-1', 'c-batch-2']))
  const [mcp, ...rest] = body.invocations
  assert.match(mcp.callId, /^call_/)
  assert.equal(mcp.name, 'user_acme_tool_echo')
  assert.equal(mcp.route, 'user_mcp')
  assert.equal(mcp.serverId, 's')
  assert.deepEqual(mcp.arguments, { text: 'hi', api_key: '****' })
  assert.equal(mcp.output, 'acme:hi')
  assert.notEqual(mcp.trace, null, 'the trace is kept with JOURNAL=full')

  const invoked = rest.find((e: any) => e.callId === 'c-invoke')
  assert.deepEqual(Object.keys(invoked), [
    'callId', 'ts', 'userId', 'name', 'route', 'serverId', 'arguments', 'argumentsSha256', 'output', 'isError',
    'error', 'truncated', 'trace', 'durationMs', 'toolMs', 'keyId', 'instance', 'checkpointId', 'approvalId', 'parentCallId', 'status'
  ])
  assert.equal(invoked.status, null, 'a plain call is no input_required round')
  assert.equal(invoked.userId, 'acme')
  assert.equal(invoked.route, 'function')
  assert.equal(invoked.serverId, null)
  assert.deepEqual(invoked.arguments, { expression: '1+2' })
  assert.equal(invoked.argumentsSha256, createHash('sha256').update(JSON.stringify({ expression: '1+2' })).digest('hex'))
  assert.equal(invoked.output, one.json().output)
  assert.equal(invoked.isError, false)
  assert.equal(invoked.keyId, keyId(ACME))
  assert.ok(Date.parse(invoked.ts) > 0)
  assert.equal(typeof invoked.instance, 'string')
  assert.equal(invoked.approvalId, null)

  const refused = rest.find((e: any) => e.callId === 'c-batch-2')
  assert.equal(refused.route, null)
  assert.equal(refused.isError, true)
  assert.equal(refused.error.code, 'GW_TOOL_NOT_FOUND')
  assert.equal(refused.output, null)

  const all = JSON.stringify(body)
  assert.ok(!all.includes(ACME) && !all.includes('sk-should-not-be-stored'))

  const single = await a.inject({ method: 'GET', url: '/users/acme/invocations/c-invoke', headers: bearer(ACME) })
  assert.equal(single.statusCode, 200)
  assert.deepEqual(single.json(), invoked)
  assert.equal(await metric(a, 'gateway_journal_written_total'), 4)
  assert.equal(await metric(a, 'gateway_journal_dropped_total'), 0)
})

test('filters and cursor pages over HTTP; NDJSON export of the same selection', async (t) => {
  const a = await app(t)
  for (let i = 0; i < 25; i++) {
    const expression = i % 5 === 0 ? '1/' : `${i}+1`
    await a.inject({ method: 'POST', url: '/invoke', headers: bearer(ACME), payload: { name: i % 2 === 0 ? 'calculate' : 'current_time', arguments: i % 2 === 0 ? { expression } : {}, callId: `c${i}` } })
  }
  const walk = async (query: string): Promise<string[]> => {
    const ids: string[] = []
    let cursor: string | null = null
    do {
      const page = await journal(a, 'acme', ACME, query + (cursor === null ? '' : `&cursor=${cursor}`))
      assert.equal(page.status, 200, JSON.stringify(page.body))
      ids.push(...page.body.invocations.map((e: any) => e.callId))
      cursor = page.body.nextCursor
    } while (cursor !== null)
    return ids
  }
  const every = Array.from({ length: 25 }, (_, i) => `c${24 - i}`)
  assert.deepEqual(await walk('limit=4'), every)
  assert.deepEqual(await walk('limit=3&tool=current_time'), every.filter((id) => Number(id.slice(1)) % 2 === 1))
  const errors = await walk('limit=2&isError=true')
  assert.deepEqual(errors, ['c20', 'c10', 'c0'])
  assert.deepEqual(await walk(`limit=100&until=${Date.now() + 60_000}&since=2020-01-01`), every)
  assert.deepEqual(await walk(`limit=100&since=${Date.now() + 60_000}`), [])

  await a.services.journal.flush()
  const nd = await a.inject({ method: 'GET', url: '/users/acme/invocations?isError=false', headers: { ...bearer(ACME), accept: 'application/x-ndjson' } })
  assert.equal(nd.statusCode, 200)
  assert.match(String(nd.headers['content-type']), /^application\/x-ndjson/)
  const lines = nd.body.trim().split('\n').map((l) => JSON.parse(l))
  assert.deepEqual(lines.map((e) => e.callId), every.filter((id) => !errors.includes(id)))
  const capped = await a.inject({ method: 'GET', url: '/users/acme/invocations?limit=3', headers: { ...bearer(ACME), accept: 'application/x-ndjson' } })
  assert.equal(capped.body.trim().split('\n').length, 3)
})

test('bad cursors and ranges are 400 with stable codes; an unknown callId is 404', async (t) => {
  const a = await app(t)
  const get = async (url: string): Promise<{ status: number, code: string }> => {
    const res = await a.inject({ method: 'GET', url, headers: bearer(ACME) })
    return { status: res.statusCode, code: res.json().code }
  }
  const forged = Buffer.from(JSON.stringify({ v: 1, id: 'nope' })).toString('base64url')
  for (const cursor of ['garbage!', 'AAAA', forged, Buffer.from('{"v":2,"id":"1-1"}').toString('base64url')]) {
    assert.deepEqual(await get(`/users/acme/invocations?cursor=${encodeURIComponent(cursor)}`), { status: 400, code: 'GW_INVALID_CURSOR' }, cursor)
  }
  for (const q of ['since=yesterday', 'until=1e5', 'since=2026-13-45', `since=${Date.now()}&until=${Date.now() - 1000}`, 'since=-5']) {
    const r = await get(`/users/acme/invocations?${q}`)
    assert.equal(r.status, 400, q)
    assert.ok(['GW_INVALID_RANGE', 'GW_BAD_REQUEST'].includes(r.code), `${q}: ${r.code}`)
  }
  assert.deepEqual(await get('/users/acme/invocations?since=2026-13-45'), { status: 400, code: 'GW_INVALID_RANGE' })
  assert.deepEqual(await get('/users/acme/invocations?since=20&until=10'), { status: 400, code: 'GW_INVALID_RANGE' })
  assert.deepEqual(await get('/users/acme/invocations?limit=0'), { status: 400, code: 'GW_BAD_REQUEST' })
  assert.deepEqual(await get('/users/acme/invocations/never'), { status: 404, code: 'GW_INVOCATION_NOT_FOUND' })
  const nd = await a.inject({ method: 'GET', url: '/users/acme/invocations?cursor=garbage', headers: { ...bearer(ACME), accept: 'application/x-ndjson' } })
  assert.equal(nd.statusCode, 400, 'the export checks its query before it starts streaming')
})

test('a tenant key reads only its own journal; an admin reads any, and _global holds calls without a tenant', async (t) => {
  const a = await app(t)
  await a.inject({ method: 'POST', url: '/invoke', headers: bearer(ACME), payload: { name: 'calculate', arguments: { expression: '1' }, callId: 'acme-call' } })
  await a.inject({
    method: 'POST',
    url: '/invoke',
    headers: bearer(GLOBEX),
    payload: { name: 'calculate', arguments: { expression: '2' }, callId: 'globex-call' }
  })
  await a.inject({
    method: 'POST',
    url: '/invoke',
    headers: bearer(ADMIN),
    payload: { name: 'calculate', arguments: { expression: '3' }, callId: 'admin-call' }
  })
  // A tenant key naming another tenant is refused, and the attempt is journaled under the key's tenant.
  const mismatch = await a.inject({
    method: 'POST',
    url: '/invoke',
    headers: bearer(GLOBEX),
    payload: { name: 'calculate', userId: 'acme', arguments: { expression: '4' }, callId: 'sneaky' }
  })
  assert.equal(mismatch.statusCode, 403)

  assert.equal((await journal(a, 'acme', GLOBEX)).status, 403)
  assert.equal((await journal(a, 'acme', GLOBEX)).body.code, 'GW_TENANT_MISMATCH')
  assert.equal((await a.inject({ method: 'GET', url: '/users/acme/invocations/acme-call', headers: bearer(GLOBEX) })).statusCode, 403)
  assert.equal((await a.inject({
    method: 'GET',
    url: '/users/acme/invocations',
    headers: { ...bearer(GLOBEX), accept: 'application/x-ndjson' }
  })).statusCode, 403)
  assert.equal((await journal(a, '_global', ACME)).status, 403)
  assert.deepEqual((await journal(a, 'acme', ACME)).body.invocations.map((e: any) => e.callId), ['acme-call'])
  assert.deepEqual(
    (await journal(a, 'globex', GLOBEX)).body.invocations.map((e: any) => [e.callId, e.error?.code ?? null]),
    [['sneaky', 'GW_TENANT_MISMATCH'], ['globex-call', null]]
  )
  assert.deepEqual((await journal(a, 'acme', ADMIN)).body.invocations.map((e: any) => e.callId), ['acme-call'])
  const global = (await journal(a, '_global', ADMIN)).body.invocations
  assert.deepEqual(global.map((e: any) => [e.callId, e.userId, e.keyId]), [['admin-call', null, keyId(ADMIN)]])
  assert.equal((await a.inject({ method: 'GET', url: '/users/acme/invocations/globex-call', headers: bearer(ADMIN) })).statusCode, 404)
})

test('masking at any depth and caps: a 10 MB argument is capped in the journal and the call is unaffected', async (t) => {
  const a = await app(t, { BODY_LIMIT_BYTES: String(32 * 1024 * 1024) })
  const big = 'x'.repeat(10 * 1024 * 1024)
  const args = { expression: '6*7', context: { deep: [{ headers: { Authorization: 'Bearer live-secret-token' } }, { password: 'hunter2', blob: big }] } }
  // calculate refuses unknown properties, so the call fails as a tool error; what matters is that it is answered normally.
  const res = await a.inject({ method: 'POST', url: '/invoke', headers: bearer(ACME), payload: { name: 'calculate', arguments: args, callId: 'big' } })
  assert.equal(res.statusCode, 200)
  assert.equal(res.json().error.code, 'GW_INVALID_ARGUMENTS')
  const ok = await a.inject({
    method: 'POST',
    url: '/invoke',
    headers: bearer(ACME),
    payload: { name: 'calculate', arguments: { expression: '6*7' }, callId: 'small' }
  })
  assert.equal(ok.json().output, JSON.stringify({ expression: '6*7', result: 42 }))

  await a.services.journal.flush()
  const entry = (await a.inject({ method: 'GET', url: '/users/acme/invocations/big', headers: bearer(ACME) })).json()
  assert.equal(entry.arguments.$capped, true)
  assert.equal(entry.arguments.limit, 16 * 1024)
  assert.ok(entry.arguments.bytes > 10 * 1024 * 1024)
  assert.ok(Buffer.byteLength(entry.arguments.head) <= 16 * 1024)
  assert.ok(!JSON.stringify(entry).includes('live-secret-token') && !JSON.stringify(entry).includes('hunter2'))
  const masked = JSON.stringify({ expression: '6*7', context: { deep: [{ headers: { Authorization: '****' } }, { password: '****', blob: big }] } })
  assert.equal(entry.argumentsSha256, createHash('sha256').update(masked).digest('hex'))
  assert.ok(entry.arguments.head.startsWith('{"expression":"6*7","context":{"deep":[{"headers":{"Authorization":"****"}}'))
})

test('JOURNAL=meta keeps no arguments, output or trace; JOURNAL=off records nothing', async (t) => {
  const meta = await app(t, { JOURNAL: 'meta' })
  await meta.inject({
    method: 'POST',
    url: '/invoke',
    headers: bearer(ACME),
    payload: { name: 'calculate', arguments: { expression: '1+1' }, callId: 'm1', trace: true }
  })
  const [entry] = (await journal(meta, 'acme', ACME)).body.invocations
  assert.equal(entry.callId, 'm1')
  assert.equal(entry.arguments, null)
  assert.equal(entry.output, null)
  assert.equal(entry.trace, null)
  assert.match(entry.argumentsSha256, /^[0-9a-f]{64}$/)
  assert.equal(entry.route, 'function')

  const off = await app(t, { JOURNAL: 'off' })
  const r = await off.inject({
    method: 'POST',
    url: '/invoke',
    headers: bearer(ACME),
    payload: { name: 'calculate', arguments: { expression: '1+1' }, callId: 'o1' }
  })
  assert.equal(r.statusCode, 200)
  assert.deepEqual((await journal(off, 'acme', ACME)).body, { invocations: [], nextCursor: null })
  assert.equal(await metric(off, 'gateway_journal_written_total'), 0)
})

test('with REDIS_URL the journal is a Redis stream shared by every instance', async (t) => {
  const r = await redisForTest(t)
  if (r === undefined) return
  const env = { REDIS_URL, REDIS_KEY_PREFIX: r.prefix }
  const one = await app(t, env)
  const two = await app(t, env)
  await one.inject({
    method: 'POST',
    url: '/invoke',
    headers: bearer(ACME),
    payload: { name: 'calculate', arguments: { expression: '1', token: 'abc' }, callId: 'from-one' }
  })
  await two.inject({
    method: 'POST',
    url: '/invoke',
    headers: bearer(ACME),
    payload: { name: 'calculate', arguments: { expression: '2' }, callId: 'from-two' }
  })
  await one.services.journal.flush()
  const { body } = await journal(two, 'acme', ACME)
  assert.deepEqual(body.invocations.map((e: any) => e.callId), ['from-two', 'from-one'])
  assert.equal(body.invocations[1].arguments.token, '****')
  assert.equal(await r.redis.xlen(`${r.prefix}{journal:acme}:stream`), 2)
  assert.equal((await one.inject({ method: 'GET', url: '/users/acme/invocations/from-two', headers: bearer(ACME) })).json().callId, 'from-two')
})

test('Redis slow or down while journaling: calls go on, drops are counted, reads say 503', async (t) => {
  const r = await redisForTest(t)
  if (r === undefined) return
  const proxy = new TcpProxy()
  await proxy.start()
  t.after(async () => await proxy.stop())
  // The registry stays in memory: only the journal (and the rate limiter) depend on the proxy.
  const a = await app(t, { REDIS_URL: proxy.url, REDIS_KEY_PREFIX: r.prefix }, { store: createMemoryRegistryStore() })
  const call = async (callId: string): Promise<void> => {
    const res = await a.inject({
      method: 'POST',
      url: '/invoke',
      headers: bearer(ACME),
      payload: { name: 'calculate', arguments: { expression: '1+1' }, callId }
    })
    assert.equal(res.statusCode, 200)
    assert.equal(res.json().output, JSON.stringify({ expression: '1+1', result: 2 }))
  }
  while (await metric(a, 'gateway_journal_written_total') < 1) {
    await call('warm')
    await a.services.journal.flush()
    await delay(20)
  }
  // A Redis that accepts and never answers: the calls are answered while the writes hang.
  proxy.pause()
  for (let i = 0; i < 5; i++) await call(`paused-${i}`)
  await proxy.stop()
  for (let i = 0; i < 20; i++) await call(`down-${i}`)
  await a.services.journal.flush()
  assert.ok(await metric(a, 'gateway_journal_dropped_total') >= 20, 'every entry written while Redis was away is counted as dropped')
  const read = await a.inject({ method: 'GET', url: '/users/acme/invocations', headers: bearer(ACME) })
  assert.equal(read.statusCode, 503)
  assert.equal(read.json().code, 'GW_JOURNAL_UNAVAILABLE')
})
