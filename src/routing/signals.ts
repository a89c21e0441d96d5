import { setMaxListeners } from 'node:events'

/**
 * An AbortController for a signal that one request shares with all the work it fans out to: a
 * batch's concurrent calls, a listing's servers, an MCP exchange's calls. Each of those adds
 * abort listeners and removes them when it ends, so the count is bounded by the request's own
 * work (batch size, servers asked), not a leak; Node's leak warning (at 11 listeners) is turned
 * off for this signal so it does not flood the logs.
 */
export function fanOutAbortController (): AbortController {
  const controller = new AbortController()
  setMaxListeners(0, controller.signal)
  return controller
}

/**
 * What a call needs of its caller's cancellation to stop waiting: an AbortSignal has it, and so
 * does a {@link CallerAbort}, which makes no AbortSignal until one is asked for.
 */
/** A listener object, as EventTarget takes them. */
export interface AbortListener {
  handleEvent: (event: Event) => void
}

export interface AbortSource {
  readonly aborted: boolean
  readonly reason: unknown
  addEventListener: (type: 'abort', listener: AbortListener, options?: { once?: boolean }) => void
  removeEventListener: (type: 'abort', listener: AbortListener) => void
}

/**
 * One request's "the caller went away", as cheap as possible while it does not happen (nearly
 * always): `new AbortController()` costs 4-5 us on Node 20, a measurable share of a trivial call,
 * so the controller (a fan-out one) is made only when something reads `signal` (an MCP call, a
 * built-in tool, a handler that asks for it). Listeners added before that (the call's deadline)
 * are kept here and told on abort like the signal's.
 */
export class CallerAbort implements AbortSource {
  #controller: AbortController | undefined
  #listeners: AbortListener[] | undefined
  #aborted = false
  #reason: unknown

  get aborted (): boolean { return this.#aborted }
  get reason (): unknown { return this.#reason }

  /** The same cancellation as an AbortSignal, made on first read (already aborted if the caller left). */
  get signal (): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = fanOutAbortController()
      if (this.#aborted) this.#controller.abort(this.#reason)
    }
    return this.#controller.signal
  }

  abort (reason: unknown): void {
    if (this.#aborted) return
    this.#aborted = true
    this.#reason = reason
    const listeners = this.#listeners
    this.#listeners = undefined
    // Like an AbortSignal: listeners see `aborted` and `reason` set, each is told once.
    if (listeners !== undefined) for (const listener of listeners) listener.handleEvent(new Event('abort'))
    this.#controller?.abort(reason)
  }

  /** An 'abort' listener object (one-shot, as every listener of a call is). */
  addEventListener (_type: 'abort', listener: AbortListener): void {
    if (this.#controller !== undefined) {
      this.#controller.signal.addEventListener('abort', listener, { once: true })
      return
    }
    if (this.#aborted) return
    const listeners = this.#listeners ??= []
    if (!listeners.includes(listener)) listeners.push(listener)
  }

  removeEventListener (_type: 'abort', listener: AbortListener): void {
    const listeners = this.#listeners
    if (listeners !== undefined) {
      const i = listeners.indexOf(listener)
      if (i !== -1) listeners.splice(i, 1)
    }
    this.#controller?.signal.removeEventListener('abort', listener)
  }
}
