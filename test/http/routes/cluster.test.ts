import { test } from 'node:test'
import type { TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { Redis } from 'ioredis'
import { ClusterTokens, CLUSTER_TOKEN_HEADER, CLUSTER_TOKEN_MAX_AGE_MS } from '../../../src/cluster/index.js'
import { buildTestApp } from '../../helpers/app.js'
import { REDIS_URL, deleteKeys, requireRedis, uniquePrefix } from '../../helpers/redis-utils.js'

const SECRET = 'cluster-secret-for-the-tests'
const PATH = '/internal/cluster/processes'
const ADMIN = 'admin-key-0123456789'
const TENANT = 'tenant-key-0123456789'

async function clusterApp (t: TestContext, env: Record<string, string> = {}): Promise<Awaited<ReturnType<typeof buildTestApp>>> {
  const prefix = uniquePrefix()
  t.after(async () => { await deleteKeys(prefix) })
  return await buildTestApp(t, { env: { REDIS_URL, REDIS_KEY_PREFIX: prefix, API_KEYS: `${ADMIN}:*,${TENANT}:alice`, CLUSTER_SECRET: SECRET, ...env } })
}

test('Redis with API keys and no CLUSTER_SECRET does not start, and says why', async (t) => {
  if (!await requireRedis(t)) return
  await assert.rejects(buildTestApp(t, { env: { REDIS_URL, REDIS_KEY_PREFIX: uniquePrefix(), API_KEYS: `${ADMIN}:*` } }), /CLUSTER_SECRET is required/)
})

test('GET /cluster: admin only; lists this instance once its membership started', async (t) => {
  if (!await requireRedis(t)) return
  const app = await clusterApp(t)
  const membership = app.services.coordination?.membership
  assert.ok(membership)
  await membership.start('http://127.0.0.1:9')
  const res = await app.inject({ method: 'GET', url: '/cluster', headers: { authorization: `Bearer ${ADMIN}` } })
  assert.equal(res.statusCode, 200, res.body)
  const body = res.json() as { self: string, instances: Array<{ id: string, url: string, processes: number }> }
  assert.equal(body.self, membership.id)
  assert.deepEqual(body.instances.map((i) => [i.id, i.url, i.processes]), [[membership.id, 'http://127.0.0.1:9', 0]])
  assert.equal((await app.inject({ method: 'GET', url: '/cluster', headers: { authorization: `Bearer ${TENANT}` } })).statusCode, 403)
  assert.equal((await app.inject({ method: 'GET', url: '/cluster' })).statusCode, 401)
})

test('GET /cluster without Redis: no membership, an empty list', async (t) => {
  const app = await buildTestApp(t)
  const res = await app.inject({ method: 'GET', url: '/cluster' })
  assert.equal(res.statusCode, 200)
  assert.deepEqual(res.json(), { self: null, instances: [] })
})

test('the instance-to-instance route: 401 without a token, with an API key instead, a tampered, expired or replayed token; ' +
  'a good one gets through', async (t) => {
  if (!await requireRedis(t)) return
  const app = await clusterApp(t)
  const payload = JSON.stringify({ op: 'list' })
  const tokens = new ClusterTokens(SECRET)
  const send = async (headers: Record<string, string>, body = payload): Promise<{ statusCode: number, json: () => unknown, body: string }> =>
    await app.inject({ method: 'POST', url: PATH, headers: { 'content-type': 'application/json', ...headers }, payload: body })

  const cases: Array<[string, Record<string, string>, string?]> = [
    ['no token', {}],
    ['an admin API key', { authorization: `Bearer ${ADMIN}` }],
    ['a token of another secret', { [CLUSTER_TOKEN_HEADER]: new ClusterTokens(`${SECRET}-other`).sign({ method: 'POST', path: PATH, body: payload }) }],
    ['a token for another body', { [CLUSTER_TOKEN_HEADER]: tokens.sign({ method: 'POST', path: PATH, body: '{"op":"stop"}' }) }],
    ['an expired token', { [CLUSTER_TOKEN_HEADER]: tokens.sign({ method: 'POST', path: PATH, body: payload }, Date.now() - CLUSTER_TOKEN_MAX_AGE_MS - 5000) }],
    ['a malformed token', { [CLUSTER_TOKEN_HEADER]: 'v1.x.y.z' }]
  ]
  for (const [what, headers] of cases) {
    const res = await send(headers)
    assert.equal(res.statusCode, 401, `${what}: ${res.body}`)
    assert.equal((res.json() as { code: string }).code, 'GW_UNAUTHORIZED', what)
  }
  const good = tokens.sign({ method: 'POST', path: PATH, body: payload })
  const first = await send({ [CLUSTER_TOKEN_HEADER]: good })
  assert.notEqual(first.statusCode, 401, first.body)
  assert.ok(first.statusCode < 500, first.body)
  const replay = await send({ [CLUSTER_TOKEN_HEADER]: good })
  assert.equal(replay.statusCode, 401, replay.body)
  assert.match((replay.json() as { message: string }).message, /already used/)
})

test('open mode (no keys) with Redis: the instance-to-instance route still needs a token', async (t) => {
  if (!await requireRedis(t)) return
  const app = await clusterApp(t, { API_KEYS: '' })
  const res = await app.inject({ method: 'POST', url: PATH, headers: { 'content-type': 'application/json' }, payload: '{"op":"list"}' })
  assert.equal(res.statusCode, 401, res.body)
})

test('the instance-to-instance route is not in the OpenAPI document', async (t) => {
  const app = await buildTestApp(t)
  const doc = (await app.inject({ method: 'GET', url: '/openapi.json' })).json() as { paths: Record<string, unknown> }
  assert.ok(doc.paths['/cluster'] !== undefined)
  assert.equal(Object.keys(doc.paths).some((p) => p.startsWith('/internal')), false)
})

test('the instance-to-instance route authenticates before any body parsing or validation, whatever the content type', async (t) => {
  if (!await requireRedis(t)) return
  const app = await clusterApp(t)
  const tokens = new ClusterTokens(SECRET)
  // A token of another secret, and a right token signed for another body: both present, both wrong.
  const wrongTokens = [
    new ClusterTokens(`${SECRET}-other`).sign({ method: 'POST', path: PATH, body: 'x' }),
    tokens.sign({ method: 'POST', path: PATH, body: '{"op":"stop"}' }),
    'v1.x.y.z'
  ]
  const bodies: Array<[string | undefined, string]> = [
    ['text/plain', 'not json at all'],
    ['text/plain', '{"op":"list"}'],
    ['application/x-www-form-urlencoded', 'op=list'],
    ['application/octet-stream', '\u0000\u0001'],
    ['application/json', '{not json'],
    ['application/json', '[1,2]'],
    [undefined, '']
  ]
  for (const token of wrongTokens) {
    for (const [type, payload] of bodies) {
      const res = await app.inject({
        method: 'POST',
        url: PATH,
        headers: { [CLUSTER_TOKEN_HEADER]: token, ...(type !== undefined ? { 'content-type': type } : {}) },
        payload
      })
      assert.equal(res.statusCode, 401, `${type ?? 'no type'} ${payload}: ${res.body}`)
      assert.equal((res.json() as { code: string }).code, 'GW_UNAUTHORIZED')
      assert.match((res.json() as { message: string }).message, /^Instance-to-instance call refused/)
    }
  }
  // Only with a right token is the body judged: a text/plain one is then the schema's 400, never a 500.
  const text = '{"op":"list"}'
  const res = await app.inject({
    method: 'POST',
    url: PATH,
    headers: { 'content-type': 'text/plain', [CLUSTER_TOKEN_HEADER]: tokens.sign({ method: 'POST', path: PATH, body: text }) },
    payload: text
  })
  assert.equal(res.statusCode, 400, res.body)
  assert.match((res.json() as { message: string }).message, /body must be object/)
})

test('a token accepted by one instance is refused by every other instance on the same Redis (nonces in Redis)', async (t) => {
  if (!await requireRedis(t)) return
  const prefix = uniquePrefix()
  t.after(async () => { await deleteKeys(prefix) })
  const env = { REDIS_URL, REDIS_KEY_PREFIX: prefix, API_KEYS: `${ADMIN}:*`, CLUSTER_SECRET: SECRET }
  const a = await buildTestApp(t, { env })
  const b = await buildTestApp(t, { env })
  const payload = JSON.stringify({ op: 'list' })
  const token = new ClusterTokens(SECRET).sign({ method: 'POST', path: PATH, body: payload })
  const send = async (app: typeof a): Promise<{ statusCode: number, body: string, json: () => unknown }> =>
    await app.inject({ method: 'POST', url: PATH, headers: { 'content-type': 'application/json', [CLUSTER_TOKEN_HEADER]: token }, payload })
  const first = await send(a)
  assert.notEqual(first.statusCode, 401, first.body)
  assert.ok(first.statusCode < 500, first.body)
  const replayed = await send(b)
  assert.equal(replayed.statusCode, 401, replayed.body)
  assert.match((replayed.json() as { message: string }).message, /already used/)
  // The nonce expires with the token (its age bound twice over): nothing of it stays in Redis.
  const redis = new Redis(REDIS_URL)
  t.after(() => { redis.disconnect() })
  const ttl = await redis.pttl(`${prefix}cluster:nonce:${token.split('.')[2] ?? ''}`)
  assert.ok(ttl > 0 && ttl <= 2 * CLUSTER_TOKEN_MAX_AGE_MS, `PTTL ${ttl}`)
})
