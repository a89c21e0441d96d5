import { HttpError } from '../errors.js'
import type { Logger } from '../logger.js'
import { DocumentCache } from '../registry/document-cache.js'
import { scopeKey } from '../registry/scoped-cache.js'
import type { RegistryScope, RegistryStore } from '../registry/types.js'
import type { ToolPolicy, ToolPolicyProvider } from '../routing/policy.js'
import { actingUserId } from '../routing/tenancy.js'
import type { Caller } from '../routing/types.js'
import { CommandGuard } from './command-guard.js'
import { parsePolicy } from './document.js'
import type { PolicyDocument } from './document.js'
import { EffectivePolicy } from './effective.js'

/** One scope's policy as read from the store. */
interface Loaded {
  policy: PolicyDocument | undefined
  version: number
  updatedAt: string | null
}

/** What GET /policy and GET /users/{userId}/policy answer. */
export interface PolicyView {
  /** The stored policy, or null when none is set. */
  policy: PolicyDocument | null
  /** The (kind, scope) version: it grows with every write and delete, 0 when never written. */
  version: number
  updatedAt: string | null
}

/** Tenants whose policy stays cached; beyond it the least recently read are dropped (and re-read). */
const MAX_CACHED_SCOPES = 10_000

const DEFAULT_SCOPE: RegistryScope = { kind: 'global' }

/**
 * Tool policies (docs/ARCHITECTURE.md#policies): the default (the registry's global scope) and
 * one per tenant (its user scope), stored as documents in the registry store with a version
 * and the registry's change events, so a write on any instance is enforced by every instance at
 * once. Reads are cached per scope and dropped on a change event; while the store is down the
 * last policy read keeps being enforced, and a scope never read fails the request (503) rather
 * than run without its policy.
 */
export class PolicyService implements ToolPolicyProvider {
  readonly #store: RegistryStore
  readonly #logger: Logger
  readonly #guard: CommandGuard
  /** Effective policies by tenant ('' without one), rebuilt when either of its documents changes. */
  readonly #effective = new Map<string, { base: Loaded, own: Loaded | undefined, policy: EffectivePolicy }>()

  // A tenant dropped by the bound takes its effective policy along.
  readonly #documents: DocumentCache<Loaded>

  constructor (store: RegistryStore, logger: Logger, opts: { guard?: CommandGuard } = {}) {
    this.#store = store
    this.#logger = logger
    this.#guard = opts.guard ?? new CommandGuard()
    this.#documents = new DocumentCache<Loaded>(store, 'policy', {
      parse: (doc) => doc === undefined
        ? { policy: undefined, version: 0, updatedAt: null }
        : { policy: parsePolicy(doc.value), version: doc.version, updatedAt: doc.updatedAt },
      // The very same version stays the same object, so effective policies built on it are kept.
      same: (cached, read) => cached.version === read.version && cached.updatedAt === read.updatedAt,
      onStaleRead: (err, scope) => { this.#logger.warn({ err, scope: scopeKey(scope) }, 'policy store unavailable: enforcing the last policy read') },
      maxScopes: MAX_CACHED_SCOPES,
      onEvict: (scope) => { this.#effective.delete(scope.kind === 'global' ? '' : scope.userId) }
    })
  }

  /** The policy every call of the tenant (or of no tenant) obeys; the same object while nothing changed. */
  async effective (userId: string | undefined): Promise<ToolPolicy> {
    // Every call asks: while nothing changed, answer from the cache without a store round.
    const cached = this.effectiveNow(userId)
    if (cached !== undefined) return cached
    const [base, own] = await Promise.all([
      this.#documents.load(DEFAULT_SCOPE),
      userId === undefined ? undefined : this.#documents.load({ kind: 'user', userId })
    ])
    const key = userId ?? ''
    const known = this.#effective.get(key)
    if (known !== undefined && known.base === base && known.own === own) return known.policy
    const policy = new EffectivePolicy({ default: base.policy, tenant: own?.policy }, this.#guard)
    this.#effective.set(key, { base, own, policy })
    return policy
  }

  /** The cached effective policy when both of its documents are still fresh, else undefined. */
  effectiveNow (userId: string | undefined): ToolPolicy | undefined {
    const known = this.#effective.get(userId ?? '')
    if (known === undefined) return undefined
    const base = this.#documents.peek(DEFAULT_SCOPE)
    if (base?.fresh !== true || base.value !== known.base) return undefined
    if (userId === undefined) return known.own === undefined ? known.policy : undefined
    // Reading the tenant's own counts as a use for the bound, as a load does.
    const own = this.#documents.get({ kind: 'user', userId })
    if (own?.fresh !== true || own.value !== known.own) return undefined
    return known.policy
  }

  /** GET: an admin reads any policy, a tenant key only its own (and not the default's route). */
  async read (caller: Caller, scope: RegistryScope): Promise<PolicyView> {
    const loaded = await this.#documents.load(authorize(caller, scope, 'read'))
    return { policy: loaded.policy ?? null, version: loaded.version, updatedAt: loaded.updatedAt }
  }

  /** The default policy a tenant's calls also obey (shown to the tenant with its own). */
  async defaultPolicy (): Promise<PolicyDocument | null> {
    return (await this.#documents.load(DEFAULT_SCOPE)).policy ?? null
  }

  /** PUT (admin): validates strictly, then creates or replaces. */
  async write (caller: Caller, scope: RegistryScope, input: unknown): Promise<PolicyView & { created: boolean }> {
    const target = authorize(caller, scope, 'write')
    const policy = parsePolicy(input)
    const { version, created } = await this.#store.putDocument('policy', target, policy)
    return { policy, version, updatedAt: new Date().toISOString(), created }
  }

  /** DELETE (admin): the tenant goes back to the default policy alone. */
  async remove (caller: Caller, scope: RegistryScope): Promise<{ deleted: boolean, version: number }> {
    return await this.#store.deleteDocument('policy', authorize(caller, scope, 'write'))
  }

  async close (): Promise<void> {
    this.#documents.close()
    await this.#guard.close()
  }
}

/** Policies are written by admins; a tenant key reads only its own. */
function authorize (caller: Caller, scope: RegistryScope, action: 'read' | 'write'): RegistryScope {
  if (action === 'write' && !caller.isAdmin) throw new HttpError('GW_FORBIDDEN', 'Tool policies are written with an admin key')
  if (scope.kind === 'global') {
    if (!caller.isAdmin) throw new HttpError('GW_FORBIDDEN', 'The default tool policy is managed with an admin key')
    return scope
  }
  return { kind: 'user', userId: actingUserId(caller, scope.userId) ?? scope.userId }
}
