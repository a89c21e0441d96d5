/**
 * What a remote MCP transport is to the pool (docs/ARCHITECTURE.md#mcp-pool): the spec it is built
 * from, the handle it gives back, and the traits the pool and connection.ts read instead of
 * comparing type names. One transport is one file (transport-stdio.ts, transport-http.ts) that
 * exports a {@link TransportKind}; transports.ts is the table of them, keyed by type.
 */
import type { FetchLike, Transport } from '@modelcontextprotocol/client'
import type { Logger } from '../logger.js'
import type { GwCode } from '../errors.js'
import type { ResponseLimits } from './response-limits.js'
import type { UpstreamAuthorization } from './upstream-auth.js'

/** Remote MCP transports the gateway speaks (docs/ARCHITECTURE.md#registry; aliases are normalised by the registry). */
export const CONNECT_TYPES = ['streamable_http', 'sse', 'stdio'] as const
export type ConnectType = typeof CONNECT_TYPES[number]

/**
 * What the pool needs to reach one MCP server. Secrets (header and env values) are already
 * decrypted; nothing here is ever logged or put into an error message.
 */
export interface ConnectSpec {
  type: ConnectType
  /** http(s) URL of the MCP endpoint (streamable_http) or of the SSE stream (sse). */
  url?: string
  /** Extra request headers (e.g. Authorization) sent with every HTTP request. */
  headers?: Record<string, string>
  /** stdio: the executable to spawn (no shell). */
  command?: string
  args?: string[]
  /** stdio: added to the SDK's minimal default environment; the gateway's own env is never passed. */
  env?: Record<string, string>
  cwd?: string
  /** Default deadline for tools/call on this server (the caller may pass a lower one). */
  timeoutMs?: number
  /** The protocol era to speak (server-config.ts SERVER_PROTOCOLS); default the transport kind's `era`. */
  protocol?: 'auto' | 'legacy' | '2026-07-28'
  /** What the connection's Client declares in `initialize`; none by default (a relay connection's: relay.ts). */
  clientCapabilities?: Record<string, unknown>
  /**
   * HTTP only: the server's OAuth (SPEC 16), asked for the Authorization header of every request
   * and told of refusals. Not part of the config's identity: the pool's hash leaves it out.
   */
  authorization?: UpstreamAuthorization
}

/** Options of createTransport (transports.ts). */
export interface CreateTransportOptions {
  /**
   * fetch used for every HTTP request of the transport (the SSRF guard supplies one that checks
   * the address actually dialled). Defaults to the global fetch.
   */
  fetch?: FetchLike
  logger?: Logger
  /** Label put into log lines (the pool key); never the URL's credentials or headers. */
  label?: string
  /** Bytes of a stdio child's stderr copied into the logs; the rest is drained and dropped. */
  stderrCapBytes?: number
  /**
   * streamable_http: the SDK's fetch-based transport or our own on undici request()
   * (MCP_HTTP_TRANSPORT; lean-http-transport.ts). Default 'sdk'. Lean needs a dispatcher with
   * the same egress guarantees as `fetch`: the SSRF guard's (`fetch.dispatcherFor`), or the
   * plain shared agent when no fetch is given; a custom fetch without one keeps the SDK's.
   */
  httpTransport?: HttpTransportKind
  /**
   * Bounds on the answers read (response-limits.ts): the largest message, and the budget of
   * answers in flight with the owner this connection counts against. Lean transport: reading
   * stops at the bound and the requests fail with the limit's error. SDK transports (sse, and
   * streamable_http with `sdk`): the body stream is cut at the bound (see limitResponses).
   * stdio: one line at most maxMessageBytes (the SDK then closes the connection); no budget.
   * Default: DEFAULT_MAX_MESSAGE_BYTES, no budget.
   */
  limits?: ResponseLimits
  /**
   * HTTP: writes the active span's W3C trace context into each request's headers (src/tracing/);
   * absent while tracing is off, and then nothing is done per request.
   */
  traceHeaders?: ((headers: Record<string, string>) => void) | undefined
}

export const HTTP_TRANSPORT_KINDS = ['sdk', 'lean'] as const
export type HttpTransportKind = typeof HTTP_TRANSPORT_KINDS[number]

/** A transport plus what the pool needs to manage it. */
export interface TransportHandle {
  transport: Transport
  type: ConnectType
  /** stdio: the child's pid once started, else null. */
  pid: () => number | null
  /**
   * Abort listeners currently registered on the transport-wide AbortSignal the SDK passes to
   * fetch (0 for stdio). Stays bounded by the number of in-flight requests; see isolateAbortSignals.
   */
  abortListenerCount: () => number
  /** Tells the server the session is over, freeing its state (streamable HTTP's DELETE); best effort. */
  endSession?: () => Promise<void>
}

export class ConnectSpecError extends Error {
  readonly code = 'GW_BAD_MCP_CONFIG' satisfies GwCode
  constructor (message: string) {
    super(message)
    this.name = 'ConnectSpecError'
  }
}

/** createTransport's options with their defaults applied: what a {@link TransportKind} is given. */
export interface TransportContext extends Omit<CreateTransportOptions, 'logger' | 'label' | 'stderrCapBytes' | 'limits'> {
  logger: Logger
  label: string
  stderrCapBytes: number
  limits: ResponseLimits
}

/** How a transport error on a live connection is handled (connection.ts). */
export type TransportErrorAction =
  /** The session is gone (a broken legacy SSE stream cannot resume): drop the connection. */
  | 'drop'
  /** Maybe one broken stream, maybe a dead server: a ping tells, and a failed one drops it. */
  | 'probe'
  /** Logged only (the transport's close event says when it is over). */
  | 'log'

/**
 * One transport type: how to build it and how it behaves. A new transport (a new protocol
 * revision's) is one more file exporting one of these plus its row in transports.ts.
 */
export interface TransportKind {
  /** Builds the transport; throws ConnectSpecError for a spec that cannot work. */
  create: (spec: ConnectSpec, context: TransportContext) => TransportHandle
  /**
   * The server is a process the gateway starts, whose first start may be slow (`npx -y` downloads
   * it): its config's first connection gets MCP_STDIO_FIRST_CONNECT_MS, is started in the
   * background when registered (warm), and reports `starting` meanwhile (warm-start.ts).
   */
  slowFirstStart: boolean
  /**
   * A connection that closed before a request's answer means the request got none (no partial
   * responses, as on stdio): a retrySafe call may be replayed (classify.failedBeforeResponse). On
   * HTTP a closed connection means a response stream had started and broke.
   */
  closedMeansUnanswered: boolean
  /** What a transport error on the connection in use means (legacy era; a 2026-07-28 connection only logs them). */
  onTransportError: (err: unknown) => TransportErrorAction
  /**
   * How the era is chosen: `auto` probes with `server/discover` once per config (the verdict is
   * remembered, era-verdicts.ts) and falls back to `initialize`; `legacy` always initializes.
   */
  era: 'auto' | 'legacy'
}
