import { HttpError } from '../errors.js'
import type { HttpErrorCode } from '../errors.js'
import { checkUrl } from '../egress/ssrf.js'
import type { EgressPolicy } from '../egress/ssrf.js'
import { isValidId, normalizeServerConfig } from './server-config.js'
import type { ServerConfig } from './server-config.js'
import { maskedSecretsChangingOrigin, restoreMaskedSecrets, secretContext } from './secrets.js'
import type { SecretBox } from './secrets.js'
import { ServerLimitError } from './types.js'
import type { RegistryScope, RegistryStore } from './types.js'

/** A server as the REST API shows it: secrets masked. */
export interface ServerView {
  serverId: string
  config: ServerConfig
  updatedAt: string
}

export type RegistryResult<T> = { ok: true, value: T } | { ok: false, error: HttpError }

/**
 * The registry use cases behind the REST API (docs/ARCHITECTURE.md#registry): validation, the tenant rules (no
 * stdio; SSRF-checked URLs), secrets sealed at rest and masked on read.
 */
export class ServerRegistry {
  readonly #store: RegistryStore
  readonly #box: SecretBox
  readonly #egress: EgressPolicy
  readonly #onStored: ((scope: RegistryScope, serverId: string, config: ServerConfig) => void) | undefined
  readonly #maxServersPerTenant: number | undefined

  /**
   * `onStored` is told of every server this instance stored (the remote tiers start a stdio server's first connection).
   * `maxServersPerTenant` (TENANT_MAX_SERVERS) bounds each tenant's servers, whoever registers them; the global scope is the operator's.
   */
  constructor (
    store: RegistryStore,
    box: SecretBox,
    egress: EgressPolicy,
    opts: { onStored?: (scope: RegistryScope, serverId: string, config: ServerConfig) => void, maxServersPerTenant?: number } = {}
  ) {
    this.#store = store
    this.#box = box
    this.#egress = egress
    this.#onStored = opts.onStored
    this.#maxServersPerTenant = opts.maxServersPerTenant
  }

  get backend (): 'memory' | 'redis' | 'redis-cluster' {
    return this.#store.backend
  }

  async list (scope: RegistryScope): Promise<ServerView[]> {
    const servers = await this.#store.list(scope)
    return servers
      .map((s) => ({ serverId: s.serverId, config: this.#box.maskConfig(s.config, secretContext(scope, s.serverId)), updatedAt: s.updatedAt }))
      .sort((a, b) => (a.serverId < b.serverId ? -1 : 1))
  }

  /**
   * Creates or replaces a server. Stdio is for admins only (it runs a command on the gateway
   * host); a tenant's URL must pass the SSRF guard. Header/env values sent back exactly as
   * masked keep their stored value, so a client can GET, edit and PUT.
   */
  async put (
    scope: RegistryScope,
    serverId: string,
    input: unknown,
    opts: { allowStdio: boolean, fromFile?: boolean }
  ): Promise<RegistryResult<{ created: boolean, version: number, server: ServerView }>> {
    if (!isValidId(serverId)) return fail('GW_BAD_REQUEST', 'serverId must match ^[A-Za-z0-9][A-Za-z0-9-]{0,63}$')
    const normalized = normalizeServerConfig(input, { allowStdio: opts.allowStdio, ...(opts.fromFile ? { unknownKeys: 'strip' as const } : {}) })
    if (!normalized.ok) return fail(normalized.code, normalized.message)
    let config = normalized.config
    if (scope.kind === 'user' && config.url !== undefined) {
      const checked = await checkUrl(config.url, this.#egress)
      if (!checked.ok) return fail('GW_EGRESS_BLOCKED', `The server URL is not allowed: ${checked.message}`)
    }
    const context = secretContext(scope, serverId)
    const previous = await this.#store.get(scope, serverId)
    if (previous) {
      const opened = this.#box.openConfig(previous.config, context)
      if (opened.ok) {
        // A masked value means "keep the stored secret" only where that secret was meant to go.
        const moved = maskedSecretsChangingOrigin(config, opened.config)
        if (moved.length > 0) {
          return fail('GW_SECRET_ORIGIN_CHANGED', `${moved.join(', ')}: a masked value (such as "Bearer ****") keeps the stored secret only while the place it is sent to stays the same (the server's origin: scheme, host and port; for auth.clientSecret also auth.authorizationServer), and this change moves it; send the actual value, or leave the field out`)
        }
        config = restoreMaskedSecrets(config, opened.config)
      }
    }
    const max = scope.kind === 'user' ? this.#maxServersPerTenant : undefined
    let stored: { created: boolean, version: number }
    try {
      stored = await this.#store.put(scope, serverId, this.#box.sealConfig(config, context), max === undefined ? {} : { maxServers: max })
    } catch (err) {
      if (!(err instanceof ServerLimitError)) throw err
      return fail('GW_TENANT_QUOTA_EXCEEDED', `Tenant server limit reached: the tenant has ${err.maxServers} remote MCP servers, TENANT_MAX_SERVERS; delete one to make room (replacing one is allowed)`)
    }
    const { created, version } = stored
    this.#onStored?.(scope, serverId, config)
    return {
      ok: true,
      value: { created, version, server: { serverId, config: this.#box.maskConfig(config, ''), updatedAt: new Date().toISOString() } }
    }
  }

  async remove (scope: RegistryScope, serverId: string): Promise<RegistryResult<{ version: number }>> {
    if (!isValidId(serverId)) return fail('GW_BAD_REQUEST', 'serverId must match ^[A-Za-z0-9][A-Za-z0-9-]{0,63}$')
    const { deleted, version } = await this.#store.delete(scope, serverId)
    if (!deleted) return fail('GW_SERVER_NOT_FOUND', `No server '${serverId}' is registered ${scope.kind === 'global' ? 'globally' : 'for this tenant'}`)
    return { ok: true, value: { version } }
  }

  async get (scope: RegistryScope, serverId: string): Promise<ServerView | undefined> {
    const s = await this.#store.get(scope, serverId)
    return s && { serverId, config: this.#box.maskConfig(s.config, secretContext(scope, serverId)), updatedAt: s.updatedAt }
  }

  /** The stored config with its secrets opened (for the gateway's own use, never shown), or undefined when there is none or it does not open. */
  async opened (scope: RegistryScope, serverId: string): Promise<ServerConfig | undefined> {
    if (!isValidId(serverId)) return undefined
    const s = await this.#store.get(scope, serverId)
    if (s === undefined) return undefined
    const opened = this.#box.openConfig(s.config, secretContext(scope, serverId))
    return opened.ok ? opened.config : undefined
  }

  /**
   * Upserts the global servers of MCP_SERVERS_FILE (`{"mcpServers": {...}}`) at start-up.
   * Every problem is collected and named; unchanged entries are not rewritten.
   */
  async loadServersFile (document: unknown, source: string): Promise<{ loaded: number, problems: string[] }> {
    const servers = (document as { mcpServers?: unknown } | null)?.mcpServers
    if (servers === null || typeof servers !== 'object' || Array.isArray(servers)) {
      return { loaded: 0, problems: [`${source}: expected {"mcpServers": {"<serverId>": {...}}}`] }
    }
    const problems: string[] = []
    let loaded = 0
    for (const [serverId, input] of Object.entries(servers as Record<string, unknown>)) {
      const result = await this.#upsertIfChanged(serverId, input)
      if (result !== undefined) problems.push(`${source}: server '${serverId}': ${result}`)
      else loaded++
    }
    return { loaded, problems }
  }

  async #upsertIfChanged (serverId: string, input: unknown): Promise<string | undefined> {
    if (!isValidId(serverId)) return 'serverId must match ^[A-Za-z0-9][A-Za-z0-9-]{0,63}$'
    const normalized = normalizeServerConfig(input, { allowStdio: true, unknownKeys: 'strip' })
    if (!normalized.ok) return normalized.message
    const scope: RegistryScope = { kind: 'global' }
    const existing = await this.#store.get(scope, serverId)
    if (existing) {
      const opened = this.#box.openConfig(existing.config, secretContext(scope, serverId))
      if (opened.ok && JSON.stringify(opened.config) === JSON.stringify(normalized.config)) return undefined
    }
    await this.#store.put(scope, serverId, this.#box.sealConfig(normalized.config, secretContext(scope, serverId)))
    return undefined
  }
}

function fail (code: HttpErrorCode, message: string): { ok: false, error: HttpError } {
  return { ok: false, error: new HttpError(code, message) }
}
