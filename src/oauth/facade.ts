/**
 * The OAuth routes' use cases (SPEC 16), one method per operation, with the registry's tenancy
 * rules: a tenant key reaches only its own servers' authorizations, global servers are an admin's.
 * The callback is public: its `state` alone names the tenant and server it completes.
 */
import { HttpError } from '../errors.js'
import { authorize as scopeFor } from '../registry/facade.js'
import type { ServerRegistry } from '../registry/registry-service.js'
import type { ServerConfig } from '../registry/server-config.js'
import type { RegistryScope } from '../registry/types.js'
import type { Caller } from '../routing/types.js'
import type { OAuthStatus, UpstreamOAuth } from './service.js'

export class OAuthFacade {
  readonly #oauth: UpstreamOAuth
  readonly #registry: ServerRegistry

  constructor (oauth: UpstreamOAuth, registry: ServerRegistry) {
    this.#oauth = oauth
    this.#registry = registry
  }

  async authorize (caller: Caller, requested: RegistryScope, serverId: string, returnTo?: string): Promise<{ authorizationUrl: string, expiresAt: string }> {
    const { scope, config } = await this.#server(caller, requested, serverId)
    return await this.#oauth.authorize(scope, serverId, config, returnTo)
  }

  async status (caller: Caller, requested: RegistryScope, serverId: string): Promise<OAuthStatus> {
    const { scope, config } = await this.#server(caller, requested, serverId)
    return await this.#oauth.status(scope, serverId, config)
  }

  async disconnect (caller: Caller, requested: RegistryScope, serverId: string): Promise<void> {
    const { scope, config } = await this.#server(caller, requested, serverId)
    await this.#oauth.disconnect(scope, serverId, config)
  }

  /** The public callback: `returnTo` when the authorization named one, else nothing (the route answers a page). */
  async callback (query: { code?: string, state?: string, iss?: string, error?: string }): Promise<{ serverId: string, returnTo?: string }> {
    const done = await this.#oauth.complete(query, async (scope, serverId) => await this.#registry.opened(scope, serverId))
    return { serverId: done.serverId, ...(done.returnTo !== undefined ? { returnTo: done.returnTo } : {}) }
  }

  /** The client ID metadata document (`/oauth/client-metadata.json`). */
  clientMetadata (): Record<string, unknown> {
    const metadata = this.#oauth.clientMetadata()
    if (metadata.redirect_uris.length === 0) throw new HttpError('GW_NOT_FOUND', 'PUBLIC_URL is not set: the gateway is no OAuth client')
    return metadata
  }

  async #server (caller: Caller, requested: RegistryScope, serverId: string): Promise<{ scope: RegistryScope, config: ServerConfig }> {
    const scope = scopeFor(caller, requested)
    const config = await this.#registry.opened(scope, serverId)
    if (config === undefined) {
      throw new HttpError('GW_SERVER_NOT_FOUND', `No server '${serverId}' is registered ${scope.kind === 'global' ? 'globally' : 'for this tenant'}`)
    }
    return { scope, config }
  }
}
