import type { Logger } from '../logger.js'
import { taggedKey } from '../redis/index.js'
import type { RedisScope } from './scope.js'

/** One live instance as GET /cluster shows it. Times are epoch milliseconds. */
export interface InstanceInfo {
  id: string
  /** Its INSTANCE_URL: where the other instances reach it. */
  url: string
  startedAt: number
  lastSeenAt: number
  /** Its running background processes at its last heartbeat. */
  processes: number
}

export interface MembershipOptions {
  /** CLUSTER_HEARTBEAT_MS; an instance counts as gone after 3 missed heartbeats. */
  heartbeatMs: number
  /** Running background processes of this instance, reported with each heartbeat. */
  processes?: () => number
  logger: Logger
  now?: () => number
}

/** Dead members stay in the hash this long (for logs and LOST reports), then are pruned by list(). */
const FORGET_DEAD_AFTER_MS = 60 * 60_000

/**
 * Heartbeat: the alive key (its TTL is the liveness, decided by Redis's clock, so instances'
 * clocks need not agree) and the member's description, in one script on the one `{cluster}` slot.
 */
const HEARTBEAT_SCRIPT = `
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return 1
`

/**
 * Cluster membership in Redis (docs/CLUSTER.md): every instance renews
 * `{p}{cluster}:alive:{id}` (TTL 3 heartbeats) and its entry in the hash `{p}{cluster}:members`.
 * An instance is alive while its alive key exists; a clean shutdown deletes both at once, a
 * crash lets the key expire. Nothing here elects anything: each instance only says it is there.
 */
export class Membership {
  readonly id: string
  readonly startedAt: number
  readonly #coord: RedisScope
  readonly #opts: MembershipOptions
  readonly #now: () => number
  #timer: NodeJS.Timeout | undefined
  #lastSeenAt = 0
  #failing = false
  #stopped = false
  #url = ''

  constructor (coord: RedisScope, opts: MembershipOptions) {
    this.#coord = coord
    this.#opts = opts
    this.#now = opts.now ?? Date.now
    this.id = coord.instanceId
    this.startedAt = this.#now()
  }

  get ttlMs (): number {
    return this.#opts.heartbeatMs * 3
  }

  #membersKey (): string { return taggedKey(this.#coord.keyPrefix, 'cluster', 'members') }
  #aliveKey (id: string): string { return taggedKey(this.#coord.keyPrefix, 'cluster', `alive:${id}`) }

  /** This instance's INSTANCE_URL ('' before start). */
  get url (): string {
    return this.#url
  }

  /**
   * Registers under `url` (INSTANCE_URL, known once the server listens) now, rejecting when Redis
   * does not answer, and keeps renewing until stop().
   */
  async start (url: string): Promise<void> {
    this.#url = url.replace(/\/+$/, '')
    // The timer first: when Redis is down now, the next ticks register the instance once it is back.
    this.#timer = setInterval(() => { this.heartbeat().catch(() => {}) }, this.#opts.heartbeatMs)
    this.#timer.unref()
    await this.heartbeat()
  }

  /** One renewal; failures are logged once per outage, and the next tick tries again. */
  async heartbeat (): Promise<void> {
    if (this.#stopped) return
    const now = this.#now()
    const info: InstanceInfo = { id: this.id, url: this.url, startedAt: this.startedAt, lastSeenAt: now, processes: this.#opts.processes?.() ?? 0 }
    try {
      await this.#coord.redis.eval(HEARTBEAT_SCRIPT, 2, this.#aliveKey(this.id), this.#membersKey(), this.id, JSON.stringify(info), String(this.ttlMs))
      this.#lastSeenAt = now
      if (this.#failing) this.#opts.logger.info({ instanceId: this.id }, 'cluster heartbeat renewed again')
      this.#failing = false
    } catch (err) {
      if (!this.#failing) {
        this.#opts.logger.warn(
          { err, instanceId: this.id },
          'cluster heartbeat failed: other instances will report this instance\'s background processes LOST until it is renewed'
        )
      }
      this.#failing = true
      throw err
    }
  }

  /** When this instance last renewed its membership (0 before the first). */
  get lastSeenAt (): number {
    return this.#lastSeenAt
  }

  /** Is the instance's alive key there? Rejects when Redis does not answer (the caller decides). */
  async isAlive (id: string): Promise<boolean> {
    if (id === this.id && !this.#stopped) return true
    return await this.#coord.redis.exists(this.#aliveKey(id)) === 1
  }

  /** A live instance's description, or undefined when it is gone or unknown. */
  async get (id: string): Promise<InstanceInfo | undefined> {
    const alive = await this.#coord.redis.get(this.#aliveKey(id))
    return alive === null ? undefined : parseInfo(alive)
  }

  /** Live instances, oldest first; prunes long-dead members from the hash on the way. */
  async list (): Promise<InstanceInfo[]> {
    const all = await this.#coord.redis.hgetall(this.#membersKey())
    const ids = Object.keys(all)
    if (ids.length === 0) return []
    const alive = await this.#coord.redis.mget(...ids.map((id) => this.#aliveKey(id)))
    const out: InstanceInfo[] = []
    const forget: string[] = []
    const now = this.#now()
    ids.forEach((id, i) => {
      const live = alive[i]
      if (live !== null && live !== undefined) {
        const info = parseInfo(live)
        if (info !== undefined) out.push(info)
        return
      }
      const last = parseInfo(all[id])
      if (last === undefined || now - last.lastSeenAt > FORGET_DEAD_AFTER_MS) forget.push(id)
    })
    if (forget.length > 0) await this.#coord.redis.hdel(this.#membersKey(), ...forget).catch(() => 0)
    return out.sort((a, b) => a.startedAt - b.startedAt || (a.id < b.id ? -1 : 1))
  }

  /** Clean shutdown: stop renewing and leave at once (the others need not wait for the TTL). */
  async stop (): Promise<void> {
    if (this.#stopped) return
    this.#stopped = true
    if (this.#timer !== undefined) clearInterval(this.#timer)
    await Promise.all([
      this.#coord.redis.del(this.#aliveKey(this.id)),
      this.#coord.redis.hdel(this.#membersKey(), this.id)
    ]).catch((err: unknown) => { this.#opts.logger.warn({ err }, 'could not leave the cluster membership (it expires by itself)') })
  }
}

function parseInfo (text: string | undefined): InstanceInfo | undefined {
  if (text === undefined) return undefined
  try {
    const v = JSON.parse(text) as InstanceInfo
    return typeof v.id === 'string' && typeof v.url === 'string' ? v : undefined
  } catch {
    return undefined
  }
}
