import type { GwCodes } from '../errors.js'
import { maskText } from '../secrets/detector.js'
import type { ToolFailureReason } from '../routing/types.js'

/**
 * The codes of failures talking to a remote MCP server (their meanings are in ERROR_CODES):
 * connect, timeout, error, unavailable (circuit open), cancelled, an answer too large or without
 * room in the budget of answers in flight (response-limits.ts). A subset of the table, checked by the compiler.
 */
export type UpstreamErrorCode = GwCodes<
  | 'GW_UPSTREAM_CONNECT'
  | 'GW_UPSTREAM_TIMEOUT'
  | 'GW_UPSTREAM_ERROR'
  | 'GW_UPSTREAM_UNAVAILABLE'
  | 'GW_CANCELLED'
  | 'GW_UPSTREAM_TOO_LARGE'
  | 'GW_UPSTREAM_BUDGET_EXHAUSTED'
  | 'GW_OAUTH_REQUIRED'
>

/**
 * A failure of a remote MCP server, thrown by the client pool. The message is safe to show to a
 * caller: header and env values of the server's config are redacted from it.
 */
export class UpstreamError extends Error {
  readonly code: UpstreamErrorCode
  /** GW_UPSTREAM_UNAVAILABLE: epoch ms from which the server's open circuit breaker lets a probe through. */
  readonly retryAt: number | undefined
  constructor (code: UpstreamErrorCode, message: string, retryAt?: number) {
    super(message)
    this.name = 'UpstreamError'
    this.code = code
    this.retryAt = retryAt
  }
}

/**
 * A server asks for input (elicitation, sampling, roots) that the call cannot be given: it
 * refused with -32021 (MissingRequiredClientCapability, MCP 2026-07-28) because the call did not
 * declare that kind, or it answered `input_required` to a call whose caller cannot receive one.
 * An answer, not a failure of the server (the breaker does not count it).
 */
export class InputUnavailableError extends UpstreamError {
  /** The server's `data.requiredCapabilities` of a -32021, when it sent them. */
  readonly requiredCapabilities: unknown
  constructor (message: string, requiredCapabilities?: unknown) {
    super('GW_UPSTREAM_ERROR', message)
    this.name = 'InputUnavailableError'
    this.requiredCapabilities = requiredCapabilities
  }
}

/** Maps an upstream code to the router's failure reason (ToolOutcome). */
export function upstreamFailureReason (code: UpstreamErrorCode): ToolFailureReason {
  if (code === 'GW_UPSTREAM_TIMEOUT') return 'timeout'
  if (code === 'GW_CANCELLED') return 'cancelled'
  if (code === 'GW_UPSTREAM_UNAVAILABLE') return 'upstream-unavailable'
  if (code === 'GW_UPSTREAM_TOO_LARGE') return 'upstream-too-large'
  if (code === 'GW_UPSTREAM_BUDGET_EXHAUSTED') return 'upstream-budget'
  if (code === 'GW_OAUTH_REQUIRED') return 'oauth-required'
  return 'upstream'
}

/**
 * Shorter secret parts are not redacted: replacing every `abc` or `1234` in a message would
 * mangle it beyond use and hide nothing worth hiding (a 5-character credential is no secret).
 */
export const MIN_REDACTED_LENGTH = 6

// Schemes whose credential is the text after them (what servers echo without the scheme: `token=<x>`).
const AUTH_SCHEME = /^(?:Bearer|Basic|Token|Bot|Digest|ApiKey|Api-Key|Key|JWT|SSWS|OAuth)\s+(\S.*)$/i

/**
 * Every string that must not appear in a message for one secret value: the value itself; the
 * credential after a known auth scheme (`Bearer x` -> `x`); for Basic, the decoded `user:pass`
 * and the password alone; and each of those URL-encoded (servers echo query strings). Parts
 * shorter than MIN_REDACTED_LENGTH are left out.
 */
export function secretVariants (value: string): string[] {
  const parts = new Set<string>([value, value.trim()])
  const credential = AUTH_SCHEME.exec(value.trim())?.[1]?.trim()
  if (credential !== undefined) {
    parts.add(credential)
    if (/^basic\s/i.test(value.trim()) && /^[A-Za-z0-9+/]+={0,2}$/.test(credential)) {
      const decoded = Buffer.from(credential, 'base64').toString('utf8')
      const colon = decoded.indexOf(':')
      if (colon > 0) {
        parts.add(decoded)
        parts.add(decoded.slice(colon + 1))
      }
    }
  }
  for (const part of [...parts]) parts.add(encodeURIComponent(part))
  return [...parts].filter((p) => p.length >= MIN_REDACTED_LENGTH)
}

/**
 * Replaces every secret value, and every part of it a server could echo (see secretVariants),
 * in `message` by `[redacted]`, then whatever else looks like a credential (the one secret
 * detector, src/secrets/detector.ts: a token the server quotes from elsewhere, a URL with userinfo).
 * Upstream error texts can echo what was sent (a server quoting a bad Authorization header or just
 * its token, a spawn error quoting env), so every message that leaves the pool (errors,
 * unavailable reasons, log lines) goes through this.
 */
export function redactSecrets (message: string, secrets: readonly string[]): string {
  let out = message
  const variants = new Set(secrets.flatMap(secretVariants))
  // Longest first so a secret that contains another is replaced whole.
  for (const secret of [...variants].sort((a, b) => b.length - a.length)) {
    out = out.split(secret).join('[redacted]')
  }
  return maskText(out, { mask: '[redacted]' })
}
