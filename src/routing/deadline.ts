import type { AbortSource } from './signals.js'
import type { ToolOutcome } from './types.js'

/** What `runWithDeadline` hands the work: its signal, created when first read. */
export interface DeadlineCall {
  /** Aborted on the deadline (reason: Error('timeout')) or when the caller's signal aborts (its reason). */
  readonly signal: AbortSignal
}

/** The outcome of a call whose caller went away (before or while it ran). */
export const CANCELLED_OUTCOME: ToolOutcome = { ok: false, reason: 'cancelled', message: 'The caller cancelled the call' }

/**
 * One call under a deadline. The work's AbortController is created only when the work reads
 * `signal` (most in-process functions never do: it was the largest allocation of a trivial
 * call); an abort that came first is applied to it then. It is its own abort listener
 * (`handleEvent`) and the timer gets it as an argument: no closures per call. Nothing is armed
 * until `watch`: a handler that answers synchronously needs no timer (it cannot be interrupted).
 */
export class DeadlineRun implements DeadlineCall {
  readonly #parent: AbortSource
  readonly #timeoutMessage: string | (() => string)
  #controller: AbortController | undefined
  #aborted = false
  #reason: unknown
  #settled = false
  #timer: NodeJS.Timeout | undefined
  #resolve: ((outcome: ToolOutcome) => void) | undefined
  #reject: ((err: unknown) => void) | undefined

  /** `timeoutMessage` may be a function: it is only needed when the deadline passes. */
  constructor (parent: AbortSource, timeoutMessage: string | (() => string)) {
    this.#parent = parent
    this.#timeoutMessage = timeoutMessage
  }

  get signal (): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController()
      if (this.#aborted) this.#controller.abort(this.#reason)
    }
    return this.#controller.signal
  }

  /**
   * The outcome of `work`, or a timeout outcome after `timeoutMs`, or a cancelled one when the
   * caller's signal aborts, whichever comes first; `work`'s late settling is ignored (never an
   * unhandled rejection).
   */
  async watch (work: Promise<ToolOutcome>, timeoutMs: number): Promise<ToolOutcome> {
    const result = new Promise<ToolOutcome>((resolve, reject) => {
      this.#resolve = resolve
      this.#reject = reject
    })
    this.#timer = setTimeout(onDeadline, timeoutMs, this)
    if (this.#parent.aborted) this.handleEvent()
    else this.#parent.addEventListener('abort', this, { once: true })
    work.then((outcome) => { this.#settle(outcome) }, (err: unknown) => { this.#fail(err) })
    return await result
  }

  /** The caller's signal aborted. */
  handleEvent (): void {
    this.#abort(this.#parent.reason)
    this.#settle(CANCELLED_OUTCOME)
  }

  timedOut (): void {
    this.#abort(new Error('timeout'))
    const message = this.#timeoutMessage
    this.#settle({ ok: false, reason: 'timeout', message: typeof message === 'string' ? message : message() })
  }

  #settle (outcome: ToolOutcome): void {
    if (this.#finish()) this.#resolve?.(outcome)
  }

  #fail (err: unknown): void {
    if (this.#finish()) this.#reject?.(err)
  }

  #finish (): boolean {
    if (this.#settled) return false
    this.#settled = true
    clearTimeout(this.#timer)
    this.#parent.removeEventListener('abort', this)
    return true
  }

  #abort (reason: unknown): void {
    if (this.#aborted) return
    this.#aborted = true
    this.#reason = reason
    this.#controller?.abort(reason)
  }
}

function onDeadline (run: DeadlineRun): void {
  run.timedOut()
}

/**
 * Runs `fn` with a deadline. In-process handlers cannot be killed, so on timeout the caller
 * gets a timeout outcome at once and the handler's signal is aborted for it to stop; its late
 * result is ignored. The same when the caller's signal aborts (a cancelled outcome).
 */
export async function runWithDeadline (
  timeoutMs: number,
  parent: AbortSource,
  fn: (call: DeadlineCall) => Promise<ToolOutcome>,
  timeoutMessage: string | (() => string)
): Promise<ToolOutcome> {
  const run = new DeadlineRun(parent, timeoutMessage)
  let work: Promise<ToolOutcome>
  try {
    work = fn(run)
  } catch (err) {
    work = Promise.reject(err)
  }
  return await run.watch(work, timeoutMs)
}
