import type { Config } from '../config.js'
import { StartupError } from '../errors.js'
import type { Logger } from '../logger.js'
import { createRedisClient, quitWithTimeout, redisTargetOf } from '../redis/index.js'
import { newInstanceId } from './coordination.js'
import type { Coordination } from './coordination.js'
import { createLimiterStores } from './limiter-stores.js'
import type { LimiterStores } from './limiter-stores.js'
import { Membership } from './membership.js'
import { PeerClient } from './peer-client.js'
import { ClusterTokens } from './token.js'

export { newInstanceId } from './coordination.js'
export type { Coordination } from './coordination.js'
export type { RedisScope } from './scope.js'
export { Membership } from './membership.js'
export type { InstanceInfo } from './membership.js'
export { PeerClient, PeerRequestError, PeerUnavailableError } from './peer-client.js'
export { CLUSTER_TOKEN_HEADER, CLUSTER_TOKEN_MAX_AGE_MS, ClusterTokens, ClusterTokenVerifier, MemoryNonceStore } from './token.js'
export { RedisNonceStore } from './redis-nonces.js'
export { RedisWorkingSets } from './working-sets.js'
export { LeaseLock, LeaseLostError, LockUnavailableError, LockWaitAbortedError } from './lease-lock.js'
export type { LeaseContext, WriteLock } from './write-lock.js'
export { RedisSemaphore } from './semaphore.js'
export type { SemaphoreHold } from './semaphore.js'
export { MemoryWindowCounter, RedisWindowCounter } from './window-counter.js'
export type { WindowCount, WindowCounter } from './window-counter.js'
export { admitInnerCall, createLimiterStores, limitBucket, memoryLimiterStores } from './limiter-stores.js'
export type { LimiterStores } from './limiter-stores.js'
export { FORWARDED_PROCESS_CALL_PATH, ProcessDirectory } from './process-directory.js'
export type { ProcessRecord } from './process-directory.js'
export { KeyedMutex } from './keyed-mutex.js'

/** This instance's part in the cluster, as the services use it. */
export interface Cluster {
  /** The cluster-wide parts' shared Redis connection and membership; undefined without Redis (one instance). */
  coordination: Coordination | undefined
  /** Signs and checks instance-to-instance calls; undefined without CLUSTER_SECRET. */
  tokens: ClusterTokens | undefined
  /** What the per-tenant rate and concurrency limits count in (the rate-limit plugin): Redis or memory. */
  limiterStores: LimiterStores
  /**
   * Closes the limiter's stores, stops the heartbeats and closes the coordination connection. Call
   * it after the built-ins' close: their shutdown still records in Redis what it stopped.
   */
  close: () => Promise<void>
}

export interface ClusterDeps {
  /** Running background processes of this instance, reported with each heartbeat. */
  processes: () => number
}

/**
 * Builds this instance's cluster parts from the config: with Redis, one coordination connection
 * (membership, process ownership, write leases) and the instance tokens; in any case the rate
 * limiter's stores. Throws a StartupError before dialling Redis when API keys are set without
 * CLUSTER_SECRET.
 */
export async function createCluster (config: Config, logger: Logger, deps: ClusterDeps): Promise<Cluster> {
  const target = redisTargetOf(config)
  const instanceId = newInstanceId()
  const closers: Array<() => Promise<void>> = []
  const close = async (): Promise<void> => {
    for (const fn of closers.splice(0).reverse()) {
      await fn().catch((err: unknown) => logger.error({ err }, 'error while closing'))
    }
  }
  try {
    let coordination: Coordination | undefined
    let tokens: ClusterTokens | undefined
    if (target !== undefined) {
      const keyed = (config.apiKeys ?? '') !== '' || (config.apiKeysFile ?? '') !== ''
      if (keyed && config.clusterSecret === undefined) {
        throw new StartupError(
          'CLUSTER_SECRET is required when Redis is configured and API keys are set: instances sign their calls to each other with it (set the same value, at least 16 characters, on every instance)'
        )
      }
      const redis = createRedisClient(target, { commandTimeoutMs: 2000, connectTimeoutMs: 2000 })
      redis.on('error', () => {})
      closers.push(async () => { await quitWithTimeout(redis, 1000) })
      const scope = { redis, keyPrefix: config.redisKeyPrefix, instanceId }
      const membership = new Membership(scope, { heartbeatMs: config.clusterHeartbeatMs, processes: deps.processes, logger })
      // Closed in reverse: the heartbeats stop before their connection goes.
      closers.push(async () => { await membership.stop() })
      tokens = config.clusterSecret !== undefined ? new ClusterTokens(config.clusterSecret) : undefined
      coordination = { ...scope, membership, peers: tokens !== undefined ? new PeerClient(tokens) : undefined }
    }
    // The rate limiter's own connection, failing fast instead of queueing (limiter-stores.ts).
    const limiterStores = await createLimiterStores({ target, keyPrefix: config.redisKeyPrefix, instanceId, logger })
    closers.push(limiterStores.close)
    return { coordination, tokens, limiterStores, close }
  } catch (err) {
    await close()
    throw err
  }
}
