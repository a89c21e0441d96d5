import type { Redis } from 'ioredis'
import { createRedisClient, escapeGlob, migrateKeys, quitWithTimeout, taggedKey } from '../redis/index.js'
import type { MigrationResult, RedisClient, RedisTarget } from '../redis/index.js'
import { KEEP_AFTER_MS, TenantApprovalsFull } from './store.js'
import type { ApprovalRecord, ApprovalStore, DecideOutcome } from './store.js'

/**
 * The compare-and-set of a decision: pending and unexpired -> approved/denied, in one step. Redis
 * runs a script alone, so of two decisions arriving on two instances exactly one finds the record
 * pending. It touches the record only: the record is found by its approvalId alone (so it is
 * tagged by it), the pending index by tenant, two slots on a cluster; the index is updated after
 * the script (see decide), and readers of the index check each record's status anyway.
 * KEYS: the record. ARGV: status, now, decidedBy, reason, keep (ms).
 */
const DECIDE_SCRIPT = `
local s = redis.call('HGET', KEYS[1], 'status')
if not s then return 'not-found' end
if s ~= 'pending' then return 'decided' end
if tonumber(redis.call('HGET', KEYS[1], 'expiresAt')) <= tonumber(ARGV[2]) then return 'expired' end
redis.call('HSET', KEYS[1], 'status', ARGV[1], 'decidedAt', ARGV[2], 'decidedBy', ARGV[3], 'reason', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 'ok'
`

/**
 * A new pending record's place in its tenant's index, refused when the tenant already has `max`
 * pending, unexpired ones: the count and the add in one step, so racing instances never pass the
 * bound together. The members that expired leave the index first. Returns {1 admitted or 0, the
 * expired approvalIds...} (their records are in other slots: the caller drops their requests).
 * KEYS: the index. ARGV: now, max ('' = no bound), expiresAt, approvalId, keep until.
 */
const ADMIT_SCRIPT = `
local out = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if ARGV[2] ~= '' and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  table.insert(out, 1, 0)
  return out
end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[4])
redis.call('PEXPIREAT', KEYS[1], ARGV[5])
table.insert(out, 1, 1)
return out
`

/**
 * A record that expired undecided keeps its outcome, not its request (the whole call, up to
 * BODY_LIMIT_BYTES, kept a day past the expiry). Only while it is still pending: a decision that
 * raced the expiry keeps what its run reads. KEYS: the record. ARGV: now.
 */
const DROP_REQUEST_SCRIPT = `
if redis.call('HGET', KEYS[1], 'status') == 'pending' and tonumber(redis.call('HGET', KEYS[1], 'expiresAt')) <= tonumber(ARGV[1]) then
  redis.call('HDEL', KEYS[1], 'request')
end
return 1
`

interface DecideCommand {
  tgApprovalDecide: (numKeys: number, ...keysAndArgs: Array<string | number>) => Promise<string>
  tgApprovalAdmit: (numKeys: number, ...keysAndArgs: Array<string | number>) => Promise<[number, ...string[]]>
  tgApprovalDropRequest: (numKeys: number, ...keysAndArgs: Array<string | number>) => Promise<number>
}

export interface RedisApprovalOptions {
  /** Where Redis is: one server or a Redis Cluster. Either this or `url`. */
  target?: RedisTarget
  /** `redis://...`: the same as `target: { kind: 'single', url }`. */
  url?: string
  keyPrefix: string
  commandTimeoutMs?: number
  onError?: (err: Error) => void
}

/**
 * Held calls in Redis (one server or a Redis Cluster), shared by every instance. Layout
 * (docs/CLUSTER.md#redis-key-layout), with `p` the key prefix:
 * - `p{approval:<approvalId>}:rec`: a hash of the record's fields, expiring a day after the call
 *   expires or is decided; tagged by its id, since GET /approvals/{approvalId} knows nothing else;
 * - `p{approvals:<tenant>}:pending`: a sorted set of the tenant's pending approvalIds by expiresAt
 *   (tenant `_global` for calls of no user).
 * No command or script spans both (they may be in two slots). Before the tags they were
 * `papproval:<approvalId>` and `papprovals:pending:<tenant>`: a single-Redis store renames them
 * once after its first connect.
 * Its own connection, so that a waiting call's polling never queues behind registry commands.
 */
export class RedisApprovalStore implements ApprovalStore {
  readonly backend = 'redis' as const
  readonly #client: RedisClient & DecideCommand
  readonly #prefix: string
  /** Settles when the start-up migration is done (undefined: none ran: a cluster, or it failed). */
  readonly migrated: Promise<MigrationResult | undefined>

  constructor (opts: RedisApprovalOptions) {
    this.#prefix = opts.keyPrefix
    const target = opts.target ?? (opts.url !== undefined ? { kind: 'single' as const, url: opts.url } : undefined)
    if (target === undefined) throw new Error('RedisApprovalStore needs a target or a url')
    this.#client = createRedisClient(target, {
      lazyConnect: true,
      connectTimeoutMs: 2000,
      maxRetriesPerRequest: 1,
      commandTimeoutMs: opts.commandTimeoutMs ?? 2000
    }) as RedisClient & DecideCommand
    this.#client.defineCommand('tgApprovalDecide', { lua: DECIDE_SCRIPT })
    this.#client.defineCommand('tgApprovalAdmit', { lua: ADMIT_SCRIPT })
    this.#client.defineCommand('tgApprovalDropRequest', { lua: DROP_REQUEST_SCRIPT })
    this.#client.on('error', (err: Error) => opts.onError?.(err))
    this.migrated = this.#client.connect().then(async () => {
      if (target.kind !== 'single') return undefined
      const p = this.#prefix
      return await migrateKeys(this.#client as Redis, {
        marker: taggedKey(p, 'meta', 'layout:approvals'),
        patterns: [`${escapeGlob(p)}approval:*`, `${escapeGlob(p)}approvals:pending:*`],
        rename: (key) => {
          const rest = key.slice(p.length)
          const record = /^approval:([A-Za-z0-9_-]+)$/.exec(rest)
          if (record !== null) return this.#key(record[1] as string)
          const index = /^approvals:pending:([A-Za-z0-9_.-]+)$/.exec(rest)
          return index === null ? undefined : this.#indexOfTenant(index[1] as string)
        }
      })
    }).catch((err: unknown) => {
      // Tried again on the next start (the marker is set only once the scan completed).
      opts.onError?.(err instanceof Error ? err : new Error(String(err)))
      return undefined
    })
  }

  #key (approvalId: string): string {
    return taggedKey(this.#prefix, `approval:${approvalId}`, 'rec')
  }

  #index (userId: string): string {
    return this.#indexOfTenant(userId === '' ? '_global' : userId)
  }

  #indexOfTenant (tenant: string): string {
    return taggedKey(this.#prefix, `approvals:${tenant}`, 'pending')
  }

  async put (record: ApprovalRecord, opts: { maxPendingPerTenant?: number } = {}): Promise<void> {
    const key = this.#key(record.approvalId)
    const index = this.#index(record.userId)
    const fields: Record<string, string> = {}
    for (const [k, v] of Object.entries(record)) if (v !== undefined) fields[k] = String(v)
    // One step per slot; the record first, so an index member always has its record. A record the
    // index refuses is removed again: its approvalId was never given to anyone.
    await this.#client.multi().hset(key, fields).pexpireat(key, record.expiresAt + KEEP_AFTER_MS).exec()
    const [admitted, ...expired] = await this.#client.tgApprovalAdmit(1, index,
      record.createdAt, String(opts.maxPendingPerTenant ?? ''), record.expiresAt, record.approvalId, record.expiresAt + KEEP_AFTER_MS)
    await this.#dropRequests(expired, record.createdAt)
    if (admitted === 1) return
    await this.#client.del(key)
    throw new TenantApprovalsFull(opts.maxPendingPerTenant ?? 0)
  }

  /** Drops the requests of records that left the index expired (one script per record: each in its own slot). */
  async #dropRequests (approvalIds: readonly string[], now: number): Promise<void> {
    await Promise.all(approvalIds.map(async (id) => await this.#client.tgApprovalDropRequest(1, this.#key(id), now)))
  }

  async get (approvalId: string): Promise<ApprovalRecord | undefined> {
    const h = await this.#client.hgetall(this.#key(approvalId))
    return fromHash(h)
  }

  async listPending (userId: string, now: number, limit: number): Promise<ApprovalRecord[]> {
    const index = this.#index(userId)
    // Expired members are dropped from the index as they are met; their records stay readable, without their requests.
    const expired = await this.#client.zrangebyscore(index, '-inf', now)
    if (expired.length > 0) {
      await this.#client.zrem(index, ...expired)
      await this.#dropRequests(expired, now)
    }
    const ids = await this.#client.zrangebyscore(index, `(${now}`, '+inf', 'LIMIT', 0, limit)
    if (ids.length === 0) return []
    // One command per record, sent together: the records are in other slots than the index (a
    // cluster pipeline must stay on one node).
    const records = await Promise.all(ids.map(async (id) => fromHash(await this.#client.hgetall(this.#key(id)))))
    const out: ApprovalRecord[] = []
    const stale: string[] = []
    records.forEach((r, i) => {
      if (r !== undefined && r.status === 'pending') out.push(r)
      else stale.push(ids[i] as string)
    })
    // Decided (or gone) but still indexed: decide's ZREM did not happen (see decide). Dropped now.
    if (stale.length > 0) await this.#client.zrem(index, ...stale)
    return out.sort((a, b) => a.createdAt - b.createdAt)
  }

  async decide (approvalId: string, status: 'approved' | 'denied', facts: { now: number, decidedBy: string, reason: string }): Promise<DecideOutcome> {
    const record = await this.get(approvalId)
    if (record === undefined) return { ok: false, reason: 'not-found' }
    const verdict = await this.#client.tgApprovalDecide(1, this.#key(approvalId),
      status, facts.now, facts.decidedBy, facts.reason, KEEP_AFTER_MS)
    // After the compare-and-set, not in it (another slot). A failure here leaves a stale member
    // that listPending skips and removes: the decision itself is already final.
    if (verdict === 'ok') await this.#client.zrem(this.#index(record.userId), approvalId).catch(() => 0)
    const after = await this.get(approvalId)
    if (verdict === 'ok' && after !== undefined) return { ok: true, record: after }
    if (verdict === 'expired' || verdict === 'decided') return { ok: false, reason: verdict, ...(after !== undefined ? { record: after } : {}) }
    return { ok: false, reason: 'not-found' }
  }

  async setResult (approvalId: string, result: string): Promise<void> {
    await this.#client.hset(this.#key(approvalId), 'result', result)
  }

  async close (): Promise<void> {
    await quitWithTimeout(this.#client, 1000)
  }
}

function fromHash (h: Record<string, string> | null | undefined): ApprovalRecord | undefined {
  if (h === null || h === undefined || h.approvalId === undefined || h.status === undefined) return undefined
  const num = (v: string | undefined): number | undefined => v === undefined ? undefined : Number(v)
  return {
    approvalId: h.approvalId,
    userId: h.userId ?? '',
    name: h.name ?? '',
    callId: h.callId ?? '',
    rule: h.rule ?? '',
    status: h.status as ApprovalRecord['status'],
    createdAt: Number(h.createdAt),
    expiresAt: Number(h.expiresAt),
    ...(h.decidedAt !== undefined ? { decidedAt: num(h.decidedAt) as number } : {}),
    ...(h.decidedBy !== undefined ? { decidedBy: h.decidedBy } : {}),
    ...(h.reason !== undefined ? { reason: h.reason } : {}),
    ...(h.route !== undefined ? { route: h.route } : {}),
    request: h.request ?? '',
    ...(h.result !== undefined ? { result: h.result } : {})
  }
}
