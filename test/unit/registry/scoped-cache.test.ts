import { test } from 'node:test'
import assert from 'node:assert/strict'
import { ScopedCache, scopeKey } from '../../../src/registry/scoped-cache.js'
import type { RegistryScope } from '../../../src/registry/types.js'

const GLOBAL: RegistryScope = { kind: 'global' }
const user = (userId: string): RegistryScope => ({ kind: 'user', userId })

test('scopeKey: the global scope and each tenant have keys of their own', () => {
  assert.equal(scopeKey(GLOBAL), 'g')
  assert.equal(scopeKey(user('alice')), 'u:alice')
  assert.notEqual(scopeKey(user('g')), scopeKey(GLOBAL))
})

test('a change marks one scope stale, a resync every scope; a stale value stays readable as the fallback', () => {
  const cache = new ScopedCache<string>()
  cache.set(GLOBAL, 'default')
  cache.set(user('alice'), 'alice v1')
  cache.set(user('bob'), 'bob v1', false)
  assert.deepEqual(cache.get(user('alice')), { scope: user('alice'), value: 'alice v1', fresh: true })
  assert.equal(cache.get(user('bob'))?.fresh, false)
  assert.equal(cache.get(user('carol')), undefined)

  cache.markStale(user('alice'))
  cache.markStale(user('carol'))
  assert.deepEqual([cache.get(GLOBAL)?.fresh, cache.get(user('alice'))?.fresh], [true, false])
  assert.equal(cache.get(user('alice'))?.value, 'alice v1')
  assert.equal(cache.get(user('carol')), undefined)

  cache.set(user('alice'), 'alice v2')
  assert.deepEqual(cache.peek(user('alice')), { scope: user('alice'), value: 'alice v2', fresh: true })
  cache.markAllStale()
  assert.deepEqual([GLOBAL, user('alice'), user('bob')].map((s) => cache.peek(s)?.fresh), [false, false, false])
  cache.clear()
  assert.equal(cache.peek(GLOBAL), undefined)
})

test('bounded: the least recently used scope is dropped and reported; get of a fresh value is a use, peek and a stale get are not', () => {
  const evicted: RegistryScope[] = []
  const cache = new ScopedCache<number>({ maxScopes: 3, onEvict: (scope) => { evicted.push(scope) } })
  cache.set(GLOBAL, 0)
  cache.set(user('a'), 1)
  cache.set(user('b'), 2)
  assert.equal(cache.get(GLOBAL)?.value, 0)
  cache.set(user('c'), 3)
  assert.deepEqual(evicted, [user('a')])

  assert.equal(cache.peek(user('b'))?.value, 2)
  cache.markStale(GLOBAL)
  assert.equal(cache.get(GLOBAL)?.value, 0)
  cache.set(user('d'), 4)
  cache.set(user('e'), 5)
  assert.deepEqual(evicted, [user('a'), user('b'), GLOBAL])
  assert.deepEqual([user('c'), user('d'), user('e')].map((s) => cache.peek(s)?.value), [3, 4, 5])

  // Storing a scope again makes it the most recent.
  cache.set(user('c'), 30)
  cache.set(user('f'), 6)
  assert.deepEqual(evicted.at(-1), user('d'))
})
