import type { ClusterTokens } from './token.js'
import { CLUSTER_TOKEN_HEADER } from './token.js'

/** The peer did not answer (connection refused, reset, or no answer within the timeout). */
export class PeerUnavailableError extends Error {
  constructor (message: string) {
    super(message)
    this.name = 'PeerUnavailableError'
  }
}

/** The peer answered with an error status; `code` and the message are the peer's own. */
export class PeerRequestError extends Error {
  readonly status: number
  readonly code: string | undefined
  constructor (status: number, code: string | undefined, message: string) {
    super(message)
    this.name = 'PeerRequestError'
    this.status = status
    this.code = code
  }
}

export interface PeerCallOptions {
  /** Past it the call fails with PeerUnavailableError. Default: the client's. */
  timeoutMs?: number
  /** The caller's own signal (its request ended): the call is abandoned. */
  signal?: AbortSignal
}

/** Largest peer answer read (a background process's log slice is far below it). */
const MAX_ANSWER_BYTES = 16 * 1024 * 1024

/**
 * Calls another instance's internal routes: JSON POST with a fresh token for exactly that
 * request (token.ts). Never follows redirects; the answer size is bounded.
 */
export class PeerClient {
  readonly #tokens: ClusterTokens
  readonly #timeoutMs: number

  constructor (tokens: ClusterTokens, opts: { timeoutMs?: number } = {}) {
    this.#tokens = tokens
    this.#timeoutMs = opts.timeoutMs ?? 5000
  }

  async post<T> (baseUrl: string, path: string, body: unknown, opts: PeerCallOptions = {}): Promise<T> {
    const text = JSON.stringify(body)
    const token = this.#tokens.sign({ method: 'POST', path, body: text })
    const timeoutMs = opts.timeoutMs ?? this.#timeoutMs
    const signals = [AbortSignal.timeout(timeoutMs), ...(opts.signal !== undefined ? [opts.signal] : [])]
    let res: Response
    try {
      res = await fetch(new URL(path, baseUrl), {
        method: 'POST',
        headers: { 'content-type': 'application/json', [CLUSTER_TOKEN_HEADER]: token },
        body: text,
        redirect: 'manual',
        signal: AbortSignal.any(signals)
      })
    } catch (err) {
      const e = err as Error
      const why = e.name === 'TimeoutError' ? `did not answer within ${timeoutMs} ms` : e.name === 'AbortError' ? 'call abandoned: the request ended' : `is unreachable (${(e.cause as Error | undefined)?.message ?? e.message})`
      throw new PeerUnavailableError(`The instance at ${baseUrl} ${why}`)
    }
    const declared = Number(res.headers.get('content-length') ?? '0')
    if (declared > MAX_ANSWER_BYTES) {
      await res.body?.cancel()
      throw new PeerUnavailableError(`The instance at ${baseUrl} answered with ${declared} bytes (more than ${MAX_ANSWER_BYTES})`)
    }
    let answer: unknown
    try {
      answer = await res.json()
    } catch {
      throw new PeerUnavailableError(`The instance at ${baseUrl} answered ${res.status} without JSON`)
    }
    if (!res.ok) {
      const a = answer as { code?: unknown, message?: unknown }
      throw new PeerRequestError(res.status, typeof a.code === 'string' ? a.code : undefined, typeof a.message === 'string' ? a.message : `HTTP ${res.status}`)
    }
    return answer as T
  }
}
