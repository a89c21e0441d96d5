import { Cluster, Redis } from 'ioredis'
import type { ClusterOptions, RedisOptions } from 'ioredis'

/**
 * Where the gateway's Redis is: one server (`REDIS_URL`) or a Redis Cluster
 * (`REDIS_CLUSTER_NODES`, used instead of REDIS_URL when set). Every store takes this and asks
 * createRedisClient for its connection, so each works on both.
 */
export type RedisTarget =
  | { kind: 'single', url: string }
  | { kind: 'cluster', nodes: ReadonlyArray<{ host: string, port: number }>, password?: string | undefined, tls?: boolean | undefined }

/** A connection to either: ioredis gives both the same command API (scripts, pub/sub, streams). */
export type RedisClient = Redis | Cluster

/** The connection options every store chooses for itself (bounded commands, bounded connects). */
export interface RedisClientOptions {
  /** Past it a command fails (ioredis `commandTimeout`). */
  commandTimeoutMs?: number
  /** Bound on a TCP connect. */
  connectTimeoutMs?: number
  /** Upper bound of the reconnect back-off. Default 2000. */
  maxReconnectDelayMs?: number
  /** false: commands fail at once while disconnected instead of queueing. Default true. */
  enableOfflineQueue?: boolean
  /** ioredis `maxRetriesPerRequest`. Default 1. */
  maxRetriesPerRequest?: number | null
  /** Do not connect before the first command. */
  lazyConnect?: boolean
  /** ioredis `autoResubscribe` (default true); false for a subscriber that resubscribes by hand. */
  autoResubscribe?: boolean
  /** ioredis `autoResendUnfulfilledCommands` (default true); false where a command must not run twice. */
  autoResendUnfulfilledCommands?: boolean
}

/**
 * `REDIS_CLUSTER_NODES` (`host:port,host:port,...`, at least one) or `REDIS_URL`, checked; undefined
 * when neither is set (the in-memory embedded default). A cluster's password and TLS come from
 * REDIS_URL when both are set (`rediss://:password@any-node`).
 */
export function redisTargetOf (config: { redisUrl?: string | undefined, redisClusterNodes?: readonly string[] | undefined }): RedisTarget | undefined {
  const nodes = config.redisClusterNodes ?? []
  if (nodes.length > 0) {
    const parsed = nodes.map(parseNode)
    let password: string | undefined
    let tls: boolean | undefined
    if (config.redisUrl !== undefined && config.redisUrl !== '') {
      const u = new URL(config.redisUrl)
      if (u.password !== '') password = decodeURIComponent(u.password)
      if (u.protocol === 'rediss:') tls = true
    }
    return { kind: 'cluster', nodes: parsed, password, tls }
  }
  if (config.redisUrl === undefined || config.redisUrl === '') return undefined
  return { kind: 'single', url: config.redisUrl }
}

/** `host:port` (IPv6 in brackets: `[::1]:7000`). Throws a message naming the node. */
export function parseNode (node: string): { host: string, port: number } {
  const m = /^(?:\[([0-9A-Fa-f:.]+)\]|([^:\s[\]]+)):([0-9]{1,5})$/.exec(node.trim())
  const port = m === null ? NaN : Number(m[3])
  if (m === null || !(port >= 1 && port <= 65535)) throw new Error(`Not a host:port Redis Cluster node: '${node}'`)
  return { host: m[1] ?? m[2] ?? '', port }
}

/** A new connection to the target; the caller owns it (close with quitWithTimeout). */
export function createRedisClient (target: RedisTarget, options: RedisClientOptions = {}): RedisClient {
  const maxDelay = options.maxReconnectDelayMs ?? 2000
  const base: RedisOptions = {
    maxRetriesPerRequest: options.maxRetriesPerRequest === undefined ? 1 : options.maxRetriesPerRequest,
    enableOfflineQueue: options.enableOfflineQueue ?? true,
    retryStrategy: (times: number) => Math.min(50 * 2 ** Math.min(times, 10), maxDelay),
    ...(options.commandTimeoutMs !== undefined ? { commandTimeout: options.commandTimeoutMs } : {}),
    ...(options.connectTimeoutMs !== undefined ? { connectTimeout: options.connectTimeoutMs } : {}),
    ...(options.lazyConnect === true ? { lazyConnect: true } : {}),
    ...(options.autoResubscribe !== undefined ? { autoResubscribe: options.autoResubscribe } : {}),
    ...(options.autoResendUnfulfilledCommands !== undefined ? { autoResendUnfulfilledCommands: options.autoResendUnfulfilledCommands } : {})
  }
  if (target.kind === 'single') return new Redis(target.url, base)
  const clusterOptions: ClusterOptions = {
    redisOptions: {
      ...base,
      ...(target.password !== undefined ? { password: target.password } : {}),
      ...(target.tls === true ? { tls: {} } : {})
    },
    enableOfflineQueue: options.enableOfflineQueue ?? true,
    clusterRetryStrategy: (times: number) => Math.min(100 * 2 ** Math.min(times, 10), maxDelay),
    // Writes and scripts go to masters; reads too, so a read sees the write before it.
    scaleReads: 'master',
    slotsRefreshTimeout: options.connectTimeoutMs ?? 2000,
    ...(options.lazyConnect === true ? { lazyConnect: true } : {})
  }
  return new Cluster(target.nodes.map((n) => ({ host: n.host, port: n.port })), clusterOptions)
}
