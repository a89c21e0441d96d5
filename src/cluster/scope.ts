import type { RedisClient } from '../redis/index.js'

/** One instance's handle on the shared Redis: its connection, the key prefix, and its id. */
export interface RedisScope {
  redis: RedisClient
  /** REDIS_KEY_PREFIX. */
  keyPrefix: string
  /** This instance, unique for its lifetime (a restart is a new instance). */
  instanceId: string
}
