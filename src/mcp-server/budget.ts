import { HttpError } from '../errors.js'

/** What one POST /mcp exchange may run: decided by the HTTP layer's per-tenant limits. */
export interface CallLimits {
  /** tools/call this exchange may still run this minute (RATE_LIMIT_PER_MINUTE, each call counted). */
  calls: number
  /** tools/call it may run at once: the concurrency slots the exchange holds (MAX_CONCURRENT_PER_TENANT). */
  concurrency: number
}

/** The requests that each reach one upstream server, counted like a call: tools/call, resources/read, prompts/get, completion/complete. */
const COUNTED: ReadonlySet<unknown> = new Set(['tools/call', 'resources/read', 'prompts/get', 'completion/complete'])

/**
 * How many calls a POST /mcp body carries (one JSON-RPC message or a batch): what the exchange
 * counts against the tenant's limits, each tools/call, resources/read, prompts/get and
 * completion/complete as one request (listings, like tools/list, are not counted).
 */
export function countToolCalls (body: unknown): number {
  const messages = Array.isArray(body) ? body : [body]
  let n = 0
  for (const m of messages) {
    if (m !== null && typeof m === 'object' && COUNTED.has((m as { method?: unknown }).method)) n++
  }
  return n
}

/**
 * Whether a POST /mcp body is a 2026-07-28 subscriptions/listen: a notification stream that
 * stays open, counted against the stream limits of GET /mcp, not as a call in flight.
 */
export function isListenRequest (body: unknown): boolean {
  return body !== null && typeof body === 'object' && !Array.isArray(body) &&
    (body as { method?: unknown }).method === 'subscriptions/listen'
}

/**
 * The per-exchange share of a tenant's limits. The MCP SDK runs every request of a JSON-RPC
 * batch at once, so without this a batch of 40 tools/call would run 40 upstream calls while
 * holding one slot. Calls past `calls` are refused (a JSON-RPC error each, the others still
 * run); calls within it wait for one of the exchange's `concurrency` slots, in arrival order.
 */
export class CallBudget {
  #calls: number
  #free: number
  readonly #waiting: Array<() => void> = []

  constructor (limits: CallLimits) {
    this.#calls = Math.max(0, limits.calls)
    this.#free = Math.max(1, limits.concurrency)
  }

  /** Counts one call against the minute's allowance; the refusal when none is left. */
  take (): HttpError | undefined {
    if (this.#calls <= 0) {
      return new HttpError(
        'GW_RATE_LIMITED',
        'Rate limit per minute exceeded for this tenant: each tools/call of a batch counts; this call was not run, retry later'
      )
    }
    this.#calls--
    return undefined
  }

  /** Runs `fn` in one of the exchange's slots, waiting for one when all are busy. */
  async run<T> (fn: () => Promise<T>): Promise<T> {
    if (this.#free > 0) this.#free--
    else await new Promise<void>((resolve) => { this.#waiting.push(resolve) })
    try {
      return await fn()
    } finally {
      // A slot goes straight to the next waiter (the count stays the same) or back to the pool.
      const next = this.#waiting.shift()
      if (next !== undefined) next()
      else this.#free++
    }
  }
}

/** Bytes of whole-text listing answers a tenant, and the instance, may have in flight (AnswerBytes). */
export interface AnswerByteLimits {
  tenant: number
  instance: number
}

const DEFAULT_ANSWER_BYTES: AnswerByteLimits = { tenant: 16 * 1024 * 1024, instance: 128 * 1024 * 1024 }

/**
 * Listings answered by the SDK's path (a batch, or `MCP_HTTP_TRANSPORT=sdk`): the SDK writes each
 * answer as one JSON text, a copy of the listing per answer held until the client has read it. 25
 * concurrent batches of 4 tools/list over a 4 MB listing took the gateway to 1.2 GB of RSS (an audit).
 * A listing's bytes are held from its answer until its exchange ends; past a tenant's share, or the
 * instance's, the listing is refused (GW_RATE_LIMITED), unless nothing of that tenant is in flight (a
 * listing larger than the share is still answered, one at a time). The lean path writes a cached
 * listing's own bytes (known-json.ts): no copy, nothing held.
 */
export class AnswerBytes {
  readonly #limits: AnswerByteLimits
  readonly #byTenant = new Map<string, number>()
  #total = 0

  constructor (limits: AnswerByteLimits = DEFAULT_ANSWER_BYTES) {
    this.#limits = limits
  }

  /**
   * What an exchange of `tenant` holds, given back all at once by the function returned with it
   * (call it when the exchange ends): `hold(bytes)` throws GW_RATE_LIMITED past the limits.
   */
  exchange (tenant: string): { hold: (bytes: number) => void, release: () => void } {
    let held = 0
    const hold = (bytes: number): void => {
      const mine = this.#byTenant.get(tenant) ?? 0
      if (mine > 0 && (mine + bytes > this.#limits.tenant || this.#total + bytes > this.#limits.instance)) {
        throw new HttpError('GW_RATE_LIMITED', `This tenant's listings waiting to be sent take ${mine} bytes as JSON; ` +
          'this one was not answered: retry once they are read (or ask for one listing per request)')
      }
      held += bytes
      this.#total += bytes
      this.#byTenant.set(tenant, mine + bytes)
    }
    const release = (): void => {
      if (held === 0) return
      this.#total -= held
      const left = (this.#byTenant.get(tenant) ?? 0) - held
      if (left > 0) this.#byTenant.set(tenant, left)
      else this.#byTenant.delete(tenant)
      held = 0
    }
    return { hold, release }
  }
}
