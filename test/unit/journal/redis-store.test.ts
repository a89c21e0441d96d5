import { test } from 'node:test'
import assert from 'node:assert/strict'
import { RedisJournalStore } from '../../../src/journal/redis-store.js'
import { journalStoreConformance } from '../../helpers/journal-conformance.js'
import { redisForTest } from '../../helpers/redis.js'
import { delay, REDIS_URL, TcpProxy } from '../../helpers/redis-utils.js'

journalStoreConformance('redis', async (t, opts) => {
  const r = await redisForTest(t)
  if (r === undefined) return undefined
  const store = new RedisJournalStore({ url: REDIS_URL, keyPrefix: r.prefix, ...opts })
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
  const stream = `${r.prefix}journal:acme`
  assert.equal(await r.redis.type(stream), 'stream')
  const ttl = await r.redis.pttl(stream)
  assert.ok(ttl > 0 && ttl <= 3_600_000)
  const id = await r.redis.get(`${r.prefix}journal:acme:call:c1`)
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
