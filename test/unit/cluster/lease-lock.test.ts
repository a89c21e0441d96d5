import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { TestContext } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { LeaseLock, LeaseLostError, LockUnavailableError, LockWaitAbortedError } from '../../../src/cluster/index.js'
import type { LeaseContext } from '../../../src/cluster/index.js'
import { createRedisClient, quitWithTimeout } from '../../../src/redis/index.js'
import type { RedisClient, RedisTarget } from '../../../src/redis/index.js'
import { BuiltinSource } from '../../../src/builtin/source.js'
import type { BuiltinTool } from '../../../src/builtin/tool.js'
import type { Workspace } from '../../../src/builtin/types.js'
import type { CallContext } from '../../../src/routing/types.js'
import { startRedisCluster } from '../../../scripts/lib/redis-cluster.js'
import { deleteKeys, freePort, REDIS_URL, requireRedis, uniquePrefix } from '../../helpers/redis-utils.js'

// Two LeaseLock objects with their own connections and instance ids act as two gateway instances.

/** A connection for one simulated instance, closed after the test. */
function connect (t: TestContext, target: RedisTarget): RedisClient {
  const redis = createRedisClient(target, { commandTimeoutMs: 2000, connectTimeoutMs: 2000 })
  redis.on('error', () => {})
  t.after(async () => { await quitWithTimeout(redis, 1000) })
  return redis
}

function instances (t: TestContext, target: RedisTarget, prefix: string, leaseMs: number): { a: LeaseLock, b: LeaseLock, ra: RedisClient, rb: RedisClient } {
  const ra = connect(t, target)
  const rb = connect(t, target)
  return {
    a: new LeaseLock({ redis: ra, keyPrefix: prefix, instanceId: 'inst-a' }, { leaseMs }),
    b: new LeaseLock({ redis: rb, keyPrefix: prefix, instanceId: 'inst-b' }, { leaseMs }),
    ra,
    rb
  }
}

/** 40 tasks on one key spread over two instances: never two at once, fences strictly increasing in run order. */
async function mutualExclusion (a: LeaseLock, b: LeaseLock, label: string): Promise<void> {
  let active = 0
  let maxActive = 0
  const fences: number[] = []
  const started = performance.now()
  const tasks = Array.from({ length: 40 }, async (_, i) => {
    const lock = i % 2 === 0 ? a : b
    await lock.run('tenant\u0000/ws/{odd}root', async (lease) => {
      assert.ok(lease !== undefined)
      active++
      maxActive = Math.max(maxActive, active)
      fences.push(lease.fence)
      await sleep(Math.floor(Math.random() * 4))
      active--
    })
  })
  await Promise.all(tasks)
  const ms = performance.now() - started
  console.log(`# ${label}: 40 leased tasks on one key over 2 instances in ${ms.toFixed(0)} ms (${(ms / 40).toFixed(1)} ms per hand-over)`)
  assert.equal(maxActive, 1)
  assert.equal(fences.length, 40)
  for (let i = 1; i < fences.length; i++) assert.ok(fences[i]! > fences[i - 1]!, `fence ${fences[i]} after ${fences[i - 1]}`)
}

/**
 * Instance A takes the lease and "crashes" (its connection is cut, so nothing renews it); B
 * waits and proceeds once the lease ran out; A's signal aborts by its local deadline.
 */
async function crashedHolder (a: LeaseLock, ra: RedisClient, b: LeaseLock, leaseMs: number, label: string): Promise<void> {
  let aLease: LeaseContext | undefined
  let releaseA!: () => void
  const aHeld = new Promise<void>((resolve) => { releaseA = resolve })
  const aDone = a.run('crash-key', async (lease) => {
    aLease = lease
    ra.disconnect(false)
    await new Promise<void>((resolve) => {
      lease?.signal.addEventListener('abort', () => resolve(), { once: true })
      releaseA()
    })
  })
  await aHeld
  assert.ok(aLease !== undefined)
  const waitStarted = performance.now()
  const bFence = await b.run('crash-key', async (lease) => lease?.fence)
  const waited = performance.now() - waitStarted
  await aDone
  console.log(`# ${label}: after a holder stopped renewing, the next writer waited ${waited.toFixed(0)} ms (lease ${leaseMs} ms)`)
  assert.ok(aLease.signal.aborted)
  assert.ok(aLease.signal.reason instanceof LeaseLostError)
  assert.ok(bFence !== undefined && bFence > aLease.fence)
  // It waited for the lease, not for a release (nothing released it), and not forever.
  assert.ok(waited >= leaseMs / 3, `waited ${waited} ms`)
  assert.ok(waited < leaseMs * 10, `waited ${waited} ms`)
}

test('two instances: one writer at a time on a key, fences strictly increasing; other keys run alongside', async (t) => {
  if (!await requireRedis(t)) return
  const prefix = uniquePrefix()
  t.after(async () => { await deleteKeys(prefix) })
  const { a, b } = instances(t, { kind: 'single', url: REDIS_URL }, prefix, 2000)
  await mutualExclusion(a, b, 'redis')

  // Different keys are not serialised: both hold at the same time.
  let both = 0
  let inside = 0
  await Promise.all(['k1', 'k2'].map(async (k, i) => await (i === 0 ? a : b).run(k, async () => {
    inside++
    await sleep(50)
    both = Math.max(both, inside)
    inside--
  })))
  assert.equal(both, 2)

  // Released: the lease key is gone, the fence counter stays.
  const keys = a.keysOf('k1')
  const probe = connect(t, { kind: 'single', url: REDIS_URL })
  assert.equal(await probe.exists(keys.lease), 0)
  assert.equal(await probe.get(keys.fence), '1')
})

test('a holder that stops renewing (crash) loses the lease after it runs out; the next writer proceeds', async (t) => {
  if (!await requireRedis(t)) return
  const prefix = uniquePrefix()
  t.after(async () => { await deleteKeys(prefix) })
  const { a, b, ra } = instances(t, { kind: 'single', url: REDIS_URL }, prefix, 600)
  await crashedHolder(a, ra, b, 600, 'redis')
})

test('a lease taken over (renewal finds another token) aborts the holder\'s signal, and the tool run through BuiltinSource sees it', async (t) => {
  if (!await requireRedis(t)) return
  const prefix = uniquePrefix()
  t.after(async () => { await deleteKeys(prefix) })
  const { a, ra } = instances(t, { kind: 'single', url: REDIS_URL }, prefix, 600)
  const ws: Workspace = {
    tenant: 't1',
    workspaceId: 'w',
    root: '/nonexistent/ws',
    readRoots: [],
    limits: { readMaxChars: 1, commandTimeoutMs: 1, bashLogChars: 1, maxProcessOutputChars: 1, outputMaxChars: 10_000 }
  }
  let sawAbort: unknown
  const tool: BuiltinTool = {
    name: 'write_file',
    description: 'test',
    inputSchema: { type: 'object' },
    mutates: () => true,
    run: async (_args, ctx) => {
      // Another writer takes the lease over (as after an expiry); the next renewal notices.
      const { lease } = a.keysOf(`t1\u0000${ws.root}`) as { lease: string }
      await ra.set(lease, 'someone-else', 'PX', 5000)
      await new Promise<void>((resolve) => { ctx.signal.addEventListener('abort', () => resolve(), { once: true }) })
      sawAbort = ctx.signal.reason
      throw new Error('stopped')
    }
  }
  const source = new BuiltinSource([tool], { resolve: async () => ws }, { writes: a })
  const entry = await source.resolve('write_file', {} as never)
  assert.ok(entry !== undefined)
  const ctx = { workspace: {}, caller: { isAdmin: false }, signal: new AbortController().signal } as unknown as CallContext
  const started = performance.now()
  const out = await source.call(entry, {}, ctx)
  console.log(`# a taken-over lease was noticed after ${(performance.now() - started).toFixed(0)} ms (lease 600 ms, renewal every 200 ms)`)
  assert.ok(sawAbort instanceof LeaseLostError)
  assert.match((sawAbort as Error).message, /another writer holds it/)
  assert.equal(out.ok, false)
  assert.ok(!out.ok && /lease was lost/.test(out.message))
  // The other writer's lease was not deleted by the loser's release.
  assert.equal(await ra.get(a.keysOf(`t1\u0000${ws.root}`).lease), 'someone-else')
})

test('the call\'s signal stops the wait for a lease held elsewhere; the task never runs', async (t) => {
  if (!await requireRedis(t)) return
  const prefix = uniquePrefix()
  t.after(async () => { await deleteKeys(prefix) })
  const { a, b } = instances(t, { kind: 'single', url: REDIS_URL }, prefix, 2000)
  let release!: () => void
  let held!: () => void
  const holding = new Promise<void>((resolve) => { held = resolve })
  const aDone = a.run('k', async () => { held(); await new Promise<void>((resolve) => { release = resolve }) })
  await holding
  let ran = false
  const started = performance.now()
  await assert.rejects(b.run('k', async () => { ran = true }, { signal: AbortSignal.timeout(150) }), LockWaitAbortedError)
  console.log(`# the wait stopped ${(performance.now() - started).toFixed(0)} ms after it began (signal after 150 ms)`)
  assert.equal(ran, false)
  release()
  await aDone
  // Already aborted: not even one attempt.
  await assert.rejects(b.run('k', async () => { ran = true }, { signal: AbortSignal.abort() }), LockWaitAbortedError)
  assert.equal(ran, false)
  assert.equal(await b.run('k', async () => 'free'), 'free')
})

test('Redis down while acquiring: fails closed with a clear error, and BuiltinSource answers a tool error, not a throw', async (t) => {
  const port = await freePort()
  const redis = connect(t, { kind: 'single', url: `redis://127.0.0.1:${port}` })
  const lock = new LeaseLock({ redis, keyPrefix: uniquePrefix(), instanceId: 'down' }, { leaseMs: 1000 })
  let ran = false
  const started = performance.now()
  await assert.rejects(lock.run('k', async () => { ran = true }), (err: unknown) => {
    assert.ok(err instanceof LockUnavailableError)
    assert.match(err.message, /workspace lock is unavailable/)
    return true
  })
  console.log(`# with Redis down the lock failed closed in ${(performance.now() - started).toFixed(0)} ms`)
  assert.equal(ran, false)

  const ws: Workspace = {
    tenant: 't1',
    workspaceId: 'w',
    root: '/nonexistent/ws',
    readRoots: [],
    limits: { readMaxChars: 1, commandTimeoutMs: 1, bashLogChars: 1, maxProcessOutputChars: 1, outputMaxChars: 10_000 }
  }
  const tool: BuiltinTool = {
    name: 'write_file',
    description: 'test',
    inputSchema: { type: 'object' },
    mutates: () => true,
    run: async () => { ran = true; return {} }
  }
  const source = new BuiltinSource([tool], { resolve: async () => ws }, { writes: lock })
  const entry = await source.resolve('write_file', {} as never)
  assert.ok(entry !== undefined)
  const ctx = { workspace: {}, caller: { isAdmin: false }, signal: new AbortController().signal } as unknown as CallContext
  const out = await source.call(entry, {}, ctx)
  assert.ok(!out.ok && out.reason === 'tool-error' && /workspace lock is unavailable/.test(out.message))
  assert.equal(ran, false)
})

test('on a real Redis Cluster: mutual exclusion, strictly increasing fences, a crashed holder\'s lease runs out', async (t) => {
  if (!await requireRedis(t)) return
  const cluster = await startRedisCluster(t)
  const target: RedisTarget = { kind: 'cluster', nodes: cluster.nodes.map((n) => ({ host: '127.0.0.1', port: Number(n.split(':')[1]) })) }
  const prefix = uniquePrefix()
  const { a, b, ra } = instances(t, target, prefix, 600)
  await mutualExclusion(a, b, 'redis cluster')
  // Keys of many workspaces spread over the masters: each lease and fence pair shares a slot.
  for (let i = 0; i < 20; i++) assert.equal(await a.run(`ws-${i}`, async (lease) => lease?.fence), 1)
  await crashedHolder(a, ra, b, 600, 'redis cluster')
})
