/**
 * The authoring API: what a module in FUNCTIONS_DIR or MCP_SERVICES_DIR imports to declare its tools
 * with types (README.md#adding-tools). Both functions only return their argument, so a module may
 * export plain objects of the same shapes instead and import nothing from the gateway.
 */
export { defineFunction } from './functions/define.js'
export type { FunctionContext, FunctionTool } from './functions/define.js'
export { defineMcpService } from './local-mcp/define.js'
export type { LocalMcpServiceModule, McpServerLike } from './local-mcp/define.js'
