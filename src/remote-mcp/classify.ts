/**
 * What a failure talking to a remote MCP server means: which errors leave the connection unusable,
 * which are timeouts or cancellations, and the UpstreamError (code and caller-safe message) each
 * becomes. The pool decides what to do about them (drop, retry tools/list, never replay a call).
 */
import { ProtocolError, SdkError, SdkErrorCode, SdkHttpError, SseError } from '@modelcontextprotocol/client'
import { UpstreamError } from './errors.js'
import type { UpstreamErrorCode } from './errors.js'
import { oauthRequiredIn } from './upstream-auth.js'
import { isResponseLimitError } from './response-limits.js'
import type { ResponseLimitError } from './response-limits.js'
import { ResponseStreamEndedError } from './lean-http-transport.js'

/**
 * The answer-size or answer-budget error behind a failure (response-limits.ts): thrown as is by
 * a JSON answer's send, or carried in the `data` of the JSON-RPC error a transport made for the
 * requests of an SSE stream it stopped reading (an object no server can forge through JSON).
 */
function responseLimitError (err: unknown): ResponseLimitError | undefined {
  if (isResponseLimitError(err)) return err
  if (err instanceof ProtocolError && isResponseLimitError(err.data)) return err.data
  return undefined
}

/** The lean transport's "stream ended before the answer and cannot be resumed", carried like the limits. */
function streamEnded (err: unknown): ResponseStreamEndedError | undefined {
  return err instanceof ProtocolError && err.data instanceof ResponseStreamEndedError ? err.data : undefined
}

function isSdkError (err: unknown, code: SdkErrorCode): boolean {
  return err instanceof SdkError && err.code === code
}

function isAbortError (err: unknown): boolean {
  return err instanceof Error && err.name === 'AbortError'
}

/** The HTTP status a server refused a request with (SdkHttpError), if that is what `err` is. */
function httpStatus (err: unknown): number | undefined {
  return err instanceof SdkHttpError && typeof err.status === 'number' ? err.status : undefined
}

function isSessionExpired (err: unknown): boolean {
  return httpStatus(err) === 404
}

/**
 * The statuses a server refuses a call's own content with (a malformed or unprocessable request, a body, URI or header
 * too large: `express.json()` answers 413 past 100 KB): the server is alive, and the caller's arguments chose them.
 */
const REFUSED_CONTENT = new Set([400, 413, 414, 422, 431])

/**
 * Errors after which the connection cannot be used again: a stale session, a closed
 * connection (stdio child gone), a broken SSE stream, a network failure.
 */
export function isDeadConnection (err: unknown): boolean {
  if (isSessionExpired(err)) return true
  if (isSdkError(err, SdkErrorCode.ConnectionClosed) || isSdkError(err, SdkErrorCode.NotConnected)) return true
  // A response stream the server ended and that could not be resumed: most often a server that
  // went away; a fresh connection (a new session, or nothing at all in 2026-07-28) is cheap.
  if (streamEnded(err) !== undefined) return true
  if (err instanceof SseError) return true
  if (err instanceof TypeError && /fetch failed/i.test(err.message)) return true
  return err instanceof Error && /^Not connected$/.test(err.message)
}

/** fetch failed on a kept-alive socket the peer had closed (undici UND_ERR_SOCKET, ECONNRESET, EPIPE). */
export function isStaleSocket (err: unknown): boolean {
  // The era probe wraps what the transport threw (SdkError EraNegotiationFailed, its cause).
  if (isSdkError(err, SdkErrorCode.EraNegotiationFailed)) return isStaleSocket((err as Error).cause)
  if (!(err instanceof TypeError) || !/fetch failed/i.test(err.message)) return false
  const code = (err.cause as { code?: unknown } | undefined)?.code
  return code === 'UND_ERR_SOCKET' || code === 'ECONNRESET' || code === 'EPIPE'
}

function classifyUpstream (err: unknown): UpstreamErrorCode {
  if (isSdkError(err, SdkErrorCode.RequestTimeout)) return 'GW_UPSTREAM_TIMEOUT'
  if (err instanceof TypeError && /fetch failed/i.test(err.message)) return 'GW_UPSTREAM_CONNECT'
  return 'GW_UPSTREAM_ERROR'
}

/**
 * The UpstreamError a failed tools/list or tools/call becomes. `timeoutMs` is the deadline the
 * request had (named in a timeout's message); `safeMessage` redacts the server's secrets.
 */
export function toUpstreamError (
  err: unknown,
  op: 'list' | 'call',
  timeoutMs: number | undefined,
  safeMessage: (err: unknown) => string,
  method = op === 'list' ? 'tools/list' : 'tools/call'
): UpstreamError {
  if (err instanceof UpstreamError) return err
  const oauth = oauthRequiredIn(err)
  if (oauth !== undefined) return oauth
  if (isAbortError(err)) return new UpstreamError('GW_CANCELLED', 'The request was cancelled by the caller')
  const limit = responseLimitError(err)
  if (limit !== undefined) return new UpstreamError(limit.code, limit.message)
  const ended = streamEnded(err)
  const what = method
  const code: UpstreamErrorCode = classifyUpstream(err)
  if (code === 'GW_UPSTREAM_TIMEOUT') {
    return new UpstreamError(code, `${what} timed out${timeoutMs !== undefined ? ` after ${timeoutMs} ms` : ''}`)
  }
  if (ended !== undefined) {
    return new UpstreamError('GW_UPSTREAM_ERROR', `${ended.message}; the ${what} was not replayed`)
  }
  if (isSessionExpired(err)) {
    return new UpstreamError('GW_UPSTREAM_ERROR', `The MCP server no longer knows this session (HTTP 404); the ${what} was not replayed, the next request starts a new session`)
  }
  if (op === 'call' && isDeadConnection(err)) {
    // The call may or may not have reached the server: reporting it as a connect failure would
    // invite a blind retry of something that may have had side effects.
    return new UpstreamError('GW_UPSTREAM_ERROR', `The connection to the MCP server was lost (${safeMessage(err)}); the tools/call was not replayed, the next call reconnects`)
  }
  const status = httpStatus(err)
  if (status !== undefined) return new UpstreamError(code, `${what} failed: HTTP ${status}: ${safeMessage(err)}`)
  if (isTooDeep(err)) {
    // A listing is the server's answer alone; a call's arguments are walked too (the SDK validates the request it sends).
    const deep = op === 'list' ? 'the server\'s answer is JSON nested' : 'the call\'s arguments or the server\'s answer nest JSON'
    return new UpstreamError(code, `${what} failed: ${deep} too deeply to be read (the MCP SDK's validation ran out of stack)`)
  }
  return new UpstreamError(code, `${what} failed: ${safeMessage(err)}`)
}

/**
 * The engine's stack overflow: what a recursive reader of an answer (the MCP SDK validates results with zod, which walks
 * JSON values recursively) throws on JSON nested thousands of levels deep, which JSON.parse itself reads.
 */
function isTooDeep (err: unknown): boolean {
  return err instanceof RangeError && err.message === 'Maximum call stack size exceeded'
}

/**
 * The server's own JSON-RPC error answer (a resources/read of an unknown URI: -32602 with
 * data.uri), which /mcp passes to its client with its code and data; not the transport's errors
 * carried in a ProtocolError's data (limits, a stream that ended).
 */
export function isServerAnswer (err: unknown): err is ProtocolError {
  return err instanceof ProtocolError && responseLimitError(err) === undefined && streamEnded(err) === undefined
}

/**
 * Whether a failed tools/call certainly got no answer from the server: the request could not be
 * sent or was refused before it ran (a stale session's 404, a failed fetch, a connection already
 * closed), or a stdio server exited before answering (stdio has no partial responses: its
 * TransportKind says `closedMeansUnanswered`). On HTTP transports a closed connection means a
 * response stream had started and broke: not this.
 */
export function failedBeforeResponse (err: unknown, closedMeansUnanswered: boolean): boolean {
  if (isSessionExpired(err)) return true
  if (err instanceof TypeError && /fetch failed/i.test(err.message)) return true
  if (err instanceof Error && /^Not connected$/.test(err.message)) return true
  return closedMeansUnanswered && isSdkError(err, SdkErrorCode.ConnectionClosed)
}

/**
 * How a failed list or call counts for the server's circuit breaker: `failure` (transport or
 * protocol: the server is not usable), `answered` (the server sent a JSON-RPC error: it is
 * alive), `neutral` (the caller cancelled, or a tool ran past its own deadline).
 */
export function breakerVerdict (err: unknown, op: 'list' | 'call'): 'failure' | 'answered' | 'neutral' {
  // The user must authorize: the server answered (it is alive), nothing to count against it.
  if (oauthRequiredIn(err) !== undefined) return 'answered'
  if (err instanceof UpstreamError) {
    if (err.code === 'GW_UPSTREAM_TOO_LARGE') return 'answered'
    return err.code === 'GW_CANCELLED' || err.code === 'GW_UPSTREAM_UNAVAILABLE' || err.code === 'GW_UPSTREAM_BUDGET_EXHAUSTED' ? 'neutral' : 'failure'
  }
  if (isAbortError(err)) return 'neutral'
  // JSON too deep for the SDK: a listing's is the server's answer (it is alive); a call's may be the caller's arguments,
  // and a caller must not take a server (a global one: every tenant's) out of service by sending a few.
  if (isTooDeep(err)) return op === 'list' ? 'answered' : 'neutral'
  // A call refused for its content: a caller must not open a (shared) server's breaker by sending big arguments.
  if (op === 'call' && REFUSED_CONTENT.has(httpStatus(err) ?? 0)) return 'answered'
  // Too large: the server answered (it is alive). No budget: the gateway's own limit, not the server's fault.
  const limit = responseLimitError(err)
  if (limit !== undefined) return limit.code === 'GW_UPSTREAM_TOO_LARGE' ? 'answered' : 'neutral'
  if (streamEnded(err) !== undefined) return 'failure'
  if (isSdkError(err, SdkErrorCode.RequestTimeout)) return op === 'call' ? 'neutral' : 'failure'
  // A JSON-RPC error answer (the server is alive), or the client's own check of what it answered.
  if (err instanceof ProtocolError) return 'answered'
  if (isSdkError(err, SdkErrorCode.InvalidResult)) return 'answered'
  return 'failure'
}
