import { createMemoryRegistryStore } from './memory-store.js'
import { createRedisRegistryStore, type RedisRegistryStoreOptions } from './redis-store.js'
import type { RedisTarget } from '../redis/index.js'
import type { RegistryStore } from './types.js'

export interface RegistryStoreConfig {
  /** Where Redis is (redisTargetOf: REDIS_CLUSTER_NODES or REDIS_URL); wins over redisUrl. */
  target?: RedisTarget | undefined
  /** REDIS_URL; with no target either, the in-memory store (the embedded default). */
  redisUrl?: string | undefined
  /** REDIS_KEY_PREFIX, default `tg:`. */
  keyPrefix?: string | undefined
  redis?: Omit<RedisRegistryStoreOptions, 'url' | 'target' | 'keyPrefix'>
}

/**
 * The registry store: Redis (one server or a cluster) when configured, memory otherwise. With
 * Redis it waits for the first connection and rejects with RegistryUnavailableError when Redis
 * does not answer in time.
 */
export async function createRegistryStore (config: RegistryStoreConfig): Promise<RegistryStore> {
  const target = config.target ?? (config.redisUrl !== undefined && config.redisUrl !== '' ? { kind: 'single' as const, url: config.redisUrl } : undefined)
  if (target === undefined) return createMemoryRegistryStore()
  return await createRedisRegistryStore({ ...config.redis, target, keyPrefix: config.keyPrefix ?? 'tg:' })
}
