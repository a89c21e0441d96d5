import { taggedKey } from '../redis/index.js'
import type { RedisScope } from './scope.js'

/**
 * Search mode's working sets (listing/working-sets.ts `WorkingSetStore`) in the Redis every
 * instance shares, so an /mcp client's next request, on any instance, lists what its search
 * found. One sorted set per key, scored by when a name was last found: the newest `max` are kept
 * and the key expires `ttlMs` after its last change (docs/CLUSTER.md#redis-key-layout).
 */
export class RedisWorkingSets {
  readonly #scope: Pick<RedisScope, 'redis' | 'keyPrefix'>

  constructor (scope: Pick<RedisScope, 'redis' | 'keyPrefix'>) {
    this.#scope = scope
  }

  async add (key: string, names: readonly string[], max: number, ttlMs: number): Promise<boolean> {
    if (names.length === 0) return false
    const redisKey = this.#key(key)
    const now = Date.now()
    // One score per name, in the order found: a later name is the newer.
    const members = names.flatMap((name, i) => [String(now + i / 1000), name])
    const result = await this.#scope.redis.multi()
      .zadd(redisKey, ...members)
      .zremrangebyrank(redisKey, 0, -(max + 1))
      .pexpire(redisKey, ttlMs)
      .exec()
    const [err, added] = result?.[0] ?? [new Error('the transaction was discarded'), 0]
    if (err !== null) throw err
    return Number(added) > 0
  }

  async get (key: string): Promise<string[]> {
    return await this.#scope.redis.zrange(this.#key(key), 0, -1)
  }

  #key (key: string): string {
    return taggedKey(this.#scope.keyPrefix, `search:${key}`, 'found')
  }
}
