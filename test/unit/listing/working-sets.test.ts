/**
 * Search mode's working sets (listing/working-sets.ts), the same cases for the memory store and
 * the Redis one (cluster/working-sets.ts, on a real redis-server): newest names kept up to `max`,
 * "new" only for a name not there yet, expiry after the last change, keys apart.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import type { TestContext } from 'node:test'
import { MemoryWorkingSets, workingSetKey } from '../../../src/listing/working-sets.js'
import type { WorkingSetStore } from '../../../src/listing/working-sets.js'
import { RedisWorkingSets } from '../../../src/cluster/working-sets.js'
import { redisForTest } from '../../helpers/redis.js'

const stores: Array<[string, (t: TestContext) => Promise<WorkingSetStore | undefined>]> = [
  ['memory', async () => new MemoryWorkingSets()],
  ['redis', async (t) => {
    const r = await redisForTest(t)
    return r === undefined ? undefined : new RedisWorkingSets({ redis: r.redis, keyPrefix: r.prefix })
  }]
]

for (const [kind, make] of stores) {
  test(`${kind}: the newest names are kept up to max; only a name not there yet counts as new; keys are apart`, async (t) => {
    const store = await make(t)
    if (store === undefined) return
    assert.deepEqual(await store.get('a'), [])
    assert.equal(await store.add('a', ['x', 'y'], 3, 60_000), true)
    assert.equal(await store.add('a', ['y'], 3, 60_000), false, 'found again: nothing new')
    assert.equal(await store.add('a', ['z', 'w'], 3, 60_000), true)
    // x was the oldest (y was found again after it): it went first.
    assert.deepEqual([...await store.get('a')].sort(), ['w', 'y', 'z'])
    assert.deepEqual(await store.get('b'), [])
    assert.equal(await store.add('b', [], 3, 60_000), false)
  })

  test(`${kind}: a set expires after its last change`, async (t) => {
    const store = await make(t)
    if (store === undefined) return
    await store.add('short', ['x'], 3, 150)
    assert.deepEqual(await store.get('short'), ['x'])
    await new Promise((resolve) => setTimeout(resolve, 300))
    assert.deepEqual(await store.get('short'), [])
  })
}

test('memory: at most maxKeys sets, the least recently changed go first', async () => {
  const store = new MemoryWorkingSets({ maxKeys: 2 })
  await store.add('a', ['x'], 3, 60_000)
  await store.add('b', ['x'], 3, 60_000)
  await store.add('a', ['y'], 3, 60_000)
  await store.add('c', ['x'], 3, 60_000)
  assert.deepEqual(await store.get('b'), [])
  assert.deepEqual(await store.get('a'), ['x', 'y'])
})

test('the key names no tenant text, and differs by tenant, API key, allow-list and pinned', () => {
  const base = { tenant: 'acme', keyId: 'k1', functions: ['calculate'], mcp: ['tracker'], pinned: [] }
  const key = workingSetKey(base)
  assert.match(key, /^[A-Za-z0-9_-]{43}$/)
  for (const other of [{ tenant: 'globex' }, { keyId: 'k2' }, { functions: [] }, { mcp: ['files'] }, { pinned: ['calculate'] }]) {
    assert.notEqual(workingSetKey({ ...base, ...other }), key, JSON.stringify(other))
  }
})
