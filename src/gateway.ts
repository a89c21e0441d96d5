import { performance } from 'node:perf_hooks'
import { Ajv } from 'ajv'
import type { ValidateFunction } from 'ajv'
import type { Config } from './config.js'
import { HttpError } from './errors.js'
import type { ApprovalFacade, ApprovedCall } from './approvals/index.js'
import { InvokeBody } from './api/invoke.js'
import type { InvokeBodyT } from './api/invoke.js'
import { splitComma } from './routing/allow-list.js'
import type { AllowList } from './routing/allow-list.js'
import { CallObserver } from './routing/call-events.js'
import type { CallEnd, CallEvent, CallVia } from './routing/call-events.js'
import { CallerAbort } from './routing/signals.js'
import { entryError, newCallId, pendingEntry } from './routing/batch-entries.js'
import type { BatchEntry } from './routing/batch-entries.js'
import type { Diagnostic } from './routing/diagnostic.js'
import type { InvokeOutcome, ToolRouter } from './routing/router.js'
import type { PolicyLimits, ToolPolicy, ToolPolicyProvider } from './routing/policy.js'
import type { MetaCall } from './routing/meta.js'
import type { SurfaceServer, Unavailable } from './routing/source.js'
import { actingUserId, toolRequestTenant } from './routing/tenancy.js'
import { isBuiltinName } from './naming/builtin-names.js'
import { NO_ROUND, openRound, RequestStateSealer, sealRound } from './routing/input-rounds.js'
import type { RoundOpening } from './routing/input-rounds.js'
import type { ClientRelay } from './routing/client-relay.js'
import type { ParkedCalls } from './routing/parked-calls.js'
import { parkableRound } from './routing/parked-rounds.js'
import type { Caller, CallContext, InputRound, Tier, WorkspaceRequest } from './routing/types.js'
import { TIER_TRAITS } from './routing/types.js'
import { Listings } from './listing/listings.js'
import type { ListToolsRequest, ListToolsResponse, ToolSearchRequest, ToolSearchResponse } from './listing/listings.js'
import { roundScore } from './listing/tool-search.js'
import { renderTools } from './routing/formats.js'
import type { Tracing } from './tracing/index.js'
import type { InnerAnswer, InnerCall } from './code-mode/index.js'

/** What the gateway needs of approvals (ApprovalFacade, src/approvals/): holding a call, and waiting inline for its decision. */
export type CallHold = Pick<ApprovalFacade, 'hold' | 'awaitDecision'>

export interface GatewayOptions {
  /** Tool policies; none: every call is allowed and nothing is held. */
  policies?: ToolPolicyProvider | undefined
  /** Where calls the policy holds go; none: a policy's requireApproval cannot hold (the router runs the call). */
  approvals?: CallHold | undefined
  /** The outcome observer (the journal and the metrics subscribe); default a fresh one. */
  calls?: CallObserver | undefined
  /**
   * Seals and opens the requestState handles of `input_required` rounds (REST and /mcp alike,
   * src/routing/input-rounds.ts); default one with a key of this process (no other instance continues a call).
   */
  requestState?: RequestStateSealer | undefined
  /**
   * Where calls wait while their caller answers a legacy server's questions in a later request
   * (src/routing/parked-calls.ts); absent: such a question is refused to the server, the call ends as its tool says.
   */
  parked?: ParkedCalls | undefined
  /** The listings (with their search indexes); default: over the router, without embeddings. */
  listings?: Listings | undefined
  /** OpenTelemetry (src/tracing/): each call runs inside its span. Default off. */
  tracing?: Tracing | undefined
}

export interface InvokeOptions {
  /** Receives the tool's progress notifications (an MCP client's progressToken on /mcp). */
  onProgress?: CallContext['onProgress'] | undefined
  /** Who asks, for the observer: POST /invoke (the default), a batch entry, or an /mcp tools/call. */
  via?: Exclude<CallVia, 'approval'> | undefined
  /**
   * The /mcp client the call's questions (a legacy one) and log messages are relayed to while it
   * runs (InputRound.relay), beside the round its body declares (clientCapabilities, inputResponses, requestState).
   */
  relay?: ClientRelay | undefined
  /** A code-mode script's inner call (`via: 'script'`): the `run_tools_script` call it belongs to (the journal's tree). */
  parentCallId?: string | undefined
}

const NO_OPTIONS: InvokeOptions = {}
const IN_BATCH: InvokeOptions = { via: 'batch' }

/**
 * A call's context. Its `signal` is read through: a CallerAbort makes its AbortSignal only when a
 * source reads it, and the deadline listens to `abortSource` without one. A class, not an object
 * literal with a getter: V8 builds a literal with an accessor through a slow path on every call.
 */
class InvokeContext implements CallContext {
  callId = ''
  readonly abortSource: CallerAbort | undefined
  readonly #signal: AbortSignal | undefined

  constructor (
    readonly caller: Caller,
    signal: AbortSignal | CallerAbort,
    readonly workspace: CallContext['workspace'],
    readonly timeoutMs: number,
    readonly onProgress: CallContext['onProgress'],
    readonly input: InputRound | undefined,
    readonly tasks: boolean | undefined
  ) {
    this.abortSource = signal instanceof CallerAbort ? signal : undefined
    this.#signal = signal instanceof CallerAbort ? undefined : signal
  }

  get signal (): AbortSignal {
    return this.#signal ?? (this.abortSource as CallerAbort).signal
  }
}

/**
 * One call on its way: what it learns (the acting tenant, the serving server), then its outcome,
 * published to the observer once answered. A class with every field set in the constructor: one
 * object of one shape per call, which is also the event the journal and the metrics read.
 */
class Call implements CallEvent {
  end: CallEnd = 'finished'
  outcome: InvokeOutcome = UNANSWERED
  userId: string | undefined = undefined
  serverId: string | undefined = undefined
  /** The tier the name resolved to, once it did. */
  route: Tier | undefined = undefined
  readonly arguments: unknown

  constructor (
    readonly via: CallVia,
    readonly callId: string,
    readonly name: string,
    args: unknown,
    readonly keyId: string | undefined,
    readonly startedAt: number,
    readonly approvalId: string | undefined,
    /** Ask the source for the trace. */
    readonly trace: boolean,
    readonly parentCallId: string | undefined = undefined
  ) {
    this.arguments = args
  }
}

const UNANSWERED: InvokeOutcome = { ok: false, error: new HttpError('GW_INTERNAL', 'The call has not been answered'), toolMs: 0 }

const REFUSED = Symbol('refused')

/** A party's tenant as a parked call's owner names it (`_`: none; a refused one parks nothing, #invoke refuses it first). */
function tenantKey (tenant: string | undefined | typeof REFUSED): string {
  return typeof tenant === 'string' ? tenant : '_'
}

/**
 * The tools' facade (docs/ARCHITECTURE.md#facades): listing, invoking and batches, one method per
 * HTTP operation; routes call exactly one of these. It applies tenancy (who may act for which
 * userId) and request shaping on top of the router, and publishes every answered call to `calls`.
 */
export class Gateway {
  /** The outcome observer: every answered call, once (docs/ARCHITECTURE.md#journal). */
  readonly calls: CallObserver
  readonly #router: ToolRouter
  readonly #config: Config
  readonly #validateInvoke: ValidateFunction
  readonly #policies: ToolPolicyProvider | undefined
  readonly #approvals: CallHold | undefined
  readonly #sealer: RequestStateSealer
  readonly #parked: ParkedCalls | undefined
  /** Set only while tracing is on: the off path is one undefined check per call. */
  readonly #tracing: Tracing | undefined
  /** Listings, their renderings and search indexes (listing/listings.ts). */
  readonly listings: Listings

  constructor (config: Config, router: ToolRouter, opts: GatewayOptions = {}) {
    this.#config = config
    this.#router = router
    this.calls = opts.calls ?? new CallObserver()
    this.#policies = opts.policies
    this.#approvals = opts.approvals
    this.#sealer = opts.requestState ?? new RequestStateSealer()
    this.#parked = opts.parked
    this.#tracing = opts.tracing?.enabled === true ? opts.tracing : undefined
    this.listings = opts.listings ?? new Listings(router)
    this.#validateInvoke = new Ajv({ strict: false, allErrors: false }).compile(InvokeBody)
  }

  /**
   * GET /tools (and /mcp's tools/list): the allow-list's listing for the tenant the caller acts
   * for, under its policy (listing/listings.ts: cached against every source's catalog version
   * and the policy, so a change on any instance is seen at once).
   */
  async listTools (query: ListToolsRequest, caller: Caller, signal: AbortSignal): Promise<ListToolsResponse> {
    const userId = toolRequestTenant(caller, query.userId, { mcp: splitComma(query.mcp) })
    // Fresh in the cache on almost every listing: no await then (the same object effective() answers).
    const policy = this.#policies?.effectiveNow?.(userId) ?? await this.#policy(userId)
    return await this.listings.render(query, { userId, keyId: caller.keyId, policy, signal })
  }

  /**
   * Search mode at /mcp: the tools a `tool_search` call found join the caller's search-mode
   * listing of this allow-list (Listings.remember); true when the listing changed.
   */
  async rememberFound (query: ListToolsRequest, caller: Caller, names: readonly string[]): Promise<boolean> {
    const userId = toolRequestTenant(caller, query.userId, { mcp: splitComma(query.mcp) })
    return await this.listings.remember(query, { userId, keyId: caller.keyId }, names)
  }

  /** GET /tools/search: the allow-list's tools ranked against `q` (SPEC 17), in `format`, under the same tenancy and policy as listTools. */
  async searchTools (query: ToolSearchRequest, caller: Caller, signal: AbortSignal): Promise<ToolSearchResponse> {
    const allow: AllowList = { functions: splitComma(query.functions), mcp: splitComma(query.mcp) }
    const userId = toolRequestTenant(caller, query.userId, { mcp: allow.mcp })
    const { matches, listing } = await this.listings.search(query.q, query.limit ?? 10, allow, { userId, policy: await this.#policy(userId), signal })
    return {
      tools: renderTools(matches.map((m) => m.tool), query.format ?? 'openai'),
      scores: matches.map((m) => roundScore(m.score)),
      total: listing.tools.length,
      unresolved: listing.unresolved,
      unavailable: listing.unavailable
    }
  }

  /**
   * /mcp's resources, prompts and completion: the MCP servers the allow-list selects (tiers 2, 3
   * and 5, tier 2 only ever the tenant's), with the tenant's tool policy, under the same tenancy
   * rule as listTools (mcp-server/surface-handlers.ts decides each item against the policy).
   */
  async surface (
    query: ListToolsRequest,
    caller: Caller,
    signal: AbortSignal
  ): Promise<{ servers: SurfaceServer[], unavailable: Unavailable[], policy: ToolPolicy | undefined }> {
    const mcp = splitComma(query.mcp)
    const userId = toolRequestTenant(caller, query.userId, { mcp })
    const policy = await this.#policy(userId)
    const { servers, unavailable } = await this.#router.surface({ functions: splitComma(query.functions), mcp }, { userId, signal })
    return { servers, unavailable, policy }
  }

  async catalog (
    requestedUserId: string | undefined,
    caller: Caller,
    signal: AbortSignal
  ): Promise<{ tools: unknown[], unavailable: Unavailable[], diagnostics: Diagnostic[] }> {
    const userId = actingUserId(caller, requestedUserId)
    const { tools, unavailable } = await this.#router.catalog({ userId, signal })
    const diagnostics: Diagnostic[] = tools.filter((t) => t.shadowedBy !== null).map((t) => ({
      type: 'shadowed',
      name: t.name,
      route: t.route,
      source: t.source,
      exposedAs: null,
      shadowedBy: t.shadowedBy ?? undefined,
      message: `${t.route} tool '${t.name}' from '${t.source}' is shadowed by ${t.shadowedBy ?? ''}`
    }))
    return { tools, unavailable, diagnostics }
  }

  /**
   * One call. Request-level failures are `{ ok: false }` with an HttpError. `onProgress` (from
   * an MCP client's progressToken on /mcp) receives the tool's progress notifications.
   */
  async invoke (body: InvokeBodyT, caller: Caller, signal: AbortSignal | CallerAbort, opts: InvokeOptions = NO_OPTIONS): Promise<InvokeOutcome> {
    const via = opts.via ?? 'invoke'
    // An approver key decides calls, it never makes them (the routes refuse it first; this is the rule itself).
    if (caller.role === 'approver') return this.refused(via, body.name, new HttpError('GW_FORBIDDEN', 'An approver key cannot invoke tools'), body.callId)
    const call = await this.#run(body, caller, signal, opts.onProgress, via, undefined, opts.relay, opts.parentCallId)
    const held = call.outcome
    if (!held.ok || held.pending === undefined) return held
    // Held: answered (and published) once the inline wait for a decision is over.
    const answer = await this.#awaitDecision(held, body.waitForApprovalMs ?? 0, signal instanceof CallerAbort ? signal.signal : signal)
    call.end = answer === held ? 'held' : 'decided'
    call.outcome = answer
    this.calls.publish(call)
    return answer
  }

  /**
   * A code-mode script's inner call (SPEC 19): made as the `run_tools_script` call that runs the
   * script (its tenant, API key, allow-list and workspace; never a checkpoint of its own), through
   * the same path as POST /invoke (tenancy, policy, approvals, journal), journaled under the
   * script's callId. A held call is not waited for: the script gets GW_APPROVAL_PENDING.
   */
  async invokeInner (call: InnerCall, parent: MetaCall, signal: AbortSignal): Promise<InnerAnswer> {
    const { checkpoint: _checkpoint, ...workspace } = parent.ctx.workspace
    const body: InvokeBodyT = {
      name: call.name,
      arguments: call.arguments,
      callId: newCallId(),
      ...(parent.userId !== undefined ? { userId: parent.userId } : {}),
      ...(parent.allow !== undefined ? { allow: { functions: [...parent.allow.functions ?? []], mcp: [...parent.allow.mcp ?? []] } } : {}),
      context: workspace as InvokeBodyT['context']
    }
    const outcome = await this.invoke(body, parent.ctx.caller, signal, { via: 'script', parentCallId: parent.ctx.callId })
    if (!outcome.ok) return { callId: body.callId as string, isError: true, output: '', error: { code: outcome.error.code, message: outcome.error.message } }
    const r = outcome.result
    return { callId: r.callId, isError: r.isError, output: r.output, error: r.error }
  }

  /**
   * Runs an approved call as its maker made it (ApprovalFacade.decide, on the instance that won
   * the decision): not held again, journaled with its approvalId, bounded by its own deadline.
   */
  async runApproved (approved: ApprovedCall): Promise<InvokeOutcome> {
    const body: InvokeBodyT = {
      name: approved.name,
      arguments: approved.arguments,
      callId: approved.callId,
      ...(approved.userId !== undefined ? { userId: approved.userId } : {}),
      ...(approved.allow !== undefined ? { allow: approved.allow } : {}),
      ...(approved.context !== undefined ? { context: approved.context as InvokeBodyT['context'] } : {}),
      // A call that can be asked for input runs so when approved: its round's handle carries the approval.
      ...(approved.clientCapabilities !== undefined ? { clientCapabilities: approved.clientCapabilities } : {}),
      ...(approved.inputResponses !== undefined ? { inputResponses: approved.inputResponses } : {}),
      ...(approved.requestState !== undefined ? { requestState: approved.requestState } : {})
    }
    const maker: Caller = {
      userId: approved.userId,
      isAdmin: approved.caller.isAdmin,
      ...(approved.caller.keyId !== undefined ? { keyId: approved.caller.keyId } : {})
    }
    return (await this.#run(body, maker, new AbortController().signal, undefined, 'approval', approved.approvalId)).outcome
  }

  /**
   * A call refused before it became one (a malformed batch entry, an approver key, an MCP
   * exchange's spent call budget): published like every answered call, and returned as the outcome.
   */
  refused (via: CallVia, name: string, error: HttpError, callId?: string): InvokeOutcome & { ok: false } {
    const call = new Call(via, callId ?? '', name, undefined, undefined, performance.now(), undefined, false)
    const outcome = { ok: false as const, error, toolMs: 0 as const }
    call.end = 'refused'
    call.outcome = outcome
    this.calls.publish(call)
    return outcome
  }

  /**
   * One call, run and published. A held call is not published here: its caller's answer is (a
   * pending one, or the decision's), and the journal records it when it is decided.
   */
  async #run (
    body: InvokeBodyT,
    caller: Caller,
    signal: AbortSignal | CallerAbort,
    onProgress: CallContext['onProgress'],
    via: CallVia,
    approvalId: string | undefined,
    relay?: ClientRelay,
    parentCallId?: string
  ): Promise<Call> {
    // The observer's one hook: /invoke, each call of /invoke/batch, /mcp's tools/call and approved calls all come here.
    const calls = this.calls
    // A retry of an input_required round is the same call: its id, and the approval it passed, come from its handle.
    const opened = this.#openRound(body, caller)
    const round: RoundOpening = relay === undefined || !opened.ok ? opened : { ...opened, input: { capabilities: {}, ...opened.input, relay } }
    const callId = (round.ok ? round.callId : undefined) ?? body.callId ?? newCallId()
    // A listener that keeps the trace (the journal) gets it whether or not the caller asked for it in the result.
    const call = new Call(via, callId, body.name, body.arguments, caller.keyId, performance.now(), approvalId ?? (round.ok ? round.approvalId : undefined),
      body.trace === true || calls.wantsTrace, parentCallId)
    const tracing = this.#tracing
    const roundBody = body.callId === callId ? body : { ...body, callId }
    const outcome = !round.ok
      ? { ok: false as const, error: round.error, toolMs: 0 as const }
      : tracing === undefined
        ? await this.#runRound(roundBody, caller, signal, onProgress, call, round.input)
        : await tracing.toolCall(call, async () => await this.#runRound(roundBody, caller, signal, onProgress, call, round.input))
    call.outcome = outcome
    if (outcome.ok && outcome.pending !== undefined) return call
    // Before publishing: no listener (journal, metrics, the approvals' store) sees the server's own state.
    if (outcome.ok && outcome.result.inputRequired !== undefined) {
      sealRound(this.#sealer, outcome.result, body, { tenant: call.userId, keyId: caller.keyId }, call)
    }
    if (call.userId === undefined && !caller.isAdmin) call.userId = caller.userId
    calls.publish(call)
    if (outcome.ok && body.trace !== true) outcome.result.trace = null
    return call
  }

  /** A round of a call (#invoke), or of a parked one (parked-rounds.ts). */
  async #runRound (
    body: InvokeBodyT,
    caller: Caller,
    signal: AbortSignal | CallerAbort,
    onProgress: CallContext['onProgress'],
    call: Call,
    input: InputRound | undefined
  ): Promise<InvokeOutcome> {
    // The common call (no input round): no closure, no extra promise.
    if (this.#parked === undefined || input === undefined) return await this.#invoke(body, caller, signal, onProgress, call, input)
    const invoke = async (round: InputRound | undefined, own?: AbortSignal): Promise<InvokeOutcome> =>
      await this.#invoke(body, caller, own ?? signal, onProgress, call, round)
    return await parkableRound(this.#parked, {
      owner: { tenant: tenantKey(this.#tenantOf(body, caller)), keyId: caller.keyId ?? '' },
      input,
      callerSignal: signal instanceof CallerAbort ? signal.signal : signal,
      invoke,
      call: { callId: body.callId ?? call.callId, name: body.name, startedAt: call.startedAt, route: () => call.route }
    })
  }

  /** The tenant a call acts for (toolRequestTenant; undefined: none), REFUSED when the rule refuses it (#invoke refuses the call then). */
  #tenantOf (body: InvokeBodyT, caller: Caller): string | undefined | typeof REFUSED {
    try {
      return toolRequestTenant(caller, body.userId, { toolName: body.name, mcp: body.allow?.mcp })
    } catch {
      return REFUSED
    }
  }

  async #invoke (
    body: InvokeBodyT,
    caller: Caller,
    signal: AbortSignal | CallerAbort,
    onProgress: CallContext['onProgress'],
    call: Call,
    input: InputRound | undefined
  ): Promise<InvokeOutcome> {
    let userId: string | undefined
    try {
      // The same rule as listing: an admin (every caller in open mode) may name the tenant through
      // an encoded name alone, a tenant key never names another tenant.
      userId = toolRequestTenant(caller, body.userId, { toolName: body.name, mcp: body.allow?.mcp })
    } catch (err) {
      if (err instanceof HttpError) return { ok: false, error: err, toolMs: 0 }
      throw err
    }
    call.userId = userId
    try {
      // Fresh in the cache on almost every call: no await then.
      const policy = this.#policies?.effectiveNow?.(userId) ?? await this.#policy(userId)
      const limits = policy?.limits ?? {}
      const workspace = body.context ?? {}
      const callId = body.callId ?? newCallId()
      const approvals = this.#approvals
      const actingFor = userId
      const outcome = await this.#router.invoke({
        name: body.name,
        arguments: body.arguments ?? {},
        callId,
        userId,
        // Fixed-shape literals (absent = undefined) rather than conditional spreads: this runs on every call.
        approved: call.approvalId !== undefined,
        hold: approvals === undefined
          ? undefined
          : async (entry, rule, args) => await approvals.hold({
            userId: actingFor,
            name: body.name,
            callId,
            rule,
            route: entry.route,
            arguments: args as Record<string, unknown>,
            allow: body.allow,
            context: body.context,
            caller: { isAdmin: caller.isAdmin, keyId: caller.keyId },
            clientCapabilities: body.clientCapabilities,
            inputResponses: body.inputResponses,
            requestState: body.requestState
          }),
        allow: body.allow,
        includeTrace: call.trace,
        onResolved: (entry) => {
          call.route = entry.route
          if (TIER_TRAITS[entry.route].selectedBy === 'mcp') call.serverId = entry.source
        },
        policy,
        outputMaxChars: limits.outputMaxChars,
        // Tools see the tenant the call acts for (an admin acting for a userId is that tenant).
        ctx: new InvokeContext(
          { userId, isAdmin: caller.isAdmin, keyId: caller.keyId },
          signal,
          Object.keys(limits).length === 0 ? workspace : { ...workspace, limits: underCeilings(workspace.limits, limits) },
          Math.min(this.#config.invokeTimeoutMs, limits.timeoutMs ?? Infinity),
          onProgress,
          input,
          body.task
        )
      })
      // A task's handle is bound to the tenant the call acted for (tasks.ts).
      if (outcome.ok && outcome.result.task !== undefined) outcome.result.task.tenant = userId
      return outcome
    } catch (err) {
      if (err instanceof HttpError) return { ok: false, error: err, toolMs: 0 }
      throw err
    }
  }

  /**
   * The call's input round from its body (openRound), its handle opened for the tenant the call
   * acts for: the rule #invoke applies, where a request that breaks it is refused, handle or not.
   */
  #openRound (body: InvokeBodyT, caller: Caller): RoundOpening {
    if (body.clientCapabilities === undefined && body.inputResponses === undefined && body.requestState === undefined) return NO_ROUND
    const tenant = this.#tenantOf(body, caller)
    // A call whose tenant the rule refuses gets no round: #invoke refuses the call itself.
    if (tenant === REFUSED) return NO_ROUND
    return openRound(this.#sealer, body, { tenant, keyId: caller.keyId })
  }

  /** The tenant's effective tool policy; a store that cannot be read is a 503, never a call without its policy. */
  async #policy (userId: string | undefined): Promise<ToolPolicy | undefined> {
    if (this.#policies === undefined) return undefined
    try {
      return await this.#policies.effective(userId)
    } catch (err) {
      const code = (err as { code?: unknown } | null)?.code
      if (code === 'GW_REGISTRY_UNAVAILABLE') {
        throw new HttpError('GW_REGISTRY_UNAVAILABLE', 'The tool policy cannot be read: the registry (Redis) does not answer')
      }
      throw err
    }
  }

  /** Waits inline (waitForApprovalMs) for a held call's outcome; still pending past it: the pending outcome. */
  async #awaitDecision (held: InvokeOutcome & { ok: true }, waitMs: number, signal: AbortSignal): Promise<InvokeOutcome> {
    const approvalId = held.pending?.approvalId
    if (this.#approvals === undefined || approvalId === undefined || waitMs <= 0) return held
    const result = await this.#approvals.awaitDecision(approvalId, waitMs, signal)
    return result === undefined ? held : { ok: true, result }
  }

  /**
   * Runs calls concurrently (bounded) and returns results in order. Each entry is validated
   * on its own: one bad call never fails the batch.
   */
  async invokeBatch (calls: unknown[], caller: Caller, signal: AbortSignal): Promise<{ results: BatchEntry[], toolMs: number }> {
    if (calls.length > this.#config.batchMaxCalls) {
      throw new HttpError('GW_BAD_REQUEST', `body/calls must have at most ${this.#config.batchMaxCalls} entries`)
    }
    const results: BatchEntry[] = new Array(calls.length)
    let toolMs = 0
    let next = 0
    // The last call of each workspace lane: a built-in call waits for the one listed before it on the same
    // workspace (docs/ARCHITECTURE.md#result-and-trace). Calls are taken in list order, so the call waited for
    // has always started, and a waiting worker cannot deadlock the pool.
    const lanes = new Map<string, Promise<unknown>>()
    const worker = async (): Promise<void> => {
      while (next < calls.length) {
        const index = next++
        let call = calls[index]
        if (!this.#validateInvoke(call)) {
          const err = this.#validateInvoke.errors?.[0]
          const where = err ? `calls/${index}${err.instancePath}` : `calls/${index}`
          const error = new HttpError('GW_BAD_REQUEST', `body/${where} ${err?.message ?? 'is invalid'}`)
          results[index] = entryError(call, error)
          this.refused('batch', '', error)
          continue
        }
        // The id is fixed here, so that an entry refused before reaching a tool carries it too.
        const body = call as InvokeBodyT
        // A retry of an input_required round takes its callId from its handle.
        if (body.callId === undefined && body.requestState === undefined) call = { ...body, callId: newCallId() }
        const lane = workspaceLane(body, caller)
        const before = lane === undefined ? undefined : lanes.get(lane)
        const invoked = (before === undefined ? Promise.resolve() : before).then(async () => await this.invoke(call as InvokeBodyT, caller, signal, IN_BATCH))
        if (lane !== undefined) lanes.set(lane, invoked.catch(() => undefined))
        const outcome = await invoked
        if (outcome.ok && outcome.pending !== undefined) {
          results[index] = pendingEntry(outcome.result, outcome.pending.approvalId)
        } else if (outcome.ok) {
          toolMs += outcome.result.toolMs
          results[index] = outcome.result
        } else {
          results[index] = entryError(call, outcome.error)
        }
      }
    }
    await Promise.all(Array.from({ length: Math.min(this.#config.batchConcurrency, calls.length) }, worker))
    return { results, toolMs }
  }
}

/**
 * The workspace a batch call works on, when it is a built-in (the only tier that touches a workspace):
 * the acting tenant as the body names it plus the workspace the context selects. Calls of one lane run
 * in the order listed, so a read_file sees the write_file before it; other calls run concurrently.
 */
function workspaceLane (body: InvokeBodyT, caller: Caller): string | undefined {
  if (!isBuiltinName(body.name)) return undefined
  const ctx = body.context
  return JSON.stringify([body.userId ?? caller.userId ?? null, ctx?.workspaceRoot ?? null, ctx?.workspaceId ?? null])
}

/** A request's context.limits under a policy's ceilings: each key is the lower of the two. */
function underCeilings (requested: WorkspaceRequest['limits'], ceilings: PolicyLimits): WorkspaceRequest['limits'] {
  const out: Record<string, number> = { ...requested }
  for (const key of ['readMaxChars', 'commandTimeoutMs', 'bashLogChars', 'maxProcessOutputChars', 'outputMaxChars'] as const) {
    const ceiling = ceilings[key]
    if (ceiling !== undefined) out[key] = Math.min(out[key] ?? Infinity, ceiling)
  }
  return out
}
