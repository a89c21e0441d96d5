import { createMemoryRegistryStore } from './memory-store.js'
import { createRedisRegistryStore, type RedisRegistryStoreOptions } from './redis-store.js'
import type { RegistryStore } from './types.js'

export interface RegistryStoreConfig {
  /** REDIS_URL; unset selects the in-memory store (the embedded default). */
  redisUrl?: string | undefined
  /** REDIS_KEY_PREFIX, default `tg:`. */
  keyPrefix?: string | undefined
  redis?: Omit<RedisRegistryStoreOptions, 'url' | 'keyPrefix'>
}

/**
 * The registry store: Redis when REDIS_URL is set, memory otherwise. With Redis it
 * waits for the first connection and rejects with RegistryUnavailableError when Redis does
 * not answer in time.
 */
export async function createRegistryStore (config: RegistryStoreConfig): Promise<RegistryStore> {
  if (config.redisUrl === undefined || config.redisUrl === '') return createMemoryRegistryStore()
  return await createRedisRegistryStore({ ...config.redis, url: config.redisUrl, keyPrefix: config.keyPrefix ?? 'tg:' })
}
