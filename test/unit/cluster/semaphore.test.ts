import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { TestContext } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { RedisSemaphore } from '../../../src/cluster/index.js'
import type { SemaphoreHold } from '../../../src/cluster/index.js'
import { createRedisClient, quitWithTimeout } from '../../../src/redis/index.js'
import type { RedisClient, RedisTarget } from '../../../src/redis/index.js'
import { startRedisCluster } from '../../../scripts/lib/redis-cluster.js'
import { deleteKeys, freePort, REDIS_URL, requireRedis, uniquePrefix } from '../../helpers/redis-utils.js'

// Two RedisSemaphore objects with their own connections and instance ids act as two gateway instances.

function connect (t: TestContext, target: RedisTarget): RedisClient {
  const redis = createRedisClient(target, { commandTimeoutMs: 2000, connectTimeoutMs: 2000 })
  redis.on('error', () => {})
  t.after(async () => { await quitWithTimeout(redis, 1000) })
  return redis
}

function instances (t: TestContext, target: RedisTarget, prefix: string, leaseMs: number): { a: RedisSemaphore, b: RedisSemaphore } {
  const a = new RedisSemaphore({ redis: connect(t, target), keyPrefix: prefix, instanceId: 'inst-a', leaseMs })
  const b = new RedisSemaphore({ redis: connect(t, target), keyPrefix: prefix, instanceId: 'inst-b', leaseMs })
  t.after(() => { a.close(); b.close() })
  return { a, b }
}

function hold (r: Awaited<ReturnType<RedisSemaphore['acquire']>>): SemaphoreHold {
  assert.ok(r.ok, `refused with ${r.ok ? '' : r.held} held`)
  return r.hold
}

/** The limit holds across both instances, n slots are taken whole or not at all, releases free them. */
async function limitAcrossInstances (a: RedisSemaphore, b: RedisSemaphore, label: string): Promise<void> {
  const bucket = 't:acme'
  const started = performance.now()
  const results = await Promise.all(Array.from({ length: 20 }, async (_, i) => await (i % 2 === 0 ? a : b).acquire(bucket, 1, 3)))
  console.log(`# ${label}: 20 concurrent acquires over 2 instances in ${(performance.now() - started).toFixed(0)} ms`)
  const granted = results.filter((r) => r.ok)
  assert.equal(granted.length, 3)
  assert.equal(await a.held(bucket), 3)
  assert.equal(a.heldHere + b.heldHere, 3)
  // Other buckets are their own.
  hold(await b.acquire('t:globex', 3, 3)).release().catch(() => {})

  await hold(granted[0]!).release()
  assert.equal(await b.held(bucket), 2)
  // Two do not fit in the one left: refused whole, nothing taken.
  const two = await b.acquire(bucket, 2, 3)
  assert.ok(!two.ok)
  assert.equal(two.held, 2)
  assert.equal(await b.held(bucket), 2)
  const one = hold(await b.acquire(bucket, 1, 3))
  assert.equal(one.slots, 1)
  for (const r of [...granted.slice(1), { ok: true as const, hold: one }]) await hold(r).release()
  assert.equal(await a.held(bucket), 0)
  assert.equal(a.heldHere + b.heldHere, 0)
  // n at once.
  const three = hold(await a.acquire(bucket, 3, 3))
  assert.equal(await b.held(bucket), 3)
  await three.release()
  await three.release()
  assert.equal(await b.held(bucket), 0)
}

/** A holder that stops renewing (crash) loses its slots after the lease; one that renews keeps them. */
async function crashedHolder (a: RedisSemaphore, b: RedisSemaphore, leaseMs: number, label: string): Promise<void> {
  const bucket = 't:crash'
  hold(await a.acquire(bucket, 2, 3))
  const kept = hold(await b.acquire(bucket, 1, 3))
  a.close()
  assert.ok(!(await b.acquire(bucket, 1, 3)).ok)
  const started = performance.now()
  let got: SemaphoreHold | undefined
  while (got === undefined) {
    const r = await b.acquire(bucket, 2, 3)
    if (r.ok) got = r.hold
    else await sleep(20)
    assert.ok(performance.now() - started < leaseMs * 20, 'the crashed instance\'s slots never came back')
  }
  const waited = performance.now() - started
  console.log(`# ${label}: a crashed instance's slots came back after ${waited.toFixed(0)} ms (lease ${leaseMs} ms); the live one kept its slot through renewals`)
  // B's slots stay through several more leases: the timer renews them.
  await sleep(leaseMs * 3)
  assert.equal(await b.held(bucket), 3)
  await kept.release()
  await got.release()
}

test('two instances share one limit per bucket; n slots are all or nothing; release frees them', async (t) => {
  if (!await requireRedis(t)) return
  const prefix = uniquePrefix()
  t.after(async () => { await deleteKeys(prefix) })
  const { a, b } = instances(t, { kind: 'single', url: REDIS_URL }, prefix, 5000)
  await limitAcrossInstances(a, b, 'redis')
})

test('under churn on two instances the cap is never exceeded', async (t) => {
  if (!await requireRedis(t)) return
  const prefix = uniquePrefix()
  t.after(async () => { await deleteKeys(prefix) })
  const { a, b } = instances(t, { kind: 'single', url: REDIS_URL }, prefix, 5000)
  let active = 0
  let maxActive = 0
  let granted = 0
  let refused = 0
  await Promise.all(Array.from({ length: 16 }, async (_, w) => {
    const sem = w % 2 === 0 ? a : b
    for (let i = 0; i < 25; i++) {
      const r = await sem.acquire('t:churn', 1 + (i % 2), 4)
      if (!r.ok) { refused++; continue }
      granted++
      active += r.hold.slots
      maxActive = Math.max(maxActive, active)
      await sleep(Math.floor(Math.random() * 3))
      active -= r.hold.slots
      await r.hold.release()
    }
  }))
  console.log(`# 400 acquires over 16 workers on 2 instances, limit 4: ${granted} granted, ${refused} refused, at most ${maxActive} slots in use`)
  assert.ok(maxActive <= 4)
  assert.ok(granted > 0 && refused > 0)
  assert.equal(await a.held('t:churn'), 0)
})

test('a crashed instance\'s slots come back after the lease; a live instance\'s are renewed', async (t) => {
  if (!await requireRedis(t)) return
  const prefix = uniquePrefix()
  t.after(async () => { await deleteKeys(prefix) })
  const { a, b } = instances(t, { kind: 'single', url: REDIS_URL }, prefix, 300)
  await crashedHolder(a, b, 300, 'redis')
})

test('Redis down: acquire rejects (the caller decides what to do)', async (t) => {
  const redis = connect(t, { kind: 'single', url: `redis://127.0.0.1:${await freePort()}` })
  const sem = new RedisSemaphore({ redis, keyPrefix: uniquePrefix(), instanceId: 'down', leaseMs: 1000 })
  await assert.rejects(sem.acquire('t:x', 1, 3))
  assert.equal(sem.heldHere, 0)
})

test('on a real Redis Cluster: one limit across instances, all-or-nothing, crashed slots come back', async (t) => {
  if (!await requireRedis(t)) return
  const cluster = await startRedisCluster(t)
  const target: RedisTarget = { kind: 'cluster', nodes: cluster.nodes.map((n) => ({ host: '127.0.0.1', port: Number(n.split(':')[1]) })) }
  const prefix = uniquePrefix()
  const { a, b } = instances(t, target, prefix, 300)
  await limitAcrossInstances(a, b, 'redis cluster')
  await crashedHolder(a, b, 300, 'redis cluster')
})
