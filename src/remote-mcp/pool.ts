import { createHash } from 'node:crypto'
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js'
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js'
import type { CallToolResult, Implementation, Progress, Tool } from '@modelcontextprotocol/sdk/types.js'
import type { jsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/types.js'
import { trackProgress } from '../mcp/progress.js'
import { SharedSchemaValidator } from '../mcp/schema-validator.js'
import { CircuitBreakers } from './breaker.js'
import type { Admission, BreakerSnapshot } from './breaker.js'
import { breakerVerdict, failedBeforeResponse, isDeadConnection, toUpstreamError } from './classify.js'
import { closeConnection, openConnection } from './connection.js'
import type { Connection } from './connection.js'
import { redactSecrets, UpstreamError } from './errors.js'
import { silentLogger } from '../logger.js'
import type { Logger } from '../logger.js'
import type { ConnectSpec, ConnectType, HttpTransportKind } from './transports.js'
import type { ResponseBudget, ResponseLimits } from './response-limits.js'

/** Construction options of {@link McpClientPool}. All durations in milliseconds. */
export interface McpClientPoolOptions {
  /** Deadline for spawning/connecting plus the initialize handshake. */
  connectTimeoutMs: number
  /**
   * Deadline of a stdio server's first connection under its config (`npx -y pkg` may download
   * the package first); the longer of this and connectTimeoutMs applies. Default connectTimeoutMs.
   */
  stdioFirstConnectTimeoutMs?: number
  /** Deadline for a whole tools/list (all pages). */
  listTimeoutMs: number
  /** Default deadline for tools/call (a spec's timeoutMs or the call's timeoutMs override it). */
  callTimeoutMs: number
  /** A client unused for this long is closed (its stdio child killed). */
  idleMs: number
  /** At most this many clients; creating one more closes the least recently used. */
  maxClients: number
  /** A cached tool list older than this is refreshed on the next listTools. */
  toolsTtlMs: number
  /** fetch for HTTP transports (the SSRF guard's); defaults to the global fetch. */
  fetch?: FetchLike
  /** streamable_http: the SDK's transport or the lean one (MCP_HTTP_TRANSPORT); default 'sdk'. */
  httpTransport?: HttpTransportKind
  logger?: Logger
  /** What the gateway calls itself in the initialize handshake. */
  clientInfo: Implementation
  /** Output-schema validators shared by the pool's clients; default: one of the pool's own. */
  schemaValidator?: jsonSchemaValidator
  /** How long close()/invalidate() wait for clients to close before giving up on them. Default 5000. */
  closeTimeoutMs?: number
  /** Circuit breaker per client: consecutive failures within windowMs open it for openMs. Default 5, 60000, 30000. */
  breaker?: { failures: number, windowMs: number, openMs: number }
  /**
   * Bounds on the servers' answers (response-limits.ts, docs/ARCHITECTURE.md#mcp-pool): the
   * largest message, the budget of answers in flight shared with the other pool, and whose share
   * of it a client key counts against (a tenant for `user_{u}_service_{s}`). Default: the
   * transport's bound per message, no budget.
   */
  responseLimits?: { maxMessageBytes: number, budget?: ResponseBudget, owner: (key: string) => string }
}

/** Retries and circuit breakers of a pool (GET /status, /metrics). */
export interface McpResilienceStats {
  /** tools/call retried once on a fresh connection (read-only or idempotent tools only). */
  retries: number
  /** Times a breaker opened (a failed half-open probe reopens it and counts again). */
  breakerOpens: number
  open: number
  halfOpen: number
  /** Breakers that are open, half-open or counting failures. */
  breakers: BreakerSnapshot[]
}

/** Per-request options of listTools. */
export interface ListToolsOptions {
  /** The caller went away: stop waiting (a shared connect or refresh carries on for others). */
  signal?: AbortSignal
}

/** Per-request options of callTool. */
export interface CallToolOptions {
  /** Aborting sends notifications/cancelled to the server and fails the call with GW_CANCELLED. */
  signal?: AbortSignal
  /** Deadline for this call (default: the spec's timeoutMs, else the pool's callTimeoutMs). */
  timeoutMs?: number
  /** Asks the server for progress on this call (a progressToken of the SDK's own) and receives it. */
  onProgress?: (progress: Progress) => void
  /**
   * The tool says it is read-only or idempotent (its annotations): a call that failed in
   * transport before any answer is retried once on a fresh connection. Never set it otherwise.
   */
  retrySafe?: boolean
}

/** One client in {@link McpClientPoolStats}. */
export interface McpClientStats {
  type: ConnectType
  connected: boolean
  /** Tools in the cached list (0 before the first listing). */
  tools: number
  /** Epoch ms of the last listTools/callTool. */
  lastUsedAt: number
  /** Abort listeners on the transport-wide signal (bounded by in-flight requests; see transports.ts). */
  abortListeners: number
}

/** What stats() returns (AI4J's getGatewayStatus shape, per client key). */
export interface McpClientPoolStats {
  totalClients: number
  connectedClients: number
  clients: Record<string, McpClientStats>
}

/** Which clients invalidate() drops: an exact key, a key prefix, or a predicate on the key. */
export type InvalidateTarget = string | { prefix: string } | ((key: string) => boolean)

interface Entry {
  /** Caller key + config hash. */
  id: string
  key: string
  spec: ConnectSpec
  secrets: string[]
  conn: Connection | undefined
  connecting: Promise<Connection> | undefined
  tools: Tool[] | undefined
  toolsFetchedAt: number
  /** Bumped by notifications/tools/list_changed; a refresh that started before is not fresh. */
  toolsVersion: number
  toolsFetchedVersion: number
  refreshing: Promise<Tool[]> | undefined
  lastUsedAt: number
  inFlight: number
  idleTimer: NodeJS.Timeout | undefined
  closed: boolean
  /** Why it was retired: out of the pool, closed when its last running call ends. */
  retired: string | undefined
  /** Why the last connect attempt failed (cleared by a successful one). */
  connectError: string | undefined
  /** Aborted when the client closes: a connect under way (a stdio first start may take a minute) stops with it. */
  closing: AbortController
}

/** What {@link McpClientPool.starting} reports about a client whose first connection is under way. */
export interface StartingState {
  /** Why the previous attempt failed, when this is a retry. */
  lastError: string | undefined
}

/** A client's id in the pool: the caller's key and its config's hash. */
function clientId (key: string, spec: ConnectSpec): string {
  return `${key}#${hashConnectSpec(spec)}`
}

/** Stable hash of a spec: the same config always gives the same hash, any change a new one. */
export function hashConnectSpec (spec: ConnectSpec): string {
  return createHash('sha256').update(canonicalJson(spec)).digest('hex').slice(0, 16)
}

function canonicalJson (value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`
  if (value !== null && typeof value === 'object') {
    const obj = value as Record<string, unknown>
    return `{${Object.keys(obj).filter((k) => obj[k] !== undefined).sort().map((k) => `${JSON.stringify(k)}:${canonicalJson(obj[k])}`).join(',')}}`
  }
  return JSON.stringify(value) ?? 'null'
}

const MAX_LIST_PAGES = 1000

/**
 * Pool of MCP clients for remote servers (docs/ARCHITECTURE.md#mcp-pool).
 *
 * - Clients are keyed by the caller's key (`{serverId}`, `user_{userId}_service_{serverId}`)
 *   plus a hash of the ConnectSpec: a changed config never reuses the old client, and the old
 *   client of that key is closed.
 * - Connected lazily and single-flight: concurrent first calls share one connect.
 * - Closed after `idleMs` without use; at most `maxClients` (LRU eviction closes the client;
 *   when every client is busy the oldest is still evicted, failing its in-flight calls, because
 *   the bound is what protects the host).
 * - Tool lists are cached per client and refreshed after `toolsTtlMs` or on
 *   notifications/tools/list_changed; a failed refresh keeps the previous list (and logs).
 * - A stale streamable-HTTP session (404) or a dropped connection is re-initialised and
 *   tools/list retried once; tools/call is replayed only for a caller that says the tool is
 *   read-only or idempotent (`retrySafe`) and when the failure got no answer, once; otherwise it
 *   fails with GW_UPSTREAM_ERROR and the next call gets a fresh session.
 * - A circuit breaker per client id fails operations fast (GW_UPSTREAM_UNAVAILABLE) after
 *   repeated failures, until a half-open probe succeeds (breaker.ts).
 */
export class McpClientPool {
  readonly #opts: Required<Omit<McpClientPoolOptions, 'fetch' | 'httpTransport' | 'schemaValidator' | 'responseLimits'>> & { fetch?: FetchLike, httpTransport?: HttpTransportKind, responseLimits?: McpClientPoolOptions['responseLimits'] }
  readonly #log: Logger
  readonly #schemaValidator: jsonSchemaValidator
  readonly #entries = new Map<string, Entry>()
  /** The ids in #entries per pool key (one per config of the key; normally one): no scan of the pool per new client. */
  readonly #idsByKey = new Map<string, Set<string>>()
  /** Clients taken out of #entries while calls still ran on them (see #retire). */
  readonly #retiring = new Set<Entry>()
  /**
   * Client ids (key and config hash) that connected at least once, so that only a config's first
   * connection gets the first-connect deadline. Bounded: the oldest ids are forgotten first.
   */
  readonly #connectedOnce = new Set<string>()
  readonly #breakers: CircuitBreakers
  /** Failures already counted by the breaker (a connect failure reaches every caller waiting for it). */
  readonly #counted = new WeakSet<object>()
  #retries = 0
  #closed = false

  constructor (options: McpClientPoolOptions) {
    const breaker = options.breaker ?? { failures: 5, windowMs: 60_000, openMs: 30_000 }
    this.#opts = { closeTimeoutMs: 5000, logger: silentLogger, ...options, breaker, stdioFirstConnectTimeoutMs: options.stdioFirstConnectTimeoutMs ?? options.connectTimeoutMs }
    this.#log = this.#opts.logger
    this.#schemaValidator = options.schemaValidator ?? new SharedSchemaValidator()
    // Remembered beyond the clients themselves (an open breaker outlives its idle client), bounded alike.
    this.#breakers = new CircuitBreakers({ ...breaker, maxEntries: 4 * options.maxClients })
  }

  /** Retries and breakers (GET /status, /metrics). */
  resilience (): McpResilienceStats {
    const counts = this.#breakers.counts()
    return { retries: this.#retries, breakerOpens: this.#breakers.openedTotal, ...counts, breakers: this.#breakers.snapshot() }
  }

  /**
   * The last tool list fetched for this client, fresh or not, without any I/O; undefined when
   * none was fetched yet. For a caller whose deadline ran out while a refresh is still under
   * way (the refresh goes on and updates the cache when it lands).
   */
  cachedTools (key: string, spec: ConnectSpec): Tool[] | undefined {
    return this.#entries.get(clientId(key, spec))?.tools
  }

  /**
   * Defined while this client's first connection (a stdio config that never connected) is under
   * way: a caller whose own deadline ran out can say the server is starting, not that it timed out.
   */
  starting (key: string, spec: ConnectSpec): StartingState | undefined {
    const entry = this.#entries.get(clientId(key, spec))
    if (entry === undefined || entry.connecting === undefined || !this.#isFirstConnect(entry)) return undefined
    return { lastError: entry.connectError }
  }

  /**
   * Connects and lists in the background, so that the first listing does not pay for a slow
   * start (a stdio server that npx must download). Shares the single-flight connect and refresh:
   * at most one warm-up per client runs at a time, and one that is under way is joined. Never
   * rejects: a failure is logged and kept for {@link starting}; the next use tries again.
   */
  async warm (key: string, spec: ConnectSpec): Promise<void> {
    if (this.#closed) return
    const id = clientId(key, spec)
    const admission = this.#breakers.admit(id)
    if (!admission.ok) return
    const entry = this.#acquire(key, spec)
    try {
      if (entry.tools !== undefined && entry.conn !== undefined && !entry.conn.closed) return
      await this.#refresh(entry)
      this.#log.debug({ mcpClient: key, tools: entry.tools?.length ?? 0 }, 'MCP client warmed up')
    } catch (err) {
      if (!entry.closed) this.#log.warn({ mcpClient: key, err: this.#safeMessage(entry, err) }, 'MCP server warm-up failed; the next use tries again')
    } finally {
      if (admission.probe) this.#breakers.release(id)
      this.#release(entry)
    }
  }

  /**
   * Lists the server's tools (all pages), from the cache when fresh (a half-open probe always
   * asks the server). Throws UpstreamError; GW_UPSTREAM_UNAVAILABLE while its breaker is open.
   */
  async listTools (key: string, spec: ConnectSpec, options: ListToolsOptions = {}): Promise<Tool[]> {
    const id = clientId(key, spec)
    const admission = this.#admit(id)
    const entry = this.#acquire(key, spec)
    try {
      const fresh = !admission.probe && entry.tools !== undefined &&
        entry.toolsFetchedVersion === entry.toolsVersion &&
        Date.now() - entry.toolsFetchedAt < this.#opts.toolsTtlMs
      if (fresh && entry.tools !== undefined) return entry.tools
      const previous = entry.tools
      try {
        return await this.#waitFor(this.#refresh(entry), options.signal, entry)
      } catch (err) {
        // A stale list beats no list: a failed or cancelled refresh never empties what routing uses
        // (unless that failure opened the breaker: then the server is reported unavailable).
        if (this.#breakers.isOpen(id)) throw this.#unavailable(this.#breakers.admit(id))
        if (previous !== undefined && !options.signal?.aborted) {
          this.#log.warn({ mcpClient: key, err: this.#safeMessage(entry, err) }, 'tools/list refresh failed; keeping the previous list')
          return previous
        }
        throw this.#toUpstream(entry, err, 'list')
      }
    } finally {
      if (admission.probe) this.#breakers.release(id)
      this.#release(entry)
    }
  }

  /**
   * Calls a tool and returns the raw CallToolResult (a tool-level failure is `isError: true`,
   * not an exception). Throws UpstreamError for connect, timeout, cancellation and protocol
   * failures, GW_UPSTREAM_UNAVAILABLE while the server's breaker is open. Replayed only when
   * `retrySafe` and the failure certainly got no answer: once, on a fresh connection.
   */
  async callTool (key: string, spec: ConnectSpec, name: string, args: Record<string, unknown> | undefined, options: CallToolOptions = {}): Promise<CallToolResult> {
    const id = clientId(key, spec)
    const admission = this.#admit(id)
    const entry = this.#acquire(key, spec)
    // The SDK adds an abort listener to the signal it is given and never removes it, so it gets a
    // per-call signal; the caller's long-lived signal then only carries our own removable link.
    const perCall = new AbortController()
    const onAbort = (): void => { perCall.abort(options.signal?.reason) }
    options.signal?.addEventListener('abort', onAbort, { once: true })
    const timeout = options.timeoutMs ?? spec.timeoutMs ?? this.#opts.callTimeoutMs
    const deadline = Date.now() + timeout
    // Any progress notification means the server is running the call: never replayed after it.
    let responded = false
    const userProgress = options.onProgress
    const onProgress = userProgress === undefined ? undefined : (p: Progress): void => { responded = true; userProgress(p) }
    try {
      options.signal?.throwIfAborted()
      for (let attempt = 1; ; attempt++) {
        const conn = await this.#waitFor(this.#connect(entry), options.signal, entry)
        const attemptTimeout = attempt === 1 ? timeout : Math.max(1, deadline - Date.now())
        try {
          const result = await this.#callOnce(conn, name, args, attemptTimeout, perCall.signal, onProgress)
          this.#breakers.success(id)
          return result
        } catch (err) {
          if (options.signal?.aborted === true) throw new UpstreamError('GW_CANCELLED', `tools/call ${name} was cancelled by the caller`)
          if (isDeadConnection(err)) this.#dropConnection(entry, conn, 'tools/call failed on a dead connection')
          if (attempt === 1 && options.retrySafe === true && !responded && !entry.closed && deadline - Date.now() > 0 && failedBeforeResponse(err, conn.handle.type)) {
            // The broken connection is out of the pool (dropped above, or already closed): the
            // next #connect opens a fresh one.
            if (entry.conn === conn) this.#dropConnection(entry, conn, 'tools/call failed before any answer; retrying once')
            this.#retries++
            this.#log.info({ mcpClient: key, tool: name, err: this.#safeMessage(entry, err) }, 'retrying a read-only/idempotent tools/call once on a fresh connection')
            continue
          }
          this.#countFailure(entry, err, 'call')
          throw this.#toUpstream(entry, err, 'call', timeout)
        }
      }
    } catch (err) {
      throw this.#toUpstream(entry, err, 'call')
    } finally {
      options.signal?.removeEventListener('abort', onAbort)
      if (admission.probe) this.#breakers.release(id)
      this.#release(entry)
    }
  }

  async #callOnce (conn: Connection, name: string, args: Record<string, unknown> | undefined, timeout: number, signal: AbortSignal, onProgress: ((p: Progress) => void) | undefined): Promise<CallToolResult> {
    // Progress never extends the deadline: a server that keeps reporting must still finish
    // within the call's timeout.
    const progress = onProgress !== undefined ? trackProgress(conn.client, onProgress) : undefined
    try {
      const params = { name, arguments: args ?? {}, ...(progress !== undefined ? { _meta: { progressToken: progress.token } } : {}) }
      return await conn.client.callTool(params, undefined, { timeout, signal }) as CallToolResult
    } finally {
      progress?.end()
    }
  }

  /**
   * Closes and forgets the clients matching `target`: a string is an exact key (never a prefix:
   * user `1` must not drop user `1-2`'s clients), `{ prefix }` matches keys starting with it
   * (e.g. `{ prefix: 'user_42_service_' }`, safe because ids contain no `_`), a function decides
   * per key. Returns how many clients were dropped.
   */
  async invalidate (target: InvalidateTarget): Promise<number> {
    const match = typeof target === 'function'
      ? target
      : typeof target === 'string'
        ? (k: string) => k === target
        : (k: string) => k.startsWith(target.prefix)
    const victims = [...this.#entries.values()].filter((e) => match(e.key))
    // A changed (or removed) server starts over: its breaker must not hold the new config back.
    this.#breakers.reset(match)
    await this.#bounded(Promise.all(victims.map(async (e) => { await this.#retire(e, 'invalidated') })))
    return victims.length
  }

  /** Snapshot of the pool for GET /status. */
  stats (): McpClientPoolStats {
    const clients: Record<string, McpClientStats> = {}
    let connected = 0
    for (const e of this.#entries.values()) {
      const isConnected = e.conn !== undefined && !e.conn.closed
      if (isConnected) connected++
      clients[e.key] = {
        type: e.spec.type,
        connected: isConnected,
        tools: e.tools?.length ?? 0,
        lastUsedAt: e.lastUsedAt,
        abortListeners: e.conn?.handle.abortListenerCount() ?? 0
      }
    }
    return { totalClients: this.#entries.size, connectedClients: connected, clients }
  }

  /** Closes every client (stdio children included) within closeTimeoutMs; later calls fail. */
  async close (): Promise<void> {
    this.#closed = true
    const all = [...this.#entries.values(), ...this.#retiring]
    await this.#bounded(Promise.all(all.map(async (e) => { await this.#closeEntry(e, 'pool closed') })))
  }

  /** Lets an operation through the client's breaker, or throws GW_UPSTREAM_UNAVAILABLE without any I/O. */
  #admit (id: string): Admission & { ok: true } {
    if (this.#closed) throw new UpstreamError('GW_UPSTREAM_ERROR', 'The MCP client pool is closed')
    const admission = this.#breakers.admit(id)
    if (!admission.ok) throw this.#unavailable(admission)
    return admission
  }

  #unavailable (admission: Admission): UpstreamError {
    if (admission.ok) return new UpstreamError('GW_UPSTREAM_UNAVAILABLE', 'The MCP server is unavailable: its circuit breaker is being probed')
    return new UpstreamError('GW_UPSTREAM_UNAVAILABLE', admission.message, admission.retryAt)
  }

  /** Tells the breaker about a failed operation (once per error: a shared connect failure reaches every waiter). */
  #countFailure (entry: Entry, err: unknown, op: 'list' | 'call' | 'connect'): void {
    if (entry.closed || (typeof err === 'object' && err !== null && this.#counted.has(err))) return
    if (typeof err === 'object' && err !== null) this.#counted.add(err)
    const verdict = op === 'connect' ? breakerVerdict(err, 'list') : breakerVerdict(err, op)
    if (verdict === 'failure') {
      const before = this.#breakers.openedTotal
      this.#breakers.failure(entry.id, entry.key, this.#safeMessage(entry, err))
      if (this.#breakers.openedTotal > before) this.#log.warn({ mcpClient: entry.key, err: this.#safeMessage(entry, err) }, 'MCP server circuit breaker opened: its calls fail fast until a probe succeeds')
    } else if (verdict === 'answered') {
      this.#breakers.success(entry.id)
    }
  }

  #acquire (key: string, spec: ConnectSpec): Entry {
    if (this.#closed) throw new UpstreamError('GW_UPSTREAM_ERROR', 'The MCP client pool is closed')
    const id = clientId(key, spec)
    let entry = this.#entries.get(id)
    if (entry === undefined) {
      // Same key, other config: that client belongs to a config that no longer exists.
      const sameKey = this.#idsByKey.get(key)
      if (sameKey !== undefined) {
        for (const otherId of [...sameKey]) {
          const other = this.#entries.get(otherId)
          if (other === undefined) continue
          this.#retire(other, 'config changed').catch(() => {})
          this.#breakers.reset((k, breakerId) => k === key && breakerId !== id)
        }
      }
      entry = {
        id,
        key,
        spec,
        secrets: [...Object.values(spec.headers ?? {}), ...Object.values(spec.env ?? {})],
        conn: undefined,
        connecting: undefined,
        tools: undefined,
        toolsFetchedAt: 0,
        toolsVersion: 0,
        toolsFetchedVersion: -1,
        refreshing: undefined,
        lastUsedAt: Date.now(),
        inFlight: 0,
        idleTimer: undefined,
        closed: false,
        retired: undefined,
        connectError: undefined,
        closing: new AbortController()
      }
      this.#entries.set(id, entry)
      let ids = this.#idsByKey.get(key)
      if (ids === undefined) { ids = new Set(); this.#idsByKey.set(key, ids) }
      ids.add(id)
      this.#evictOverflow(entry)
    } else {
      // Map order is the LRU order: re-insert on use.
      this.#entries.delete(id)
      this.#entries.set(id, entry)
    }
    entry.inFlight++
    entry.lastUsedAt = Date.now()
    if (entry.idleTimer !== undefined) {
      clearTimeout(entry.idleTimer)
      entry.idleTimer = undefined
    }
    return entry
  }

  #release (entry: Entry): void {
    entry.inFlight--
    entry.lastUsedAt = Date.now()
    if (entry.inFlight > 0 || entry.closed) return
    if (entry.retired !== undefined) {
      this.#closeEntry(entry, entry.retired).catch(() => {})
      return
    }
    entry.idleTimer = setTimeout(() => {
      entry.idleTimer = undefined
      if (entry.inFlight === 0) this.#closeEntry(entry, 'idle').catch(() => {})
    }, this.#opts.idleMs)
    entry.idleTimer.unref()
  }

  /** Takes the entry out of #entries (and the key index) if it is still the one there. */
  #forget (entry: Entry): void {
    if (this.#entries.get(entry.id) !== entry) return
    this.#entries.delete(entry.id)
    const ids = this.#idsByKey.get(entry.key)
    ids?.delete(entry.id)
    if (ids?.size === 0) this.#idsByKey.delete(entry.key)
  }

  #evictOverflow (keep: Entry): void {
    while (this.#entries.size > this.#opts.maxClients) {
      // The least recently used idle client, else the least recently used one (Map order is LRU
      // order), found without copying the pool.
      let victim: Entry | undefined
      let oldest: Entry | undefined
      for (const e of this.#entries.values()) {
        if (e === keep) continue
        oldest ??= e
        if (e.inFlight === 0) { victim = e; break }
      }
      victim ??= oldest
      if (victim === undefined) return
      this.#closeEntry(victim, 'evicted (pool full)').catch(() => {})
    }
  }

  /**
   * Takes a client out of the pool (the next call gets a new one) without cutting off the calls
   * running on it: a registry change or a resync must not fail work that was already accepted.
   * It closes when its last call ends; those are bounded by their own timeouts, and close()
   * still cuts them off.
   */
  async #retire (entry: Entry, why: string): Promise<void> {
    this.#forget(entry)
    if (entry.inFlight === 0 || entry.closed) {
      await this.#closeEntry(entry, why)
      return
    }
    this.#log.debug({ mcpClient: entry.key, why, running: entry.inFlight }, 'retiring MCP client after its running calls')
    entry.retired = why
    this.#retiring.add(entry)
  }

  async #closeEntry (entry: Entry, why: string): Promise<void> {
    this.#forget(entry)
    this.#retiring.delete(entry)
    if (entry.closed) return
    entry.closed = true
    entry.closing.abort()
    if (entry.idleTimer !== undefined) clearTimeout(entry.idleTimer)
    this.#log.debug({ mcpClient: entry.key, why }, 'closing MCP client')
    const conn = entry.conn
    entry.conn = undefined
    const pending = entry.connecting
    const closing: Array<Promise<void>> = []
    if (conn !== undefined) closing.push(this.#closeConnection(entry, conn))
    // A connect still in flight is closed by #connect itself when it sees entry.closed.
    if (pending !== undefined) closing.push(pending.then(() => {}, () => {}))
    await Promise.all(closing)
  }

  async #closeConnection (entry: Entry, conn: Connection): Promise<void> {
    await closeConnection(conn, { label: entry.key, logger: this.#log, safeMessage: (err) => this.#safeMessage(entry, err) })
  }

  #dropConnection (entry: Entry, conn: Connection, why: string): void {
    if (entry.conn === conn) entry.conn = undefined
    if (!conn.closed) {
      this.#log.info({ mcpClient: entry.key, why }, 'dropping MCP connection; the next request reconnects')
      this.#closeConnection(entry, conn).catch(() => {})
    }
  }

  /** Single-flight connect: every caller of one entry shares the same attempt. */
  #connect (entry: Entry): Promise<Connection> {
    if (entry.closed) return Promise.reject(new UpstreamError('GW_UPSTREAM_ERROR', 'The MCP client was closed (registry change, eviction or shutdown)'))
    if (entry.conn !== undefined && !entry.conn.closed) return Promise.resolve(entry.conn)
    entry.connecting ??= this.#openConnection(entry).finally(() => { entry.connecting = undefined })
    return entry.connecting
  }

  #isFirstConnect (entry: Entry): boolean {
    return entry.spec.type === 'stdio' && !this.#connectedOnce.has(entry.id)
  }

  async #openConnection (entry: Entry): Promise<Connection> {
    const first = this.#isFirstConnect(entry)
    try {
      const conn = await this.#openConnectionOnce(entry, first
        ? Math.max(this.#opts.stdioFirstConnectTimeoutMs, this.#opts.connectTimeoutMs)
        : this.#opts.connectTimeoutMs)
      entry.connectError = undefined
      this.#connectedOnce.delete(entry.id)
      this.#connectedOnce.add(entry.id)
      if (this.#connectedOnce.size > 4 * this.#opts.maxClients) this.#connectedOnce.delete(this.#connectedOnce.values().next().value as string)
      return conn
    } catch (err) {
      entry.connectError = this.#safeMessage(entry, err)
      this.#countFailure(entry, err, 'connect')
      throw err
    }
  }

  async #openConnectionOnce (entry: Entry, connectTimeoutMs: number): Promise<Connection> {
    // The SDK never removes the abort listener it adds to a request's signal: each attempt gets
    // its own signal, linked to the entry's by a listener removed when the attempt ends.
    const attempt = new AbortController()
    const onClosing = (): void => { attempt.abort() }
    entry.closing.signal.addEventListener('abort', onClosing, { once: true })
    try {
      return await this.#openConnectionWith(entry, connectTimeoutMs, attempt.signal)
    } finally {
      entry.closing.signal.removeEventListener('abort', onClosing)
    }
  }

  #limits (entry: Entry): ResponseLimits | undefined {
    const l = this.#opts.responseLimits
    return l === undefined ? undefined : { maxMessageBytes: l.maxMessageBytes, budget: l.budget, owner: l.owner(entry.key) }
  }

  async #openConnectionWith (entry: Entry, connectTimeoutMs: number, signal: AbortSignal): Promise<Connection> {
    return await openConnection({
      spec: entry.spec,
      label: entry.key,
      clientInfo: this.#opts.clientInfo,
      schemaValidator: this.#schemaValidator,
      fetch: this.#opts.fetch,
      ...(this.#opts.httpTransport !== undefined ? { httpTransport: this.#opts.httpTransport } : {}),
      limits: this.#limits(entry),
      logger: this.#log,
      connectTimeoutMs,
      safeMessage: (err) => this.#safeMessage(entry, err),
      abandoned: () => entry.closed,
      signal,
      inUse: (conn) => entry.conn === conn,
      adopt: (conn) => { entry.conn = conn },
      onClosed: (conn) => { if (entry.conn === conn) entry.conn = undefined },
      onDead: (conn, why) => { this.#dropConnection(entry, conn, why) },
      onToolsChanged: () => {
        entry.toolsVersion++
        // Refresh in the background so the next listTools is served fresh; failures keep the old list.
        if (!entry.closed && entry.tools !== undefined) this.#refresh(entry).catch(() => {})
      }
    })
  }

  /** Single-flight tools/list refresh that updates the cache only on success. */
  #refresh (entry: Entry): Promise<Tool[]> {
    entry.refreshing ??= this.#listAllWithRetry(entry).finally(() => { entry.refreshing = undefined })
    return entry.refreshing
  }

  async #listAllWithRetry (entry: Entry): Promise<Tool[]> {
    const version = entry.toolsVersion
    let tools: Tool[]
    const conn = await this.#connect(entry)
    // The deadline is the listing's own: a connect has its own, and a caller waiting for both
    // has its signal. Counted from the connect, a slow first start would fail the listing too.
    const deadline = Date.now() + this.#opts.listTimeoutMs
    try {
      try {
        tools = await this.#listAll(conn, deadline)
      } catch (err) {
        // tools/list is idempotent, so a stale session or a dropped connection is re-initialised
        // and the listing retried once (docs/ARCHITECTURE.md#mcp-pool). Anything else (timeout, server error) is final.
        if (!isDeadConnection(err) || entry.closed) throw err
        this.#dropConnection(entry, conn, 'tools/list failed on a dead connection; retrying once')
        tools = await this.#listAll(await this.#connect(entry), deadline)
      }
    } catch (err) {
      this.#countFailure(entry, err, 'list')
      throw err
    }
    this.#breakers.success(entry.id)
    if (!entry.closed) {
      entry.tools = tools
      entry.toolsFetchedAt = Date.now()
      entry.toolsFetchedVersion = version
    }
    return tools
  }

  async #listAll (conn: Connection, deadline: number): Promise<Tool[]> {
    const tools: Tool[] = []
    let cursor: string | undefined
    const seen = new Set<string>()
    for (let page = 0; page < MAX_LIST_PAGES; page++) {
      const timeout = deadline - Date.now()
      if (timeout <= 0) throw new McpError(ErrorCode.RequestTimeout, 'Request timed out')
      const result = await conn.client.listTools(cursor === undefined ? {} : { cursor }, { timeout })
      tools.push(...result.tools)
      cursor = result.nextCursor
      if (cursor === undefined) return tools
      // A server that repeats a cursor would make us loop until the deadline.
      if (seen.has(cursor)) throw new UpstreamError('GW_UPSTREAM_ERROR', 'The MCP server repeated a tools/list cursor')
      seen.add(cursor)
    }
    throw new UpstreamError('GW_UPSTREAM_ERROR', `The MCP server returned more than ${MAX_LIST_PAGES} tools/list pages`)
  }

  /** Waits for a shared promise, giving up (GW_CANCELLED) when this caller's signal aborts. */
  async #waitFor<T> (promise: Promise<T>, signal: AbortSignal | undefined, entry: Entry): Promise<T> {
    if (signal === undefined) return promise
    // The shared promise may reject after this caller left, with nobody else listening.
    promise.catch(() => {})
    if (signal.aborted) throw new UpstreamError('GW_CANCELLED', `The request to MCP server ${entry.key} was cancelled by the caller`)
    let onAbort: (() => void) | undefined
    const aborted = new Promise<never>((_resolve, reject) => {
      onAbort = () => reject(new UpstreamError('GW_CANCELLED', `The request to MCP server ${entry.key} was cancelled by the caller`))
      signal.addEventListener('abort', onAbort, { once: true })
    })
    try {
      return await Promise.race([promise, aborted])
    } finally {
      if (onAbort !== undefined) signal.removeEventListener('abort', onAbort)
    }
  }

  #toUpstream (entry: Entry, err: unknown, op: 'list' | 'call', timeoutMs?: number): UpstreamError {
    return toUpstreamError(err, op, op === 'list' ? this.#opts.listTimeoutMs : timeoutMs, (e) => this.#safeMessage(entry, e))
  }

  #safeMessage (entry: Entry, err: unknown): string {
    const raw = err instanceof Error ? err.message : String(err)
    return redactSecrets(raw, entry.secrets).slice(0, 2000)
  }

  async #bounded (work: Promise<unknown>): Promise<void> {
    let timer: NodeJS.Timeout | undefined
    const timeout = new Promise<void>((resolve) => {
      timer = setTimeout(() => {
        this.#log.warn({ closeTimeoutMs: this.#opts.closeTimeoutMs }, 'MCP clients did not close in time; continuing')
        resolve()
      }, this.#opts.closeTimeoutMs)
    })
    try {
      await Promise.race([work.then(() => {}, () => {}), timeout])
    } finally {
      clearTimeout(timer)
    }
  }
}
