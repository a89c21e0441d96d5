import { Server } from '@modelcontextprotocol/server'
import { gatewayMcpHandlers } from './handlers.js'
import type { GatewayMcpServerOptions, McpEra } from './handlers.js'
import { VERSION } from '../version.js'

export const SERVER_INFO = { name: 'tool-gateway', version: VERSION } as const
const INSTRUCTIONS = 'Tools of tool-gateway for this API key and allow-list (the functions, mcp and userId query parameters of the endpoint URL).'

/**
 * Every listing the gateway serves depends on the caller (API key, tenant, allow-list), so no
 * shared cache may keep one; `ttlMs: 0` because a registry change anywhere in the cluster
 * changes it at once. Only the 2026-07-28 revision carries these fields.
 */
const PRIVATE_NOW = { ttlMs: 0, cacheScope: 'private' } as const

/**
 * The gateway's MCP server for one HTTP exchange (stateless), on the SDK v2 `Server`, which
 * speaks whichever revision the transport it is connected to serves: the era-blind handlers
 * (handlers.ts) registered once for both. `era` tells the handlers which shapes the client
 * reads (structuredContent of any JSON type in 2026-07-28).
 */
export function createGatewayMcpServer (opts: GatewayMcpServerOptions, era: McpEra): Server {
  const server = new Server(SERVER_INFO, {
    capabilities: { tools: { listChanged: true } },
    instructions: INSTRUCTIONS,
    cacheHints: { 'tools/list': PRIVATE_NOW, 'server/discover': PRIVATE_NOW }
  })
  const handlers = gatewayMcpHandlers(opts, era)
  server.setRequestHandler('tools/list', async (_request, ctx) => await handlers.listTools(ctx.mcpReq.signal))
  server.setRequestHandler('tools/call', async (request, ctx) =>
    await handlers.callTool(request.params, ctx.mcpReq.signal, async (n) => { await ctx.mcpReq.notify(n) }))
  return server
}
