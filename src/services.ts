import { randomUUID } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import { WorkspaceFacade, createBuiltins } from './builtin/index.js'
import type { Builtins } from './builtin/index.js'
import type { Config } from './config.js'
import { parseDuration } from './config.js'
import { HttpError, StartupError } from './errors.js'
import { ApprovalFacade, createApprovals } from './approvals/index.js'
import { admitInnerCall, createCluster, RedisWorkingSets } from './cluster/index.js'
import type { ClusterTokens, Coordination, LimiterStores, PeerClient } from './cluster/index.js'
import { redisTargetOf } from './redis/index.js'
import { createJournal } from './journal/index.js'
import type { Journal } from './journal/index.js'
import type { Logger } from './logger.js'
import { Gateway } from './gateway.js'
import { FunctionSource } from './functions/source.js'
import { loadFunctions } from './functions/loader.js'
import { LocalMcpSource } from './local-mcp/source.js'
import { loadLocalMcpServices } from './local-mcp/loader.js'
import { RegistryFacade } from './registry/facade.js'
import { PolicyService } from './policy/service.js'
import { createRegistryStore } from './registry/create-store.js'
import type { ListingListener, RegistryStore } from './registry/types.js'
import { createRemoteMcp, remoteMcpSettings } from './remote-mcp/index.js'
import type { McpConnector, ServerDirectory } from './remote-mcp/index.js'
import { countUnavailable, gatewayStatus, readiness } from './status.js'
import type { GatewayStatus, Readiness, ServiceCounters } from './status.js'
import { ToolRouter } from './routing/router.js'
import { Listings } from './listing/listings.js'
import { ToolSearchTool } from './listing/tool-search.js'
import { ScriptTool } from './code-mode/index.js'
import { GuardrailEngine } from './guardrails/engine.js'
import { metaToolSet } from './routing/meta.js'
import type { Embedder } from './search/index.js'
import { CallObserver } from './routing/call-events.js'
import type { ToolSource } from './routing/source.js'
import type { Tier } from './routing/types.js'
import { RequestStateSealer } from './routing/input-rounds.js'
import { ClientRequests, FORWARDED_MCP_ANSWER_PATH } from './mcp-server/client-requests.js'
import { FORWARDED_RESUME_PATH, ParkedCalls } from './routing/parked-calls.js'
import type { ForwardedResume } from './routing/parked-calls.js'
import type { ForwardedAnswer } from './mcp-server/client-requests.js'
import { OAuthFacade, createUpstreamOAuth } from './oauth/index.js'
import type { UpstreamOAuth } from './oauth/index.js'
import { definitionChangedRecord, PinFacade, PinningPolicies, PinService } from './pins/index.js'
import { NO_TRACING } from './tracing/index.js'
import type { Tracing } from './tracing/index.js'

/** Everything the HTTP layer needs, built once per process from the config. */
export interface Services {
  /** What the services were built from (a route reads its limits here). */
  config: Config
  /** The cluster-wide parts' shared Redis connection; undefined without Redis (one instance). */
  coordination: Coordination | undefined
  /** Signs and checks instance-to-instance calls; undefined without CLUSTER_SECRET. */
  clusterTokens: ClusterTokens | undefined
  /** What the per-tenant rate and concurrency limits count in (the rate-limit plugin): Redis or memory. */
  limiterStores: LimiterStores
  /** The tool use cases (GET /tools, GET /catalog, POST /invoke, /mcp). */
  gateway: Gateway
  /** The registry use cases (the /mcp/servers and /users/{userId}/mcp/servers routes), tenancy included. */
  registry: RegistryFacade
  /** The gateway's OAuth client of MCP servers (the .../oauth routes and the public callback, SPEC 16), tenancy included. */
  oauth: OAuthFacade
  /** The workspace use cases (the /users/{userId}/workspaces routes), tenancy included. */
  workspaces: WorkspaceFacade
  /** Tool policies (GET|PUT /policy, GET|PUT|DELETE /users/{userId}/policy), tenancy included. */
  policies: PolicyService
  /** Definition pins (GET|POST .../mcp/servers/{serverId}/pins, SPEC 18), tenancy included. */
  pins: PinFacade
  /** The invocation journal (GET /users/{userId}/invocations), tenancy included. */
  journal: Journal
  /** The approval use cases (the /approvals routes; the gateway holds calls through it). */
  approvals: ApprovalFacade
  /** Tier 1 internals (sandbox, processes), absent when a test supplies its own built-in source. */
  builtins: Builtins | undefined
  /** GET /status: client pools, retries and breakers, the sandbox, the registry backend, the workspace quota. */
  status: () => GatewayStatus
  /**
   * What can change a listing: registry change events from every instance, and this instance's
   * upstream servers saying their tool lists changed (the /mcp endpoint notifies list_changed on them).
   */
  subscribe: (listener: ListingListener) => () => void
  /** While a listing naming these servers is watched (an /mcp notification stream), their 2026-07-28 connections listen for tool list changes. */
  watchUpstream: (tenant: string | undefined, serverIds: readonly string[]) => () => void
  /** GET /readyz: can this instance serve (registry reachable, sandbox probe)? */
  readiness: () => Promise<Readiness>
  /** Monotonic failure counts for metrics. */
  counters: Readonly<ServiceCounters>
  /**
   * The requestState handles of upstream `input_required` rounds, REST and /mcp alike (src/routing/input-rounds.ts):
   * keyed from SECRETS_KEY, so every instance continues any call; the gateway's, passed to /mcp's endpoint too.
   */
  mcpRequestState?: RequestStateSealer
  /**
   * The requests sent to legacy /mcp clients during their calls and the answers they POST back
   * (src/mcp-server/client-requests.ts); an answer that reaches another instance is forwarded here.
   */
  mcpClientRequests: ClientRequests
  /** Calls waiting for their callers' answers on this instance; a resume another instance forwards comes here. */
  parkedCalls: ParkedCalls
  /** OpenTelemetry (src/tracing/): NO_TRACING unless the process entry configured an exporter. Its owner shuts it down. */
  tracing: Tracing
  /** Closes every resource (MCP clients, processes, Redis) within a bounded time. */
  close: () => Promise<void>
}

/** Parts tests (or embedders) may supply instead of the defaults built from the config. */
export interface ServiceOverrides {
  builtin?: ToolSource
  /** The registry store (tests share one between two apps to act as two instances). */
  store?: RegistryStore
  /** Replaces the registry directory and the client pools (router tests with in-process servers). */
  directory?: ServerDirectory
  connector?: McpConnector
  /** The requestState sealer of input_required rounds, REST and /mcp (tests: a short TTL or their own clock). */
  mcpRequestState?: RequestStateSealer
  /**
   * The embeddings hook of tool search (search/tool-index.ts `Embedder`): an operator's semantic
   * ranker, fused with the full-text rank. None by default (nothing is downloaded at run time).
   */
  searchEmbedder?: Embedder
  /** OpenTelemetry tracing (src/tracing/, createTracing in src/server.ts); default off. The caller shuts it down. */
  tracing?: Tracing
}

const EXAMPLES = {
  functions: fileURLToPath(new URL('../examples/functions', import.meta.url)),
  mcpServices: fileURLToPath(new URL('../examples/mcp-services', import.meta.url))
}

/** Start-up discovery and wiring. Throws to stop start-up, naming the problem. */
export async function createServices (config: Config, logger: Logger, overrides: ServiceOverrides = {}): Promise<Services> {
  const closers: Array<() => Promise<void>> = []
  const close = async (): Promise<void> => {
    for (const fn of closers.splice(0).reverse()) {
      await fn().catch((err: unknown) => logger.error({ err }, 'error while closing'))
    }
  }
  try {
    return await build(config, logger, overrides, closers, close)
  } catch (err) {
    await close()
    throw err
  }
}

async function build (
  config: Config, logger: Logger, overrides: ServiceOverrides, closers: Array<() => Promise<void>>, close: () => Promise<void>
): Promise<Services> {
  const tracing = overrides.tracing ?? NO_TRACING
  const functionDirs = [...(config.loadExamples ? [EXAMPLES.functions] : []), ...config.functionsDirs]
  const serviceDirs = [...(config.loadExamples ? [EXAMPLES.mcpServices] : []), ...config.mcpServicesDirs]

  const functions = new FunctionSource(await loadFunctions(functionDirs), { defaultTimeoutMs: config.functionTimeoutMs })
  const localMcp = new LocalMcpSource(
    await loadLocalMcpServices(serviceDirs, { listTimeoutMs: config.mcpListTimeoutMs }),
    { callTimeoutMs: config.functionTimeoutMs }
  )
  closers.push(async () => await localMcp.close())

  // Checked before the store is opened: a bad SECRETS_KEY or EGRESS_ALLOW stops start-up before Redis is dialled.
  const remoteSettings = remoteMcpSettings(config)
  const counters: ServiceCounters = { mcpConnectFailures: 0, registryUnavailable: 0 }
  const redisTarget = redisTargetOf(config)
  const rawStore = overrides.store ?? await createRegistryStore({ target: redisTarget, keyPrefix: config.redisKeyPrefix })
  if (!overrides.store) closers.push(async () => await rawStore.close())
  const store = countUnavailable(rawStore, counters)

  let builtins: Builtins | undefined
  // Pushed before the built-ins: closed after them, so their shutdown can still record in Redis what it stopped.
  const cluster = await createCluster(config, logger, { processes: () => builtins?.processes.stats().running ?? 0 })
  closers.push(cluster.close)
  const { coordination } = cluster

  // After the store: the sandbox allocates each tenant's host uid in it.
  let builtin = overrides.builtin
  if (!builtin) {
    builtins = await createBuiltins(config, logger, { uids: store, ...(coordination !== undefined ? { coordination } : {}) })
    const b = builtins
    closers.push(async () => await b.close())
    builtin = builtins.source
  }

  // Bound below, once the pools it drops clients from exist (the pools ask it for each server's tokens).
  const late: { oauth?: UpstreamOAuth } = {}
  const remote = await createRemoteMcp(config, logger, {
    settings: remoteSettings,
    store,
    directory: overrides.directory,
    connector: overrides.connector,
    onConnectFailure: () => { counters.mcpConnectFailures++ },
    authorizationFor: (scope, serverId, serverConfig) => late.oauth?.authorization(scope, serverId, serverConfig),
    tracing
  })
  closers.push(remote.close)
  const oauth = createUpstreamOAuth(config, logger, { remote, box: remoteSettings.box, coordination, redisTarget })
  closers.push(oauth.close)
  late.oauth = oauth.service
  // A removed server's tokens are forgotten (on whichever instance hears it first; deleting twice is harmless).
  closers.push(toClose(store.subscribe((change) => {
    if (change.op === 'delete') oauth.forget(change.scope, change.serverId)
  })))

  // Every tier named: a tier added to TIERS and not wired here does not compile (docs/ARCHITECTURE.md#add-a-tier).
  const sources: Record<Tier, ToolSource | null> = {
    builtin,
    user_mcp: remote.userMcp,
    local_mcp: localMcp,
    function: functions,
    global_mcp: remote.globalMcp
  }
  // tool_search (SPEC 17) searches the listings, which list through this router: it reads them at call time.
  const toolSearch = new ToolSearchTool(() => listings)
  // Code mode (SPEC 19): scripts in the built-ins' sandbox whose inner calls go through the gateway below, as their script's call.
  const scripts = new ScriptTool({
    host: builtins?.scripts,
    listing: async (parent) => (await listings.policed(parent.allow ?? {}, { userId: parent.userId, policy: parent.policy, signal: parent.signal })).tools,
    invoke: async (call, parent, signal) => await gateway.invokeInner(call, parent, signal),
    admit: async (parent) => await admitInnerCall(cluster.limiterStores.windows, config.rateLimitPerMinute, parent.userId, parent.ctx.caller.keyId),
    maxCalls: config.codeModeMaxCalls
  })
  closers.push(async () => await scripts.close())
  // The tenants' policies name the guardrails (SPEC 18); a policy without them costs nothing. Large values are checked in worker threads.
  const guardrails = new GuardrailEngine({ webhookSecret: config.guardrailWebhookSecret })
  closers.push(async () => await guardrails.close())
  const router = new ToolRouter({
    sources,
    outputMaxChars: config.outputMaxChars,
    meta: metaToolSet([toolSearch, scripts]),
    guardrails
  })
  // Search mode's working sets are shared through Redis when there is one: an /mcp client's next request may reach another instance.
  const listings: Listings = new Listings(router, {
    embedder: overrides.searchEmbedder,
    ...(coordination !== undefined ? { workingSets: new RedisWorkingSets(coordination) } : {})
  })
  // Its own Redis connection: journal writes never queue behind (or delay) registry commands.
  const journal = createJournal({
    mode: config.journal,
    target: redisTarget,
    keyPrefix: config.redisKeyPrefix,
    maxEntriesPerTenant: config.journalMaxEntries,
    maxBytesPerTenant: config.journalTenantBytes,
    retentionMs: parseDuration(config.journalRetention),
    memoryBytes: config.journalMemoryBytes,
    logger
  })
  closers.push(async () => await journal.close())
  // In the registry store: a policy written through any instance is enforced by all at once.
  const policies = new PolicyService(store, logger)
  closers.push(async () => await policies.close())
  // Read the default policy once now: a registry outage later keeps enforcing it, and calls of no
  // tenant keep being served instead of failing for a policy never read.
  await policies.defaultPolicy().catch((err: unknown) => { logger.warn({ err }, 'the default tool policy could not be read at start-up') })
  // Definition pins (SPEC 18) in the same store: a changed definition is journaled once, by the instance that recorded it.
  const pins = new PinService(store, logger, { onChange: (change) => { journal.record(definitionChangedRecord(change)) } })
  closers.push(async () => { pins.close() })
  const pinnedPolicies = new PinningPolicies(policies, pins)
  // As the default policy: read once now, kept through an outage for calls without a tenant.
  await pins.view(undefined)
  if (config.approvalWebhookUrl !== undefined && (config.approvalWebhookSecret ?? '') === '') {
    throw new StartupError('APPROVAL_WEBHOOK_URL is set without APPROVAL_WEBHOOK_SECRET: the webhook\'s receiver could not tell its POSTs from forged ones')
  }
  // Its own Redis connection too: a call waiting for its decision polls without queueing behind registry commands.
  const approvals = createApprovals({
    target: redisTarget,
    keyPrefix: config.redisKeyPrefix,
    ttlMs: parseDuration(config.approvalTtl),
    maxPendingPerTenant: config.tenantMaxPendingApprovals,
    box: remoteSettings.box,
    webhookUrl: config.approvalWebhookUrl,
    webhookSecret: config.approvalWebhookSecret,
    logger
  })
  closers.push(async () => await approvals.close())
  // Every answered call is published once (docs/ARCHITECTURE.md#journal): the journal subscribes
  // here, the metrics plugin per app.
  const calls = new CallObserver()
  if (journal.enabled) calls.subscribe((call) => { journal.recordCall(call) }, { trace: journal.wantsTrace })
  // The handles are HMAC'd with a key derived from SECRETS_KEY; without it each instance has a key of its own.
  const mcpRequestState = overrides.mcpRequestState ?? new RequestStateSealer({ secret: config.secretsKey })
  if (mcpRequestState.ephemeral) {
    logger.warn({}, 'SECRETS_KEY is not set: requestState handles (MCP input_required rounds) are signed with a per-process random key, ' +
      'so a retry must reach the same instance and a restart ends open rounds')
  }
  const approvalFacade: ApprovalFacade = new ApprovalFacade({
    approvals,
    calls,
    // The gateway below: an approved call runs through the tool use case, journaled with its approvalId.
    run: async (call) => await gateway.runApproved(call),
    invokeTimeoutMs: config.invokeTimeoutMs
  })
  // Calls that wait while their callers answer a legacy server's questions (src/routing/parked-calls.ts).
  const parkedCalls = new ParkedCalls({
    instanceId: coordination?.instanceId ?? randomUUID(),
    ...(coordination?.peers !== undefined ? { forward: forwardResumes(coordination, coordination.peers, config.invokeTimeoutMs) } : {})
  })
  closers.push(async () => { parkedCalls.close() })
  const gateway: Gateway = new Gateway(config, router, {
    calls, policies: pinnedPolicies, approvals: approvalFacade, requestState: mcpRequestState, parked: parkedCalls, listings, tracing
  })
  const registry = new RegistryFacade(remote.registry, router, {
    // A server removed takes its pins along: another server registered under its id starts unpinned.
    onRemoved: async (scope, serverId) => {
      await pins.forget(scope, scope.kind === 'global' ? 'global_mcp' : 'user_mcp', serverId)
        .catch((err: unknown) => { logger.warn({ err, serverId }, 'the removed server\'s definition pins could not be dropped') })
    }
  })
  logger.info({ functions: functions.size, localMcpTools: localMcp.size, localMcpServices: localMcp.serviceNames, registry: store.backend }, 'tools discovered')

  const sandbox = builtins?.sandbox
  const mcpClientRequests = new ClientRequests({
    instanceId: coordination?.instanceId ?? randomUUID(),
    ...(coordination?.peers !== undefined ? { forward: forwardAnswers(coordination, coordination.peers) } : {}),
    onError: (err, what) => { logger.warn({ err }, what) }
  })
  return {
    oauth: new OAuthFacade(oauth.service, remote.registry),
    mcpRequestState,
    mcpClientRequests,
    parkedCalls,
    tracing,
    config,
    coordination,
    clusterTokens: cluster.tokens,
    limiterStores: cluster.limiterStores,
    gateway,
    registry,
    journal,
    approvals: approvalFacade,
    policies,
    pins: new PinFacade(pins, router, pinnedPolicies),
    workspaces: new WorkspaceFacade(builtins?.lifecycle),
    builtins,
    status: () => gatewayStatus({
      pools: remote.poolStats(),
      resilience: remote.resilience(),
      sandbox,
      registry: { backend: store.backend, secretsEncrypted: remoteSettings.box.encrypted },
      workspaceQuota: builtins?.quota
    }),
    readiness: async () => await readiness({
      store,
      sandbox,
      sources: { builtin: builtins?.source.names.length ?? 0, functions: functions.size, localMcpTools: localMcp.size }
    }),
    counters,
    close,
    subscribe: (listener) => {
      const unsubscribe = [
        store.subscribe(listener),
        remote.onToolsChanged((scope, serverId) => { listener({ op: 'tools', scope, serverId }) })
      ]
      return () => { for (const u of unsubscribe) u() }
    },
    watchUpstream: (tenant, serverIds) => {
      // The listing's servers are the tenant's of these ids and the global ones (tiers 2 and 5).
      const stops = [remote.watchTools({ kind: 'global' }, serverIds)]
      if (tenant !== undefined) stops.push(remote.watchTools({ kind: 'user', userId: tenant }, serverIds))
      return () => { for (const stop of stops) stop() }
    }
  }
}

/** Forwards a legacy /mcp client's answer to the instance whose call waits for it (the cluster's signed call). */
function forwardAnswers (coordination: Coordination, peers: PeerClient): (instanceId: string, answer: ForwardedAnswer) => Promise<boolean> {
  return async (instanceId, answer) => {
    const owner = await coordination.membership.get(instanceId)
    if (owner === undefined || owner.url === '') return false
    await peers.post(owner.url, FORWARDED_MCP_ANSWER_PATH, answer, { timeoutMs: 5000 })
    return true
  }
}

/**
 * Forwards a retry of a parked call to the instance it waits on (the cluster's signed call) and
 * reads back its step, a failed outcome's error rebuilt (an HttpError does not travel as JSON).
 */
function forwardResumes (coordination: Coordination, peers: PeerClient, timeoutMs: number): (instanceId: string, resume: ForwardedResume) => Promise<unknown> {
  return async (instanceId, resume) => {
    const owner = await coordination.membership.get(instanceId)
    if (owner === undefined || owner.url === '') return undefined
    const step = await peers.post<{ kind?: string, value?: { ok?: boolean, error?: { code: string, message: string } } } | null>(
      owner.url, FORWARDED_RESUME_PATH, resume, { timeoutMs: timeoutMs + 5000 })
    if (step?.kind === 'done' && step.value?.ok === false && step.value.error !== undefined) {
      return { kind: 'done', value: { ok: false, toolMs: 0, error: new HttpError(step.value.error.code as never, step.value.error.message) } }
    }
    return step
  }
}

function toClose (unsubscribe: () => void): () => Promise<void> {
  return async () => { unsubscribe() }
}
