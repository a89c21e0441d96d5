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
  /**
   * Definition pinning (SPEC 18, src/pins/): how the tool's definition compares with the one the
   * tenant pinned; undefined when it is the pinned one (or the tool's tier is not pinned). Asking
   * may pin a tool seen for the first time, on a later turn of the event loop.
   */
  definitionCheck?: (entry: CatalogEntry) => DefinitionChange | undefined
  /** `hold`: a changed definition is withheld from listings and calls until accepted; `warn` (default): only reported. */
  readonly pinning?: 'warn' | 'hold'
  limits: PolicyLimits
}

/** What a listing's `definition_changed` diagnostic and a held call say of a changed definition. */
export function definitionChangeMessage (name: string, change: DefinitionChange): string {
  if (change.unreadable === true) {
    return `Tool '${name}' cannot be compared with its pinned definition: the pins cannot be read (the registry does not answer); it is withheld under the policy's \`pinning: hold\` until they can`
  }
  const what = change.fields.length > 0 ? ` (${change.fields.join(', ')})` : ''
  const fate = change.held
    ? 'it is withheld under the policy\'s `pinning: hold` until an admin or the tenant accepts it (POST .../mcp/servers/{serverId}/pins)'
    : 'accept it with POST .../mcp/servers/{serverId}/pins'
  return `Tool '${name}' changed its definition${what} since it was pinned: ${change.oldDigest} is pinned, ${change.newDigest} is offered; ${fate}`
}

/** A tool whose definition is not the one pinned for the tenant and server. */
export interface DefinitionChange {
  /** `sha256:<hex>` of the pinned definition, and of the definition the server offers now. */
  oldDigest: string
  newDigest: string
  /** The top-level fields that differ (`description`, `inputSchema`...), when the pinned definition was kept. */
  fields: string[]
  /** Withheld under `pinning: hold` until accepted (POST .../pins). */
  held: boolean
  /** The pins could not be read (the registry store did not answer): nothing was compared; held under `hold`. */
  unreadable?: boolean
}

/** The policy of a tenant (undefined: no userId) for a request; an object that stays === while it is unchanged. */
export interface ToolPolicyProvider {
  effective: (userId: string | undefined) => Promise<ToolPolicy>
  /** The same policy when it can be answered without waiting (cached and fresh), else undefined: ask `effective`. */
  effectiveNow?: (userId: string | undefined) => ToolPolicy | undefined
}
