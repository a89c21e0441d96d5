import { after } from 'node:test'
import { Cluster } from 'ioredis'
import { startRedisCluster } from '../../scripts/lib/redis-cluster.js'
import type { RedisClusterHandle } from '../../scripts/lib/redis-cluster.js'
import { parseNode } from '../../src/redis/index.js'
import type { RedisTarget } from '../../src/redis/index.js'

/**
 * One local 3-master Redis Cluster for a test file, started on first use (so a file whose
 * cluster cases are filtered out starts none) and stopped after the file's tests.
 */
export function lazyCluster (): () => Promise<RedisClusterHandle> {
  let started: Promise<RedisClusterHandle> | undefined
  after(async () => { if (started !== undefined) await (await started.catch(() => undefined))?.stop() })
  return async () => {
    started ??= startRedisCluster()
    return await started
  }
}

/** The RedisTarget of a local cluster (what REDIS_CLUSTER_NODES gives). */
export function clusterTarget (cluster: RedisClusterHandle): RedisTarget {
  return { kind: 'cluster', nodes: cluster.nodes.map(parseNode) }
}

/** A plain ioredis cluster client for assertions; disconnected by the caller. */
export function clusterClient (cluster: RedisClusterHandle): Cluster {
  return new Cluster(cluster.nodes.map(parseNode), { scaleReads: 'master' })
}
