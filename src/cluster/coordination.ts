import { randomBytes } from 'node:crypto'
import os from 'node:os'
import type { RedisClient } from '../redis/index.js'

/**
 * What the cluster-wide parts (membership, background-process ownership, workspace write leases,
 * the per-tenant concurrency semaphore) share: one Redis connection of this instance, the key
 * prefix, and this instance's id. Absent without Redis: then the gateway is one instance and
 * every one of those parts falls back to its in-process form.
 */
export interface Coordination {
  redis: RedisClient
  /** REDIS_KEY_PREFIX. */
  keyPrefix: string
  /** This instance, unique for its lifetime (a restart is a new instance). */
  instanceId: string
}

/** `{hostname}-{pid}-{random}`: readable in GET /cluster and logs, never reused by a restart. */
export function newInstanceId (): string {
  const host = os.hostname().replace(/[^A-Za-z0-9.-]/g, '-').slice(0, 40) || 'host'
  return `${host}-${process.pid}-${randomBytes(4).toString('hex')}`
}
