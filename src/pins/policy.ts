import type { CatalogEntry } from '../routing/source.js'
import type { DefinitionChange, Guardrail, PolicyDecision, PolicyLimits, ToolPolicy, ToolPolicyProvider } from '../routing/policy.js'
import { TIER_TRAITS } from '../routing/types.js'
import { changedFields, definitionOf, digestOf } from './digest.js'
import type { Definition } from './digest.js'
import type { PinService, PinView } from './service.js'

const NO_GUARDRAILS: readonly Guardrail[] = []
/** Tenants whose combined policy is kept (beyond: the oldest is rebuilt when next asked). */
const MAX_COMPOSED = 10_000

/**
 * A tenant's tool policy with its definition pins (SPEC 18): the policy's decisions as they are,
 * plus `definitionCheck`, which compares a remote tool's definition with the pinned one. A tool
 * seen unpinned is queued to be pinned; a changed one to be recorded (once per digest).
 */
export class PinnedPolicy implements ToolPolicy {
  readonly limits: PolicyLimits
  readonly pinning: 'warn' | 'hold'
  readonly #inner: ToolPolicy
  readonly #view: PinView
  readonly #pins: PinService
  readonly #userId: string | undefined
  /** Per entry: the change (null: the pinned definition). Unpinned entries are not kept: they are asked again until pinned. */
  readonly #checks = new WeakMap<CatalogEntry, DefinitionChange | null>()

  constructor (inner: ToolPolicy, view: PinView, pins: PinService, userId: string | undefined) {
    this.#inner = inner
    this.#view = view
    this.#pins = pins
    this.#userId = userId
    this.limits = inner.limits
    this.pinning = inner.pinning ?? 'warn'
  }

  decide (entry: CatalogEntry): PolicyDecision {
    return this.#inner.decide(entry)
  }

  checkCall (entry: CatalogEntry, args: Record<string, unknown>): string | undefined | Promise<string | undefined> {
    return this.#inner.checkCall(entry, args)
  }

  guardrailsFor (entry: CatalogEntry): readonly Guardrail[] {
    return this.#inner.guardrailsFor?.(entry) ?? NO_GUARDRAILS
  }

  definitionCheck (entry: CatalogEntry): DefinitionChange | undefined {
    if (!TIER_TRAITS[entry.route].pinned) return undefined
    const known = this.#checks.get(entry)
    if (known !== undefined) return known ?? undefined
    const digested = digestOf(entry.spec)
    // Nothing to compare with (the store did not answer): `hold` holds, `warn` has nothing to report. Not kept: asked again.
    if (this.#view.unreadable) {
      return this.pinning === 'hold' ? { oldDigest: 'unknown', newDigest: digested.digest, fields: [], held: true, unreadable: true } : undefined
    }
    const verdict = this.#view.verdict(entry, digested)
    if (verdict.kind === 'unpinned') {
      this.#pins.observe(this.#userId, entry, digested)
      return undefined
    }
    if (verdict.kind === 'same') {
      this.#checks.set(entry, null)
      return undefined
    }
    if (verdict.pin.pending?.digest !== digested.digest) this.#pins.observe(this.#userId, entry, digested)
    const before = verdict.pin.definition === null ? undefined : JSON.parse(verdict.pin.definition) as Definition
    const change: DefinitionChange = {
      oldDigest: verdict.pin.digest,
      newDigest: digested.digest,
      fields: before === undefined ? [] : changedFields(before, definitionOf(entry.spec)),
      held: this.pinning === 'hold'
    }
    this.#checks.set(entry, change)
    return change
  }
}

/**
 * The tool policies with the pins: what the Gateway asks for a tenant's policy. The combined object
 * stays the same (===) while neither the policy nor the pins changed, so listings cached against it
 * stay valid, and a change to either (on any instance) is seen at once.
 */
export class PinningPolicies implements ToolPolicyProvider {
  readonly #policies: ToolPolicyProvider
  readonly #pins: PinService
  readonly #composed = new Map<string, { policy: ToolPolicy, view: PinView, pinned: PinnedPolicy }>()

  constructor (policies: ToolPolicyProvider, pins: PinService) {
    this.#policies = policies
    this.#pins = pins
  }

  async effective (userId: string | undefined): Promise<ToolPolicy> {
    const [policy, view] = await Promise.all([this.#policies.effective(userId), this.#pins.view(userId)])
    return this.#compose(userId, policy, view)
  }

  effectiveNow (userId: string | undefined): ToolPolicy | undefined {
    const policy = this.#policies.effectiveNow?.(userId)
    if (policy === undefined) return undefined
    const view = this.#pins.viewNow(userId)
    return view === undefined ? undefined : this.#compose(userId, policy, view)
  }

  #compose (userId: string | undefined, policy: ToolPolicy, view: PinView): PinnedPolicy {
    const key = userId ?? ''
    const known = this.#composed.get(key)
    if (known !== undefined && known.policy === policy && known.view === view) return known.pinned
    const pinned = new PinnedPolicy(policy, view, this.#pins, userId)
    this.#composed.delete(key)
    this.#composed.set(key, { policy, view, pinned })
    if (this.#composed.size > MAX_COMPOSED) this.#composed.delete(this.#composed.keys().next().value as string)
    return pinned
  }
}
