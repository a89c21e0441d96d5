import { readFile } from 'node:fs/promises'
import { StartupError } from '../errors.js'
import type { Config } from '../config.js'
import { DiscoveryError } from '../discovery/modules.js'
import { createEgressPolicy, guardedFetch } from '../egress/ssrf.js'
import type { EgressPolicy } from '../egress/ssrf.js'
import type { Logger } from '../logger.js'
import { encodeUserServiceName, parseUserServiceName } from '../naming/names.js'
import { ServerRegistry } from '../registry/registry-service.js'
import { secretBoxFromEnv } from '../registry/secrets.js'
import type { SecretBox } from '../registry/secrets.js'
import type { RegistryScope, RegistryStore } from '../registry/types.js'
import { VERSION } from '../version.js'
import { PoolConnector } from './connector.js'
import type { AuthorizationFor } from './connector.js'
import type { FetchLike } from '@modelcontextprotocol/client'
import { RegistryDirectory } from './directory.js'
import { McpClientPool } from './pool.js'
import type { McpClientPoolStats, McpResilienceStats } from './pool.js'
import { RemoteMcpSource } from './source.js'
import { KeptLists } from './list-bounds.js'
import { defaultMaxMessageBytes, ResponseBudget } from './response-limits.js'
import { transportKind } from './transports.js'
import type { SurfaceRequest } from '../routing/source.js'
import type { McpConnector, RemoteServer, ServerDirectory } from './source.js'
import { callerKeyOf } from './relay.js'
import type { Tracing } from '../tracing/index.js'

export type { McpClientPoolStats, McpConnector, McpResilienceStats, ServerDirectory }
// For the OAuth client (src/oauth): the transports' hook, its refusal, and the bounded fetch of its flow.
export { UpstreamError } from './errors.js'
export { limitResponses } from './http-fetch.js'
export { OAuthRequiredError } from './upstream-auth.js'
export type { UpstreamAuthorization } from './upstream-auth.js'

/** The settings tiers 2 and 5 cannot start without, checked before anything is opened. */
export interface RemoteMcpSettings {
  box: SecretBox
  egress: EgressPolicy
}

/** SECRETS_KEY(_PREVIOUS) and EGRESS_ALLOW as usable objects; a StartupError names the bad one. */
export function remoteMcpSettings (config: Config): RemoteMcpSettings {
  const box = secretBoxFromEnv({ SECRETS_KEY: config.secretsKey, SECRETS_KEY_PREVIOUS: config.secretsKeyPrevious })
  if (!box.ok) throw new StartupError(box.message)
  try {
    return { box: box.box, egress: createEgressPolicy(config.egressAllow) }
  } catch (err) {
    throw new StartupError(`EGRESS_ALLOW: ${(err as Error).message}`)
  }
}

export interface RemoteMcpDeps {
  settings: RemoteMcpSettings
  /** The registry store (opened by the caller: tier 1 allocates sandbox uids in it too). */
  store: RegistryStore
  /** Replaces the registry directory and the client pools (router tests with in-process servers). */
  directory?: ServerDirectory | undefined
  connector?: McpConnector | undefined
  /** Called for each list/call that could not connect (GW_UPSTREAM_CONNECT), for metrics. */
  onConnectFailure?: () => void
  /** The OAuth hook of a server with `auth` (src/oauth, SPEC 16). */
  authorizationFor?: AuthorizationFor
  /** OpenTelemetry (src/tracing/): upstream tools/call spans and the trace context sent to servers. Default off. */
  tracing?: Tracing | undefined
}

/** Tiers 2 and 5 assembled: the registry, the two tool sources over one directory and connector, the client pools. */
export interface RemoteMcp {
  registry: ServerRegistry
  /** Tier 2: each tenant's registered servers. */
  userMcp: RemoteMcpSource
  /** Tier 5: the operator's global servers. */
  globalMcp: RemoteMcpSource
  /** Client pool statistics (GET /status). */
  poolStats: () => { global: McpClientPoolStats, tenant: McpClientPoolStats }
  /** Retries and circuit breakers of each pool (GET /status, /metrics). */
  resilience: () => { global: McpResilienceStats, tenant: McpResilienceStats }
  /** A registered server said its own tool list changed (seen by this instance, which holds its client). */
  onToolsChanged: (listener: (scope: RegistryScope, serverId: string) => void) => () => void
  /** Someone waits for these servers' tool list changes until the returned function is called (pool.watch). */
  watchTools: (scope: RegistryScope, serverIds: readonly string[]) => () => void
  /** Drops the clients of one server (its OAuth tokens changed: the next request connects with the new ones). */
  dropClients: (scope: RegistryScope, serverId: string) => Promise<void>
  /** The fetch requests to servers of `scope` go through: the egress guard's for tenants, the global fetch for the operator's. */
  fetchFor: (scope: RegistryScope) => FetchLike
  /** Closes the directory's subscription, every MCP client and the tenant egress agent. The store stays open. */
  close: () => Promise<void>
}

/**
 * Builds tiers 2 and 5 on an open registry store: secrets, SSRF policy, client pools (one per
 * tier: tenant servers go through the egress-guarded fetch), the directory that drops a client
 * when its server changes on any instance, and the servers of MCP_SERVERS_FILE.
 */
export async function createRemoteMcp (config: Config, logger: Logger, deps: RemoteMcpDeps): Promise<RemoteMcp> {
  const { settings: { box, egress }, store } = deps
  const closers: Array<() => Promise<void>> = []
  const close = async (): Promise<void> => {
    for (const fn of closers.splice(0).reverse()) {
      await fn().catch((err: unknown) => logger.error({ err }, 'error while closing'))
    }
  }
  try {
    if (!box.encrypted) {
      const level = store.backend !== 'memory' ? 'warn' : 'info'
      logger[level]({ registry: store.backend }, store.backend !== 'memory'
        ? '!!! SECRETS_KEY is not set: MCP server headers and env values are stored in Redis in PLAINTEXT'
        : 'SECRETS_KEY is not set: secrets of registered servers are kept unencrypted in memory')
    }
    // Set once the sources exist; the changes before that (MCP_SERVERS_FILE's) are covered by the
    // start-up warm-up below.
    const warming: { server?: (scope: RegistryScope, serverId: string) => void } = {}
    const registry = new ServerRegistry(store, box, egress, {
      maxServersPerTenant: config.tenantMaxServers,
      // A tenant's stdio server (registered by an admin; any slow-starting transport) starts on the
      // instance that stored it; global ones start on every instance from their change event (below).
      onStored: (scope, serverId, stored) => {
        if (scope.kind === 'user' && transportKind(stored.type).slowFirstStart) warming.server?.(scope, serverId)
      }
    })

    const maxMessageBytes = config.mcpMaxMessageBytes ?? defaultMaxMessageBytes(config.outputMaxChars)
    if (maxMessageBytes > config.mcpTenantListBytes) {
      throw new StartupError(`MCP_MAX_MESSAGE_BYTES (${maxMessageBytes}) <= MCP_TENANT_LIST_BYTES (${config.mcpTenantListBytes}) must hold: one server's tool list may be as large as one answer`)
    }
    if (maxMessageBytes > config.mcpResponseBudgetTenantBytes || config.mcpResponseBudgetTenantBytes > config.mcpResponseBudgetBytes) {
      throw new StartupError(`MCP_MAX_MESSAGE_BYTES (${maxMessageBytes}) <= MCP_RESPONSE_BUDGET_TENANT_BYTES (${config.mcpResponseBudgetTenantBytes}) <= MCP_RESPONSE_BUDGET_BYTES (${config.mcpResponseBudgetBytes}) must hold: a budget smaller than one answer would refuse every large answer`)
    }
    // One budget for both pools: the instance total covers every answer in flight. A tenant's
    // servers share its owner's share; a global server (the operator's, called by any tenant)
    // has a share of its own (docs/ARCHITECTURE.md#mcp-pool).
    const budget = new ResponseBudget({ totalBytes: config.mcpResponseBudgetBytes, ownerBytes: config.mcpResponseBudgetTenantBytes })
    const tenantOwner = (key: string): string => {
      const parsed = parseUserServiceName(callerKeyOf(key))
      return parsed === undefined ? `key:${key}` : `tenant:${parsed.userId}`
    }
    const toolsChanged = new Set<(scope: RegistryScope, serverId: string) => void>()
    const emitToolsChanged = (scope: RegistryScope, serverId: string): void => {
      // The sources exist by the time a connection can hear anything.
      const source = scope.kind === 'global' ? sources.global : sources.user
      source?.toolsChanged(scope)
      for (const listener of toolsChanged) listener(scope, serverId)
    }
    const sources: { user?: RemoteMcpSource, global?: RemoteMcpSource } = {}
    // Each tenant's kept tool lists together; each global server is an owner of its own.
    const lists = new KeptLists(config.mcpTenantListBytes, config.mcpTenantListItems)
    const poolOptions = {
      connectTimeoutMs: config.mcpConnectTimeoutMs,
      stdioFirstConnectTimeoutMs: config.mcpStdioFirstConnectMs,
      listTimeoutMs: config.mcpListTimeoutMs,
      callTimeoutMs: config.mcpCallTimeoutMs,
      idleMs: config.mcpIdleMs,
      maxClients: config.mcpMaxClients,
      toolsTtlMs: config.mcpToolsTtlMs,
      breaker: { failures: config.mcpBreakerFailures, windowMs: config.mcpBreakerWindowMs, openMs: config.mcpBreakerOpenMs },
      clientInfo: { name: 'tool-gateway', version: VERSION },
      httpTransport: config.mcpHttpTransport,
      tracing: deps.tracing,
      logger
    }
    const tenantFetch = guardedFetch(egress, { connectTimeoutMs: config.mcpConnectTimeoutMs })
    closers.push(async () => await tenantFetch.close())
    const pools = {
      tenant: new McpClientPool({
        ...poolOptions,
        fetch: tenantFetch,
        responseLimits: { maxMessageBytes, budget, owner: tenantOwner, lists },
        onToolsChanged: (key) => {
          const parsed = parseUserServiceName(key)
          if (parsed !== undefined) emitToolsChanged({ kind: 'user', userId: parsed.userId }, parsed.serverId)
        }
      }),
      global: new McpClientPool({
        ...poolOptions,
        responseLimits: { maxMessageBytes, budget, owner: (key) => `global:${callerKeyOf(key)}`, lists },
        onToolsChanged: (key) => { emitToolsChanged({ kind: 'global' }, key) }
      })
    }
    closers.push(async () => { await Promise.all([pools.tenant.close(), pools.global.close()]) })
    let directory = deps.directory
    if (!directory) {
      const dir = new RegistryDirectory(store, box, {
        logger,
        // A change anywhere (any instance) drops that server's client here: a removal disconnects it.
        onServerChanged: (scope, serverId) => {
          const dropped = scope.kind === 'global'
            ? pools.global.invalidate(serverId)
            : pools.tenant.invalidate(encodeUserServiceName(scope.userId, serverId))
          dropped.catch((err: unknown) => logger.warn({ err, serverId }, 'closing a removed server\'s client failed'))
          // A (re)registered global stdio server starts now, on every instance, once its old client
          // is gone: its first listing then finds it running instead of waiting for npx. (A tenant's
          // is started by the instance that stored it: onStored above.)
          if (scope.kind === 'global') dropped.finally(() => warming.server?.(scope, serverId)).catch(() => {})
        },
        onResync: () => {
          Promise.all([pools.global.invalidate(() => true), pools.tenant.invalidate(() => true)])
            .catch((err: unknown) => logger.warn({ err }, 'dropping clients after a registry resync failed'))
        }
      })
      closers.push(async () => dir.close())
      directory = dir
    }
    const connector = countConnectFailures(deps.connector ?? new PoolConnector(pools, deps.authorizationFor), deps.onConnectFailure ?? (() => {}))

    if (config.mcpServersFile) {
      let document: unknown
      try {
        document = JSON.parse(await readFile(config.mcpServersFile, 'utf8'))
      } catch (err) {
        throw new StartupError(`MCP_SERVERS_FILE ${config.mcpServersFile}: ${(err as Error).message}`)
      }
      const { loaded, problems } = await registry.loadServersFile(document, config.mcpServersFile)
      if (problems.length > 0) throw new DiscoveryError('MCP_SERVERS_FILE could not be loaded', problems)
      logger.info({ servers: loaded, file: config.mcpServersFile }, 'global MCP servers loaded')
    }

    const remoteOpts = { listDeadlineMs: config.mcpListTimeoutMs, callTimeoutMs: config.mcpCallTimeoutMs }
    const userMcp = new RemoteMcpSource('user_mcp', directory, connector, remoteOpts)
    const globalMcp = new RemoteMcpSource('global_mcp', directory, connector, remoteOpts)
    sources.user = userMcp
    sources.global = globalMcp
    // Warm-ups run in the background and end with the pools (closing a pool closes what it is connecting).
    const stopWarming = new AbortController()
    closers.push(async () => { stopWarming.abort() })
    const warmFailed = (err: unknown): void => { logger.warn({ err }, 'warming MCP servers failed') }
    warming.server = (scope, serverId) => {
      if (stopWarming.signal.aborted) return
      const source = scope.kind === 'global' ? globalMcp : userMcp
      source.warm({ userId: scope.kind === 'user' ? scope.userId : undefined, signal: stopWarming.signal }, [serverId]).catch(warmFailed)
    }
    // The global stdio servers known at start-up (MCP_SERVERS_FILE, or a shared Redis) start now.
    globalMcp.warm({ userId: undefined, signal: stopWarming.signal }).catch(warmFailed)
    return {
      registry,
      userMcp,
      globalMcp,
      poolStats: () => ({ global: pools.global.stats(), tenant: pools.tenant.stats() }),
      resilience: () => ({ global: pools.global.resilience(), tenant: pools.tenant.resilience() }),
      onToolsChanged: (listener) => {
        toolsChanged.add(listener)
        return () => { toolsChanged.delete(listener) }
      },
      watchTools: (scope, serverIds) => {
        const stops = serverIds.map((id) => scope.kind === 'global'
          ? pools.global.watch(id)
          : pools.tenant.watch(encodeUserServiceName(scope.userId, id)))
        return () => { for (const stop of stops) stop() }
      },
      dropClients: async (scope, serverId) => {
        // Its `~relay` twin too (relay.ts): every key of the server starts with the plain one.
        const key = scope.kind === 'global' ? serverId : encodeUserServiceName(scope.userId, serverId)
        await (scope.kind === 'global' ? pools.global : pools.tenant).invalidate((k) => k === key || k.startsWith(`${key}~`))
        // What the tenant can call changed (a server that could not be listed now can): names resolve afresh, /mcp streams hear it.
        emitToolsChanged(scope, serverId)
      },
      fetchFor: (scope) => scope.kind === 'global' ? globalThis.fetch : tenantFetch,
      close
    }
  } catch (err) {
    await close()
    throw err
  }
}

/** The connector, reporting list/call operations that could not connect (GW_UPSTREAM_CONNECT). */
function countConnectFailures (connector: McpConnector, onFailure: () => void): McpConnector {
  const counted = async <T>(work: Promise<T>): Promise<T> => {
    try {
      return await work
    } catch (err) {
      if ((err as { code?: unknown } | null)?.code === 'GW_UPSTREAM_CONNECT') onFailure()
      throw err
    }
  }
  const warm = connector.warm
  const surface = connector.surface
  return {
    listTools: async (key, server, opts) => await counted(connector.listTools(key, server, opts)),
    callTool: async (key, server, name, args, opts) => await counted(connector.callTool(key, server, name, args, opts)),
    ...(warm !== undefined ? { warm: async (key: string, server: RemoteServer) => { await warm.call(connector, key, server) } } : {}),
    ...(surface !== undefined
      ? {
          surface: async (key: string, server: RemoteServer, req: SurfaceRequest, opts: { signal: AbortSignal, timeoutMs: number }) =>
            await counted(surface.call(connector, key, server, req, opts))
        }
      : {})
  }
}
