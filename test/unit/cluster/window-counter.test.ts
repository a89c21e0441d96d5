import assert from 'node:assert/strict'
import { once } from 'node:events'
import { test } from 'node:test'
import type { TestContext } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { MemoryWindowCounter, RedisWindowCounter } from '../../../src/cluster/index.js'
import type { WindowCount, WindowCounter } from '../../../src/cluster/index.js'
import { createRedisClient, quitWithTimeout } from '../../../src/redis/index.js'
import type { RedisClient } from '../../../src/redis/index.js'
import { deleteKeys, freePort, REDIS_URL, requireRedis, uniquePrefix } from '../../helpers/redis-utils.js'

/** A connection as the rate limiter makes it (no offline queue: a command fails while Redis is away). */
async function connect (t: TestContext, url: string, ready = true): Promise<RedisClient> {
  const redis = createRedisClient({ kind: 'single', url }, { commandTimeoutMs: 1000, connectTimeoutMs: 1000, enableOfflineQueue: false })
  redis.on('error', () => {})
  t.after(async () => { await quitWithTimeout(redis, 1000) })
  if (ready) await once(redis, 'ready')
  return redis
}

async function add (counter: WindowCounter, key: string, n: number, windowMs: number): Promise<WindowCount> {
  const window = await counter.add(key, n, windowMs)
  assert.ok(window !== undefined, 'the count failed')
  return window
}

/** What both stores do: n at once, per key, and a new window once the last one ended. */
async function countsInWindows (counter: WindowCounter): Promise<void> {
  const first = await add(counter, 't:acme', 1, 300)
  assert.equal(first.current, 1)
  assert.ok(first.ttl > 0 && first.ttl <= 300, `ttl ${first.ttl}`)
  assert.equal((await add(counter, 't:acme', 4, 300)).current, 5)
  // The window keeps its end: a later count does not push it out.
  const later = await add(counter, 't:acme', 1, 300)
  assert.ok(later.ttl <= first.ttl, `ttl ${later.ttl} after ${first.ttl}`)
  // Another key is its own window.
  assert.equal((await add(counter, 't:globex', 1, 300)).current, 1)
  await sleep(350)
  const next = await add(counter, 't:acme', 1, 300)
  assert.equal(next.current, 1, 'a new window starts at 0')
  assert.ok(next.ttl > 200, `ttl ${next.ttl}`)
}

test('memory: counts per key in fixed windows; the answer comes at once, not as a promise', async () => {
  const counter = new MemoryWindowCounter()
  assert.ok(!(counter.add('t:x', 1, 1000) instanceof Promise))
  await countsInWindows(counter)
})

test('memory: each count answers with a copy of its window (interleaved requests each see their own count)', () => {
  const counter = new MemoryWindowCounter()
  const a = counter.add('t:acme', 1, 60_000)
  const b = counter.add('t:acme', 1, 60_000)
  assert.equal(a.current, 1)
  assert.equal(b.current, 2)
})

test('memory: past maxKeys, expired windows go first, then the oldest', async () => {
  const counter = new MemoryWindowCounter({ maxKeys: 3 })
  counter.add('short', 1, 20)
  counter.add('old', 5, 60_000)
  counter.add('mid', 5, 60_000)
  await sleep(30)
  // 'short' has expired: dropped, the others stay.
  counter.add('new', 1, 60_000)
  assert.equal(counter.size, 3)
  assert.equal(counter.add('old', 0, 60_000).current, 5)
  // Full with live windows: the oldest window ('old') makes room.
  counter.add('newer', 1, 60_000)
  assert.equal(counter.size, 3)
  assert.equal(counter.add('mid', 0, 60_000).current, 5)
  assert.equal(counter.add('old', 0, 60_000).current, 0, 'the oldest window was dropped')
})

test('Redis: two instances (two connections) count in one window per key, under REDIS_KEY_PREFIX rl:', async (t) => {
  if (!await requireRedis(t)) return
  const prefix = uniquePrefix()
  t.after(async () => { await deleteKeys(prefix) })
  const one = new RedisWindowCounter({ redis: await connect(t, REDIS_URL), keyPrefix: prefix })
  const two = new RedisWindowCounter({ redis: await connect(t, REDIS_URL), keyPrefix: prefix })
  await countsInWindows(one)
  assert.equal((await add(one, 't:shared', 3, 60_000)).current, 3)
  assert.equal((await add(two, 't:shared', 2, 60_000)).current, 5)
  // The key expires with its window.
  const redis = await connect(t, REDIS_URL)
  const pttl = await redis.pttl(`${prefix}rl:t:shared`)
  assert.ok(pttl > 0 && pttl <= 60_000, `PTTL ${pttl}`)
  // Concurrent counts each get their own count: exactly the first n pass a limit of n.
  const counts = await Promise.all(Array.from({ length: 20 }, async (_, i) => await add(i % 2 === 0 ? one : two, 't:burst', 1, 60_000)))
  assert.deepEqual(counts.map((c) => c.current).sort((a, b) => a - b), Array.from({ length: 20 }, (_, i) => i + 1))
})

test('Redis down: a count resolves to undefined and reports the error (the caller decides what an outage means)', async (t) => {
  const errors: unknown[] = []
  const counter = new RedisWindowCounter({ redis: await connect(t, `redis://127.0.0.1:${await freePort()}`, false), keyPrefix: uniquePrefix(), onError: (err) => errors.push(err) })
  assert.equal(await counter.add('t:acme', 1, 60_000), undefined)
  assert.equal(errors.length, 1)
})
