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

test('VersionedCache: an owner holds at most its share; past it its own oldest go, not another owner\'s; its newest is kept however large', () => {
  const c = new VersionedCache<string>({ maxEntries: 100, maxBytes: 100, sizeOf: (v) => v.length, ownerShare: 0.25 })
  c.set('b:1', [1], 'x'.repeat(10), 'b')
  c.set('none', [1], 'x'.repeat(10))
  // Owner a lists many allow-lists: it keeps 25 bytes at most, b's entry and the ownerless one stay.
  for (let i = 0; i < 20; i++) c.set(`a:${i}`, [1], 'y'.repeat(10), 'a')
  assert.equal(c.get('b:1', [1])?.length, 10, 'another owner\'s entry was pushed out')
  assert.equal(c.get('none', [1])?.length, 10)
  assert.equal(c.get('a:19', [1])?.length, 10)
  assert.equal(c.get('a:18', [1])?.length, 10)
  assert.equal(c.get('a:17', [1]), undefined, 'a keeps two entries of 10 bytes (25 bytes of 100)')
  // One listing larger than the share is still kept (alone of its owner's).
  c.set('a:big', [1], 'z'.repeat(60), 'a')
  assert.equal(c.get('a:big', [1])?.length, 60)
  assert.equal(c.get('a:19', [1]), undefined)
  assert.equal(c.get('b:1', [1])?.length, 10)
  // Entries count too: a quarter of maxEntries.
  const n = new VersionedCache<string>({ maxEntries: 8, ownerShare: 0.25 })
  n.set('b', [1], 'v', 'b')
  for (let i = 0; i < 10; i++) n.set(`a:${i}`, [1], 'v', 'a')
  assert.equal(n.get('b', [1]), 'v')
  assert.deepEqual(n.stats(), { entries: 3, bytes: 0 })
})
