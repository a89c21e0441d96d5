import { test } from 'node:test'
import assert from 'node:assert/strict'
import { VersionedCache } from '../../../src/routing/versioned-cache.js'

test('VersionedCache: a hit needs the exact version tokens; a stale entry is dropped', () => {
  const c = new VersionedCache<string>({ maxEntries: 10 })
  c.set('k', [1, 'a'], 'v')
  assert.equal(c.get('k', [1, 'a']), 'v')
  assert.equal(c.get('k', [2, 'a']), undefined)
  assert.equal(c.get('k', [1, 'a']), undefined, 'the stale entry is gone')
  assert.equal(c.stats().entries, 0)
})

test('VersionedCache: bounded by entries and by bytes, oldest first; a value over the whole budget is not kept', () => {
  const c = new VersionedCache<string>({ maxEntries: 3, maxBytes: 100, sizeOf: (v) => v.length })
  for (const k of ['a', 'b', 'c', 'd']) c.set(k, [1], 'x'.repeat(10))
  assert.deepEqual(c.stats(), { entries: 3, bytes: 30 })
  assert.equal(c.get('a', [1]), undefined)
  c.set('big', [1], 'y'.repeat(90))
  assert.ok(c.stats().bytes <= 100, JSON.stringify(c.stats()))
  assert.equal(c.get('big', [1])?.length, 90)
  assert.equal(c.get('c', [1]), undefined, 'older entries made room')
  c.set('huge', [1], 'z'.repeat(101))
  assert.equal(c.get('huge', [1]), undefined)
  c.set('big', [2], 'w'.repeat(5))
  assert.deepEqual(c.stats(), { entries: 2, bytes: 15 }, 'a replaced entry gives its bytes back')
  assert.equal(c.get('big', [2]), 'wwwww')
})
