import assert from 'node:assert/strict'
import { test } from 'node:test'
import { createLimiterStores, MemoryWindowCounter, RedisWindowCounter } from '../../../src/cluster/index.js'
import type { Logger } from '../../../src/logger.js'
import { countKeys, deleteKeys, freePort, REDIS_URL, requireRedis, uniquePrefix } from '../../helpers/redis-utils.js'

function recorder (): { logger: Logger, warnings: string[] } {
  const warnings: string[] = []
  const logger: Logger = { debug () {}, info () {}, warn (_obj, msg) { warnings.push(msg ?? '') }, error () {} }
  return { logger, warnings }
}

test('without Redis: memory windows, no semaphore, no errors', async () => {
  const stores = await createLimiterStores({ target: undefined, keyPrefix: 'tg:', instanceId: 'i', logger: recorder().logger })
  assert.ok(stores.windows instanceof MemoryWindowCounter)
  assert.equal(stores.semaphore, undefined)
  assert.equal(stores.errors(), 0)
  await stores.close()
})

test('with Redis: windows and concurrency slots in it, on a connection closed with the stores', async (t) => {
  if (!await requireRedis(t)) return
  const prefix = uniquePrefix()
  t.after(async () => { await deleteKeys(prefix) })
  const { logger, warnings } = recorder()
  const stores = await createLimiterStores({ target: { kind: 'single', url: REDIS_URL }, keyPrefix: prefix, instanceId: 'inst-a', logger })
  let closed = false
  t.after(async () => { if (!closed) await stores.close() })
  assert.ok(stores.windows instanceof RedisWindowCounter)
  assert.equal((await stores.windows.add('t:acme', 2, 60_000))?.current, 2)
  const got = await stores.semaphore?.acquire('t:acme', 1, 2)
  assert.ok(got?.ok)
  assert.equal(await countKeys(prefix), 2, 'the window and the semaphore key')
  await got.hold.release()
  await stores.close()
  closed = true
  assert.deepEqual(warnings, [])
  assert.equal(stores.errors(), 0)
})

test('Redis down at start-up: not fatal; a warning, then failed counts are counted as errors', async () => {
  const { logger, warnings } = recorder()
  const stores = await createLimiterStores({ target: { kind: 'single', url: `redis://127.0.0.1:${await freePort()}` }, keyPrefix: uniquePrefix(), instanceId: 'i', logger })
  try {
    assert.ok(warnings.some((w) => /not reachable at start-up/.test(w)), warnings.join('; '))
    const before = stores.errors()
    // No offline queue: the count fails at once instead of waiting for Redis.
    const started = Date.now()
    assert.equal(await stores.windows.add('t:acme', 1, 60_000), undefined)
    assert.ok(Date.now() - started < 500, 'the count waited for Redis')
    assert.ok(stores.errors() > before)
    stores.countError()
    assert.ok(stores.errors() > before + 1)
  } finally {
    await stores.close()
  }
})
