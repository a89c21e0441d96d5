import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js'
import type { CallToolResult, ListToolsResult } from '@modelcontextprotocol/sdk/types.js'
import { gatewayMcpHandlers } from './handlers.js'
import type { GatewayMcpServerOptions } from './handlers.js'
import { VERSION } from '../version.js'

export const SERVER_INFO = { name: 'tool-gateway', version: VERSION } as const
export const INSTRUCTIONS = 'Tools of tool-gateway for this API key and allow-list (the functions, mcp and userId query parameters of the endpoint URL).'

/**
 * The gateway's MCP server for a legacy request (2025-11-25 and earlier), one per HTTP
 * exchange (stateless), on the v1 SDK: the era-blind handlers (handlers.ts) registered for
 * tools/list and tools/call.
 */
export function createGatewayMcpServer (opts: GatewayMcpServerOptions): Server {
  const server = new Server(SERVER_INFO, { capabilities: { tools: { listChanged: true } }, instructions: INSTRUCTIONS })
  const handlers = gatewayMcpHandlers(opts, 'legacy')
  server.setRequestHandler(ListToolsRequestSchema, async (_request, extra) =>
    await handlers.listTools(extra.signal) as ListToolsResult)
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) =>
    await handlers.callTool(request.params, extra.signal, async (n) => { await extra.sendNotification(n as never) }) as CallToolResult)
  return server
}
