/**
 * Where the gateway keeps what it holds as an OAuth client of MCP servers (SPEC 16): per tenant
 * and server one connection record (tokens, the client registration, the discovery that found
 * the authorization server, the last challenge), and the pending authorizations, each found by
 * its `state` and taken once. Both are opaque strings here, sealed by the caller with
 * SECRETS_KEY (service.ts): this layer never sees a token in clear.
 *
 * Two implementations: memory (the embedded default: one instance) and Redis (every instance
 * reads the same records; a state taken on one is gone for all: GETDEL).
 */
import { createHash } from 'node:crypto'
import { createRedisClient, quitWithTimeout, taggedKey } from '../redis/index.js'
import type { RedisClient, RedisTarget } from '../redis/index.js'
import type { RegistryScope } from '../registry/types.js'

/** How long an authorization started by POST .../oauth/authorize may be completed (SPEC 16: 10 min). */
export const STATE_TTL_MS = 10 * 60_000

export interface OAuthStore {
  /** The sealed connection record of `serverId` in `scope`, or undefined when none is kept. */
  get: (scope: RegistryScope, serverId: string) => Promise<string | undefined>
  put: (scope: RegistryScope, serverId: string, sealed: string) => Promise<void>
  delete: (scope: RegistryScope, serverId: string) => Promise<void>
  /** Keeps a pending authorization under `state` for STATE_TTL_MS. */
  /** `owner` is whose authorization it is (scopeKey): the memory store keeps MEMORY_STATES_PER_OWNER of each. */
  putState: (state: string, sealed: string, owner: string) => Promise<void>
  /** The pending authorization of `state`, removed in the same step: a second take finds nothing. */
  takeState: (state: string) => Promise<string | undefined>
  close: () => Promise<void>
}

/** The scope part of a key: `g` or `u:<userId>` (userIds are ID_PATTERN-safe). */
export function scopeKey (scope: RegistryScope): string {
  return scope.kind === 'global' ? 'g' : `u:${scope.userId}`
}

// The state itself is a bearer secret of the flow: only its hash names a key.
const stateId = (state: string): string => createHash('sha256').update(state).digest('base64url')

/** Bounds of the memory store: pending authorizations past it drop the oldest (they expire anyway). */
const MEMORY_MAX_STATES = 10_000
/**
 * Pending authorizations one owner (a tenant, or the global scope) keeps in the memory store; its
 * next one drops its own oldest. Without it one tenant starting authorizations in a loop pushed
 * every other tenant's pending one out of the instance's 10,000.
 */
const MEMORY_STATES_PER_OWNER = 100

export class MemoryOAuthStore implements OAuthStore {
  readonly #records = new Map<string, string>()
  readonly #states = new Map<string, { sealed: string, expiresAt: number, owner: string }>()
  readonly #now: () => number

  constructor (opts: { now?: () => number } = {}) {
    this.#now = opts.now ?? Date.now
  }

  async get (scope: RegistryScope, serverId: string): Promise<string | undefined> {
    return this.#records.get(`${scopeKey(scope)}/${serverId}`)
  }

  async put (scope: RegistryScope, serverId: string, sealed: string): Promise<void> {
    this.#records.set(`${scopeKey(scope)}/${serverId}`, sealed)
  }

  async delete (scope: RegistryScope, serverId: string): Promise<void> {
    this.#records.delete(`${scopeKey(scope)}/${serverId}`)
  }

  async putState (state: string, sealed: string, owner: string): Promise<void> {
    const now = this.#now()
    let mine = 0
    let oldestMine: string | undefined
    for (const [id, entry] of this.#states) {
      if (entry.expiresAt <= now) {
        this.#states.delete(id)
      } else if (entry.owner === owner) {
        oldestMine ??= id
        mine++
      }
    }
    if (mine >= MEMORY_STATES_PER_OWNER && oldestMine !== undefined) this.#states.delete(oldestMine)
    // Insertion order is age: past the instance's bound, the oldest of anyone's go.
    for (const id of this.#states.keys()) {
      if (this.#states.size < MEMORY_MAX_STATES) break
      this.#states.delete(id)
    }
    this.#states.set(stateId(state), { sealed, expiresAt: now + STATE_TTL_MS, owner })
  }

  async takeState (state: string): Promise<string | undefined> {
    const id = stateId(state)
    const entry = this.#states.get(id)
    this.#states.delete(id)
    return entry !== undefined && entry.expiresAt > this.#now() ? entry.sealed : undefined
  }

  async close (): Promise<void> {}
}

/**
 * Redis layout (docs/CLUSTER.md#redis-key-layout), `p` the key prefix:
 * - `p{oauth:<scope>}:<serverId>`: the sealed record of a tenant's (`u:<userId>`) or a global (`g`) server;
 * - `p{oauth-state:<sha256 of state>}`: a pending authorization, expiring after STATE_TTL_MS, taken with GETDEL.
 * Its own connection, like the journal's and the approvals'.
 */
export class RedisOAuthStore implements OAuthStore {
  readonly #client: RedisClient
  readonly #prefix: string

  constructor (opts: { target: RedisTarget, keyPrefix: string, onError?: (err: Error) => void }) {
    this.#prefix = opts.keyPrefix
    this.#client = createRedisClient(opts.target, { lazyConnect: false, connectTimeoutMs: 2000, maxRetriesPerRequest: 1, commandTimeoutMs: 2000 })
    this.#client.on('error', (err: Error) => opts.onError?.(err))
  }

  #record (scope: RegistryScope, serverId: string): string {
    return taggedKey(this.#prefix, `oauth:${scopeKey(scope)}`, serverId)
  }

  #state (state: string): string {
    return taggedKey(this.#prefix, `oauth-state:${stateId(state)}`, 'pending')
  }

  async get (scope: RegistryScope, serverId: string): Promise<string | undefined> {
    return (await this.#client.get(this.#record(scope, serverId))) ?? undefined
  }

  async put (scope: RegistryScope, serverId: string, sealed: string): Promise<void> {
    await this.#client.set(this.#record(scope, serverId), sealed)
  }

  async delete (scope: RegistryScope, serverId: string): Promise<void> {
    await this.#client.del(this.#record(scope, serverId))
  }

  async putState (state: string, sealed: string, _owner: string): Promise<void> {
    // Each state its own key with its TTL: bounded by the tenant's rate limit x STATE_TTL_MS, and never evicting another's.
    await this.#client.set(this.#state(state), sealed, 'PX', STATE_TTL_MS)
  }

  async takeState (state: string): Promise<string | undefined> {
    return (await this.#client.getdel(this.#state(state))) ?? undefined
  }

  async close (): Promise<void> {
    await quitWithTimeout(this.#client, 2000)
  }
}
