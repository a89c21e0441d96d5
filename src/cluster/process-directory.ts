import { createHash } from 'node:crypto'
import { taggedKey } from '../redis/index.js'
import type { RedisScope } from './scope.js'

/** Where another instance sends the background-process calls it forwards to this one (the owner). */
export const FORWARDED_PROCESS_CALL_PATH = '/internal/cluster/processes'

/** Which workspace a process runs in. The root never leaves the gateway (it is a host path). */
export interface ProcessWorkspaceIdentity {
  tenant: string
  workspaceId: string
  /** Real path of the workspace root: an admin workspaceRoot must not alias a tenant's workspace of the same id. */
  root: string
}

/** The least a snapshot must carry to be filed. */
export interface FiledSnapshot {
  processId: string
  startedAt: number
  status: string
}

/** One process as the directory holds it: who runs it, where, and what it last looked like. */
export interface ProcessRecord<S extends FiledSnapshot = FiledSnapshot> extends ProcessWorkspaceIdentity {
  /** The instance that runs it (its instanceId). */
  owner: string
  snapshot: S
  /** When the owner last wrote the record (epoch ms, the owner's clock). */
  updatedAt: number
}

export interface ProcessDirectoryOptions {
  /**
   * How long a running process's record outlives its owner's last refresh: the owner refreshes
   * it well within (ProcessService), so it expires only after the owner is gone, and a LOST
   * process is reported that long. Default 10 min.
   */
  runningTtlMs?: number
  /** How long a finished (EXITED, STOPPED) record is kept: the manager's exitedRetentionMs. Default 10 min. */
  finishedTtlMs?: number
  /** Most ids one workspace's index holds; past it the oldest are dropped (their records expire). Default 512. */
  maxPerWorkspace?: number
  now?: () => number
}

// The record and the workspace's index in one step, so a record is never filed without being
// listable. The index is a ZSET of ids by start time; it lives as long as its newest record.
const SAVE_SCRIPT = `
local ttl = tonumber(ARGV[2])
redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[3])
if redis.call('PTTL', KEYS[2]) < ttl then redis.call('PEXPIRE', KEYS[2], ttl) end
local n = redis.call('ZCARD', KEYS[2])
local max = tonumber(ARGV[5])
if n > max then redis.call('ZREMRANGEBYRANK', KEYS[2], 0, n - max - 1) end
return 1
`

/**
 * Background-process ownership in Redis (docs/CLUSTER.md): per process, the instance that runs
 * it, its workspace and its last-known snapshot (`{p}{proc:<tenant>}:rec:<processId>`), and per
 * workspace an index of its processes (`{p}{proc:<tenant>}:ws:<hash of workspaceId and root>`).
 * All of a tenant's keys share one hash tag, so the script and MGET work on a Redis Cluster.
 * Only the owner writes a record; every instance reads them.
 */
export class ProcessDirectory<S extends FiledSnapshot = FiledSnapshot> {
  readonly #scope: RedisScope
  readonly #runningTtlMs: number
  readonly #finishedTtlMs: number
  readonly #maxPerWorkspace: number
  readonly #now: () => number

  constructor (scope: RedisScope, opts: ProcessDirectoryOptions = {}) {
    this.#scope = scope
    this.#runningTtlMs = Math.max(1000, Math.floor(opts.runningTtlMs ?? 10 * 60_000))
    this.#finishedTtlMs = Math.max(1000, Math.floor(opts.finishedTtlMs ?? 10 * 60_000))
    this.#maxPerWorkspace = Math.max(1, Math.floor(opts.maxPerWorkspace ?? 512))
    this.#now = opts.now ?? Date.now
  }

  /** This instance: the owner of what it saves. */
  get instanceId (): string {
    return this.#scope.instanceId
  }

  /** The running records' TTL: the owner refreshes them well within it. */
  get runningTtlMs (): number {
    return this.#runningTtlMs
  }

  #tag (tenant: string): string {
    // A tenant key is a userId or `_`; hashed only when it could break the tag.
    return /^[A-Za-z0-9_.:@-]{1,128}$/.test(tenant) ? `proc:${tenant}` : `proc:#${createHash('sha256').update(tenant).digest('hex').slice(0, 32)}`
  }

  recordKey (tenant: string, processId: string): string {
    return taggedKey(this.#scope.keyPrefix, this.#tag(tenant), `rec:${processId}`)
  }

  indexKey (ws: ProcessWorkspaceIdentity): string {
    const h = createHash('sha256').update(`${ws.workspaceId}\u0000${ws.root}`).digest('hex').slice(0, 32)
    return taggedKey(this.#scope.keyPrefix, this.#tag(ws.tenant), `ws:${h}`)
  }

  /** Files (or refreshes) a process this instance runs. Rejects when Redis does not answer. */
  async save (ws: ProcessWorkspaceIdentity, snapshot: S): Promise<void> {
    const record: ProcessRecord<S> = {
      owner: this.#scope.instanceId,
      tenant: ws.tenant,
      workspaceId: ws.workspaceId,
      root: ws.root,
      snapshot,
      updatedAt: this.#now()
    }
    const ttl = snapshot.status === 'RUNNING' ? this.#runningTtlMs : this.#finishedTtlMs
    await this.#scope.redis.eval(SAVE_SCRIPT, 2, this.recordKey(ws.tenant, snapshot.processId), this.indexKey(ws),
      JSON.stringify(record), String(ttl), snapshot.processId, String(snapshot.startedAt), String(this.#maxPerWorkspace))
  }

  /** The record of a tenant's process, or undefined (unknown, or expired). */
  async get (tenant: string, processId: string): Promise<ProcessRecord<S> | undefined> {
    return parseRecord<S>(await this.#scope.redis.get(this.recordKey(tenant, processId)))
  }

  /** Every record of the workspace, oldest first; drops index entries whose record expired. */
  async list (ws: ProcessWorkspaceIdentity): Promise<Array<ProcessRecord<S>>> {
    const index = this.indexKey(ws)
    const ids = await this.#scope.redis.zrange(index, 0, -1)
    if (ids.length === 0) return []
    const texts = await this.#scope.redis.mget(...ids.map((id) => this.recordKey(ws.tenant, id)))
    const out: Array<ProcessRecord<S>> = []
    const gone: string[] = []
    ids.forEach((id, i) => {
      const rec = parseRecord<S>(texts[i] ?? null)
      // The index is per (workspaceId, root) hash: the identity is checked again all the same.
      if (rec === undefined) gone.push(id)
      else if (rec.tenant === ws.tenant && rec.workspaceId === ws.workspaceId && rec.root === ws.root) out.push(rec)
    })
    if (gone.length > 0) await this.#scope.redis.zrem(index, ...gone).catch(() => 0)
    return out
  }
}

function parseRecord<S extends FiledSnapshot> (text: string | null): ProcessRecord<S> | undefined {
  if (text === null) return undefined
  try {
    const v = JSON.parse(text) as ProcessRecord<S>
    const ok = typeof v.owner === 'string' && typeof v.tenant === 'string' && typeof v.workspaceId === 'string' &&
      typeof v.root === 'string' && typeof v.snapshot?.processId === 'string'
    return ok ? v : undefined
  } catch {
    return undefined
  }
}
