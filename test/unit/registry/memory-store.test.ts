import assert from 'node:assert/strict'
import { test } from 'node:test'
import { createRegistryStore } from '../../../src/registry/create-store.js'
import { createMemoryRegistryStore } from '../../../src/registry/memory-store.js'
import { registryStoreConformance } from '../../helpers/store-conformance.js'

registryStoreConformance('memory store', async () => ({
  store: createMemoryRegistryStore(),
  cleanup: async () => {}
}))

test('createRegistryStore: memory without REDIS_URL', async () => {
  const store = await createRegistryStore({})
  assert.equal(store.backend, 'memory')
  await store.close()
  const blank = await createRegistryStore({ redisUrl: '' })
  assert.equal(blank.backend, 'memory')
  await blank.close()
})
