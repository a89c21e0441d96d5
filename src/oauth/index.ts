/**
 * The gateway as an OAuth client of MCP servers (SPEC 16), assembled from the config: the store
 * (Redis when configured, else memory), the refresh lock (a Redis lease across instances, else in
 * process), and the egress-guarded fetch of the remote tiers.
 */
import type { Config } from '../config.js'
import { KeyedMutex, LeaseLock } from '../cluster/index.js'
import type { Coordination } from '../cluster/index.js'
import type { Logger } from '../logger.js'
import type { RedisTarget } from '../redis/index.js'
import type { SecretBox } from '../registry/secrets.js'
import type { RegistryScope } from '../registry/types.js'
import type { RemoteMcp } from '../remote-mcp/index.js'
import { UpstreamOAuth } from './service.js'
import { MemoryOAuthStore, RedisOAuthStore } from './store.js'

export { OAuthFacade } from './facade.js'
export type { UpstreamOAuth } from './service.js'

/** A refresh holds its lock for one token request (bounded by the flow's 10 s deadline). */
const REFRESH_LEASE_MS = 15_000

export function createUpstreamOAuth (
  config: Config,
  logger: Logger,
  deps: { remote: Pick<RemoteMcp, 'dropClients' | 'fetchFor'>, box: SecretBox, coordination: Coordination | undefined, redisTarget: RedisTarget | undefined }
): { service: UpstreamOAuth, forget: (scope: RegistryScope, serverId: string) => void, close: () => Promise<void> } {
  const store = deps.redisTarget !== undefined
    ? new RedisOAuthStore({
      target: deps.redisTarget,
      keyPrefix: config.redisKeyPrefix,
      onError: (err) => { logger.debug({ err: err.message }, 'OAuth store connection error') }
    })
    : new MemoryOAuthStore()
  const service = new UpstreamOAuth({
    store,
    box: deps.box,
    lock: deps.coordination !== undefined ? new LeaseLock(deps.coordination, { leaseMs: REFRESH_LEASE_MS }) : new KeyedMutex(),
    publicUrl: config.publicUrl,
    clientMetadataUrl: config.oauthClientMetadataUrl,
    returnAllow: config.oauthReturnAllow,
    fetchFor: deps.remote.fetchFor,
    onChanged: (scope, serverId) => {
      deps.remote.dropClients(scope, serverId)
        .catch((err: unknown) => { logger.warn({ err, serverId }, 'dropping the clients of a server whose OAuth tokens changed failed') })
    },
    logger
  })
  return {
    service,
    forget: (scope, serverId) => {
      store.delete(scope, serverId).catch((err: unknown) => { logger.warn({ err, serverId }, 'forgetting the OAuth tokens of a removed server failed') })
    },
    close: async () => { await store.close() }
  }
}
