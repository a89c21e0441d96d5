import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Redis } from 'ioredis'
import { createRegistryStore } from '../../../src/registry/create-store.js'
import { RegistryUnavailableError } from '../../../src/registry/errors.js'
import { createRedisRegistryStore, RedisRegistryStore, type RedisRegistryStoreOptions } from '../../../src/registry/redis-store.js'
import type { ServerConfig } from '../../../src/registry/server-config.js'
import type { RegistryChange } from '../../../src/registry/types.js'
import { countKeys, delay, deleteKeys, freePort, REDIS_REQUIRED, REDIS_URL, redisReachable, TcpProxy, uniquePrefix } from '../../helpers/redis-utils.js'
import { clusterTarget, lazyCluster } from '../../helpers/redis-cluster.js'
import { registryStoreConformance } from '../../helpers/store-conformance.js'

const config: ServerConfig = { type: 'streamable_http', url: 'https://a.example/mcp', enabled: true, priority: 0 }
const TIMEOUT = { timeout: 30_000 }
const available = await redisReachable()

if (!available) {
  if (REDIS_REQUIRED) {
    test('redis store', () => {
      assert.fail(`CI=true and Redis is not reachable at ${REDIS_URL}: the Redis registry tests must run under CI`)
    })
  } else {
    test('redis store', (t) => { t.skip(`Redis not reachable at ${REDIS_URL}; start redis-server or set REDIS_URL (under CI=true this fails)`) })
  }
} else {
  registryStoreConformance('redis store', async () => {
    const keyPrefix = uniquePrefix()
    const options: RedisRegistryStoreOptions = { url: REDIS_URL, keyPrefix }
    return {
      store: await createRedisRegistryStore(options),
      peer: async () => await createRedisRegistryStore(options),
      cleanup: async () => { await deleteKeys(keyPrefix) }
    }
  })

  // The same contract on a real local Redis Cluster (3 masters), REDIS_CLUSTER_NODES' target.
  const cluster = lazyCluster()
  registryStoreConformance('redis cluster store', async () => {
    const options: RedisRegistryStoreOptions = { target: clusterTarget(await cluster()), keyPrefix: uniquePrefix() }
    return {
      store: await createRedisRegistryStore(options),
      peer: async () => await createRedisRegistryStore(options),
      // The cluster is a throwaway: stopped, with every key, after this file.
      cleanup: async () => {}
    }
  })

  test('redis store: key layout, event channel and default prefix', TIMEOUT, async (t) => {
    const keyPrefix = uniquePrefix()
    const store = await createRedisRegistryStore({ url: REDIS_URL, keyPrefix })
    const raw = new Redis(REDIS_URL)
    const listener = new Redis(REDIS_URL)
    t.after(async () => {
      await store.close()
      raw.disconnect()
      listener.disconnect()
      await deleteKeys(keyPrefix)
    })
    await listener.subscribe(`${keyPrefix}events`)
    const message = new Promise<string>((resolve) => listener.once('message', (_channel: string, m: string) => resolve(m)))

    await store.put({ kind: 'user', userId: '1-2' }, 'gh', config)
    await store.put({ kind: 'global' }, 'gh', config)

    assert.deepEqual(await raw.hkeys(`${keyPrefix}{reg:u:1-2}:srv`), ['gh'])
    assert.equal(await raw.get(`${keyPrefix}{reg:u:1-2}:ver`), '1')
    assert.deepEqual(await raw.hkeys(`${keyPrefix}{reg:g}:srv`), ['gh'])
    assert.equal(await raw.get(`${keyPrefix}{reg:g}:ver`), '1')
    assert.deepEqual(await raw.smembers(`${keyPrefix}{reg}:users`), ['1-2'])
    assert.equal(await raw.exists(`${keyPrefix}{reg:u:1}:srv`), 0)
    assert.equal(await raw.cluster('KEYSLOT', `${keyPrefix}{reg:u:1-2}:srv`).catch(() => null), null, 'a single server (no cluster mode)')
    const entry = JSON.parse(await raw.hget(`${keyPrefix}{reg:u:1-2}:srv`, 'gh') ?? 'null') as Record<string, unknown>
    assert.equal(entry.version, 1)
    assert.deepEqual(entry.config, config)

    const event = JSON.parse(await message) as Record<string, unknown>
    assert.equal(event.op, 'put')
    assert.equal(event.version, 1)
    assert.deepEqual(event.scope, { kind: 'user', userId: '1-2' })
    assert.equal(event.serverId, 'gh')

    await store.delete({ kind: 'user', userId: '1-2' }, 'gh')
    assert.deepEqual(await raw.smembers(`${keyPrefix}{reg}:users`), ['1-2'], 'the set never shrinks (a cluster cannot update it with the hash)')
    assert.deepEqual(await store.listUserIds(), [], 'but a user without servers is not listed')

    const defaults = new RedisRegistryStore({ url: REDIS_URL })
    assert.equal(defaults.keyPrefix, 'tg:')
    await defaults.close()
  })

  test('createRegistryStore: Redis when REDIS_URL is set, with REDIS_KEY_PREFIX', TIMEOUT, async () => {
    const keyPrefix = uniquePrefix()
    const store = await createRegistryStore({ redisUrl: REDIS_URL, keyPrefix })
    try {
      assert.equal(store.backend, 'redis')
      await store.put({ kind: 'global' }, 'x', config)
      assert.equal(await countKeys(keyPrefix), 3, 'the hash, its version, the migration marker')
    } finally {
      await store.close()
      await deleteKeys(keyPrefix)
    }
  })

  test('redis store: test keys are removed afterwards', TIMEOUT, async () => {
    const keyPrefix = uniquePrefix()
    const store = await createRedisRegistryStore({ url: REDIS_URL, keyPrefix })
    await store.put({ kind: 'user', userId: 'u' }, 's', config)
    await store.close()
    assert.ok(await countKeys(keyPrefix) > 0)
    await deleteKeys(keyPrefix)
    assert.equal(await countKeys(keyPrefix), 0)
  })

  test('redis store: Redis stopped and restarted: fast 503s, then it heals with nothing lost', TIMEOUT, async (t) => {
    const keyPrefix = uniquePrefix()
    const proxy = new TcpProxy()
    await proxy.start()
    const store = await createRedisRegistryStore({ url: proxy.url, keyPrefix, maxReconnectDelayMs: 100 })
    t.after(async () => {
      await store.close()
      await proxy.stop()
      await deleteKeys(keyPrefix)
    })
    const changes: RegistryChange[] = []
    store.subscribe((c) => changes.push(c))
    await store.put({ kind: 'user', userId: '5' }, 'kept', config)

    await proxy.stop()
    await assert.rejects(store.put({ kind: 'user', userId: '5' }, 'other', config), RegistryUnavailableError)
    await assert.rejects(store.list({ kind: 'user', userId: '5' }), (err: unknown) => {
      assert.ok(err instanceof RegistryUnavailableError)
      assert.equal(err.code, 'GW_REGISTRY_UNAVAILABLE')
      assert.equal(err.statusCode, 503)
      assert.doesNotMatch(err.message, /127\.0\.0\.1|tg-test/, 'no host or key in the message')
      return true
    })
    await assert.rejects(store.ping(), RegistryUnavailableError)
    assert.equal(store.connected, false)

    await proxy.start()
    // Reconnection is asynchronous; the test timeout bounds this wait.
    while (true) {
      try {
        await store.ping()
        break
      } catch (err) {
        assert.ok(err instanceof RegistryUnavailableError)
        await delay(50)
      }
    }
    while (!changes.some((c) => c.op === 'resync')) await delay(50)

    assert.equal((await store.get({ kind: 'user', userId: '5' }, 'kept'))?.config.url, config.url)
    assert.equal((await store.put({ kind: 'user', userId: '5' }, 'other', config)).version, 2, 'the failed write did not happen')
  })

  test('redis store: a Redis that accepts but never answers times out as unavailable', TIMEOUT, async (t) => {
    const keyPrefix = uniquePrefix()
    const proxy = new TcpProxy()
    await proxy.start()
    const store = await createRedisRegistryStore({ url: proxy.url, keyPrefix, commandTimeoutMs: 300, connectTimeoutMs: 300 })
    t.after(async () => {
      await store.close()
      await proxy.stop()
      await deleteKeys(keyPrefix)
    })
    proxy.pause()
    await assert.rejects(store.put({ kind: 'global' }, 's', config), RegistryUnavailableError)
    await assert.rejects(store.version({ kind: 'global' }), RegistryUnavailableError)
    await assert.rejects(createRedisRegistryStore({ url: proxy.url, keyPrefix, commandTimeoutMs: 300, connectTimeoutMs: 300 }), RegistryUnavailableError)
    proxy.resume()
  })

  test('redis store: close is bounded while Redis is down', TIMEOUT, async () => {
    const proxy = new TcpProxy()
    await proxy.start()
    const store = await createRedisRegistryStore({ url: proxy.url, keyPrefix: uniquePrefix(), closeTimeoutMs: 200 })
    await proxy.stop()
    await store.close()
    await assert.rejects(store.ping(), /closed/)
  })
}

test('redis store: nothing listening gives RegistryUnavailableError, not a hang', TIMEOUT, async () => {
  const port = await freePort()
  const url = `redis://127.0.0.1:${port}`
  await assert.rejects(createRedisRegistryStore({ url, connectTimeoutMs: 500 }), RegistryUnavailableError)

  const errors: Error[] = []
  const store = new RedisRegistryStore({ url, connectTimeoutMs: 500, onError: (e) => errors.push(e) })
  await assert.rejects(store.put({ kind: 'global' }, 's', config), RegistryUnavailableError, 'not connected yet: no offline queue')
  await assert.rejects(store.connect(), RegistryUnavailableError)
  await assert.rejects(store.get({ kind: 'user', userId: '1' }, 's'), RegistryUnavailableError)
  await store.close()
})

if (available) {
  test('redis store: keys of the untagged layout are moved on start-up (several instances at once), once, nothing lost', TIMEOUT, async (t) => {
    const p = uniquePrefix()
    const raw = new Redis(REDIS_URL)
    t.after(async () => { raw.disconnect(); await deleteKeys(p) })
    const entry = (version: number): string => JSON.stringify({ version, updatedAt: '2026-01-01T00:00:00.000Z', config })
    // Layout 1, as the store before the hash tags wrote it.
    await raw.hset(`${p}srv:g`, 'gh', entry(3))
    await raw.set(`${p}ver:g`, '3')
    await raw.hset(`${p}srv:u:1-2`, 'a', entry(1), 'b', entry(2))
    await raw.set(`${p}ver:u:1-2`, '2')
    await raw.set(`${p}ver:u:7`, '5') // a user whose servers were all deleted: the counter stays
    await raw.sadd(`${p}srv:users`, '1-2')
    await raw.set(`${p}doc:policy:g`, JSON.stringify({ version: 4, updatedAt: '2026-01-01T00:00:00.000Z', value: { deny: ['bash'] } }))
    await raw.set(`${p}docver:policy:g`, '4')
    await raw.set(`${p}doc:policy:u:1-2`, JSON.stringify({ version: 1, updatedAt: '2026-01-01T00:00:00.000Z', value: { allow: ['x'] } }))
    await raw.set(`${p}docver:policy:u:1-2`, '1')
    await raw.hset(`${p}sandbox:uids`, 't:1-2', '20001', 'u:20001', '1-2', 'cursor', '1')
    // An instance already on layout 2 wrote the global version past the old one: the larger wins.
    await raw.set(`${p}{reg:g}:ver`, '9')

    const stores = await Promise.all([1, 2, 3].map(async () => await createRedisRegistryStore({ url: REDIS_URL, keyPrefix: p })))
    t.after(async () => { await Promise.all(stores.map(async (s) => { await s.close() })) })
    const totals = stores.reduce((sum, s) => ({
      renamed: sum.renamed + (s.migration?.renamed ?? 0),
      merged: sum.merged + (s.migration?.merged ?? 0)
    }), { renamed: 0, merged: 0 })
    console.log('registry migration, three instances at once:', stores.map((s) => s.migration))
    assert.deepEqual(totals, { renamed: 10, merged: 1 }, 'each of the 11 old keys moved exactly once')
    assert.equal(await countKeys(p), 12, 'the 11 moved keys and the marker; no old key left')

    const s = stores[0] as RedisRegistryStore
    assert.deepEqual((await s.list({ kind: 'user', userId: '1-2' })).map((e) => [e.serverId, e.version]), [['a', 1], ['b', 2]])
    assert.deepEqual(await s.snapshot({ kind: 'global' }).then((x) => [x.version, x.servers.map((e) => e.serverId)]), [9, ['gh']])
    assert.equal(await s.version({ kind: 'user', userId: '7' }), 5)
    assert.deepEqual(await s.listUserIds(), ['1-2'])
    assert.deepEqual((await s.getDocument('policy', { kind: 'global' }))?.value, { deny: ['bash'] })
    assert.deepEqual((await s.getDocument('policy', { kind: 'user', userId: '1-2' }))?.value, { allow: ['x'] })
    assert.equal(await s.allocateSandboxUid('1-2', { first: 20000, last: 20010 }), 20001, 'the tenant keeps its uid')
    assert.equal(await s.allocateSandboxUid('other', { first: 20000, last: 20010 }), 20002, 'and the cursor moved along')
    assert.equal((await s.put({ kind: 'user', userId: '1-2' }, 'c', config)).version, 3, 'versions go on from the old counter')

    const later = await createRedisRegistryStore({ url: REDIS_URL, keyPrefix: p })
    t.after(async () => { await later.close() })
    assert.equal(later.migration?.ran, false, 'the marker skips the scan on later starts')
  })
}
