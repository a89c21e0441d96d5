/**
 * Breaker admission for a pool's operations (docs/ARCHITECTURE.md#mcp-pool): whether an operation on
 * a client may go ahead (an open breaker refuses before any I/O with GW_UPSTREAM_UNAVAILABLE and
 * `retryAt`), and how its outcome counts (classify.breakerVerdict): a failure once per error, however
 * many callers waited for it; an answer of the server ends the run. The state machine itself is
 * breaker.ts; which client an operation is on (keying) is the pool's.
 */
import type { Logger } from '../logger.js'
import { CircuitBreakers } from './breaker.js'
import type { Admission, BreakerOptions, BreakerSnapshot } from './breaker.js'
import { breakerVerdict } from './classify.js'
import { UpstreamError } from './errors.js'

/** The breaker part of a pool's resilience stats (GET /status, /metrics). */
export interface BreakerStats {
  /** Times a breaker opened (a failed half-open probe reopens it and counts again). */
  breakerOpens: number
  open: number
  halfOpen: number
  /** Breakers that are open, half-open or counting failures. */
  breakers: BreakerSnapshot[]
}

/** The client an operation runs on: its pool id (breaker key) and caller key (shown in /status). */
export interface BreakerTarget {
  id: string
  key: string
}

export class BreakerAdmission {
  readonly #breakers: CircuitBreakers
  readonly #log: Logger
  /** Failures already counted (a connect failure reaches every caller waiting for it). */
  readonly #counted = new WeakSet<object>()

  constructor (options: BreakerOptions, log: Logger) {
    this.#breakers = new CircuitBreakers(options)
    this.#log = log
  }

  /** Lets an operation through, or throws GW_UPSTREAM_UNAVAILABLE without any I/O. A probe must be handed back with {@link done}. */
  admit (id: string): Admission & { ok: true } {
    const admission = this.#breakers.admit(id)
    if (!admission.ok) throw unavailable(admission)
    return admission
  }

  /** As admit, but a refusal is a value (background work that just does not start). */
  tryAdmit (id: string): Admission {
    return this.#breakers.admit(id)
  }

  /** The admitted operation ended: a probe that gave no verdict lets the next operation probe. */
  done (id: string, admission: Admission): void {
    if (admission.ok && admission.probe) this.#breakers.release(id)
  }

  /** GW_UPSTREAM_UNAVAILABLE when the client's breaker is open now (a failure just opened it), else undefined. */
  openError (id: string): UpstreamError | undefined {
    return this.#breakers.isOpen(id) ? unavailable(this.#breakers.admit(id)) : undefined
  }

  /** The server answered. */
  success (id: string): void {
    this.#breakers.success(id)
  }

  /**
   * Counts a failed operation once per error; `describe` gives its caller-safe message (secrets
   * redacted). A connect failure counts as a listing's would.
   */
  countFailure (target: BreakerTarget, err: unknown, op: 'list' | 'call' | 'connect', describe: (err: unknown) => string): void {
    if (typeof err === 'object' && err !== null) {
      if (this.#counted.has(err)) return
      this.#counted.add(err)
    }
    const verdict = breakerVerdict(err, op === 'connect' ? 'list' : op)
    if (verdict === 'failure') {
      const before = this.#breakers.openedTotal
      this.#breakers.failure(target.id, target.key, describe(err))
      if (this.#breakers.openedTotal > before) {
        this.#log.warn({ mcpClient: target.key, err: describe(err) }, 'MCP server circuit breaker opened: its calls fail fast until a probe succeeds')
      }
    } else if (verdict === 'answered') {
      this.#breakers.success(target.id)
    }
  }

  /** Forgets the breakers whose client key (and id) match: the server changed, it starts over. */
  reset (match: (key: string, id: string) => boolean): void {
    this.#breakers.reset(match)
  }

  stats (): BreakerStats {
    return { breakerOpens: this.#breakers.openedTotal, ...this.#breakers.counts(), breakers: this.#breakers.snapshot() }
  }
}

function unavailable (admission: Admission): UpstreamError {
  if (admission.ok) return new UpstreamError('GW_UPSTREAM_UNAVAILABLE', 'The MCP server is unavailable: its circuit breaker is being probed')
  return new UpstreamError('GW_UPSTREAM_UNAVAILABLE', admission.message, admission.retryAt)
}
