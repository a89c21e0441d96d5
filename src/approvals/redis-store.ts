import { Redis } from 'ioredis'
import { quitWithTimeout } from '../redis/index.js'
import { KEEP_AFTER_MS } from './store.js'
import type { ApprovalRecord, ApprovalStore, DecideOutcome } from './store.js'

/**
 * The compare-and-set of a decision: pending and unexpired -> approved/denied, off the tenant's
 * pending index, in one step. Redis runs a script alone, so of two decisions arriving on two
 * instances exactly one finds the record pending.
 * KEYS: the record, the tenant's pending index. ARGV: status, now, decidedBy, reason, approvalId, keep (ms).
 */
const DECIDE_SCRIPT = `
local s = redis.call('HGET', KEYS[1], 'status')
if not s then return 'not-found' end
if s ~= 'pending' then return 'decided' end
if tonumber(redis.call('HGET', KEYS[1], 'expiresAt')) <= tonumber(ARGV[2]) then return 'expired' end
redis.call('HSET', KEYS[1], 'status', ARGV[1], 'decidedAt', ARGV[2], 'decidedBy', ARGV[3], 'reason', ARGV[4])
redis.call('ZREM', KEYS[2], ARGV[5])
redis.call('PEXPIRE', KEYS[1], ARGV[6])
return 'ok'
`

interface DecideCommand {
  tgApprovalDecide: (numKeys: number, ...keysAndArgs: Array<string | number>) => Promise<string>
}

export interface RedisApprovalOptions {
  url: string
  keyPrefix: string
  commandTimeoutMs?: number
  onError?: (err: Error) => void
}

/**
 * Held calls in Redis, shared by every instance. Layout, with `{p}` the key prefix:
 * - `{p}approval:{approvalId}`: a hash of the record's fields, expiring a day after the call
 *   expires or is decided;
 * - `{p}approvals:pending:{tenant}`: a sorted set of the tenant's pending approvalIds by expiresAt.
 * Its own connection, so that a waiting call's polling never queues behind registry commands.
 */
export class RedisApprovalStore implements ApprovalStore {
  readonly backend = 'redis' as const
  readonly #client: Redis & DecideCommand
  readonly #prefix: string

  constructor (opts: RedisApprovalOptions) {
    this.#prefix = opts.keyPrefix
    this.#client = new Redis(opts.url, {
      lazyConnect: true,
      connectTimeout: 2000,
      maxRetriesPerRequest: 1,
      commandTimeout: opts.commandTimeoutMs ?? 2000,
      retryStrategy: (times: number) => Math.min(50 * 2 ** Math.min(times, 10), 2000)
    }) as Redis & DecideCommand
    this.#client.defineCommand('tgApprovalDecide', { lua: DECIDE_SCRIPT })
    this.#client.on('error', (err: Error) => opts.onError?.(err))
    this.#client.connect().catch(() => {})
  }

  #key (approvalId: string): string {
    return `${this.#prefix}approval:${approvalId}`
  }

  #index (userId: string): string {
    return `${this.#prefix}approvals:pending:${userId === '' ? '_global' : userId}`
  }

  async put (record: ApprovalRecord): Promise<void> {
    const key = this.#key(record.approvalId)
    const fields: Record<string, string> = {}
    for (const [k, v] of Object.entries(record)) if (v !== undefined) fields[k] = String(v)
    await this.#client.multi()
      .hset(key, fields)
      .pexpireat(key, record.expiresAt + KEEP_AFTER_MS)
      .zadd(this.#index(record.userId), record.expiresAt, record.approvalId)
      .pexpireat(this.#index(record.userId), record.expiresAt + KEEP_AFTER_MS)
      .exec()
  }

  async get (approvalId: string): Promise<ApprovalRecord | undefined> {
    const h = await this.#client.hgetall(this.#key(approvalId))
    return fromHash(h)
  }

  async listPending (userId: string, now: number, limit: number): Promise<ApprovalRecord[]> {
    const index = this.#index(userId)
    // Expired members are dropped from the index as they are met; their records stay readable.
    await this.#client.zremrangebyscore(index, '-inf', now)
    const ids = await this.#client.zrangebyscore(index, `(${now}`, '+inf', 'LIMIT', 0, limit)
    if (ids.length === 0) return []
    const pipeline = this.#client.pipeline()
    for (const id of ids) pipeline.hgetall(this.#key(id))
    const replies = await pipeline.exec()
    const out: ApprovalRecord[] = []
    for (const [err, h] of replies ?? []) {
      const r = err === null ? fromHash(h as Record<string, string>) : undefined
      if (r !== undefined && r.status === 'pending') out.push(r)
    }
    return out.sort((a, b) => a.createdAt - b.createdAt)
  }

  async decide (approvalId: string, status: 'approved' | 'denied', facts: { now: number, decidedBy: string, reason: string }): Promise<DecideOutcome> {
    const record = await this.get(approvalId)
    if (record === undefined) return { ok: false, reason: 'not-found' }
    const verdict = await this.#client.tgApprovalDecide(2, this.#key(approvalId), this.#index(record.userId),
      status, facts.now, facts.decidedBy, facts.reason, approvalId, KEEP_AFTER_MS)
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
    request: h.request ?? '',
    ...(h.result !== undefined ? { result: h.result } : {})
  }
}
