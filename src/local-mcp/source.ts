import { flattenCallToolResult } from '../mcp/flatten.js'
import { trackProgress } from '../mcp/progress.js'
import { runWithDeadline } from '../routing/deadline.js'
import type { CatalogEntry, Selection, SourceScope, SurfaceListing, SurfaceRequest, SurfaceServer } from '../routing/source.js'
import { apiFunctionName, qualifiedName } from '../naming/names.js'
import { StaticSource } from '../routing/static-source.js'
import type { CallContext, ToolOutcome } from '../routing/types.js'
import { closeService } from './loader.js'
import type { LocalMcpService, LocalMcpTool } from './loader.js'

/** Tier 3: in-process MCP services, exposed as apiFunctionName(service, tool). */
export class LocalMcpSource extends StaticSource {
  readonly tier = 'local_mcp' as const
  readonly #services: LocalMcpService[]
  readonly #callTimeoutMs: number
  readonly #tools: LocalMcpTool[]

  constructor (loaded: { services: LocalMcpService[], tools: LocalMcpTool[] }, opts: { callTimeoutMs: number }) {
    super(loaded.tools.map((t) => ({
      route: 'local_mcp',
      source: t.service.name,
      name: t.exposedName,
      spec: {
        name: t.tool.name,
        description: t.tool.description ?? '',
        inputSchema: t.tool.inputSchema as Record<string, unknown>,
        ...(t.tool.title ? { title: t.tool.title } : {}),
        ...(t.tool.annotations ? { annotations: t.tool.annotations as Record<string, unknown> } : {}),
        ...(t.tool.outputSchema ? { outputSchema: t.tool.outputSchema as Record<string, unknown> } : {}),
        ...(t.tool.execution ? { execution: t.tool.execution as Record<string, unknown> } : {})
      },
      ref: t
    })))
    this.#services = loaded.services
    this.#tools = loaded.tools
    this.#callTimeoutMs = opts.callTimeoutMs
  }

  get serviceNames (): string[] {
    return this.#services.map((s) => s.name)
  }

  async call (entry: CatalogEntry, args: Record<string, unknown>, ctx: CallContext): Promise<ToolOutcome> {
    const { service, tool } = entry.ref as LocalMcpTool
    const timeoutMs = Math.min(this.#callTimeoutMs, ctx.timeoutMs)
    return runWithDeadline(timeoutMs, ctx.signal, async ({ signal }) => {
      try {
        const progress = ctx.onProgress !== undefined ? trackProgress(service.client, ctx.onProgress) : undefined
        let result
        try {
          const params = { name: tool.name, arguments: args, ...(progress !== undefined ? { _meta: { progressToken: progress.token } } : {}) }
          result = await service.client.callTool(params, undefined, { signal, timeout: timeoutMs })
        } finally {
          progress?.end()
        }
        const flat = flattenCallToolResult(result)
        return { ok: true, value: flat.text, isError: flat.isError, trace: flat.trace }
      } catch (err) {
        return { ok: false, reason: 'tool-error', message: `Local MCP service '${service.name}' failed: ${(err as Error).message}` }
      }
    }, `Local MCP tool '${entry.name}' did not finish within ${timeoutMs} ms`)
  }

  /**
   * The services /mcp serves resources, prompts and completion of: those `functions=` names by
   * one of their tools' exposed names or by the service's own name. In-process: nothing cached.
   */
  async surface (selection: Selection, _scope: SourceScope): Promise<SurfaceListing> {
    const names = new Set(selection.names ?? [])
    const picked = new Set(this.#tools.filter((t) => names.has(t.exposedName)).map((t) => t.service))
    const servers: SurfaceServer[] = this.#services
      .filter((s) => picked.has(s) || names.has(s.name))
      .map((service) => ({
        route: 'local_mcp',
        source: service.name,
        priority: 0,
        promptName: (name) => apiFunctionName(service.name, name),
        qualifiedName: (name) => qualifiedName(service.name, name),
        request: async (req, signal) => await localSurface(service, req, signal, this.#callTimeoutMs)
      }))
    return { servers, matched: servers.map((s) => s.source), unavailable: [] }
  }

  async close (): Promise<void> {
    await Promise.allSettled(this.#services.map(async (s) => await closeService(s)))
  }
}

/** One surface request on a local service's in-process client (lists walk every page; none without the capability). */
async function localSurface (service: LocalMcpService, req: SurfaceRequest, signal: AbortSignal, timeout: number): Promise<unknown> {
  const client = service.client
  const caps = client.getServerCapabilities()
  const options = { signal, timeout }
  const pages = async <T>(page: (cursor: string | undefined) => Promise<{ items: T[], nextCursor?: string | undefined }>): Promise<T[]> => {
    const items: T[] = []
    let cursor: string | undefined
    for (let n = 0; n < MAX_LOCAL_PAGES; n++) {
      const next = await page(cursor)
      items.push(...next.items)
      cursor = next.nextCursor
      if (cursor === undefined) break
    }
    return items
  }
  switch (req.method) {
    case 'resources/list':
      if (caps?.resources === undefined) return []
      return await pages(async (cursor) => {
        const r = await client.listResources(cursor !== undefined ? { cursor } : undefined, options)
        return { items: r.resources, nextCursor: r.nextCursor }
      })
    case 'resources/templates/list':
      if (caps?.resources === undefined) return []
      return await pages(async (cursor) => {
        const r = await client.listResourceTemplates(cursor !== undefined ? { cursor } : undefined, options)
        return { items: r.resourceTemplates, nextCursor: r.nextCursor }
      })
    case 'prompts/list':
      if (caps?.prompts === undefined) return []
      return await pages(async (cursor) => {
        const r = await client.listPrompts(cursor !== undefined ? { cursor } : undefined, options)
        return { items: r.prompts, nextCursor: r.nextCursor }
      })
    case 'resources/read':
      return await client.readResource(req.params, options)
    case 'prompts/get':
      return await client.getPrompt(req.params, options)
    case 'completion/complete':
      if (caps?.completions === undefined) return { completion: { values: [] } }
      return await client.complete(req.params as Parameters<typeof client.complete>[0], options)
  }
}

/** A local service that keeps paginating is cut off here (in-process, so only a bug does). */
const MAX_LOCAL_PAGES = 1000
