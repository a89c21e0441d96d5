import { flattenCallToolResult } from '../mcp/flatten.js'
import { trackProgress } from '../mcp/progress.js'
import { runWithDeadline } from '../routing/deadline.js'
import type { CatalogEntry } from '../routing/source.js'
import { StaticSource } from '../routing/static-source.js'
import type { CallContext, ToolOutcome } from '../routing/types.js'
import { closeService } from './loader.js'
import type { LocalMcpService, LocalMcpTool } from './loader.js'

/** Tier 3: in-process MCP services, exposed as apiFunctionName(service, tool). */
export class LocalMcpSource extends StaticSource {
  readonly tier = 'local_mcp' as const
  readonly #services: LocalMcpService[]
  readonly #callTimeoutMs: number

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

  async close (): Promise<void> {
    await Promise.allSettled(this.#services.map(async (s) => await closeService(s)))
  }
}
