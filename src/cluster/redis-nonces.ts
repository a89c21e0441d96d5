import type { NonceStore } from './token.js'
import type { RedisScope } from './scope.js'

/**
 * The nonces of accepted cluster tokens in the Redis every instance shares: a token replayed to
 * any instance finds its nonce there (SET NX), where per-instance memory let a captured token be
 * replayed once on each other instance. Each key expires with the token, so nothing accumulates.
 */
export class RedisNonceStore implements NonceStore {
  readonly #scope: Pick<RedisScope, 'redis' | 'keyPrefix'>

  constructor (scope: Pick<RedisScope, 'redis' | 'keyPrefix'>) {
    this.#scope = scope
  }

  async claim (nonce: string, untilMs: number, now: number): Promise<boolean> {
    // Not hash-tagged: one key per call, spread over the slots of a Redis Cluster.
    const key = `${this.#scope.keyPrefix}cluster:nonce:${nonce}`
    const set = await this.#scope.redis.set(key, '1', 'PX', Math.max(1, untilMs - now), 'NX')
    return set === 'OK'
  }
}
