import type { Builtins, SandboxIsolation } from './builtin/index.js'
import { isRegistryUnavailableError } from './registry/errors.js'
import type { RegistryStore } from './registry/types.js'
import type { McpClientPoolStats, McpResilienceStats } from './remote-mcp/index.js'

type Sandbox = Builtins['sandbox']

/** GET /status: client pool counts and each client (the shape agent frameworks' gateway status uses), plus the sandbox and the registry backend. */
export interface GatewayStatus {
  totalClients: number
  globalClients: number
  userClients: number
  connectedClients: number
  totalTools: number
  clients: McpClientPoolStats['clients']
  sandbox: { mode: string, probe: unknown, warning: string | null, isolation: SandboxIsolation | null }
  registry: { backend: 'memory' | 'redis' | 'redis-cluster', secretsEncrypted: boolean }
  /** How the workspace quota is enforced (docs/ARCHITECTURE.md#workspace-quota); null without tier 1. */
  workspaceQuota: Builtins['quota'] | null
  remoteMcp: RemoteMcpResilience
}

/** One remote MCP server's circuit breaker in GET /status (closed ones without failures are left out). */
export interface BreakerStatus {
  pool: 'global' | 'tenant'
  /** The client key: `{serverId}` (global) or `user_{userId}_service_{serverId}`. */
  server: string
  state: 'closed' | 'open' | 'half-open'
  consecutiveFailures: number
  openedAt: string | null
  retryAt: string | null
  lastError: string | null
}

/** Retries and circuit breakers of the remote MCP pools. */
export interface RemoteMcpResilience {
  /** tools/call retried once on a fresh connection (read-only or idempotent tools). */
  retries: number
  /** Times a breaker opened (or reopened after a failed probe). */
  breakerOpens: number
  openBreakers: number
  breakers: BreakerStatus[]
}

/** GET /readyz. `ready` false means 503: the reasons say why. */
export interface Readiness {
  ready: boolean
  reasons: string[]
  registry: { backend: 'memory' | 'redis' | 'redis-cluster', reachable: boolean }
  sandbox: { mode: string, ok: boolean, reason: string, warning: string | null }
  sources: { builtin: number, functions: number, localMcpTools: number }
}

/** What GET /status reads: the two client pools, tier 1's sandbox (absent: an external built-in source), the registry. */
export interface StatusParts {
  pools: { global: McpClientPoolStats, tenant: McpClientPoolStats }
  resilience?: { global: McpResilienceStats, tenant: McpResilienceStats } | undefined
  sandbox: Sandbox | undefined
  registry: GatewayStatus['registry']
  workspaceQuota?: Builtins['quota'] | undefined
}

function resilienceStatus (r: StatusParts['resilience']): RemoteMcpResilience {
  if (r === undefined) return { retries: 0, breakerOpens: 0, openBreakers: 0, breakers: [] }
  const iso = (ms: number | null): string | null => ms === null ? null : new Date(ms).toISOString()
  const breakers = (['global', 'tenant'] as const).flatMap((pool) => r[pool].breakers.map((b) => ({
    pool, server: b.key, state: b.state, consecutiveFailures: b.consecutiveFailures, openedAt: iso(b.openedAt), retryAt: iso(b.retryAt), lastError: b.lastError
  })))
  return {
    retries: r.global.retries + r.tenant.retries,
    breakerOpens: r.global.breakerOpens + r.tenant.breakerOpens,
    openBreakers: r.global.open + r.tenant.open,
    breakers
  }
}

export function gatewayStatus ({ pools, resilience, sandbox, registry, workspaceQuota }: StatusParts): GatewayStatus {
  const g = pools.global
  const u = pools.tenant
  const clients = { ...g.clients, ...u.clients }
  return {
    totalClients: g.totalClients + u.totalClients,
    globalClients: g.totalClients,
    userClients: u.totalClients,
    connectedClients: g.connectedClients + u.connectedClients,
    totalTools: Object.values(clients).reduce((n, c) => n + c.tools, 0),
    clients,
    sandbox: { mode: sandbox?.mode ?? 'external', probe: sandbox?.probe ?? null, warning: sandbox?.warning ?? null, isolation: sandbox?.isolation ?? null },
    registry,
    workspaceQuota: workspaceQuota ?? null,
    remoteMcp: resilienceStatus(resilience)
  }
}

/** What GET /readyz checks and reports. */
export interface ReadinessParts {
  store: Pick<RegistryStore, 'backend' | 'ping'>
  /** Tier 1's sandbox; undefined when a test or embedder supplies its own built-in source. */
  sandbox: Sandbox | undefined
  sources: Readiness['sources']
}

/** Ready when the registry answers a ping and the sandbox probe passed (or there is no sandbox to probe). */
export async function readiness ({ store, sandbox, sources }: ReadinessParts): Promise<Readiness> {
  const reasons: string[] = []
  let reachable = true
  try {
    await store.ping()
  } catch (err) {
    reachable = false
    reasons.push(`registry (${store.backend}) unreachable: ${(err as Error).message}`)
  }
  const probeOk = sandbox ? sandbox.probe.ok || sandbox.mode === 'none' : true
  if (!probeOk) reasons.push(`sandbox probe failed: ${sandbox?.probe.reason ?? ''}`)
  return {
    ready: reasons.length === 0,
    reasons,
    registry: { backend: store.backend, reachable },
    sandbox: { mode: sandbox?.mode ?? 'external', ok: sandbox?.probe.ok ?? true, reason: sandbox?.probe.reason ?? '', warning: sandbox?.warning ?? null },
    sources
  }
}

/** Failures counted inside the domain, where the HTTP layer cannot see them (GET /metrics). */
export interface ServiceCounters {
  /** Remote MCP list/call operations that failed to connect (GW_UPSTREAM_CONNECT). */
  mcpConnectFailures: number
  /** Registry operations that failed because the backend (Redis) was unreachable. */
  registryUnavailable: number
}

/** The store, counting the operations that fail because the backend is unreachable. */
export function countUnavailable (store: RegistryStore, counters: ServiceCounters): RegistryStore {
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
    put: async (scope, serverId, config, opts) => await counted(store.put(scope, serverId, config, opts)),
    delete: async (scope, serverId) => await counted(store.delete(scope, serverId)),
    version: async (scope) => await counted(store.version(scope)),
    listUserIds: async () => await counted(store.listUserIds()),
    allocateSandboxUid: async (tenant, range) => await counted(store.allocateSandboxUid(tenant, range)),
    subscribe: (listener) => store.subscribe(listener),
    getDocument: async (kind, scope) => await counted(store.getDocument(kind, scope)),
    putDocument: async (kind, scope, value, opts) => await counted(store.putDocument(kind, scope, value, opts)),
    deleteDocument: async (kind, scope) => await counted(store.deleteDocument(kind, scope)),
    subscribeDocuments: (listener) => store.subscribeDocuments(listener),
    ping: async () => await counted(store.ping()),
    close: async () => await store.close()
  }
}
