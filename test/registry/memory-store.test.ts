import { createMemoryRegistryStore } from '../../src/registry/memory-store.js'
import { registryStoreConformance } from './store-conformance.js'

registryStoreConformance('memory store', async () => ({
  store: createMemoryRegistryStore(),
  cleanup: async () => {}
}))
