import { test } from 'node:test'
import type { TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { Membership, newInstanceId } from '../../../src/cluster/index.js'
import { silentLogger } from '../../../src/logger.js'
import { createRedisClient, quitWithTimeout } from '../../../src/redis/index.js'
import type { RedisClient, RedisTarget } from '../../../src/redis/index.js'
import { startRedisCluster } from '../../../scripts/lib/redis-cluster.js'
import { REDIS_URL, deleteKeys, requireRedis, uniquePrefix } from '../../helpers/redis-utils.js'

function client (t: TestContext, target: RedisTarget): RedisClient {
  const c = createRedisClient(target, { commandTimeoutMs: 2000 })
  c.on('error', () => {})
  t.after(async () => await quitWithTimeout(c, 1000))
  return c
}

async function waitUntil (check: () => Promise<boolean>, timeoutMs: number): Promise<number> {
  const start = Date.now()
  while (!await check()) {
    if (Date.now() - start > timeoutMs) throw new Error(`not within ${timeoutMs} ms`)
    await sleep(20)
  }
  return Date.now() - start
}

async function scenario (t: TestContext, target: RedisTarget): Promise<void> {
  const keyPrefix = uniquePrefix()
  if (target.kind === 'single') t.after(async () => { await deleteKeys(keyPrefix) })
  const heartbeatMs = 100
  const make = (processes: number): Membership => new Membership(
    { redis: client(t, target), keyPrefix, instanceId: newInstanceId() },
    { heartbeatMs, processes: () => processes, logger: silentLogger }
  )
  const a = make(2)
  const b = make(0)
  const crashed = make(1)
  t.after(async () => { await a.stop(); await b.stop() })
  await a.start('http://10.0.0.1:8080/')
  await b.start('http://10.0.0.2:8080')
  // Registers once and never renews: an instance killed right after its first heartbeat.
  await crashed.heartbeat()

  const listed = await a.list()
  assert.deepEqual(listed.map((i) => i.id).sort(), [a.id, b.id, crashed.id].sort())
  const infoA = listed.find((i) => i.id === a.id)
  assert.equal(infoA?.url, 'http://10.0.0.1:8080', 'trailing slash dropped')
  assert.equal(infoA?.processes, 2)
  assert.ok((infoA?.lastSeenAt ?? 0) >= (infoA?.startedAt ?? Infinity))
  assert.equal((await b.get(a.id))?.url, 'http://10.0.0.1:8080')

  // The crashed one is gone once its TTL (3 heartbeats) passes; the renewing ones stay.
  const gone = await waitUntil(async () => !await b.isAlive(crashed.id), 5000)
  t.diagnostic(`an instance that stopped renewing was gone after ${gone} ms (TTL ${heartbeatMs * 3} ms)`)
  assert.equal(await b.isAlive(a.id), true)
  assert.deepEqual((await b.list()).map((i) => i.id).sort(), [a.id, b.id].sort())
  assert.equal(await b.get(crashed.id), undefined)

  // A clean stop leaves at once, without waiting for the TTL.
  await a.stop()
  assert.equal(await b.isAlive(a.id), false)
  assert.deepEqual((await b.list()).map((i) => i.id), [b.id])
}

test('membership on one Redis: live instances listed, a crashed one gone after its TTL, a stopped one at once', async (t) => {
  if (!await requireRedis(t)) return
  await scenario(t, { kind: 'single', url: REDIS_URL })
})

test('membership on a local 3-master Redis Cluster', async (t) => {
  const cluster = await startRedisCluster(t)
  await scenario(t, { kind: 'cluster', nodes: cluster.nodes.map((n) => ({ host: n.split(':')[0] ?? '', port: Number(n.split(':')[1]) })) })
})

test('a heartbeat that cannot reach Redis rejects, and start keeps retrying until Redis answers', async (t) => {
  // A port nothing listens on: every command fails fast.
  const redis = createRedisClient({ kind: 'single', url: 'redis://127.0.0.1:1' }, { commandTimeoutMs: 200, connectTimeoutMs: 200, enableOfflineQueue: false })
  redis.on('error', () => {})
  t.after(() => { redis.disconnect() })
  const m = new Membership({ redis, keyPrefix: uniquePrefix(), instanceId: newInstanceId() }, { heartbeatMs: 100, logger: silentLogger })
  await assert.rejects(m.start('http://127.0.0.1:1'))
  assert.equal(m.lastSeenAt, 0)
  await m.stop()
})
