/**
 * Bounds on what the gateway holds of remote MCP servers' answers (docs/ARCHITECTURE.md#mcp-pool):
 * the size of one answer (a JSON body or one SSE event: reading stops there) and a byte budget
 * for the answers in flight, per owner (a tenant, or a global server) and per instance. Without
 * them 24 concurrent calls answered with 300 MB events took a gateway from
 * 128 MB to 994 MB RSS.
 */
import type { GwCodes } from '../errors.js'
import type { KeptLists } from './list-bounds.js'

const MiB = 1024 * 1024

/**
 * The room a result's raw items may take beyond the output cap: images, resources and
 * structuredContent are kept in `trace` and passed through `/mcp` as received.
 */
const TRACE_ALLOWANCE_BYTES = 4 * MiB

/** Bytes of JSON one output character may take at most (UTF-8), so a result of OUTPUT_MAX_CHARS text always fits. */
const BYTES_PER_CHAR = 4

/**
 * The default MCP_MAX_MESSAGE_BYTES: the output cap in UTF-8 plus the trace allowance. Anything
 * larger could only be cut to the output cap anyway, except raw items, which get 4 MiB.
 */
export function defaultMaxMessageBytes (outputMaxChars: number): number {
  return BYTES_PER_CHAR * outputMaxChars + TRACE_ALLOWANCE_BYTES
}

/** The default with the default OUTPUT_MAX_CHARS (100,000): 4,594,304 bytes. */
export const DEFAULT_MAX_MESSAGE_BYTES = defaultMaxMessageBytes(100_000)

/** One answer (JSON body or SSE event) was larger than the bound; the rest of it was not read. */
export class MessageTooLargeError extends Error {
  readonly code = 'GW_UPSTREAM_TOO_LARGE' satisfies GwCodes<'GW_UPSTREAM_TOO_LARGE'>
  readonly limit: number
  constructor (limit: number) {
    super(`The MCP server's answer exceeds ${limit} bytes (MCP_MAX_MESSAGE_BYTES); it was not read further`)
    this.name = 'MessageTooLargeError'
    this.limit = limit
  }
}

/** One answer holds an object wider than MAX_OBJECT_MEMBERS (src/routing/wide-json.ts): it was not parsed. */
export class MessageTooWideError extends Error {
  readonly code = 'GW_UPSTREAM_TOO_LARGE' satisfies GwCodes<'GW_UPSTREAM_TOO_LARGE'>
  constructor (limit: number) {
    super(`The MCP server's answer holds an object of more than ${limit} members; it was not parsed`)
    this.name = 'MessageTooWideError'
  }
}

/** A request's stream carried more messages (or server requests) than a call may (stream-bounds.ts): it was cut. */
export class TooManyMessagesError extends Error {
  readonly code = 'GW_UPSTREAM_TOO_LARGE' satisfies GwCodes<'GW_UPSTREAM_TOO_LARGE'>
  constructor (limit: number, what: 'messages' | 'requests' = 'messages') {
    super(`The MCP server sent more than ${limit} ${what} on one call's stream; it was not read further`)
    this.name = 'TooManyMessagesError'
  }
}

/** Holding more of an answer would pass the owner's or the instance's budget; the rest was not read. */
export class ResponseBudgetError extends Error {
  readonly code = 'GW_UPSTREAM_BUDGET_EXHAUSTED' satisfies GwCodes<'GW_UPSTREAM_BUDGET_EXHAUSTED'>
  constructor (scope: 'owner' | 'instance', limit: number) {
    const which = scope === 'owner'
      ? `this tenant's (or global server's) MCP_RESPONSE_BUDGET_TENANT_BYTES, ${limit} bytes`
      : `the gateway's MCP_RESPONSE_BUDGET_BYTES, ${limit} bytes`
    super(`Too many MCP answers in flight: holding more would pass ${which}; the answer was not read further (retry when fewer calls are running)`)
    this.name = 'ResponseBudgetError'
  }
}

/** Any limit error: what classify.ts turns into its own code. */
export type ResponseLimitError = MessageTooLargeError | MessageTooWideError | TooManyMessagesError | ResponseBudgetError

export function isResponseLimitError (err: unknown): err is ResponseLimitError {
  return err instanceof MessageTooLargeError || err instanceof MessageTooWideError || err instanceof TooManyMessagesError || err instanceof ResponseBudgetError
}

export interface ResponseBudgetOptions {
  /** Bytes of answers in flight over the whole instance (MCP_RESPONSE_BUDGET_BYTES). */
  totalBytes: number
  /** Bytes of answers in flight for one owner (MCP_RESPONSE_BUDGET_TENANT_BYTES). */
  ownerBytes: number
}

/**
 * Counts the bytes of upstream answers held in memory before they are parsed: the unfinished
 * SSE event or JSON body of every request in flight. A body grows its charge as it buffers and
 * gives it back once its message is parsed (or it failed); growth that would pass either limit
 * is refused, and the transport then stops reading that body. Synchronous, one process: no lock.
 */
export class ResponseBudget {
  readonly totalBytes: number
  readonly ownerBytes: number
  #used = 0
  readonly #byOwner = new Map<string, number>()
  #refused = 0

  constructor (options: ResponseBudgetOptions) {
    this.totalBytes = options.totalBytes
    this.ownerBytes = options.ownerBytes
  }

  /** A charge for one body of `owner` (a tenant id or a global server's key), starting at 0. */
  charge (owner: string): ResponseCharge {
    return new ResponseCharge(this, owner)
  }

  /** Bytes held now, in total or for one owner. */
  usedBytes (owner?: string): number {
    return owner === undefined ? this.#used : this.#byOwner.get(owner) ?? 0
  }

  /** For GET /status: bytes held, owners holding any, bodies refused since start. */
  stats (): { usedBytes: number, owners: number, refused: number, totalBytes: number, ownerBytes: number } {
    return { usedBytes: this.#used, owners: this.#byOwner.size, refused: this.#refused, totalBytes: this.totalBytes, ownerBytes: this.ownerBytes }
  }

  /** @internal Moves `owner`'s usage by `delta`; throws ResponseBudgetError (and changes nothing) when growth does not fit. */
  adjust (owner: string, delta: number): void {
    if (delta === 0) return
    const mine = this.#byOwner.get(owner) ?? 0
    if (delta > 0) {
      if (mine + delta > this.ownerBytes) { this.#refused++; throw new ResponseBudgetError('owner', this.ownerBytes) }
      if (this.#used + delta > this.totalBytes) { this.#refused++; throw new ResponseBudgetError('instance', this.totalBytes) }
    }
    const next = mine + delta
    // Bounded by the owners with a body in flight: an owner at 0 is forgotten.
    if (next <= 0) this.#byOwner.delete(owner)
    else this.#byOwner.set(owner, next)
    this.#used += delta
  }
}

/** What one body holds of a {@link ResponseBudget}. */
export class ResponseCharge {
  readonly #budget: ResponseBudget
  readonly #owner: string
  #bytes = 0

  constructor (budget: ResponseBudget, owner: string) {
    this.#budget = budget
    this.#owner = owner
  }

  get bytes (): number { return this.#bytes }

  /** Sets what the body holds now; throws ResponseBudgetError (the charge unchanged) when growing does not fit. */
  hold (bytes: number): void {
    this.#budget.adjust(this.#owner, bytes - this.#bytes)
    this.#bytes = bytes
  }

  /** Gives everything back (idempotent). */
  release (): void {
    this.hold(0)
  }
}

/** What a transport needs to bound the answers it reads. */
export interface ResponseLimits {
  /** Largest JSON body or SSE event (bytes). */
  maxMessageBytes: number
  /** The shared budget of answers in flight; none = only the per-message bound. */
  budget?: ResponseBudget | undefined
  /** Whose budget this connection's answers count against (a tenant, or a global server's key). */
  owner?: string | undefined
  /** The lists kept per owner (MCP_TENANT_LIST_BYTES); none = only each list's own bound. */
  lists?: KeptLists | undefined
}
