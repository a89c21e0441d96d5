/**
 * One client of the pool (docs/ARCHITECTURE.md#mcp-pool): one server config under one caller key,
 * its connection (opened lazily and single-flight, dropped when dead, closed once), its tool list
 * (tool-cache.ts) and its operations: the listing retried once on a dead connection, the call
 * replayed once only when safe. Which clients exist, for how long and how many (keying, LRU,
 * idle and retirement) is pool.ts; whether an operation may start (the breaker) is the pool's too,
 * and this file reports the outcomes to it.
 */
import { CLIENT_CAPABILITIES_META_KEY, isInputRequiredResult, LOG_LEVEL_META_KEY, ProtocolError } from '@modelcontextprotocol/client'
import type { Tool as ClientTool } from '@modelcontextprotocol/client'
import type { CallToolResult, Progress, Tool } from '@modelcontextprotocol/sdk/types.js'
import { trackProgress } from '../mcp/progress.js'
import type { Logger } from '../logger.js'
import type { BreakerAdmission } from './breaker-admission.js'
import { failedBeforeResponse, isDeadConnection, isServerAnswer, toUpstreamError } from './classify.js'
import type { SurfaceRequest } from '../routing/source.js'
import type { InputRound } from '../routing/types.js'
import { answersWithinCall, INPUT_CAPABILITIES, JsonRpcError } from '../routing/client-relay.js'
import { isListRequest, SurfaceLists, surfaceOnce } from './surface.js'
import { closeConnection, openConnection, watchToolChanges } from './connection.js'
import { answerInputRequests, boundedInputRequests, callerKeyOf, MAX_ROUNDS } from './relay.js'
import type { RelayedCall } from './relay.js'
import type { Connection, ConnectionOptions } from './connection.js'
import { InputUnavailableError, redactSecrets, UpstreamError } from './errors.js'
import type { ResponseLimits } from './response-limits.js'
import { declaredTasks, TASKS_EXTENSION } from '../routing/tasks-extension.js'
import { unshellTask } from './task-results.js'
import type { UpstreamTask } from './task-results.js'
import { listAllPages, ToolListCache } from './tool-cache.js'
import type { ConnectSpec } from './transport.js'
import { transportKind } from './transports.js'
import type { FirstConnects, StartingState } from './warm-start.js'
import { parseUserServiceName } from '../naming/names.js'
import type { Tracing } from '../tracing/index.js'

/** What every client of one pool shares; built once by the pool. */
export interface ClientContext {
  log: Logger
  breakers: BreakerAdmission
  firstConnects: FirstConnects
  /** The connection options that are the pool's, not the client's. */
  connection: Pick<ConnectionOptions, 'clientInfo' | 'schemaValidator' | 'fetch' | 'httpTransport' | 'eras' | 'traceHeaders'>
  /** Set only while tracing is on: each tools/call gets a client span, its trace context in `_meta` (src/tracing/). */
  tracing?: Tracing | undefined
  /** The answer bounds of a client key's connections. */
  limits: (key: string) => ResponseLimits | undefined
  /** Deadline of a whole tools/list (all pages). */
  listTimeoutMs: number
  /** tools/call deadline when neither the call nor the spec gives one. */
  callTimeoutMs: number
  /** How long a resources, templates or prompts list is reused (the tool list's TTL). */
  surfaceTtlMs: number
  /** A tools/call is being replayed (counted in the pool's resilience stats). */
  onRetry: () => void
  /** A client's server said its tool list changed (`key`: the client key). */
  onToolsChanged: (key: string) => void
  /** Whether someone waits for the tool list changes of a client key (pool.watch). */
  isWatched: (key: string) => boolean
}

/** Per-call options of tools/call (the pool's callTool). */
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
  /**
   * The caller can answer the server's questions (a 2026-07-28 client on /mcp), or retries with
   * its answers: its capabilities are declared to the server for this call, and the retry's
   * `inputResponses` and `requestState` (the server's own, byte for byte) sent in the params.
   */
  input?: InputRound | undefined
  /** The caller takes a task (REST's opt-in): the Tasks extension is declared, and nothing else. */
  tasks?: boolean | undefined
}

/** A 2026-07-28 server's `input_required` answer to a tools/call, as it sent it. */
export interface UpstreamInputRequired {
  resultType: 'input_required'
  inputRequests?: Record<string, unknown>
  requestState?: string
}

/**
 * What a tools/call answers: the tool's result, the server's request for input (never fulfilled
 * here), or the task that runs it (Tasks extension, only for a caller that declared it).
 */
export type UpstreamCallResult = CallToolResult | UpstreamInputRequired | UpstreamTask

export class PooledClient {
  /** Caller key + config hash. */
  readonly id: string
  readonly key: string
  readonly spec: ConnectSpec
  readonly toolList = new ToolListCache()
  readonly surfaceLists = new SurfaceLists()
  /** Operations running on it; the pool's idle timer and retirement wait for 0. */
  inFlight = 0
  lastUsedAt = Date.now()
  idleTimer: NodeJS.Timeout | undefined
  /** Why it was retired: out of the pool, closed when its last running call ends. */
  retired: string | undefined
  readonly #ctx: ClientContext
  readonly #secrets: string[]
  #conn: Connection | undefined
  /** The options the current connection was opened with (its callbacks are this client's). */
  #connOptions: ConnectionOptions | undefined
  #connecting: Promise<Connection> | undefined
  /** Why the last connect attempt failed (cleared by a successful one). */
  #connectError: string | undefined
  #closed = false
  /** Aborted when the client closes: a connect under way (a stdio first start may take a minute) stops with it. */
  readonly #closing = new AbortController()

  constructor (id: string, key: string, spec: ConnectSpec, context: ClientContext) {
    this.id = id
    this.key = key
    this.spec = spec
    this.#ctx = context
    this.#secrets = [...Object.values(spec.headers ?? {}), ...Object.values(spec.env ?? {})]
  }

  /**
   * Someone waits for this server's tool list changes (or no longer does): a 2026-07-28
   * connection opens (or closes) its subscriptions/listen; a later connection asks isWatched.
   */
  setWatched (on: boolean): void {
    const conn = this.#conn
    if (conn !== undefined && this.#connOptions !== undefined) watchToolChanges(conn, this.#connOptions, on)
  }

  get connected (): boolean {
    return this.#conn !== undefined && !this.#conn.closed
  }

  /** Closed (evicted, idle, retired, the pool closed): operations fail, a connect under way is abandoned. */
  get closed (): boolean {
    return this.#closed
  }

  /** Abort listeners on the connection's transport-wide signal (GET /status). */
  abortListenerCount (): number {
    return this.#conn?.handle.abortListenerCount() ?? 0
  }

  /** Defined while this client's first start (warm-start.ts) is under way. */
  starting (): StartingState | undefined {
    return this.#ctx.firstConnects.starting(this.id, this.spec.type, this.#connecting !== undefined, this.#connectError)
  }

  /** An error's message with this config's secrets (header and env values) redacted. */
  safeMessage (err: unknown): string {
    const raw = err instanceof Error ? err.message : String(err)
    return redactSecrets(raw, this.#secrets).slice(0, 2000)
  }

  /** The UpstreamError a failure becomes (classify.ts), secrets redacted. */
  toUpstream (err: unknown, op: 'list' | 'call', timeoutMs?: number): UpstreamError {
    return toUpstreamError(err, op, op === 'list' ? this.#ctx.listTimeoutMs : timeoutMs, (e) => this.safeMessage(e))
  }

  /** Single-flight tools/list refresh; the cache takes the list only on success and while the client is open. */
  refresh (): Promise<Tool[]> {
    return this.toolList.refresh(async () => await this.#listFromServer(), () => !this.#closed)
  }

  /**
   * tools/call, replayed once on a fresh connection when `retrySafe` and the failure certainly
   * got no answer. Throws UpstreamError.
   */
  async call (name: string, args: Record<string, unknown> | undefined, options: CallToolOptions & { input?: undefined }): Promise<CallToolResult>
  async call (name: string, args: Record<string, unknown> | undefined, options: CallToolOptions): Promise<UpstreamCallResult>
  async call (name: string, args: Record<string, unknown> | undefined, options: CallToolOptions): Promise<UpstreamCallResult> {
    // The SDK adds an abort listener to the signal it is given and never removes it, so it gets a
    // per-call signal; the caller's long-lived signal then only carries our own removable link.
    const perCall = new AbortController()
    const onAbort = (): void => { perCall.abort(options.signal?.reason) }
    options.signal?.addEventListener('abort', onAbort, { once: true })
    const timeout = options.timeoutMs ?? this.spec.timeoutMs ?? this.#ctx.callTimeoutMs
    const deadline = Date.now() + timeout
    // Any progress notification means the server is running the call: never replayed after it.
    let responded = false
    const userProgress = options.onProgress
    const onProgress = userProgress === undefined ? undefined : (p: Progress): void => { responded = true; userProgress(p) }
    try {
      options.signal?.throwIfAborted()
      for (let attempt = 1; ; attempt++) {
        const conn = await this.waitFor(this.connect(), options.signal)
        const attemptTimeout = attempt === 1 ? timeout : Math.max(1, deadline - Date.now())
        try {
          const tool = this.#toolDefinition(name)
          const traced = this.#ctx.tracing === undefined ? undefined : { tracing: this.#ctx.tracing, serverId: serverIdOf(this.key) }
          const result = await callOnce(conn, name, args, attemptTimeout, perCall.signal, onProgress, tool, options.input, options.tasks === true, traced)
          this.#ctx.breakers.success(this.id)
          return result
        } catch (err) {
          if (options.signal?.aborted === true) throw new UpstreamError('GW_CANCELLED', `tools/call ${name} was cancelled by the caller`)
          if (err instanceof ProtocolError && err.code === MISSING_CLIENT_CAPABILITY) {
            this.#ctx.breakers.success(this.id)
            throw new InputUnavailableError(`tools/call failed: ${this.safeMessage(err)}`, (err.data as { requiredCapabilities?: unknown } | undefined)?.requiredCapabilities)
          }
          if (err instanceof JsonRpcError) {
            // The client's part of the call failed (it declined to declare, erred or left): no fault of the server.
            this.#ctx.breakers.success(this.id)
            throw new InputUnavailableError(`the MCP server asked the client for input, which failed: ${err.message}`)
          }
          if (isDeadConnection(err)) this.#drop(conn, 'tools/call failed on a dead connection')
          if (attempt === 1 && options.retrySafe === true && !responded && !this.#closed && deadline - Date.now() > 0 &&
            failedBeforeResponse(err, transportKind(conn.handle.type).closedMeansUnanswered)) {
            // The broken connection is out of the pool (dropped above, or already closed): the
            // next connect() opens a fresh one.
            if (this.#conn === conn) this.#drop(conn, 'tools/call failed before any answer; retrying once')
            this.#ctx.onRetry()
            this.#ctx.log.info(
              { mcpClient: this.key, tool: name, err: this.safeMessage(err) },
              'retrying a read-only/idempotent tools/call once on a fresh connection'
            )
            continue
          }
          this.#countFailure(err, 'call')
          throw this.toUpstream(err, 'call', timeout)
        }
      }
    } catch (err) {
      throw this.toUpstream(err, 'call')
    } finally {
      options.signal?.removeEventListener('abort', onAbort)
    }
  }

  /**
   * A resources, templates or prompts list (from the cache while fresh; surface.ts's SurfaceLists: one
   * fetch at a time, a `fresh` lookup at most once per FRESH_FLOOR_MS, a refusal remembered), a
   * resources/read, prompts/get or completion/complete. The server's own JSON-RPC error is thrown
   * as it is (the caller passes its code and data on); anything else as UpstreamError.
   */
  async surface (req: SurfaceRequest, options: { signal?: AbortSignal, timeoutMs: number }): Promise<unknown> {
    if (!isListRequest(req)) return await this.#surfaceOnce(req, options)
    const cached = this.surfaceLists.cached(req.method, this.#ctx.surfaceTtlMs, req.fresh === true)
    if (cached !== undefined) return cached
    // Shared by the callers of this list, so it runs on its own deadline and each caller waits with its own signal.
    const fetch = async (): Promise<unknown[]> => await this.#surfaceOnce(req, { timeoutMs: options.timeoutMs }) as unknown[]
    const shared = this.surfaceLists.load(req.method, fetch, () => !this.#closed)
    return await this.waitFor(shared, options.signal)
  }

  /** One surface request on the connection; a list is retried once on a dead connection (idempotent), nothing else is replayed. */
  async #surfaceOnce (req: SurfaceRequest, options: { signal?: AbortSignal, timeoutMs: number }): Promise<unknown> {
    const list = isListRequest(req)
    const signal = options.signal ?? new AbortController().signal
    const deadline = Date.now() + options.timeoutMs
    try {
      for (let attempt = 1; ; attempt++) {
        const conn = await this.waitFor(this.connect(), options.signal)
        let result: unknown
        let listBytes = 0
        let listItems = 0
        try {
          const lists = {
            maxBytes: this.#ctx.limits(this.key)?.maxMessageBytes ?? Infinity,
            onBytes: (bytes: number, items: number) => { listBytes = bytes; listItems = items }
          }
          result = await surfaceOnce(conn.client, req, Math.max(1, deadline - Date.now()), signal, lists)
          this.#ctx.breakers.success(this.id)
        } catch (err) {
          if (signal.aborted) throw new UpstreamError('GW_CANCELLED', `${req.method} was cancelled by the caller`)
          if (isDeadConnection(err)) {
            this.#drop(conn, `${req.method} failed on a dead connection`)
            if (list && attempt === 1 && !this.#closed && deadline > Date.now()) continue
          }
          this.#countFailure(err, list ? 'list' : 'call')
          if (isServerAnswer(err)) throw err
          throw toUpstreamError(err, list ? 'list' : 'call', options.timeoutMs, (e) => this.safeMessage(e), req.method)
        }
        // Counted with the tool lists (one slot per kind of list), after the breaker's verdict: a list
        // refused here is the tenant's, not the server's failure.
        if (list && !this.#closed) this.#keepList(`${this.id}\n${req.method}`, listBytes, listItems)
        return result
      }
    } catch (err) {
      if (isServerAnswer(err)) throw err
      throw toUpstreamError(err, list ? 'list' : 'call', options.timeoutMs, (e) => this.safeMessage(e), req.method)
    }
  }

  /**
   * The listed definition of `name`: the Client computes the 2026-07-28 `Mcp-Param-*` headers
   * and checks `structuredContent` against its outputSchema from it (the pool keeps the list;
   * the Client's own response cache is not used).
   */
  #toolDefinition (name: string): Tool | undefined {
    return this.toolList.tools?.find((t) => t.name === name)
  }

  /** Waits for a shared promise, giving up (GW_CANCELLED) when this caller's signal aborts. */
  async waitFor<T> (promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
    if (signal === undefined) return promise
    // The shared promise may reject after this caller left, with nobody else listening.
    promise.catch(() => {})
    if (signal.aborted) throw new UpstreamError('GW_CANCELLED', `The request to MCP server ${this.key} was cancelled by the caller`)
    let onAbort: (() => void) | undefined
    const aborted = new Promise<never>((_resolve, reject) => {
      onAbort = () => reject(new UpstreamError('GW_CANCELLED', `The request to MCP server ${this.key} was cancelled by the caller`))
      signal.addEventListener('abort', onAbort, { once: true })
    })
    try {
      return await Promise.race([promise, aborted])
    } finally {
      if (onAbort !== undefined) signal.removeEventListener('abort', onAbort)
    }
  }

  /** Single-flight connect: every caller of this client shares the same attempt. */
  connect (): Promise<Connection> {
    if (this.#closed) return Promise.reject(new UpstreamError('GW_UPSTREAM_ERROR', 'The MCP client was closed (registry change, eviction or shutdown)'))
    if (this.#conn !== undefined && !this.#conn.closed) return Promise.resolve(this.#conn)
    this.#connecting ??= this.#open().finally(() => { this.#connecting = undefined })
    return this.#connecting
  }

  /** Closes the connection and any connect under way (idempotent). */
  async close (why: string): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    this.#closing.abort()
    if (this.idleTimer !== undefined) clearTimeout(this.idleTimer)
    const limits = this.#ctx.limits(this.key)
    if (limits?.owner !== undefined) limits.lists?.release(limits.owner, this.id)
    this.#ctx.log.debug({ mcpClient: this.key, why }, 'closing MCP client')
    const conn = this.#conn
    this.#conn = undefined
    const pending = this.#connecting
    const closing: Array<Promise<void>> = []
    if (conn !== undefined) closing.push(this.#closeConnection(conn))
    // A connect still in flight is closed by openConnection itself when it sees `closed`.
    if (pending !== undefined) closing.push(pending.then(() => {}, () => {}))
    await Promise.all(closing)
  }

  /** The server's tool list, all pages; a client span `tools/list` while tracing is on. */
  async #listFromServer (): Promise<Tool[]> {
    return await this.#traced('tools/list', async () => await this.#listPages())
  }

  /** Runs one upstream request inside its client span (SPEC 18) while tracing is on; as it is otherwise. */
  async #traced<T> (method: string, run: () => Promise<T>): Promise<T> {
    const tracing = this.#ctx.tracing
    return tracing === undefined ? await run() : await tracing.upstream({ serverId: serverIdOf(this.key), method }, undefined, run)
  }

  async #listPages (): Promise<Tool[]> {
    const conn = await this.connect()
    // The deadline is the listing's own: a connect has its own, and a caller waiting for both
    // has its signal. Counted from the connect, a slow first start would fail the listing too.
    const deadline = Date.now() + this.#ctx.listTimeoutMs
    const maxBytes = this.#ctx.limits(this.key)?.maxMessageBytes
    let listed: { items: Tool[], bytes: number }
    try {
      try {
        listed = await listAllPages(conn.client, deadline, maxBytes)
      } catch (err) {
        // tools/list is idempotent, so a stale session or a dropped connection is re-initialised
        // and the listing retried once (docs/ARCHITECTURE.md#mcp-pool). Anything else (timeout, server error) is final.
        if (!isDeadConnection(err) || this.#closed) throw err
        this.#drop(conn, 'tools/list failed on a dead connection; retrying once')
        listed = await listAllPages((await this.connect()).client, deadline, maxBytes)
      }
    } catch (err) {
      this.#countFailure(err, 'list')
      throw err
    }
    this.#ctx.breakers.success(this.id)
    // Charged while the client is open (the cache takes the list only then); close() gives it back.
    if (!this.#closed) this.#keepList(this.id, listed.bytes, listed.items.length)
    return listed.items
  }

  /** Charges a list this client keeps to its owner's MCP_TENANT_LIST_BYTES and MCP_TENANT_LIST_ITEMS (KeptLists); throws past either. */
  #keepList (holder: string, bytes: number, items: number): void {
    const limits = this.#ctx.limits(this.key)
    if (limits?.owner !== undefined) limits.lists?.keep(limits.owner, holder, bytes, items)
  }

  /** Tells the breaker about a failed operation of a client still in use (breaker-admission.ts). */
  #countFailure (err: unknown, op: 'list' | 'call' | 'connect'): void {
    if (this.#closed) return
    this.#ctx.breakers.countFailure(this, err, op, (e) => this.safeMessage(e))
  }

  async #open (): Promise<Connection> {
    try {
      const connectTimeoutMs = this.#ctx.firstConnects.connectTimeoutMs(this.id, this.spec.type)
      // The connect is its `initialize` exchange (and, for stdio, the process's start).
      const conn = await this.#traced('initialize', async () => await this.#openOnce(connectTimeoutMs))
      this.#connectError = undefined
      this.#ctx.firstConnects.connected(this.id)
      return conn
    } catch (err) {
      this.#connectError = this.safeMessage(err)
      this.#countFailure(err, 'connect')
      throw err
    }
  }

  async #openOnce (connectTimeoutMs: number): Promise<Connection> {
    // The SDK never removes the abort listener it adds to a request's signal: each attempt gets
    // its own signal, linked to the client's by a listener removed when the attempt ends.
    const attempt = new AbortController()
    const onClosing = (): void => { attempt.abort() }
    this.#closing.signal.addEventListener('abort', onClosing, { once: true })
    try {
      const options: ConnectionOptions = {
        ...this.#ctx.connection,
        spec: this.spec,
        label: this.key,
        limits: this.#ctx.limits(this.key),
        logger: this.#ctx.log,
        connectTimeoutMs,
        safeMessage: (err) => this.safeMessage(err),
        abandoned: () => this.#closed,
        signal: attempt.signal,
        inUse: (conn) => this.#conn === conn,
        adopt: (conn) => {
          this.#conn = conn
          this.#connOptions = options
        },
        onClosed: (conn) => { if (this.#conn === conn) this.#conn = undefined },
        onDead: (conn, why) => { this.#drop(conn, why) },
        watched: () => this.#ctx.isWatched(this.key),
        onToolsChanged: () => {
          this.toolList.changed()
          this.#ctx.onToolsChanged(this.key)
          // Refresh in the background so the next listing is served fresh; failures keep the old list.
          if (!this.#closed && this.toolList.tools !== undefined) this.refresh().catch(() => {})
        }
      }
      return await openConnection(options)
    } finally {
      this.#closing.signal.removeEventListener('abort', onClosing)
    }
  }

  #drop (conn: Connection, why: string): void {
    if (this.#conn === conn) this.#conn = undefined
    if (!conn.closed) {
      this.#ctx.log.info({ mcpClient: this.key, why }, 'dropping MCP connection; the next request reconnects')
      this.#closeConnection(conn).catch(() => {})
    }
  }

  async #closeConnection (conn: Connection): Promise<void> {
    await closeConnection(conn, { label: this.key, logger: this.#ctx.log, safeMessage: (err) => this.safeMessage(err) })
  }
}

/** -32021, MissingRequiredClientCapability (MCP 2026-07-28). */
const MISSING_CLIENT_CAPABILITY = -32021

async function callOnce (
  conn: Connection,
  name: string,
  args: Record<string, unknown> | undefined,
  timeout: number,
  signal: AbortSignal,
  onProgress: ((p: Progress) => void) | undefined,
  toolDefinition: Tool | undefined,
  input: InputRound | undefined,
  tasks = false,
  traced: TracedServer | undefined = undefined
): Promise<UpstreamCallResult> {
  const relayed = input?.relay !== undefined ? input as RelayedCall['input'] : undefined
  // Progress never extends the deadline: a server that keeps reporting must still finish
  // within the call's timeout. A call that relays has a token in any case: it tags the call's
  // response stream, so what a legacy server sends on it reaches this call's client (relay.ts).
  const progress = onProgress !== undefined || relayed !== undefined ? trackProgress(conn.client, onProgress ?? ignoreProgress) : undefined
  // The questions a server asks the call's client end with the call: one it left behind would otherwise wait for an
  // answer (and hold one of the instance's waiting slots) for as long as the client never gives one.
  // A client that cannot be asked (it declared none of the capabilities: most /mcp clients) only hears the call's log
  // messages: nothing waits for it, so there is nothing to end (no controller, combined signal and error per call).
  const ended = relayed?.relay.ask !== undefined ? new AbortController() : undefined
  if (relayed !== undefined && progress !== undefined) {
    conn.relays ??= new Map()
    conn.relays.set(progress.token, { input: relayed, signal: ended !== undefined ? AbortSignal.any([signal, ended.signal]) : signal })
  }
  try {
    const meta: Record<string, unknown> = {}
    if (progress !== undefined) meta.progressToken = progress.token
    const params: Record<string, unknown> = { name, arguments: args ?? {} }
    // The caller's own capabilities for this call (a key of the request's envelope, which the
    // Client lets a call's _meta set): the server may ask it for input only as it declared.
    if (input !== undefined && conn.era === 'modern') {
      meta[CLIENT_CAPABILITIES_META_KEY] = inputCapabilities(input.capabilities, conn.tasks === true)
      // The call's log messages, at the level the client wants, when it can be told them.
      if (relayed?.relay.log !== undefined && relayed.relay.logLevel !== undefined) meta[LOG_LEVEL_META_KEY] = relayed.relay.logLevel
      if (input.inputResponses !== undefined) params.inputResponses = input.inputResponses
      if (input.requestState !== undefined) params.requestState = input.requestState
    } else if (tasks && conn.tasks === true) {
      meta[CLIENT_CAPABILITIES_META_KEY] = { extensions: { [TASKS_EXTENSION]: {} } }
    }
    if (Object.keys(meta).length > 0) params._meta = meta
    // `allowInputRequired`: an `input_required` answer is handed back as it came (the connection's
    // Client never fulfils one itself: connection.ts); the caller decides what becomes of it.
    const options = { timeout, signal, allowInputRequired: true, ...(toolDefinition !== undefined ? { toolDefinition: toolDefinition as ClientTool } : {}) }
    // A server that runs the call as a task: the task as it came, when the caller declared the Tasks extension.
    const takesTask = conn.tasks === true && (tasks || declaredTasks(input?.capabilities) !== undefined)
    let result: unknown = boundedInputRequests(traced === undefined
      ? await conn.client.callTool(params as { name: string }, options)
      : await tracedCall(traced, name, params, async () => await conn.client.callTool(params as { name: string }, options)))
    const task = taskOf(result, conn, takesTask)
    if (task !== undefined) return task
    // A caller that answers within the call: each round's questions asked of its client, the
    // call retried with the answers and the server's own requestState (relay.ts).
    for (let round = 1; isInputRequiredResult(result); round++) {
      // A caller that cannot be asked (it answers input_required itself) gets it as it came.
      if (relayed === undefined || !answersWithinCall(relayed.relay)) break
      if (round > MAX_ROUNDS) throw new InputUnavailableError(`tools/call failed: the MCP server still asked for input after ${MAX_ROUNDS} rounds`)
      const asked = result as UpstreamInputRequired
      params.inputResponses = await answerInputRequests(asked.inputRequests, relayed, signal)
      if (asked.requestState !== undefined) params.requestState = asked.requestState
      else delete params.requestState
      result = boundedInputRequests(traced === undefined
        ? await conn.client.callTool(params as { name: string }, options)
        : await tracedCall(traced, name, params, async () => await conn.client.callTool(params as { name: string }, options)))
      const later = taskOf(result, conn, takesTask)
      if (later !== undefined) return later
    }
    if (!isInputRequiredResult(result)) return result as CallToolResult
    // Only a caller that can answer gets it; a server that asks anyway (it was told no capability) is refused here.
    if (input === undefined) {
      throw new InputUnavailableError('tools/call failed: the MCP server answered input_required to a call that declared no client capabilities')
    }
    return result as UpstreamInputRequired
  } finally {
    progress?.end()
    if (progress !== undefined) conn.relays?.delete(progress.token)
    ended?.abort(new UpstreamError('GW_CANCELLED', 'The call ended before its client answered'))
  }
}

function ignoreProgress (): void {}

/** The server a traced tools/call goes to (its registry id, from the client key). */
interface TracedServer { tracing: Tracing, serverId: string }

/** A client key's server id: `user_{u}_service_{id}` (a tenant's) or the global server's id, without a relay suffix. */
function serverIdOf (key: string): string {
  const caller = callerKeyOf(key)
  return parseUserServiceName(caller)?.serverId ?? caller
}

/** One tools/call request inside its client span; `params._meta` gets the span's traceparent and tracestate. */
async function tracedCall<T> (traced: TracedServer, name: string, params: Record<string, unknown>, send: () => Promise<T>): Promise<T> {
  return await traced.tracing.upstream({ serverId: traced.serverId, method: 'tools/call', target: name }, params, send)
}

/**
 * The task a server answered, or undefined; a task for a call that did not declare the extension is
 * the server's fault. Only a connection whose transport shells task results (Connection.tasks) has any.
 */
function taskOf (result: unknown, conn: Connection, takesTask: boolean): UpstreamTask | undefined {
  if (conn.tasks !== true) return undefined
  const task = unshellTask(result)
  if (task === undefined || takesTask) return task
  throw new UpstreamError('GW_UPSTREAM_ERROR', 'tools/call failed: the MCP server answered a task to a call that did not declare the Tasks extension')
}

function inputCapabilities (declared: Record<string, unknown>, tasksOk: boolean): Record<string, unknown> {
  const caps: Record<string, unknown> = {}
  for (const name of INPUT_CAPABILITIES) if (declared[name] !== undefined) caps[name] = declared[name]
  // The Tasks extension, when the caller takes a task and the connection can poll one (Connection.tasks); no other extension.
  const tasks = tasksOk ? declaredTasks(declared) : undefined
  if (tasks !== undefined) caps.extensions = { [TASKS_EXTENSION]: tasks }
  return caps
}
