import type { AllowList } from './allow-list.js'
import type { ToolPolicy } from './policy.js'
import type { CatalogEntry } from './source.js'
import type { ToolOutcome } from './types.js'

/** What a meta tool's call knows of its request: the allow-list it works over, the tenant, the policy. */
export interface MetaCall {
  /** The request's allow-list; absent: the call named none (POST /invoke without `allow`). */
  allow: AllowList | undefined
  userId: string | undefined
  policy: ToolPolicy | undefined
  signal: AbortSignal
}

/**
 * Tools the gateway answers itself over the request's own allow-list (`tool_search`, SPEC 17),
 * never a tier's. Their names are reserved (naming/builtin-names.ts META_TOOL_NAMES): the router
 * asks them before every tier, so a server's tool of the same name is listed under its qualified
 * name. Their entries are `route: "builtin"`, `source: "gateway"`; the tool policy decides them like any tool.
 */
export interface MetaTools {
  resolve: (name: string) => CatalogEntry | undefined
  call: (entry: CatalogEntry, args: Record<string, unknown>, req: MetaCall) => Promise<ToolOutcome>
}
