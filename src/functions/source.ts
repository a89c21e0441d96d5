import type { CatalogEntry, SourceScope, Selection, SourceListing, ToolSource } from '../tools/source.js'
import { StaticCatalog } from '../tools/static-catalog.js'
import type { CallContext, ToolOutcome } from '../tools/types.js'
import { runWithDeadline } from '../tools/deadline.js'
import type { FunctionTool } from './define.js'
import type { LoadedFunction } from './loader.js'

/** Tier 4: local function tools, exposed under their own names. */
export class FunctionSource implements ToolSource {
  readonly tier = 'function' as const
  readonly #catalog = new StaticCatalog()
  readonly #defaultTimeoutMs: number

  constructor (functions: readonly LoadedFunction[], opts: { defaultTimeoutMs: number }) {
    this.#defaultTimeoutMs = opts.defaultTimeoutMs
    for (const { tool } of functions) {
      this.#catalog.add({
        route: 'function',
        source: tool.name,
        name: tool.name,
        spec: { name: tool.name, description: tool.description, inputSchema: tool.parameters },
        ref: tool
      })
    }
  }

  get size (): number {
    return this.#catalog.size
  }

  async list (selection: Selection | 'all'): Promise<SourceListing> {
    return this.#catalog.list(selection)
  }

  async resolve (name: string, _scope: SourceScope): Promise<CatalogEntry | undefined> {
    return this.#catalog.get(name)
  }

  async call (entry: CatalogEntry, args: Record<string, unknown>, ctx: CallContext): Promise<ToolOutcome> {
    const tool = entry.ref as FunctionTool
    const timeoutMs = Math.min(tool.timeoutMs ?? this.#defaultTimeoutMs, ctx.timeoutMs)
    return runWithDeadline(timeoutMs, ctx.abortSource ?? ctx.signal, async (call) => {
      try {
        // `signal` read through: its AbortController is only made for a handler that uses it.
        const value = await tool.handler(args, { callId: ctx.callId, userId: ctx.caller.userId, get signal () { return call.signal } })
        return { ok: true, value }
      } catch (err) {
        return { ok: false, reason: 'tool-error', message: err instanceof Error ? err.message : String(err) }
      }
    }, `Function '${entry.name}' did not finish within ${timeoutMs} ms`)
  }
}
