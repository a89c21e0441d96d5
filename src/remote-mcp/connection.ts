/**
 * One connection to a remote MCP server: the transport, the SDK (v2) Client over it, the era
 * negotiation and handshake within a deadline (retried on stale kept-alive sockets), what the
 * transport's close and error events mean (its TransportKind says), and closing it. The pool's
 * client (pooled-client.ts) decides when a connection is opened, shared and dropped; this file
 * knows nothing of keys, caches or callers.
 *
 * Eras: a transport whose TransportKind negotiates (`era: 'auto'`) connects with the Client's
 * `versionNegotiation: { mode: 'auto' }` (`server/discover` first, legacy `initialize`
 * otherwise), unless the config's verdict is known (era-verdicts.ts): then `connect({ prior })`
 * skips the probe. The verdict of a successful connect is remembered; a failed connect forgets it.
 */
import { ProtocolError, SdkError, SdkErrorCode } from '@modelcontextprotocol/client'
import type { Client, FetchLike, Implementation, jsonSchemaValidator } from '@modelcontextprotocol/client'
import { GatewayClient } from './gateway-client.js'
import type { Logger } from '../logger.js'
import { isStaleSocket } from './classify.js'
import { EraVerdicts } from './era-verdicts.js'
import { UpstreamError } from './errors.js'
import { oauthRequiredIn } from './upstream-auth.js'
import { MAX_LIST_PAGES } from './tool-cache.js'
import { createTransport, transportKind } from './transports.js'
import type { ConnectSpec, HttpTransportKind, TransportHandle } from './transport.js'
import type { ResponseLimits } from './response-limits.js'
import { LeanHttpTransport } from './lean-http-transport.js'
import { shellTaskResults } from './task-results.js'
import { relayServerMessage, relayUntagged } from './relay.js'
import type { RelayedCalls } from './relay.js'

export interface Connection {
  client: Client
  handle: TransportHandle
  closed: boolean
  /** A liveness ping after a broken response stream is in flight. */
  probing?: boolean
  /** The protocol era the connection speaks. */
  era: 'modern' | 'legacy'
  /** Its subscriptions/listen for tool list changes, while one is wanted (2026-07-28 only; see watchToolChanges). */
  listening?: { stop: () => void }
  /** Its running calls whose client answers the server's questions (relay.ts), by the tag of their response stream. */
  relays?: RelayedCalls
  /**
   * Whether the Tasks extension may be declared to the server on it: a 2026-07-28 connection,
   * whose transport hands task results to the call (task-results.ts) and names the task of a task
   * request in `Mcp-Name` (SEP-2663).
   */
  tasks?: boolean
}

/** What openConnection needs, and how it tells the pool about the connection's life. */
export interface ConnectionOptions {
  spec: ConnectSpec
  /** The pool's key of the client (logs, the transport's label). */
  label: string
  /** What the gateway calls itself in the initialize handshake. */
  clientInfo: Implementation
  /** Validates tools' structured output; one shared by every client (compiled once per schema). */
  schemaValidator: jsonSchemaValidator
  fetch?: FetchLike
  /** The era verdicts of server configs, shared by the pool's clients. */
  eras: EraVerdicts
  /** streamable_http: the SDK's transport or the lean one (MCP_HTTP_TRANSPORT). */
  httpTransport?: HttpTransportKind
  /** HTTP: the trace context written into each request's headers while tracing is on (CreateTransportOptions.traceHeaders). */
  traceHeaders?: ((headers: Record<string, string>) => void) | undefined
  /** Bounds on the answers read over this connection (response-limits.ts). */
  limits?: ResponseLimits | undefined
  logger: Logger
  /** Deadline for spawning/connecting plus initialize; also bounds the liveness ping. */
  connectTimeoutMs: number
  /** An error's message with the spec's secrets redacted. */
  safeMessage: (err: unknown) => string
  /** Whether the pool gave up on this client meanwhile (closed, evicted, invalidated). */
  abandoned: () => boolean
  /** Aborted when the pool closes the client: a connect still under way stops (a hung stdio child is killed) at once. */
  signal?: AbortSignal
  /** Whether `conn` is the connection the pool uses now (events of a replaced one are ignored). */
  inUse: (conn: Connection) => boolean
  /** Takes the new connection, synchronously once initialize succeeded. */
  adopt: (conn: Connection) => void
  /** The transport closed. */
  onClosed: (conn: Connection) => void
  /** The connection is dead (a broken SSE stream, a server that no longer answers ping). */
  onDead: (conn: Connection, why: string) => void
  /** notifications/tools/list_changed arrived. */
  onToolsChanged: () => void
  /** Whether someone waits for this server's tool list changes (an /mcp notification stream): then a 2026-07-28 connection listens. */
  watched: () => boolean
}

const MAX_CONNECT_ATTEMPTS = 5

/** A connect attempt that failed on a socket the server had already closed. */
class StaleSocketError extends Error {
  readonly upstream: UpstreamError
  constructor (upstream: UpstreamError) {
    super(upstream.message)
    this.upstream = upstream
  }
}

/** Connects and initializes within connectTimeoutMs. Throws UpstreamError. */
export async function openConnection (o: ConnectionOptions): Promise<Connection> {
  const deadline = Date.now() + o.connectTimeoutMs
  for (let attempt = 1; ; attempt++) {
    try {
      return await tryConnect(o, Math.max(1, deadline - Date.now()))
    } catch (err) {
      // After a server restart, fetch's keep-alive pool can still hold sockets the server
      // already closed; a POST on one fails at once with UND_ERR_SOCKET and is never retried by
      // fetch. initialize has no side effects, so a fresh attempt (which takes another or a new
      // socket) is safe; each failure discards one stale socket.
      if (err instanceof StaleSocketError && attempt < MAX_CONNECT_ATTEMPTS && Date.now() < deadline && !o.abandoned()) continue
      if (err instanceof StaleSocketError) throw err.upstream
      throw err
    }
  }
}

async function tryConnect (o: ConnectionOptions, timeoutMs: number): Promise<Connection> {
  let handle: TransportHandle
  try {
    handle = createTransport(o.spec, {
      fetch: o.fetch,
      logger: o.logger,
      label: o.label,
      ...(o.httpTransport !== undefined ? { httpTransport: o.httpTransport } : {}),
      ...(o.traceHeaders !== undefined ? { traceHeaders: o.traceHeaders } : {}),
      ...(o.limits !== undefined ? { limits: o.limits } : {})
    })
  } catch (err) {
    throw new UpstreamError('GW_UPSTREAM_CONNECT', o.safeMessage(err))
  }
  const kind = transportKind(o.spec.type)
  // The server config's own choice (`protocol`), else the transport's default.
  const era = o.spec.protocol ?? kind.era
  const client = new GatewayClient(o.clientInfo, {
    // Only a relay connection's Client says it can answer a server's questions (relay.ts).
    capabilities: o.spec.clientCapabilities ?? {},
    jsonSchemaValidator: o.schemaValidator,
    versionNegotiation: { mode: era === '2026-07-28' ? { pin: era } : era },
    // A server's `input_required` (2026-07-28) is never fulfilled here: a call hands it back
    // (`allowInputRequired`, pooled-client.ts) and the gateway passes it to its own caller.
    inputRequired: { autoFulfill: false },
    listMaxPages: MAX_LIST_PAGES
  })
  const conn: Connection = { client, handle, closed: false, era: 'legacy' }
  const transport = handle.transport
  if (transport instanceof LeanHttpTransport) {
    // A legacy server's requests and log messages on a relayed call's stream go to that call's client.
    transport.onrelated = (message, tag) => conn.relays !== undefined && relayServerMessage(conn.relays, message, tag, async (m) => { await transport.send(m) })
    transport.standaloneStream = () => wantsStandaloneStream(client, o.spec)
  }
  client.setNotificationHandler('notifications/tools/list_changed', () => { o.onToolsChanged() })
  client.onclose = () => {
    conn.closed = true
    o.onClosed(conn)
  }
  const onTransportError = kind.onTransportError
  client.onerror = (err) => {
    // 2026-07-28 has no session to lose and no ping: a broken stream fails its own request only.
    // A request refused for want of the user's OAuth authorization is an answer, not a broken connection.
    const action = o.inUse(conn) && conn.era === 'legacy' && oauthRequiredIn(err) === undefined ? onTransportError(err) : 'log'
    if (action === 'drop') o.onDead(conn, `${conn.handle.type} stream error (the session cannot resume)`)
    // A transport that may have lost only one response stream (streamable HTTP): a ping tells a
    // dead server from one bad stream; dropping the connection fails the pending calls now
    // (GW_UPSTREAM_ERROR, not replayed).
    else if (action === 'probe' && !conn.closed && conn.probing !== true) {
      conn.probing = true
      conn.client.ping({ timeout: o.connectTimeoutMs }).then(() => { conn.probing = false }, (pingErr: unknown) => {
        // A JSON-RPC error answer (a server without ping) still proves the server is there.
        const answered = pingErr instanceof ProtocolError || oauthRequiredIn(pingErr) !== undefined
        if (answered) conn.probing = false
        else o.onDead(conn, 'a transport error, and the server does not answer ping')
      })
    }
    o.logger.debug({ mcpClient: o.label, err: o.safeMessage(err) }, 'MCP transport error')
  }
  const eraKey = era === 'auto' ? EraVerdicts.key(o.spec) : undefined
  const prior = eraKey === undefined ? undefined : o.eras.get(eraKey)
  if (eraKey !== undefined && prior === undefined) o.eras.probes++
  // The era probe does not take the signal: closing the transport ends it (and a hung child).
  const onAbort = (): void => { handle.transport.close().catch(() => {}) }
  o.signal?.addEventListener('abort', onAbort, { once: true })
  try {
    await client.connect(handle.transport, {
      timeout: timeoutMs,
      ...(o.signal !== undefined ? { signal: o.signal } : {}),
      ...(prior !== undefined ? { prior } : {})
    })
  } catch (err) {
    conn.closed = true
    // A verdict that no longer holds (a server moved back to legacy, another credential) is probed afresh next time.
    if (eraKey !== undefined) o.eras.forget(eraKey)
    await client.close().catch(() => {})
    if (o.signal?.aborted === true) throw new UpstreamError('GW_UPSTREAM_ERROR', 'The MCP client was closed while connecting')
    // The server wants the user's OAuth authorization: that answer, not a connect failure.
    const oauth = oauthRequiredIn(err)
    if (oauth !== undefined) throw oauth
    const timedOut = err instanceof SdkError && err.code === SdkErrorCode.RequestTimeout
    const message = timedOut
      ? `Connecting to the MCP server timed out after ${o.connectTimeoutMs} ms`
      : `Could not connect to the MCP server: ${o.safeMessage(withBody(err))}`
    const upstream = new UpstreamError('GW_UPSTREAM_CONNECT', message)
    throw isStaleSocket(err) ? new StaleSocketError(upstream) : upstream
  } finally {
    o.signal?.removeEventListener('abort', onAbort)
  }
  const discover = client.getDiscoverResult()
  conn.era = client.getProtocolEra() === 'modern' ? 'modern' : 'legacy'
  // A task result (Tasks extension) reaches the Client as a shell it accepts (task-results.ts).
  if (conn.era === 'modern') {
    conn.tasks = true
    shellTaskResults(handle.transport)
  }
  // Other transports than the lean one tag no stream: a relayed call gets what its server asks while it is the only one.
  if (!(handle.transport instanceof LeanHttpTransport)) relayUntagged(handle.transport, () => conn.relays)
  if (eraKey !== undefined && prior === undefined) {
    o.eras.set(eraKey, conn.era === 'modern' && discover !== undefined ? { kind: 'modern', discover } : { kind: 'legacy' })
  }
  if (o.abandoned()) {
    await closeConnection(conn, o)
    throw new UpstreamError('GW_UPSTREAM_ERROR', 'The MCP client was closed while connecting')
  }
  o.adopt(conn)
  if (o.watched()) watchToolChanges(conn, o, true)
  return conn
}

/**
 * Starts or stops listening for a connection's tool list changes. A 2026-07-28 server announces
 * them only on a `subscriptions/listen` stream (the legacy GET stream is gone), which costs the
 * server a request held open; so one is opened only while someone waits for the changes (an
 * /mcp notification stream whose listing names the server), when the server says it has
 * `tools.listChanged`, and closed when nobody does. A legacy connection hears them anyway.
 */
export function watchToolChanges (conn: Connection, o: ConnectionOptions, on: boolean): void {
  if (!on) {
    conn.listening?.stop()
    conn.listening = undefined
    return
  }
  if (conn.listening !== undefined || conn.closed || conn.era !== 'modern') return
  if (conn.client.getServerCapabilities()?.tools?.listChanged !== true) return
  const state = { stopped: false, subscription: undefined as { close: () => Promise<void> } | undefined, timer: undefined as NodeJS.Timeout | undefined }
  conn.listening = {
    stop: () => {
      state.stopped = true
      clearTimeout(state.timer)
      state.subscription?.close().catch(() => {})
    }
  }
  listenForToolChanges(conn, o, state, 0)
}

/** Re-listen delays after a subscriptions/listen stream ended on the server's side: 1 s doubling up to 30 s. */
const RELISTEN_MS = 1000
const RELISTEN_MAX_MS = 30_000

/**
 * One connection's listen stream (watchToolChanges): its notifications reach the handler of
 * tryConnect (the tool cache is marked stale, the pool told). A stream the server ends is
 * opened again after a delay, and whatever changed meanwhile counts as a change; stopping it or
 * closing the client ends it.
 */
function listenForToolChanges (
  conn: Connection,
  o: ConnectionOptions,
  state: { stopped: boolean, subscription: { close: () => Promise<void> } | undefined, timer: NodeJS.Timeout | undefined },
  failures: number
): void {
  const gone = (): boolean => state.stopped || conn.closed || !o.inUse(conn)
  const again = (): void => {
    const wait = Math.min(RELISTEN_MAX_MS, RELISTEN_MS * 2 ** Math.min(failures, 5))
    state.timer = setTimeout(() => {
      if (gone()) return
      // Changes while no stream was open were not announced.
      o.onToolsChanged()
      listenForToolChanges(conn, o, state, failures + 1)
    }, wait)
    state.timer.unref()
  }
  if (gone()) return
  conn.client.listen({ toolsListChanged: true }).then(async (subscription) => {
    failures = 0
    if (gone()) {
      await subscription.close().catch(() => {})
      return
    }
    state.subscription = subscription
    const how = await subscription.closed
    if (how !== 'local' && !gone()) again()
  }, (err: unknown) => {
    o.logger.debug({ mcpClient: o.label, err: o.safeMessage(err) }, 'subscriptions/listen failed')
    if (!gone()) again()
  })
}

/**
 * Whether a legacy streamable-HTTP session opens its standalone GET stream (asked by the lean
 * transport once initialize answered). What a server sends there that the gateway uses:
 * - notifications/tools/list_changed (the tool cache, the /mcp endpoint's own list_changed),
 *   which a server sends only when it declares `tools.listChanged`;
 * - on a relay connection (its Client declares elicitation, sampling or roots: relay.ts), the
 *   questions and log messages a server sends outside the call's own stream; it is opened with
 *   the session, before the call that needs it, since a server drops what it sends while no GET
 *   stream is open.
 * Nothing else that arrives there has a reader: resources and prompts lists are kept for their
 * TTL (no list_changed handler), log messages outside a relayed call are not collected, a
 * server's ping would only be answered, and a call's progress comes on the call's own stream
 * (2025-11-25: what the GET stream carries SHOULD be unrelated to running requests). So for any other server the stream would be one more
 * exchange at connect and a socket held open for nothing: it is not opened, and nothing the
 * gateway acts on is lost.
 */
function wantsStandaloneStream (client: Client, spec: ConnectSpec): boolean {
  return client.getServerCapabilities()?.tools?.listChanged === true || spec.clientCapabilities !== undefined
}

/** Ends the session (streamable HTTP) and closes the client; a stdio child is reaped. */
export async function closeConnection (conn: Connection, o: Pick<ConnectionOptions, 'label' | 'logger' | 'safeMessage'>): Promise<void> {
  if (conn.closed) return
  conn.closed = true
  // Tell a server with sessions that this one is over (frees its state); best effort and
  // bounded, since close() below aborts whatever is still pending.
  const endSession = conn.handle.endSession
  if (endSession !== undefined) await Promise.race([endSession().catch(() => {}), delay(1000)])
  // For stdio, close() ends stdin, then SIGTERM, then SIGKILL (SDK), so the child is reaped.
  await conn.client.close().catch((err: unknown) => {
    o.logger.debug({ mcpClient: o.label, err: o.safeMessage(err) }, 'error closing MCP client')
  })
}

/** An HTTP error of the era probe with what the server said (its body), which the SDK's message leaves out; redacted by the caller. */
function withBody (err: unknown): unknown {
  const text = err instanceof SdkError ? (err.data as { text?: unknown } | undefined)?.text : undefined
  if (typeof text !== 'string' || text === '' || !(err instanceof Error) || err.message.includes(text)) return err
  return new Error(`${err.message}: ${text.slice(0, 1000)}`)
}

function delay (ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref())
}
