import { readFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import { createBuiltins } from './builtin/index.js'
import type { SandboxIsolation } from './builtin/sandbox/types.js'
import type { Builtins } from './builtin/index.js'
import type { Config } from './config.js'
import type { Logger } from './logger.js'
import { DiscoveryError } from './discovery/modules.js'
import { Gateway } from './gateway.js'
import { FunctionSource } from './functions/source.js'
import { loadFunctions } from './functions/loader.js'
import { LocalMcpSource } from './local-mcp/source.js'
import { loadLocalMcpServices } from './local-mcp/loader.js'
import { encodeUserServiceName } from './naming/names.js'
import { createRegistryStore } from './registry/create-store.js'
import { ServerRegistry } from './registry/registry-service.js'
import { secretBoxFromEnv } from './registry/secrets.js'
import { isRegistryUnavailableError } from './registry/errors.js'
import type { RegistryStore } from './registry/types.js'
import { PoolConnector } from './remote-mcp/connector.js'
import { RegistryDirectory } from './remote-mcp/directory.js'
import { McpClientPool } from './remote-mcp/pool.js'
import type { McpClientPoolStats } from './remote-mcp/pool.js'
import { RemoteMcpSource } from './remote-mcp/source.js'
import type { McpConnector, ServerDirectory } from './remote-mcp/source.js'
import { createEgressPolicy, guardedFetch } from './egress/ssrf.js'
import { ToolRouter } from './tools/router.js'
import type { ToolSource } from './tools/source.js'
import type { Tier } from './tools/types.js'

/** GET /status: AI4J's getGatewayStatus shape plus the sandbox and the registry backend. */
export interface GatewayStatus {
  totalClients: number
  globalClients: number
  userClients: number
  connectedClients: number
  totalTools: number
  clients: McpClientPoolStats['clients']
  sandbox: { mode: string, probe: unknown, warning: string | null, isolation: SandboxIsolation | null }
  registry: { backend: 'memory' | 'redis', secretsEncrypted: boolean }
}

/** GET /readyz. `ready` false means 503: the reasons say why. */
export interface Readiness {
  ready: boolean
  reasons: string[]
  registry: { backend: 'memory' | 'redis', reachable: boolean }
  sandbox: { mode: string, ok: boolean, reason: string, warning: string | null }
  sources: { builtin: number, functions: number, localMcpTools: number }
}

/** Failures counted inside the domain, where the HTTP layer cannot see them (GET /metrics). */
export interface ServiceCounters {
  /** Remote MCP list/call operations that failed to connect (GW_UPSTREAM_CONNECT). */
  mcpConnectFailures: number
  /** Registry operations that failed because the backend (Redis) was unreachable. */
  registryUnavailable: number
}

/** Everything the HTTP layer needs, built once per process from the config. */
export interface Services {
  config: Config
  gateway: Gateway
  router: ToolRouter
  registry: ServerRegistry
  functions: FunctionSource
  localMcp: LocalMcpSource
  /** Tier 1 internals (sandbox, processes), absent when a test supplies its own built-in source. */
  builtins: Builtins | undefined
  status: () => GatewayStatus
  /** Registry change events from every instance (the /mcp endpoint notifies list_changed on them). */
  subscribe: RegistryStore['subscribe']
  /** GET /readyz: can this instance serve (registry reachable, sandbox probe)? */
  readiness: () => Promise<Readiness>
  /** Monotonic failure counts for metrics. */
  counters: Readonly<ServiceCounters>
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
}

const EXAMPLES = {
  functions: fileURLToPath(new URL('../examples/functions', import.meta.url)),
  mcpServices: fileURLToPath(new URL('../examples/mcp-services', import.meta.url))
}

/** A start-up problem the process reports and exits on (no stack trace needed). */
export class StartupError extends Error {
  constructor (message: string) {
    super(message)
    this.name = 'StartupError'
  }
}

/** Start-up discovery and wiring (SPEC 1 "scan"). Throws to stop start-up, naming the problem. */
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

async function build (config: Config, logger: Logger, overrides: ServiceOverrides, closers: Array<() => Promise<void>>, close: () => Promise<void>): Promise<Services> {
  const functionDirs = [...(config.loadExamples ? [EXAMPLES.functions] : []), ...config.functionsDirs]
  const serviceDirs = [...(config.loadExamples ? [EXAMPLES.mcpServices] : []), ...config.mcpServicesDirs]

  const functions = new FunctionSource(await loadFunctions(functionDirs), { defaultTimeoutMs: config.functionTimeoutMs })
  const localMcp = new LocalMcpSource(
    await loadLocalMcpServices(serviceDirs, { listTimeoutMs: config.mcpListTimeoutMs }),
    { callTimeoutMs: config.functionTimeoutMs }
  )
  closers.push(async () => await localMcp.close())

  // Remote MCP (tiers 2 and 5): registry store, secrets, SSRF policy, client pools.
  const box = secretBoxFromEnv({ SECRETS_KEY: config.secretsKey, SECRETS_KEY_PREVIOUS: config.secretsKeyPrevious })
  if (!box.ok) throw new StartupError(box.message)
  let egress
  try {
    egress = createEgressPolicy(config.egressAllow)
  } catch (err) {
    throw new StartupError(`EGRESS_ALLOW: ${(err as Error).message}`)
  }
  const counters: ServiceCounters = { mcpConnectFailures: 0, registryUnavailable: 0 }
  const rawStore = overrides.store ?? await createRegistryStore({ redisUrl: config.redisUrl, keyPrefix: config.redisKeyPrefix })
  if (!overrides.store) closers.push(async () => await rawStore.close())
  const store = countUnavailable(rawStore, counters)

  // After the store: the sandbox allocates each tenant's host uid in it (SPEC 11).
  let builtin = overrides.builtin
  let builtins: Builtins | undefined
  if (!builtin) {
    builtins = await createBuiltins(config, logger, { uids: store })
    const b = builtins
    closers.push(async () => await b.close())
    builtin = builtins.source
  }
  if (!box.box.encrypted) {
    const level = store.backend === 'redis' ? 'warn' : 'info'
    logger[level]({ registry: store.backend }, store.backend === 'redis'
      ? '!!! SECRETS_KEY is not set: MCP server headers and env values are stored in Redis in PLAINTEXT'
      : 'SECRETS_KEY is not set: secrets of registered servers are kept unencrypted in memory')
  }
  const registry = new ServerRegistry(store, box.box, egress)

  const poolOptions = {
    connectTimeoutMs: config.mcpConnectTimeoutMs,
    listTimeoutMs: config.mcpListTimeoutMs,
    callTimeoutMs: config.mcpCallTimeoutMs,
    idleMs: config.mcpIdleMs,
    maxClients: config.mcpMaxClients,
    toolsTtlMs: config.mcpToolsTtlMs,
    clientInfo: { name: 'tool-gateway', version: '0.1.0' },
    logger
  }
  const tenantFetch = guardedFetch(egress, { connectTimeoutMs: config.mcpConnectTimeoutMs })
  closers.push(async () => await tenantFetch.close())
  const pools = {
    tenant: new McpClientPool({ ...poolOptions, fetch: tenantFetch }),
    global: new McpClientPool(poolOptions)
  }
  closers.push(async () => { await Promise.all([pools.tenant.close(), pools.global.close()]) })
  let directory = overrides.directory
  if (!directory) {
    const dir = new RegistryDirectory(store, box.box, {
      logger,
      // A change anywhere (any instance) drops that server's client here: a removal disconnects it.
      onServerChanged: (scope, serverId) => {
        const dropped = scope.kind === 'global'
          ? pools.global.invalidate(serverId)
          : pools.tenant.invalidate(encodeUserServiceName(scope.userId, serverId))
        dropped.catch((err: unknown) => logger.warn({ err, serverId }, 'closing a removed server\'s client failed'))
      },
      onResync: () => {
        Promise.all([pools.global.invalidate(() => true), pools.tenant.invalidate(() => true)])
          .catch((err: unknown) => logger.warn({ err }, 'dropping clients after a registry resync failed'))
      }
    })
    closers.push(async () => dir.close())
    directory = dir
  }
  const connector = countConnectFailures(overrides.connector ?? new PoolConnector(pools), counters)

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
  const sources: Partial<Record<Tier, ToolSource>> = {
    builtin,
    user_mcp: new RemoteMcpSource('user_mcp', directory, connector, remoteOpts),
    local_mcp: localMcp,
    function: functions,
    global_mcp: new RemoteMcpSource('global_mcp', directory, connector, remoteOpts)
  }
  const router = new ToolRouter({ sources, outputMaxChars: config.outputMaxChars })
  const gateway = new Gateway(config, router)
  logger.info({ functions: functions.size, localMcpTools: localMcp.size, localMcpServices: localMcp.serviceNames, registry: store.backend }, 'tools discovered')

  const status = (): GatewayStatus => {
    const g = pools.global.stats()
    const u = pools.tenant.stats()
    const clients = { ...g.clients, ...u.clients }
    const sandbox = builtins?.sandbox
    return {
      totalClients: g.totalClients + u.totalClients,
      globalClients: g.totalClients,
      userClients: u.totalClients,
      connectedClients: g.connectedClients + u.connectedClients,
      totalTools: Object.values(clients).reduce((n, c) => n + c.tools, 0),
      clients,
      sandbox: { mode: sandbox?.mode ?? 'external', probe: sandbox?.probe ?? null, warning: sandbox?.warning ?? null, isolation: sandbox?.isolation ?? null },
      registry: { backend: store.backend, secretsEncrypted: box.box.encrypted }
    }
  }

  const readiness = async (): Promise<Readiness> => {
    const reasons: string[] = []
    let reachable = true
    try {
      await store.ping()
    } catch (err) {
      reachable = false
      reasons.push(`registry (${store.backend}) unreachable: ${(err as Error).message}`)
    }
    const sandbox = builtins?.sandbox
    const probeOk = sandbox ? sandbox.probe.ok || sandbox.mode === 'none' : true
    if (!probeOk) reasons.push(`sandbox probe failed: ${sandbox?.probe.reason ?? ''}`)
    return {
      ready: reasons.length === 0,
      reasons,
      registry: { backend: store.backend, reachable },
      sandbox: { mode: sandbox?.mode ?? 'external', ok: sandbox?.probe.ok ?? true, reason: sandbox?.probe.reason ?? '', warning: sandbox?.warning ?? null },
      sources: { builtin: builtins ? 8 : 0, functions: functions.size, localMcpTools: localMcp.size }
    }
  }

  return { config, gateway, router, registry, functions, localMcp, builtins, status, readiness, counters, close, subscribe: (listener) => store.subscribe(listener) }
}

/** The store, counting the operations that fail because the backend is unreachable. */
function countUnavailable (store: RegistryStore, counters: ServiceCounters): RegistryStore {
  const counted = async <T>(work: Promise<T>): Promise<T> => {
    try {
      return await work
    } catch (err) {
      if (isRegistryUnavailableError(err)) counters.registryUnavailable++
      throw err
    }
  }
  return {
    backend: store.backend,
    list: async (scope) => await counted(store.list(scope)),
    snapshot: async (scope) => await counted(store.snapshot(scope)),
    get: async (scope, serverId) => await counted(store.get(scope, serverId)),
    put: async (scope, serverId, config) => await counted(store.put(scope, serverId, config)),
    delete: async (scope, serverId) => await counted(store.delete(scope, serverId)),
    version: async (scope) => await counted(store.version(scope)),
    listUserIds: async () => await counted(store.listUserIds()),
    allocateSandboxUid: async (tenant, range) => await counted(store.allocateSandboxUid(tenant, range)),
    subscribe: (listener) => store.subscribe(listener),
    ping: async () => await counted(store.ping()),
    close: async () => await store.close()
  }
}

/** The connector, counting list/call operations that could not connect (GW_UPSTREAM_CONNECT). */
function countConnectFailures (connector: McpConnector, counters: ServiceCounters): McpConnector {
  const counted = async <T>(work: Promise<T>): Promise<T> => {
    try {
      return await work
    } catch (err) {
      if ((err as { code?: unknown } | null)?.code === 'GW_UPSTREAM_CONNECT') counters.mcpConnectFailures++
      throw err
    }
  }
  return {
    listTools: async (key, server, opts) => await counted(connector.listTools(key, server, opts)),
    callTool: async (key, server, name, args, opts) => await counted(connector.callTool(key, server, name, args, opts))
  }
}
