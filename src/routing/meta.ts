import type { AllowList } from './allow-list.js'
import type { ToolPolicy } from './policy.js'
import type { CatalogEntry } from './source.js'
import type { CallContext, ToolOutcome } from './types.js'

/** What a meta tool's call knows of its request: the allow-list it works over, the tenant, the policy, the call itself. */
export interface MetaCall {
  /** The request's allow-list; absent: the call named none (POST /invoke without `allow`). */
  allow: AllowList | undefined
  userId: string | undefined
  policy: ToolPolicy | undefined
  signal: AbortSignal
  /** The call's context: its id, caller, workspace request and deadline (code mode's inner calls act as it). */
  ctx: CallContext
  /** Whether the caller (or the journal) asked for the trace. */
  includeTrace: boolean
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

/** Several meta tools as one (the router asks one): each answers for its own names. */
export function metaToolSet (tools: readonly MetaTools[]): MetaTools {
  const owners = new Map<CatalogEntry, MetaTools>()
  return {
    resolve: (name) => {
      for (const tool of tools) {
        const entry = tool.resolve(name)
        if (entry !== undefined) {
          owners.set(entry, tool)
          return entry
        }
      }
      return undefined
    },
    call: async (entry, args, req) => {
      const owner = owners.get(entry) ?? tools.find((t) => t.resolve(entry.name) !== undefined)
      if (owner === undefined) return { ok: false, reason: 'tool-error', message: `No meta tool answers for '${entry.name}'` }
      return await owner.call(entry, args, req)
    }
  }
}
