import { test } from 'node:test'
import assert from 'node:assert/strict'
import { RedisJournalStore } from '../../../src/journal/redis-store.js'
import type { PendingEntry } from '../../../src/journal/store.js'
import { journalStoreConformance } from '../../helpers/journal-conformance.js'
import { redisForTest } from '../../helpers/redis.js'
import { delay, REDIS_URL, TcpProxy, uniquePrefix } from '../../helpers/redis-utils.js'
import { clusterTarget, lazyCluster } from '../../helpers/redis-cluster.js'

journalStoreConformance('redis', async (t, opts) => {
  const r = await redisForTest(t)
  if (r === undefined) return undefined
  const store = new RedisJournalStore({ url: REDIS_URL, keyPrefix: r.prefix, ...opts })
  t.after(async () => await store.close())
  while (store.status !== 'ready') await delay(5)
  return store
})

// The same contract on a real local Redis Cluster (3 masters): a tenant's keys in one slot,
// tenants spread over the nodes (a multi-tenant batch is one script call per tenant).
const cluster = lazyCluster()
journalStoreConformance('redis cluster', async (t, opts) => {
  if (await redisForTest(t) === undefined) return undefined
  const store = new RedisJournalStore({ target: clusterTarget(await cluster()), keyPrefix: uniquePrefix(), ...opts })
  t.after(async () => await store.close())
  while (store.status !== 'ready') await delay(5)
  return store
})

test('redis: the layout is one stream per tenant with MAXLEN and TTLs, and a callId index', async (t) => {
  const r = await redisForTest(t)
  if (r === undefined) return
  const store = new RedisJournalStore({ url: REDIS_URL, keyPrefix: r.prefix, maxEntriesPerTenant: 50, retentionMs: 3_600_000 })
  t.after(async () => await store.close())
  while (store.status !== 'ready') await delay(5)
  await store.append([{ tenant: 'acme', callId: 'c1', name: 'bash', isError: true, json: '{"callId":"c1"}' }])
  const stream = `${r.prefix}{journal:acme}:stream`
  assert.equal(await r.redis.type(stream), 'stream')
  const ttl = await r.redis.pttl(stream)
  assert.ok(ttl > 0 && ttl <= 3_600_000)
  const id = await r.redis.get(`${r.prefix}{journal:acme}:call:c1`)
  const entries = await r.redis.xrange(stream, '-', '+') as Array<[string, string[]]>
  assert.equal(entries.length, 1)
  const [gotId, fields] = entries[0] as [string, string[]]
  assert.equal(gotId, id)
  assert.deepEqual(fields, ['e', '{"callId":"c1"}', 'n', 'bash', 'x', '1'])
})

test('redis: with Redis gone, appends and reads fail at once instead of queueing', async (t) => {
  const r = await redisForTest(t)
  if (r === undefined) return
  const proxy = new TcpProxy()
  await proxy.start()
  const store = new RedisJournalStore({ url: proxy.url, keyPrefix: r.prefix, maxEntriesPerTenant: 50, retentionMs: 3_600_000 })
  t.after(async () => { await store.close(); await proxy.stop() })
  while (store.status !== 'ready') await delay(5)
  await proxy.stop()
  while (store.status === 'ready') await delay(5)
  await assert.rejects(store.append([{ tenant: 'acme', callId: 'c1', name: 'bash', isError: false, json: '{}' }]))
  await assert.rejects(store.page('acme', { limit: 10 }))
})

test('redis: journal keys of the untagged layout are moved once on start-up, merging with entries already appended', async (t) => {
  const r = await redisForTest(t)
  if (r === undefined) return
  const p = r.prefix
  const now = Date.now()
  // Layout 1: an old stream and its callId index, and a tenant whose new stream got an entry first.
  await r.redis.xadd(`${p}journal:acme`, `${now - 2000}-0`, 'e', '{"callId":"old1"}', 'n', 'bash', 'x', '0')
  await r.redis.xadd(`${p}journal:acme`, `${now - 1000}-0`, 'e', '{"callId":"old2"}', 'n', 'bash', 'x', '1')
  await r.redis.pexpire(`${p}journal:acme`, 3_600_000)
  await r.redis.set(`${p}journal:acme:call:old2`, `${now - 1000}-0`, 'PX', 3_600_000)
  await r.redis.xadd(`${p}journal:beta`, `${now - 3000}-0`, 'e', '{"callId":"b-old"}', 'n', 'read_file', 'x', '0')
  await r.redis.xadd(`${p}{journal:beta}:stream`, `${now - 500}-0`, 'e', '{"callId":"b-new"}', 'n', 'read_file', 'x', '0')

  const a = new RedisJournalStore({ url: REDIS_URL, keyPrefix: p, maxEntriesPerTenant: 50, retentionMs: 3_600_000 })
  const b = new RedisJournalStore({ url: REDIS_URL, keyPrefix: p, maxEntriesPerTenant: 50, retentionMs: 3_600_000 })
  t.after(async () => { await a.close(); await b.close() })
  const [ra, rb] = await Promise.all([a.migrated, b.migrated])
  console.log('journal migration, two instances at once:', ra, rb)
  assert.equal((ra?.renamed ?? 0) + (rb?.renamed ?? 0), 2, 'acme stream and callId renamed once in all')
  assert.equal((ra?.merged ?? 0) + (rb?.merged ?? 0), 1, 'beta merged once')
  assert.equal(await r.redis.exists(`${p}journal:acme`, `${p}journal:acme:call:old2`, `${p}journal:beta`), 0)
  const ids = (page: { entries: string[] }): string[] => page.entries.map((e) => (JSON.parse(e) as { callId: string }).callId)
  assert.deepEqual(ids(await a.page('acme', { limit: 10 })), ['old2', 'old1'])
  assert.deepEqual(ids(await a.page('beta', { limit: 10 })), ['b-new', 'b-old'])
  assert.equal(await a.get('acme', 'old2'), '{"callId":"old2"}')
  assert.ok(await r.redis.pttl(`${p}{journal:acme}:stream`) > 0, 'the TTL moved with the key')
  const again = new RedisJournalStore({ url: REDIS_URL, keyPrefix: p, maxEntriesPerTenant: 50, retentionMs: 3_600_000 })
  t.after(async () => await again.close())
  assert.equal((await again.migrated)?.ran, false, 'the marker skips the scan on later starts')
})

test('redis: the callId index is bounded like the stream: calls past JOURNAL_MAX_ENTRIES do not pile up index keys for the retention', async (t) => {
  const r = await redisForTest(t)
  if (r === undefined) return
  const store = new RedisJournalStore({ url: REDIS_URL, keyPrefix: r.prefix, maxEntriesPerTenant: 20, retentionMs: 3_600_000 })
  t.after(async () => await store.close())
  while (store.status !== 'ready') await delay(5)
  const entry = (i: number, callId = `c${i}`): PendingEntry => ({ tenant: 'acme', callId, name: 'bash', isError: false, json: JSON.stringify({ callId, i }) })
  // One callId (a call of several rounds) appended early and again late: its newest entry keeps its index.
  await store.append([entry(0, 'rounds')])
  for (let i = 1; i < 300; i += 10) await store.append(Array.from({ length: 10 }, (_v, j) => entry(i + j)))
  await store.append([entry(300, 'rounds')])
  const callKeys = await r.redis.keys(`${r.prefix}{journal:acme}:call:*`)
  // Before: one key per call ever made (301), each kept for the whole retention.
  assert.ok(callKeys.length <= 21, `${callKeys.length} callId keys for a journal of 20 entries`)
  assert.deepEqual(JSON.parse(await store.get('acme', 'rounds') ?? 'null'), { callId: 'rounds', i: 300 })
  assert.deepEqual(JSON.parse(await store.get('acme', 'c299') ?? 'null'), { callId: 'c299', i: 299 })
  assert.equal(await store.get('acme', 'c5'), undefined)
})

test('redis: a calls list written before the byte budget (items without a size) is cut as before, each counted as 0 bytes', async (t) => {
  const r = await redisForTest(t)
  if (r === undefined) return
  const store = new RedisJournalStore({ url: REDIS_URL, keyPrefix: r.prefix, maxEntriesPerTenant: 5, maxBytesPerTenant: 1024 * 1024, retentionMs: 3_600_000 })
  t.after(async () => await store.close())
  while (store.status !== 'ready') await delay(5)
  const entry = (i: number): PendingEntry => ({ tenant: 'acme', callId: `c${i}`, name: 'bash', isError: false, json: JSON.stringify({ callId: `c${i}` }) })
  await store.append([0, 1, 2, 3, 4].map(entry))
  // The list as the previous layout wrote it: `<stream id> <callId>`, and no byte counter.
  const calls = `${r.prefix}{journal:acme}:calls`
  const items = await r.redis.lrange(calls, 0, -1)
  assert.match(items[0] as string, /^\d+-\d+:\d+ c0$/)
  await r.redis.del(calls, `${r.prefix}{journal:acme}:bytes`)
  await r.redis.rpush(calls, ...items.map((item) => item.replace(/:\d+ /, ' ')))
  await store.append([5, 6, 7, 8, 9].map(entry))
  assert.deepEqual((await r.redis.lrange(calls, 0, -1)).map((item) => item.slice(item.indexOf(' ') + 1)), ['c5', 'c6', 'c7', 'c8', 'c9'])
  assert.equal(await store.get('acme', 'c4'), undefined)
  assert.notEqual(await store.get('acme', 'c9'), undefined)
  const bytes = Number(await r.redis.get(`${r.prefix}{journal:acme}:bytes`))
  assert.equal(bytes, [5, 6, 7, 8, 9].reduce((n, i) => n + Buffer.byteLength(entry(i).json), 0))
})
