import type { ToolFailureReason } from '../tools/types.js'

/**
 * Stable codes for failures talking to a remote MCP server.
 * - GW_UPSTREAM_CONNECT: the client could not connect or initialise (includes a connect timeout)
 * - GW_UPSTREAM_TIMEOUT: a request (tools/list, tools/call) ran past its deadline
 * - GW_UPSTREAM_ERROR: the server answered with an error, broke the session or the connection
 * - GW_CANCELLED: the caller's signal aborted the request (the server was sent notifications/cancelled)
 */
export const UPSTREAM_ERROR_CODES = ['GW_UPSTREAM_CONNECT', 'GW_UPSTREAM_TIMEOUT', 'GW_UPSTREAM_ERROR', 'GW_CANCELLED'] as const
export type UpstreamErrorCode = typeof UPSTREAM_ERROR_CODES[number]

/**
 * A failure of a remote MCP server, thrown by the client pool. The message is safe to show to a
 * caller: header and env values of the server's config are redacted from it.
 */
export class UpstreamError extends Error {
  readonly code: UpstreamErrorCode
  constructor (code: UpstreamErrorCode, message: string) {
    super(message)
    this.name = 'UpstreamError'
    this.code = code
  }
}

export function isUpstreamError (err: unknown): err is UpstreamError {
  return err instanceof UpstreamError
}

/** Maps an upstream code to the router's failure reason (ToolOutcome). */
export function upstreamFailureReason (code: UpstreamErrorCode): ToolFailureReason {
  if (code === 'GW_UPSTREAM_TIMEOUT') return 'timeout'
  if (code === 'GW_CANCELLED') return 'cancelled'
  return 'upstream'
}

/**
 * Replaces every secret value in `message` by `[redacted]`. Upstream error texts can echo what
 * was sent (a server quoting a bad Authorization header, a spawn error quoting env), so every
 * message that leaves the pool goes through this.
 */
export function redactSecrets (message: string, secrets: readonly string[]): string {
  let out = message
  // Longest first so a secret that contains another is replaced whole.
  for (const secret of [...secrets].sort((a, b) => b.length - a.length)) {
    if (secret.length < 3) continue
    out = out.split(secret).join('[redacted]')
  }
  return out
}
