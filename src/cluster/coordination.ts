import { randomBytes } from 'node:crypto'
import os from 'node:os'
import type { RedisScope } from './scope.js'
import type { Membership } from './membership.js'
import type { PeerClient } from './peer-client.js'

/**
 * What the cluster-wide parts (background-process ownership, workspace write leases, the
 * per-tenant concurrency semaphore) share. Absent without Redis: then the gateway is one instance
 * and every one of those parts falls back to its in-process form.
 */
export interface Coordination extends RedisScope {
  /** Who else is there (GET /cluster); started once the server listens. */
  membership: Membership
  /** Calls to other instances; undefined without CLUSTER_SECRET (nothing is forwarded then). */
  peers: PeerClient | undefined
}

/** `{hostname}-{pid}-{random}`: readable in GET /cluster and logs, never reused by a restart. */
export function newInstanceId (): string {
  const host = os.hostname().replace(/[^A-Za-z0-9.-]/g, '-').slice(0, 40) || 'host'
  return `${host}-${process.pid}-${randomBytes(4).toString('hex')}`
}
