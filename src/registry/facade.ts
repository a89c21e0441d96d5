import { HttpError } from '../errors.js'
import type { ServerRegistry, ServerView } from './registry-service.js'
import type { RegistryScope } from './types.js'
import type { ToolRouter } from '../routing/router.js'
import { actingUserId } from '../routing/tenancy.js'
import type { Caller } from '../routing/types.js'

/**
 * The MCP server registry's use cases, one method per HTTP operation, with the tenancy rules
 * applied here rather than in the routes: global servers are the operator's (an admin key
 * only: their configs name internal URLs and commands), and a tenant key reaches only its own
 * userId's servers. Failures are thrown as HttpError (GW_FORBIDDEN, GW_TENANT_MISMATCH, and
 * the registry's own codes).
 */
export class RegistryFacade {
  readonly #registry: ServerRegistry
  readonly #router: ToolRouter
  readonly #onRemoved: ((scope: RegistryScope, serverId: string) => Promise<void>) | undefined

  /** `onRemoved`: what else goes with a removed server (its definition pins); awaited, never failing the removal. */
  constructor (registry: ServerRegistry, router: ToolRouter, opts: { onRemoved?: (scope: RegistryScope, serverId: string) => Promise<void> } = {}) {
    this.#registry = registry
    this.#router = router
    this.#onRemoved = opts.onRemoved
  }

  /** A scope's servers, secrets masked. */
  async list (caller: Caller, requested: RegistryScope): Promise<ServerView[]> {
    return await this.#registry.list(authorize(caller, requested))
  }

  /** Creates or replaces a server. Only an admin may register stdio servers (they run a command on the gateway host). */
  async put (caller: Caller, requested: RegistryScope, serverId: string, input: unknown): Promise<{ created: boolean, version: number, server: ServerView }> {
    const scope = authorize(caller, requested)
    const result = await this.#registry.put(scope, serverId, input, { allowStdio: scope.kind === 'global' || caller.isAdmin })
    if (!result.ok) throw result.error
    return result.value
  }

  async remove (caller: Caller, requested: RegistryScope, serverId: string): Promise<{ version: number }> {
    const scope = authorize(caller, requested)
    const result = await this.#registry.remove(scope, serverId)
    if (!result.ok) throw result.error
    await this.#onRemoved?.(scope, serverId)
    return result.value
  }

  /** The live tools/list of a global server (debugging; admin only, like every global config). */
  async liveGlobalTools (caller: Caller, serverId: string, signal: AbortSignal): Promise<unknown[]> {
    authorize(caller, { kind: 'global' })
    const result = await this.#router.liveTools('global_mcp', serverId, { userId: undefined, signal })
    if (!result.ok) throw result.error
    return result.tools
  }

  /** The live tools/list of one of a tenant's servers (debugging). */
  async liveTools (caller: Caller, userId: string, serverId: string, signal: AbortSignal): Promise<unknown[]> {
    const scope = authorize(caller, { kind: 'user', userId })
    if (scope.kind !== 'user') throw new Error('unreachable')
    const result = await this.#router.liveTools('user_mcp', serverId, { userId: scope.userId, signal })
    if (!result.ok) throw result.error
    return result.tools
  }
}

/** The scope `caller` may act on when it asks for `requested`, or the refusal (GW_FORBIDDEN, GW_TENANT_MISMATCH). */
export function authorize (caller: Caller, requested: RegistryScope): RegistryScope {
  if (requested.kind === 'global') {
    if (!caller.isAdmin) throw new HttpError('GW_FORBIDDEN', 'Global servers are managed with an admin key')
    return requested
  }
  // A tenant key may only name itself (GW_TENANT_MISMATCH otherwise).
  return { kind: 'user', userId: actingUserId(caller, requested.userId) ?? requested.userId }
}
