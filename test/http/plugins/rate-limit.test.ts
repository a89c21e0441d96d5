import { test } from 'node:test'
import assert from 'node:assert/strict'
import type { TestContext } from 'node:test'
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify'
import { buildTestApp } from '../../helpers/app.js'
import { REDIS_REQUIRED, REDIS_URL, TcpProxy, countKeys, deleteKeys, redisReachable, uniquePrefix } from '../../helpers/redis-utils.js'
import { closeGate, openGate, waiting } from '../../fixtures/functions/slow/gate.js'
import { startRedisCluster } from '../../../scripts/lib/redis-cluster.js'

const ADMIN = 'admin-key-0123456789abcdef'
const ACME = 'acme-key-0123456789abcdef'
const GLOBEX = 'globex-key-0123456789abcd'
const API_KEYS = `${ADMIN}:*,${ACME}:acme,${GLOBEX}:globex`
const bearer = (key: string): Record<string, string> => ({ authorization: `Bearer ${key}` })

async function keyed (t: TestContext, env: Record<string, string> = {}): Promise<FastifyInstance> {
  // CLUSTER_SECRET: with Redis and API keys the instances sign their calls to each other.
  return await buildTestApp(t, {
    env: { API_KEYS, CLUSTER_SECRET: 'rate-limit-test-cluster-secret', FUNCTIONS_DIR: 'test/fixtures/functions/slow', LOAD_EXAMPLES: 'true', ...env }
  })
}

function assertRateLimited (res: LightMyRequestResponse): void {
  assert.equal(res.statusCode, 429, res.body)
  const body = res.json()
  assert.deepEqual(Object.keys(body).sort(), ['code', 'error', 'message', 'statusCode'])
  assert.equal(body.code, 'GW_RATE_LIMITED')
  assert.equal(body.error, 'Too Many Requests')
  const retryAfter = Number(res.headers['retry-after'])
  assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60, `Retry-After: ${String(res.headers['retry-after'])}`)
}

/** `n` requests, at most `width` in flight at once (bounded memory and time). */
async function flood (app: FastifyInstance, n: number, width: number, request: () => InjectOptions): Promise<LightMyRequestResponse[]> {
  const out: LightMyRequestResponse[] = []
  for (let i = 0; i < n; i += width) {
    const chunk = await Promise.all(Array.from({ length: Math.min(width, n - i) }, async () => await app.inject(request())))
    out.push(...chunk)
  }
  return out
}

/** Waits (bounded by the test timeout) until `cond` holds; no sleeping on a guess. */
async function until (cond: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setImmediate(resolve))
  }
}

test('10,000 rapid requests from one tenant: 429 for that tenant only, with Retry-After; others, public routes unaffected', async (t) => {
  const a = await keyed(t, { RATE_LIMIT_PER_MINUTE: '50' })
  const all = await flood(a, 10_000, 200, () => ({ method: 'GET', url: '/tools?functions=calculate', headers: bearer(ACME) }))
  const ok = all.filter((r) => r.statusCode === 200)
  const limited = all.filter((r) => r.statusCode === 429)
  assert.equal(ok.length, 50, 'exactly the limit passes')
  assert.equal(limited.length, 10_000 - 50, 'every other request is a 429')
  assertRateLimited(limited[0] as LightMyRequestResponse)
  assertRateLimited(limited.at(-1) as LightMyRequestResponse)
  assert.equal(ok[0]?.headers['x-ratelimit-limit'], '50')

  // The same tenant everywhere: another route, and an admin acting for acme, share the bucket.
  assertRateLimited(await a.inject({ method: 'POST', url: '/invoke', headers: bearer(ACME), payload: { name: 'calculate', arguments: { expression: '1' } } }))
  assertRateLimited(await a.inject({ method: 'GET', url: '/catalog?userId=acme', headers: bearer(ADMIN) }))
  assertRateLimited(await a.inject({
    method: 'POST',
    url: '/invoke',
    headers: bearer(ADMIN),
    payload: { name: 'calculate', userId: 'acme', arguments: { expression: '1' } }
  }))

  // Other tenants and the admin for itself are untouched.
  const other = await a.inject({ method: 'POST', url: '/invoke', headers: bearer(GLOBEX), payload: { name: 'calculate', arguments: { expression: '6*7' } } })
  assert.equal(JSON.parse(other.json().output).result, 42)
  assert.equal(other.headers['x-ratelimit-remaining'], '49')
  assert.equal((await a.inject({ method: 'GET', url: '/catalog?userId=globex', headers: bearer(ADMIN) })).statusCode, 200)
  assert.equal((await a.inject({ method: 'GET', url: '/catalog', headers: bearer(ADMIN) })).statusCode, 200)

  // Public routes are never limited, whoever calls them.
  const health = await a.inject({ method: 'GET', url: '/healthz', headers: bearer(ACME) })
  assert.equal(health.statusCode, 200)
  assert.equal(health.headers['x-ratelimit-limit'], undefined)
})

test('open mode: buckets by the named userId, else by client address', async (t) => {
  const a = await buildTestApp(t, { env: { RATE_LIMIT_PER_MINUTE: '3' } })
  const statuses = async (url: string, remoteAddress = '127.0.0.1'): Promise<number[]> =>
    (await flood(a, 5, 5, () => ({ method: 'GET', url, remoteAddress }))).map((r) => r.statusCode).sort()
  assert.deepEqual(await statuses('/catalog?userId=one'), [200, 200, 200, 429, 429])
  assert.deepEqual(await statuses('/catalog?userId=two'), [200, 200, 200, 429, 429])
  assert.deepEqual(await statuses('/catalog', '10.0.0.1'), [200, 200, 200, 429, 429])
  assert.deepEqual(await statuses('/catalog', '10.0.0.2'), [200, 200, 200, 429, 429])
})

test('concurrent invocations per tenant: the cap is 429 with Retry-After: 1, other tenants unaffected, slots freed', async (t) => {
  closeGate()
  t.after(() => openGate(true))
  const a = await keyed(t, { MAX_CONCURRENT_PER_TENANT: '2' })
  const call = (key: string): Promise<LightMyRequestResponse> => a.inject({
    method: 'POST',
    url: '/invoke',
    headers: bearer(key),
    payload: { name: 'wait_gate' }
  })

  const held = [call(ACME), call(ACME)]
  await until(() => waiting() === 2, 'two calls at the gate')
  assert.equal(a.invocationsInFlight.get('t:acme'), 2)
  const third = await call(ACME)
  assertRateLimited(third)
  assert.equal(third.headers['retry-after'], '1')
  assert.match(third.json().message, /at most 2/)
  assertRateLimited(await a.inject({ method: 'POST', url: '/invoke/batch', headers: bearer(ACME), payload: { calls: [{ name: 'wait_gate' }] } }))
  // An admin acting for acme is acme's load too.
  assertRateLimited(await a.inject({ method: 'POST', url: '/invoke', headers: bearer(ADMIN), payload: { name: 'wait_gate', userId: 'acme' } }))
  // Listing is not an invocation: not capped.
  assert.equal((await a.inject({ method: 'GET', url: '/tools?functions=wait_gate', headers: bearer(ACME) })).statusCode, 200)

  const globex = call(GLOBEX)
  await until(() => waiting() === 3, 'globex at the gate too')
  openGate()
  for (const res of [...await Promise.all(held), await globex]) assert.equal(res.json().output, 'passed')
  assert.equal(a.invocationsInFlight.size, 0, 'every slot released')
  openGate(true)
  assert.equal((await call(ACME)).json().output, 'passed')
  assert.equal(a.invocationsInFlight.size, 0)
})

test('a batch holds as many slots as calls it runs at once: min(calls, BATCH_CONCURRENCY, cap)', async (t) => {
  closeGate()
  t.after(() => openGate(true))
  const a = await keyed(t, { MAX_CONCURRENT_PER_TENANT: '4', BATCH_CONCURRENCY: '3' })
  const batch = (n: number): Promise<LightMyRequestResponse> => a.inject({
    method: 'POST',
    url: '/invoke/batch',
    headers: bearer(ACME),
    payload: { calls: Array.from({ length: n }, () => ({ name: 'wait_gate' })) }
  })
  const single = (): Promise<LightMyRequestResponse> => a.inject({ method: 'POST', url: '/invoke', headers: bearer(ACME), payload: { name: 'wait_gate' } })

  // A batch of 2 holds 2 slots: two more single calls fit, a third does not.
  const two = batch(2)
  await until(() => waiting() === 2, 'the batch of 2 at the gate')
  assert.equal(a.invocationsInFlight.get('t:acme'), 2)
  const singles = [single(), single()]
  await until(() => waiting() === 4, 'two more calls')
  assertRateLimited(await single())
  openGate()
  assert.deepEqual((await two).json().results.map((r: any) => r.output), ['passed', 'passed'])
  for (const res of await Promise.all(singles)) assert.equal(res.json().output, 'passed')
  assert.equal(a.invocationsInFlight.size, 0)

  // A batch of 20 runs 3 at a time (BATCH_CONCURRENCY), so it holds 3 slots, not 20.
  const big = batch(20)
  await until(() => waiting() === 3, 'the big batch running 3 at a time')
  assert.equal(a.invocationsInFlight.get('t:acme'), 3)
  const fourth = single()
  await until(() => waiting() === 4, 'a fourth call')
  assertRateLimited(await single())
  assertRateLimited(await batch(1))
  openGate(true)
  const results = (await big).json().results
  assert.equal(results.length, 20)
  assert.ok(results.every((r: any) => r.output === 'passed'))
  assert.equal((await fourth).json().output, 'passed')
  assert.equal(a.invocationsInFlight.size, 0)
})

test('with a cap below BATCH_CONCURRENCY, a batch takes the whole cap and still runs on an idle tenant', async (t) => {
  closeGate()
  t.after(() => openGate(true))
  const a = await keyed(t, { MAX_CONCURRENT_PER_TENANT: '2', BATCH_CONCURRENCY: '8' })
  const big = a.inject({
    method: 'POST',
    url: '/invoke/batch',
    headers: bearer(ACME),
    payload: { calls: Array.from({ length: 5 }, () => ({ name: 'wait_gate' })) }
  })
  await until(() => waiting() === 5, 'the batch at the gate')
  assert.equal(a.invocationsInFlight.get('t:acme'), 2)
  assertRateLimited(await a.inject({ method: 'POST', url: '/invoke', headers: bearer(ACME), payload: { name: 'wait_gate' } }))
  openGate(true)
  assert.equal((await big).json().results.length, 5)
  assert.equal(a.invocationsInFlight.size, 0)
})

test('a client that goes away mid-call frees its slot', async (t) => {
  closeGate()
  t.after(() => openGate(true))
  const a = await keyed(t, { MAX_CONCURRENT_PER_TENANT: '1' })
  await a.listen({ port: 0, host: '127.0.0.1' })
  const address = a.server.address()
  assert.ok(address !== null && typeof address === 'object')
  const url = `http://127.0.0.1:${address.port}/invoke`
  const controller = new AbortController()
  const gone = fetch(url, {
    method: 'POST',
    signal: controller.signal,
    headers: { ...bearer(ACME), 'content-type': 'application/json' },
    body: '{"name":"wait_gate"}'
  }).catch((err: Error) => err)
  await until(() => waiting() === 1, 'the call at the gate')
  assert.equal(a.invocationsInFlight.get('t:acme'), 1)
  controller.abort()
  assert.ok((await gone) instanceof Error)
  await until(() => a.invocationsInFlight.size === 0, 'the slot to be released')
  // The tool saw the abort too (abortOnClientGone), so nothing is left at the gate.
  await until(() => waiting() === 0, 'the aborted call to leave the gate')
  openGate(true)
  const res = await fetch(url, { method: 'POST', headers: { ...bearer(ACME), 'content-type': 'application/json' }, body: '{"name":"wait_gate"}' })
  assert.equal(res.status, 200)
})

test('Redis-backed: two instances share one limit per tenant, under the configured key prefix', async (t) => {
  if (!await redisReachable()) {
    if (REDIS_REQUIRED) assert.fail(`Redis is required under CI and not reachable at ${REDIS_URL}`)
    t.skip(`no Redis at ${REDIS_URL}`)
    return
  }
  const prefix = uniquePrefix()
  t.after(async () => { await deleteKeys(prefix) })
  const env = { RATE_LIMIT_PER_MINUTE: '40', REDIS_URL, REDIS_KEY_PREFIX: prefix }
  const one = await keyed(t, env)
  const two = await keyed(t, env)
  const req = (): InjectOptions => ({ method: 'GET', url: '/tools?functions=calculate', headers: bearer(ACME) })
  const first = await flood(one, 30, 10, req)
  assert.ok(first.every((r) => r.statusCode === 200))
  const second = await flood(two, 30, 10, req)
  assert.equal(second.filter((r) => r.statusCode === 200).length, 10, 'the second instance sees the first one\'s count')
  const limited = second.filter((r) => r.statusCode === 429)
  assert.equal(limited.length, 20)
  assertRateLimited(limited[0] as LightMyRequestResponse)
  assert.equal((await two.inject({ method: 'GET', url: '/tools?functions=calculate', headers: bearer(GLOBEX) })).statusCode, 200)
  assert.ok(await countKeys(`${prefix}rl:`) >= 2, 'counters live under the prefix')
})

test('Redis down: requests are not limited rather than failing, and nothing hangs', async (t) => {
  if (!await redisReachable()) {
    if (REDIS_REQUIRED) assert.fail(`Redis is required under CI and not reachable at ${REDIS_URL}`)
    t.skip(`no Redis at ${REDIS_URL}`)
    return
  }
  const proxy = new TcpProxy()
  await proxy.start()
  t.after(async () => await proxy.stop())
  const prefix = uniquePrefix()
  t.after(async () => { await deleteKeys(prefix) })
  const a = await keyed(t, { RATE_LIMIT_PER_MINUTE: '5', REDIS_URL: proxy.url, REDIS_KEY_PREFIX: prefix })
  const invoke = (): InjectOptions => ({
    method: 'POST',
    url: '/invoke',
    headers: bearer(ADMIN),
    payload: { name: 'calculate', arguments: { expression: '1+1' } }
  })
  const before = await flood(a, 7, 1, invoke)
  assert.deepEqual(before.map((r) => r.statusCode), [200, 200, 200, 200, 200, 429, 429], 'limited while Redis is up')
  await proxy.stop()
  // Admin calls to a function tool do not touch the registry, so only the limiter sees Redis go.
  const during = await flood(a, 10, 5, invoke)
  assert.deepEqual([...new Set(during.map((r) => r.statusCode))], [200], during.map((r) => r.body).join('\n'))
  // ...and the metrics say so: the limiter's Redis errors are counted.
  const metrics = (await a.inject({ method: 'GET', url: '/metrics' })).body
  const errors = Number(/^gateway_rate_limit_redis_errors_total (\d+)/m.exec(metrics)?.[1] ?? 0)
  assert.ok(errors > 0, 'gateway_rate_limit_redis_errors_total stayed 0 while Redis was down')
})

test('Redis-backed: MAX_CONCURRENT_PER_TENANT counts the calls of every instance; slots are freed in Redis', async (t) => {
  if (!await redisReachable()) {
    if (REDIS_REQUIRED) assert.fail(`Redis is required under CI and not reachable at ${REDIS_URL}`)
    t.skip(`no Redis at ${REDIS_URL}`)
    return
  }
  closeGate()
  t.after(() => openGate(true))
  const prefix = uniquePrefix()
  t.after(async () => { await deleteKeys(prefix) })
  const env = { MAX_CONCURRENT_PER_TENANT: '2', REDIS_URL, REDIS_KEY_PREFIX: prefix }
  const one = await keyed(t, env)
  const two = await keyed(t, env)
  const call = (app: FastifyInstance, key = ACME): Promise<LightMyRequestResponse> => app.inject({
    method: 'POST',
    url: '/invoke',
    headers: bearer(key),
    payload: { name: 'wait_gate' }
  })
  const held = [call(one), call(two)]
  await until(() => waiting() === 2, 'one call at the gate on each instance')
  assert.equal(one.invocationsInFlight.get('t:acme'), 1)
  // Each instance runs one: a per-instance cap of 2 would let this through.
  const third = await call(one)
  assertRateLimited(third)
  assert.match(third.json().message, /at most 2/)
  assertRateLimited(await call(two))
  // Another tenant is not held back.
  const globex = call(two, GLOBEX)
  await until(() => waiting() === 3, 'globex at the gate too')
  held.push(globex)
  openGate(true)
  for (const res of await Promise.all(held)) assert.equal(res.json().output, 'passed')
  assert.equal(await countKeys(`${prefix}{sem:t:acme}`), 0, 'the slots left Redis')
  assert.equal((await call(two)).json().output, 'passed')
  assert.equal(one.rateLimitRedisErrors(), 0)
})

test('Redis down: the concurrency cap falls back to this instance\'s own count, and the errors are counted', async (t) => {
  if (!await redisReachable()) {
    if (REDIS_REQUIRED) assert.fail(`Redis is required under CI and not reachable at ${REDIS_URL}`)
    t.skip(`no Redis at ${REDIS_URL}`)
    return
  }
  closeGate()
  t.after(() => openGate(true))
  const proxy = new TcpProxy()
  await proxy.start()
  t.after(async () => await proxy.stop())
  const prefix = uniquePrefix()
  t.after(async () => { await deleteKeys(prefix) })
  const a = await keyed(t, { MAX_CONCURRENT_PER_TENANT: '1', REDIS_URL: proxy.url, REDIS_KEY_PREFIX: prefix })
  await proxy.stop()
  // The admin for itself: its calls to a function tool do not touch the registry, only the limiter sees Redis go.
  const call = (): Promise<LightMyRequestResponse> => a.inject({ method: 'POST', url: '/invoke', headers: bearer(ADMIN), payload: { name: 'wait_gate' } })
  const held = call()
  await until(() => waiting() === 1, 'the call at the gate')
  assertRateLimited(await call())
  assert.ok(a.rateLimitRedisErrors() > 0)
  openGate(true)
  assert.equal((await held).json().output, 'passed')
  assert.equal(a.invocationsInFlight.size, 0)
})

test('on a real Redis Cluster: the per-minute limit (the plugin\'s own Redis store) and the concurrency cap are shared by two instances', async (t) => {
  if (!await redisReachable()) {
    if (REDIS_REQUIRED) assert.fail(`Redis is required under CI and not reachable at ${REDIS_URL}`)
    t.skip(`no Redis at ${REDIS_URL}`)
    return
  }
  closeGate()
  t.after(() => openGate(true))
  const cluster = await startRedisCluster(t)
  const env = { RATE_LIMIT_PER_MINUTE: '20', MAX_CONCURRENT_PER_TENANT: '2', REDIS_CLUSTER_NODES: cluster.nodes.join(','), REDIS_KEY_PREFIX: uniquePrefix() }
  const one = await keyed(t, env)
  const two = await keyed(t, env)
  const call = (app: FastifyInstance): Promise<LightMyRequestResponse> => app.inject({
    method: 'POST',
    url: '/invoke',
    headers: bearer(ADMIN),
    payload: { name: 'wait_gate' }
  })
  const held = [call(one), call(two)]
  await until(() => waiting() === 2, 'one call at the gate on each instance')
  assertRateLimited(await call(two))
  openGate(true)
  for (const res of await Promise.all(held)) assert.equal(res.json().output, 'passed')
  // 3 counted so far; 17 more pass over both instances, then 429.
  const req = (): InjectOptions => ({ method: 'GET', url: '/tools?functions=calculate', headers: bearer(ADMIN) })
  const first = await flood(one, 10, 5, req)
  const second = await flood(two, 10, 5, req)
  assert.equal([...first, ...second].filter((r) => r.statusCode === 200).length, 17)
  assertRateLimited(second.at(-1) as LightMyRequestResponse)
  assert.equal(one.rateLimitRedisErrors() + two.rateLimitRedisErrors(), 0)
})
