import { hash } from 'node:crypto'
import type { FetchLike, jsonSchemaValidator } from '@modelcontextprotocol/client'
import type { CallToolResult, Implementation, Tool } from '@modelcontextprotocol/sdk/types.js'
import { SharedSchemaValidator } from '../mcp/schema-validator.js'
import { BreakerAdmission } from './breaker-admission.js'
import { EraVerdicts } from './era-verdicts.js'
import type { BreakerStats } from './breaker-admission.js'
import { UpstreamError } from './errors.js'
import { silentLogger } from '../logger.js'
import type { Logger } from '../logger.js'
import { RELAY_KEY_SUFFIX } from './relay.js'
import { PooledClient } from './pooled-client.js'
import type { CallToolOptions, ClientContext, UpstreamCallResult } from './pooled-client.js'
import type { ConnectSpec, ConnectType, HttpTransportKind } from './transport.js'
import type { KeptLists } from './list-bounds.js'
import type { ResponseBudget } from './response-limits.js'
import { FirstConnects } from './warm-start.js'
import type { SurfaceRequest } from '../routing/source.js'
import type { StartingState } from './warm-start.js'
import type { Tracing } from '../tracing/index.js'

export type { CallToolOptions, StartingState }

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
  responseLimits?: { maxMessageBytes: number, budget?: ResponseBudget, owner: (key: string) => string, lists?: KeptLists }
  /** A server told its client that its tool list changed (`key`: the client key); the cache is already stale. */
  onToolsChanged?: (key: string) => void
  /** OpenTelemetry (src/tracing/): a span per tools/call, the trace context in its headers and `_meta`. Default off. */
  tracing?: Tracing | undefined
}

/** Retries and circuit breakers of a pool (GET /status, /metrics). */
export interface McpResilienceStats extends BreakerStats {
  /** tools/call retried once on a fresh connection (read-only or idempotent tools only). */
  retries: number
}

/** Per-request options of listTools. */
export interface ListToolsOptions {
  /** The caller went away: stop waiting (a shared connect or refresh carries on for others). */
  signal?: AbortSignal
}

/** One client in {@link McpClientPoolStats}. */
export interface McpClientStats {
  type: ConnectType
  connected: boolean
  /** Tools in the cached list (0 before the first listing). */
  tools: number
  /** Epoch ms of the last listTools/callTool. */
  lastUsedAt: number
  /** Abort listeners on the transport-wide signal (bounded by in-flight requests; see http-fetch.ts isolateAbortSignals). */
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

/** A client's id in the pool: the caller's key and its config's hash. */
function clientId (key: string, spec: ConnectSpec): string {
  return `${key}#${hashConnectSpec(spec)}`
}

/**
 * The hash of each spec object met: a connector hands the same object for the same config on every call
 * (connector.ts), and the canonical JSON and SHA-256 of it were, twice per call, the pool's largest cost.
 * Specs are never changed once made.
 */
const specHashes = new WeakMap<ConnectSpec, string>()

/** Stable hash of a spec: the same config always gives the same hash, any change a new one. */
function hashConnectSpec (spec: ConnectSpec): string {
  let hashed = specHashes.get(spec)
  if (hashed === undefined) {
    // The OAuth hook is behaviour, not config: the same server config (auth included) is one client.
    const { authorization: _hook, ...config } = spec
    hashed = hash('sha256', canonicalJson(config), 'hex').slice(0, 16)
    specHashes.set(spec, hashed)
  }
  return hashed
}

function canonicalJson (value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`
  if (value !== null && typeof value === 'object') {
    const obj = value as Record<string, unknown>
    return `{${Object.keys(obj).filter((k) => obj[k] !== undefined).sort().map((k) => `${JSON.stringify(k)}:${canonicalJson(obj[k])}`).join(',')}}`
  }
  return JSON.stringify(value) ?? 'null'
}

/**
 * Pool of MCP clients for remote servers (docs/ARCHITECTURE.md#mcp-pool, src/remote-mcp/README.md):
 * which clients exist and for how long. One client (its connection, tool list and operations) is
 * pooled-client.ts; breaker admission breaker-admission.ts; the first start of a slow server
 * warm-start.ts.
 *
 * - Clients are keyed by the caller's key (`{serverId}`, `user_{userId}_service_{serverId}`)
 *   plus a hash of the ConnectSpec: a changed config never reuses the old client, and the old
 *   client of that key is retired.
 * - Created once even for concurrent first calls; connected lazily and single-flight.
 * - Closed after `idleMs` without use; at most `maxClients` (LRU eviction closes the client;
 *   when every client is busy the oldest is still evicted, failing its in-flight calls, because
 *   the bound is what protects the host).
 * - Retired (a registry change, a resync): out of the pool at once, closed after its last running call.
 * - A circuit breaker per client id fails operations fast (GW_UPSTREAM_UNAVAILABLE) after
 *   repeated failures, until a half-open probe succeeds.
 */
export class McpClientPool {
  readonly #opts: { idleMs: number, maxClients: number, toolsTtlMs: number, closeTimeoutMs: number }
  readonly #log: Logger
  readonly #entries = new Map<string, PooledClient>()
  /** How many watchers wait for each client key's tool list changes (watch()). */
  readonly #watched = new Map<string, number>()
  /** The ids in #entries per pool key (one per config of the key; normally one): no scan of the pool per new client. */
  readonly #idsByKey = new Map<string, Set<string>>()
  /** Clients taken out of #entries while calls still ran on them (see #retire). */
  readonly #retiring = new Set<PooledClient>()
  readonly #breakers: BreakerAdmission
  /** What every client shares (one object per pool). */
  readonly #context: ClientContext
  /** Which era each server config speaks, so that a reconnect does not probe again (era-verdicts.ts). */
  readonly eras = new EraVerdicts()
  #retries = 0
  #closed = false

  constructor (options: McpClientPoolOptions) {
    const breaker = options.breaker ?? { failures: 5, windowMs: 60_000, openMs: 30_000 }
    this.#opts = { idleMs: options.idleMs, maxClients: options.maxClients, toolsTtlMs: options.toolsTtlMs, closeTimeoutMs: options.closeTimeoutMs ?? 5000 }
    this.#log = options.logger ?? silentLogger
    // Remembered beyond the clients themselves (an open breaker outlives its idle client), bounded alike.
    this.#breakers = new BreakerAdmission({ ...breaker, maxEntries: 4 * options.maxClients }, this.#log)
    // Which configs started once: a slow-starting server's first connect has a longer deadline.
    const firstConnects = new FirstConnects({
      connectTimeoutMs: options.connectTimeoutMs,
      firstConnectTimeoutMs: options.stdioFirstConnectTimeoutMs ?? options.connectTimeoutMs,
      maxRemembered: 4 * options.maxClients
    })
    const limits = options.responseLimits
    // Off: no span, no header hook at all (tracing.enabled false is NO_TRACING).
    const tracing = options.tracing?.enabled === true ? options.tracing : undefined
    this.#context = {
      log: this.#log,
      breakers: this.#breakers,
      firstConnects,
      connection: {
        clientInfo: options.clientInfo,
        schemaValidator: options.schemaValidator ?? new SharedSchemaValidator(),
        eras: this.eras,
        fetch: options.fetch,
        ...(options.httpTransport !== undefined ? { httpTransport: options.httpTransport } : {}),
        ...(tracing !== undefined ? { traceHeaders: (headers: Record<string, string>) => { tracing.inject(headers) } } : {})
      },
      tracing,
      limits: limits === undefined
        ? () => undefined
        : (key) => ({ maxMessageBytes: limits.maxMessageBytes, budget: limits.budget, owner: limits.owner(key), lists: limits.lists }),
      listTimeoutMs: options.listTimeoutMs,
      callTimeoutMs: options.callTimeoutMs,
      surfaceTtlMs: options.toolsTtlMs,
      onRetry: () => { this.#retries++ },
      onToolsChanged: options.onToolsChanged ?? (() => {}),
      isWatched: (key) => (this.#watched.get(key) ?? 0) > 0
    }
  }

  /** Retries and breakers (GET /status, /metrics). */
  resilience (): McpResilienceStats {
    return { retries: this.#retries, ...this.#breakers.stats() }
  }

  /**
   * The last tool list fetched for this client, fresh or not, without any I/O; undefined when
   * none was fetched yet. For a caller whose deadline ran out while a refresh is still under
   * way (the refresh goes on and updates the cache when it lands).
   */
  cachedTools (key: string, spec: ConnectSpec): Tool[] | undefined {
    return this.#entries.get(clientId(key, spec))?.toolList.tools
  }

  /**
   * Defined while this client's first connection (a stdio config that never connected) is under
   * way: a caller whose own deadline ran out can say the server is starting, not that it timed out.
   */
  starting (key: string, spec: ConnectSpec): StartingState | undefined {
    return this.#entries.get(clientId(key, spec))?.starting()
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
    const admission = this.#breakers.tryAdmit(id)
    if (!admission.ok) return
    const entry = this.#acquire(key, spec, id)
    try {
      if (entry.toolList.tools !== undefined && entry.connected) return
      await entry.refresh()
      this.#log.debug({ mcpClient: key, tools: entry.toolList.tools?.length ?? 0 }, 'MCP client warmed up')
    } catch (err) {
      if (!entry.closed) this.#log.warn({ mcpClient: key, err: entry.safeMessage(err) }, 'MCP server warm-up failed; the next use tries again')
    } finally {
      this.#breakers.done(id, admission)
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
    const entry = this.#acquire(key, spec, id)
    try {
      const fresh = admission.probe ? undefined : entry.toolList.fresh(this.#opts.toolsTtlMs)
      if (fresh !== undefined) return fresh
      const previous = entry.toolList.tools
      // A list refused for a bound is not fetched again to be refused again while the refusal holds (tool-cache.ts).
      const refused = admission.probe ? undefined : entry.toolList.refusal(this.#opts.toolsTtlMs)
      if (refused !== undefined) {
        if (previous !== undefined) return previous
        throw refused
      }
      try {
        return await entry.waitFor(entry.refresh(), options.signal)
      } catch (err) {
        // A stale list beats no list: a failed or cancelled refresh never empties what routing uses
        // (unless that failure opened the breaker: then the server is reported unavailable).
        const open = this.#breakers.openError(id)
        if (open !== undefined) throw open
        if (previous !== undefined && !options.signal?.aborted) {
          this.#log.warn({ mcpClient: key, err: entry.safeMessage(err) }, 'tools/list refresh failed; keeping the previous list')
          return previous
        }
        throw entry.toUpstream(err, 'list')
      }
    } finally {
      this.#breakers.done(id, admission)
      this.#release(entry)
    }
  }

  /**
   * Calls a tool and returns the raw CallToolResult (a tool-level failure is `isError: true`,
   * not an exception), or a 2026-07-28 server's `input_required` as it came (options.input).
   * Throws UpstreamError for connect, timeout, cancellation and protocol
   * failures, GW_UPSTREAM_UNAVAILABLE while the server's breaker is open. Replayed only when
   * `retrySafe` and the failure certainly got no answer: once, on a fresh connection.
   */
  async callTool (
    key: string,
    spec: ConnectSpec,
    name: string,
    args: Record<string, unknown> | undefined,
    options?: CallToolOptions & { input?: undefined }
  ): Promise<CallToolResult>
  async callTool (
    key: string, spec: ConnectSpec, name: string, args: Record<string, unknown> | undefined, options: CallToolOptions
  ): Promise<UpstreamCallResult>
  async callTool (
    key: string,
    spec: ConnectSpec,
    name: string,
    args: Record<string, unknown> | undefined,
    options: CallToolOptions = {}
  ): Promise<UpstreamCallResult> {
    const id = clientId(key, spec)
    const admission = this.#admit(id)
    const entry = this.#acquire(key, spec, id)
    try {
      return await entry.call(name, args, options)
    } finally {
      this.#breakers.done(id, admission)
      this.#release(entry)
    }
  }

  /**
   * Resources, templates, prompts and completion of the server (PooledClient.surface), through
   * the same client, breaker and response bounds as its tools. Throws the server's own JSON-RPC
   * error as it is, UpstreamError otherwise (GW_UPSTREAM_UNAVAILABLE while its breaker is open).
   */
  async surface (key: string, spec: ConnectSpec, req: SurfaceRequest, options: { signal?: AbortSignal, timeoutMs: number }): Promise<unknown> {
    const id = clientId(key, spec)
    const admission = this.#admit(id)
    const entry = this.#acquire(key, spec, id)
    try {
      return await entry.surface(req, options)
    } finally {
      this.#breakers.done(id, admission)
      this.#release(entry)
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
        // A key's relay connections (relay.ts) go with it.
        ? (k: string) => k === target || k === `${target}${RELAY_KEY_SUFFIX}`
        : (k: string) => k.startsWith(target.prefix)
    const victims = [...this.#entries.values()].filter((e) => match(e.key))
    // A changed (or removed) server starts over: its breaker must not hold the new config back.
    this.#breakers.reset(match)
    await this.#bounded(Promise.all(victims.map(async (e) => { await this.#retire(e, 'invalidated') })))
    return victims.length
  }

  /**
   * Someone waits for the tool list changes of `key` (an /mcp notification stream whose listing
   * names the server) until the returned function is called: its 2026-07-28 connections keep a
   * subscriptions/listen open meanwhile, and only meanwhile.
   */
  watch (key: string): () => void {
    const n = (this.#watched.get(key) ?? 0) + 1
    this.#watched.set(key, n)
    if (n === 1) this.#setWatched(key, true)
    let done = false
    return () => {
      if (done) return
      done = true
      const left = (this.#watched.get(key) ?? 1) - 1
      if (left > 0) {
        this.#watched.set(key, left)
        return
      }
      this.#watched.delete(key)
      this.#setWatched(key, false)
    }
  }

  #setWatched (key: string, on: boolean): void {
    for (const id of this.#idsByKey.get(key) ?? []) this.#entries.get(id)?.setWatched(on)
  }

  /** Snapshot of the pool for GET /status. */
  stats (): McpClientPoolStats {
    const clients: Record<string, McpClientStats> = {}
    let connected = 0
    for (const e of this.#entries.values()) {
      const isConnected = e.connected
      if (isConnected) connected++
      clients[e.key] = {
        type: e.spec.type,
        connected: isConnected,
        tools: e.toolList.tools?.length ?? 0,
        lastUsedAt: e.lastUsedAt,
        abortListeners: e.abortListenerCount()
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
  #admit (id: string): ReturnType<BreakerAdmission['admit']> {
    if (this.#closed) throw new UpstreamError('GW_UPSTREAM_ERROR', 'The MCP client pool is closed')
    return this.#breakers.admit(id)
  }

  #acquire (key: string, spec: ConnectSpec, id = clientId(key, spec)): PooledClient {
    if (this.#closed) throw new UpstreamError('GW_UPSTREAM_ERROR', 'The MCP client pool is closed')
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
      entry = new PooledClient(id, key, spec, this.#context)
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

  #release (entry: PooledClient): void {
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
  #forget (entry: PooledClient): void {
    if (this.#entries.get(entry.id) !== entry) return
    this.#entries.delete(entry.id)
    const ids = this.#idsByKey.get(entry.key)
    ids?.delete(entry.id)
    if (ids?.size === 0) this.#idsByKey.delete(entry.key)
  }

  #evictOverflow (keep: PooledClient): void {
    while (this.#entries.size > this.#opts.maxClients) {
      // The least recently used idle client, else the least recently used one (Map order is LRU
      // order), found without copying the pool.
      let victim: PooledClient | undefined
      let oldest: PooledClient | undefined
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
  async #retire (entry: PooledClient, why: string): Promise<void> {
    this.#forget(entry)
    if (entry.inFlight === 0 || entry.closed) {
      await this.#closeEntry(entry, why)
      return
    }
    this.#log.debug({ mcpClient: entry.key, why, running: entry.inFlight }, 'retiring MCP client after its running calls')
    entry.retired = why
    this.#retiring.add(entry)
  }

  async #closeEntry (entry: PooledClient, why: string): Promise<void> {
    this.#forget(entry)
    this.#retiring.delete(entry)
    await entry.close(why)
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
