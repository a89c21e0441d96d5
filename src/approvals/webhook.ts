import { createHmac } from 'node:crypto'
import type { Logger } from '../logger.js'

/** What the webhook receives per held call: never the arguments (they may carry secrets). */
export interface ApprovalNotice {
  approvalId: string
  userId: string | null
  name: string
  callId: string
  createdAt: string
  expiresAt: string
}

export interface ApprovalWebhookOptions {
  url: string
  secret: string
  logger: Logger
  /** Attempts in all, the first included. Default 5. */
  attempts?: number
  /** Delay before the second attempt, doubled for each further one. Default 1000. */
  backoffMs?: number
  /** Bound on one attempt (connect, send, answer). Default 5000. */
  timeoutMs?: number
}

/** `sha256=<hex>` of the raw body under the secret: the x-gateway-signature header. */
function signature (body: string, secret: string): string {
  return 'sha256=' + createHmac('sha256', secret).update(body, 'utf8').digest('hex')
}

/**
 * Tells an operator's endpoint about each held call. The URL is the operator's (like a global
 * server's): http(s) only, checked at start-up, and a redirect is never followed. Delivery is off
 * the request path: a down or slow endpoint never delays a call or a decision; each notice is
 * retried with exponential back-off, then given up and logged.
 */
export class ApprovalWebhook {
  readonly #opts: Required<Omit<ApprovalWebhookOptions, 'logger'>> & { logger: Logger }
  readonly #timers = new Set<NodeJS.Timeout>()
  readonly #inFlight = new Set<AbortController>()
  #closed = false

  constructor (opts: ApprovalWebhookOptions) {
    this.#opts = { attempts: 5, backoffMs: 1000, timeoutMs: 5000, ...opts }
  }

  notify (notice: ApprovalNotice): void {
    if (this.#closed) return
    const body = JSON.stringify(notice)
    this.#attempt(body, notice.approvalId, 1)
  }

  #attempt (body: string, approvalId: string, n: number): void {
    const controller = new AbortController()
    this.#inFlight.add(controller)
    const timer = setTimeout(() => controller.abort(), this.#opts.timeoutMs)
    fetch(this.#opts.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-gateway-signature': signature(body, this.#opts.secret) },
      body,
      redirect: 'manual',
      signal: controller.signal
    }).then(async (res) => {
      await res.body?.cancel().catch(() => {})
      return res.status >= 200 && res.status < 300 ? undefined : `HTTP ${res.status}`
    }, (err: unknown) => (err as Error)?.message ?? String(err)).then((failure) => {
      clearTimeout(timer)
      this.#inFlight.delete(controller)
      if (failure === undefined || this.#closed) return
      if (n >= this.#opts.attempts) {
        this.#opts.logger.warn({ approvalId, attempts: n, failure }, 'approval webhook given up')
        return
      }
      const retry = setTimeout(() => {
        this.#timers.delete(retry)
        this.#attempt(body, approvalId, n + 1)
      }, this.#opts.backoffMs * 2 ** (n - 1))
      retry.unref()
      this.#timers.add(retry)
    }).catch(() => {})
  }

  close (): void {
    this.#closed = true
    for (const t of this.#timers) clearTimeout(t)
    this.#timers.clear()
    for (const c of this.#inFlight) c.abort()
  }
}
