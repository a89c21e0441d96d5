import type { CatalogEntry } from './source.js'
import type { WorkspaceLimits } from './types.js'

/**
 * What the tool policy says about one tool for one tenant. `approval-required` names the
 * `requireApproval` pattern that matched: such a call is held for a human's decision (the
 * gateway's approvals) and runs only once approved.
 */
export type PolicyDecision =
  | { kind: 'allow' }
  | { kind: 'deny', message: string }
  | { kind: 'approval-required', rule: string }

/** One guardrail of a tenant's policy (SPEC 18) as the router runs it (src/guardrails/). */
export interface Guardrail {
  /** Where it is written, for reports and messages: `default guardrails/2`. */
  readonly id: string
  readonly on: 'arguments' | 'result'
  readonly check: 'secrets' | 'pii' | 'injection' | 'webhook'
  readonly action: 'redact' | 'block' | 'flag'
  readonly url?: string | undefined
  readonly timeoutMs?: number | undefined
  readonly failOpen?: boolean | undefined
}

/** Ceilings a policy puts on a call: the request may lower them, never raise them. */
export interface PolicyLimits extends Partial<WorkspaceLimits> {
  /** The call's deadline (below INVOKE_TIMEOUT_MS). */
  timeoutMs?: number
}

/**
 * The effective tool policy of one tenant (the default combined with the tenant's own). One
 * object decides for listing (GET /tools, MCP tools/list) and invoking (/invoke, /invoke/batch,
 * MCP tools/call), so a name is listed exactly when invoking it is not refused by the policy.
 * The decision depends on the catalog entry only, never on the name the caller used for it.
 */
export interface ToolPolicy {
  decide: (entry: CatalogEntry) => PolicyDecision
  /**
   * Checks the validated arguments of a call the policy allows (a bash command against
   * `bash.denyCommands`): the refusal's message naming the rule, or undefined. A check that runs
   * off the event loop answers a promise; one with nothing to check answers at once.
   */
  checkCall: (entry: CatalogEntry, args: Record<string, unknown>) => string | undefined | Promise<string | undefined>
  /** The guardrails that apply to calls of this tool, in order (none: an empty array, the same one every time). */
  guardrailsFor?: (entry: CatalogEntry) => readonly Guardrail[]
  limits: PolicyLimits
}

/** The policy of a tenant (undefined: no userId) for a request; an object that stays === while it is unchanged. */
export interface ToolPolicyProvider {
  effective: (userId: string | undefined) => Promise<ToolPolicy>
  /** The same policy when it can be answered without waiting (cached and fresh), else undefined: ask `effective`. */
  effectiveNow?: (userId: string | undefined) => ToolPolicy | undefined
}
