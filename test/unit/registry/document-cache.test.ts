import { test } from 'node:test'
import assert from 'node:assert/strict'
import { DocumentCache } from '../../../src/registry/document-cache.js'
import { MemoryRegistryStore } from '../../../src/registry/memory-store.js'
import type { RegistryScope, RegistryStore, StoredDocument } from '../../../src/registry/types.js'

const alice: RegistryScope = { kind: 'user', userId: 'alice' }
const bob: RegistryScope = { kind: 'user', userId: 'bob' }

interface Doc { version: number, value: unknown }

/**
 * The real memory store, its reads counted, and able to fail or to hold a read (a gate) until the
 * test lets it go: what a slow or unreachable Redis does, which the memory store never does.
 */
function instrumented (): { store: RegistryStore, reads: () => number, failing: (on: boolean) => void, hold: () => () => void } {
  const real = new MemoryRegistryStore()
  let reads = 0
  let fail = false
  let gate: Promise<void> | undefined
  const store = new Proxy(real, {
    get (target, prop, receiver) {
      if (prop === 'getDocument') {
        return async (...args: Parameters<RegistryStore['getDocument']>): Promise<StoredDocument | undefined> => {
          reads++
          if (fail) throw new Error('store unreachable')
          const doc = await target.getDocument(...args)
          await gate
          return doc
        }
      }
      const v = Reflect.get(target, prop, receiver) as unknown
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v
    }
  })
  return {
    store,
    reads: () => reads,
    failing: (on) => { fail = on },
    hold: () => {
      let release!: () => void
      gate = new Promise((resolve) => { release = resolve })
      return () => { gate = undefined; release() }
    }
  }
}

function cacheOf (store: RegistryStore, stale: unknown[] = [], maxScopes = 100): DocumentCache<Doc> {
  return new DocumentCache<Doc>(store, 'policy', {
    parse: (doc) => ({ version: doc?.version ?? 0, value: doc?.value }),
    same: (a, b) => a.version === b.version,
    onStaleRead: (err) => { stale.push(err) },
    maxScopes
  })
}

test('a scope is read once while fresh; a change of its kind on the store makes the next load read again', async () => {
  const s = instrumented()
  const cache = cacheOf(s.store)
  await s.store.putDocument('policy', alice, { v: 1 })
  assert.deepEqual(await cache.load(alice), { version: 1, value: { v: 1 } })
  await cache.load(alice)
  assert.equal(s.reads(), 1)
  // Another kind's change and another scope's change leave alice's value fresh.
  await s.store.putDocument('pins', alice, { p: 1 })
  await s.store.putDocument('policy', bob, { v: 9 })
  await cache.load(alice)
  assert.equal(s.reads(), 1)
  await s.store.putDocument('policy', alice, { v: 2 })
  assert.deepEqual(await cache.load(alice), { version: 2, value: { v: 2 } })
  assert.equal(s.reads(), 2)
  cache.close()
})

test('a value read again at the cached version keeps the cached object', async () => {
  const s = instrumented()
  const cache = cacheOf(s.store)
  await s.store.putDocument('policy', alice, { v: 1 })
  // A change elsewhere while alice's read is under way: that read is not trusted as fresh...
  const release = s.hold()
  const loading = cache.load(alice)
  await s.store.putDocument('policy', bob, { v: 1 })
  release()
  const first = await loading
  assert.equal(cache.get(alice)?.fresh, false)
  // ...so the next load reads again, finds the same version, and keeps the object built before.
  const again = await cache.load(alice)
  assert.equal(s.reads(), 2)
  assert.equal(again, first)
  assert.equal(cache.get(alice)?.fresh, true)
  cache.close()
})

test('a read that started before a change is not cached as fresh', async () => {
  const s = instrumented()
  const cache = cacheOf(s.store)
  await s.store.putDocument('policy', alice, { v: 1 })
  const release = s.hold()
  const loading = cache.load(alice)
  await s.store.putDocument('policy', alice, { v: 2 })
  release()
  // The read saw version 1 or 2 depending on the order; either way it is not trusted as fresh.
  await loading
  assert.equal(cache.get(alice)?.fresh, false)
  assert.deepEqual(await cache.load(alice), { version: 2, value: { v: 2 } })
  assert.equal(cache.get(alice)?.fresh, true)
  cache.close()
})

test('an unreachable store: the last value read answers (and is said), a scope never read fails', async () => {
  const s = instrumented()
  const stale: unknown[] = []
  const cache = cacheOf(s.store, stale)
  await s.store.putDocument('policy', alice, { v: 1 })
  await cache.load(alice)
  await s.store.putDocument('policy', alice, { v: 2 })
  s.failing(true)
  assert.deepEqual(await cache.load(alice), { version: 1, value: { v: 1 } })
  assert.equal(stale.length, 1)
  await assert.rejects(cache.load(bob), /store unreachable/)
  s.failing(false)
  assert.deepEqual(await cache.load(alice), { version: 2, value: { v: 2 } })
  cache.close()
})

test('the bound drops the least recently used scope and says so; a closed cache hears no more changes', async () => {
  const s = instrumented()
  const evicted: RegistryScope[] = []
  const cache = new DocumentCache<Doc>(s.store, 'policy', {
    parse: (doc) => ({ version: doc?.version ?? 0, value: doc?.value }),
    same: (a, b) => a.version === b.version,
    onStaleRead: () => {},
    maxScopes: 1,
    onEvict: (scope) => { evicted.push(scope) }
  })
  await cache.load(alice)
  await cache.load(bob)
  assert.deepEqual(evicted, [alice])
  assert.equal(cache.peek(alice), undefined)
  cache.close()
  // After close, the store's events no longer reach the cache.
  await s.store.putDocument('policy', bob, { v: 3 })
  assert.equal(cache.peek(bob)?.fresh, true)
})
