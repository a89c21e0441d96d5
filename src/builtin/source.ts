import type { CatalogEntry, SourceScope, Selection, SourceListing, ToolSource } from '../tools/source.js'
import { fitJsonValue } from '../tools/output.js'
import { StaticCatalog } from '../tools/static-catalog.js'
import type { CallContext, Caller, ToolOutcome, WorkspaceRequest } from '../tools/types.js'
import { KeyedMutex } from './keyed-mutex.js'
import { ToolError } from './types.js'
import type { BuiltinName } from '../naming/builtin-names.js'
import type { BuiltinTool, Workspace } from './types.js'
import type { WorkspaceUsage } from './workspace/usage.js'

/** Resolves a request's workspace context to real paths (implemented by WorkspaceManager). */
export interface WorkspaceResolver {
  resolve: (req: WorkspaceRequest, caller: Caller) => Promise<Workspace>
}

/**
 * Tier 1: the built-in coding tools, each call scoped to the request's workspace. Calls that
 * may change a workspace are serialised per workspace, so concurrent edits (batch invokes,
 * parallel requests) never lose an update.
 */
export class BuiltinSource implements ToolSource {
  readonly tier = 'builtin' as const
  readonly #catalog = new StaticCatalog()
  readonly #workspaces: WorkspaceResolver
  readonly #writes = new KeyedMutex()
  readonly #usage: WorkspaceUsage | undefined

  constructor (tools: readonly BuiltinTool[], workspaces: WorkspaceResolver, opts: { usage?: WorkspaceUsage } = {}) {
    this.#workspaces = workspaces
    this.#usage = opts.usage
    for (const tool of tools) {
      this.#catalog.add({
        route: 'builtin',
        source: 'builtin',
        name: tool.name,
        spec: { name: tool.name, description: tool.description, inputSchema: tool.inputSchema },
        ref: tool
      })
    }
  }

  get names (): BuiltinName[] {
    return this.#catalog.names as BuiltinName[]
  }

  async list (selection: Selection | 'all'): Promise<SourceListing> {
    return this.#catalog.list(selection)
  }

  async resolve (name: string, _scope: SourceScope): Promise<CatalogEntry | undefined> {
    return this.#catalog.get(name)
  }

  async call (entry: CatalogEntry, args: Record<string, unknown>, ctx: CallContext): Promise<ToolOutcome> {
    const tool = entry.ref as BuiltinTool
    try {
      const workspace = await this.#workspaces.resolve(ctx.workspace, ctx.caller)
      const run = async (): Promise<ToolOutcome> => {
        // Built-in results are JSON and must stay valid JSON under the cap (docs/ARCHITECTURE.md#result-and-trace): their long
        // fields are trimmed here, before the router's generic cut of the text could break them.
        // The workspace's cap is the server's, or lower when the request asked for less.
        const fitted = fitJsonValue(await tool.run(args, { workspace, signal: ctx.signal, ...(this.#usage !== undefined ? { usage: this.#usage } : {}) }), workspace.limits.outputMaxChars)
        return { ok: true, value: fitted.value, ...(fitted.truncated ? { truncated: true } : {}) }
      }
      if (!tool.mutates(args)) return await run()
      return await this.#writes.run(`${workspace.tenant}\u0000${workspace.root}`, run)
    } catch (err) {
      if (err instanceof ToolError) return { ok: false, reason: err.reason, message: err.message }
      throw err
    }
  }
}
