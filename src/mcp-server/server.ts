import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { CallToolRequestSchema, ListToolsRequestSchema, McpError } from '@modelcontextprotocol/sdk/types.js'
import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js'
import { HttpError, toJsonRpcFailure } from '../errors.js'
import type { Gateway } from '../gateway.js'
import { splitComma } from '../tools/allow-list.js'
import type { InvokeResult } from '../tools/router.js'
import type { McpQueryT } from './json-rpc.js'
import type { Caller } from '../tools/types.js'
import { CallBudget } from './budget.js'
import type { CallLimits } from './budget.js'
import { VERSION } from '../version.js'

/** What one tools/call did, for the HTTP layer's log line and overhead accounting. */
export type McpCallRecord =
  | { ok: true, result: InvokeResult }
  | { ok: false, name: string, error: HttpError }

export interface GatewayMcpServerOptions {
  gateway: Gateway
  scope: McpQueryT
  caller: Caller
  /** Aborted when the HTTP exchange ends early (the client went away). */
  signal?: AbortSignal
  /** Called once per tools/call, success or refusal. */
  onCall?: (record: McpCallRecord) => void
  /** Unexpected failures (bugs, an unreachable registry): the client gets -32603 without details. */
  onError?: (err: unknown) => void
  /** The tenant's limits for this exchange (each tools/call of a batch counts); unset = unlimited. */
  limits?: CallLimits
}

export const SERVER_INFO = { name: 'tool-gateway', version: VERSION } as const

/**
 * An MCP server (one per HTTP exchange: stateless) whose tools/list is exactly GET
 * /tools?format=mcp for the same tenant and allow-list, and whose tools/call is POST /invoke
 * with `allow` set to that allow-list: same routing, same isError, same truncation. The
 * trace never goes to the client (onCall gets it, for the logs).
 */
export function createGatewayMcpServer (opts: GatewayMcpServerOptions): Server {
  const { gateway, scope, caller } = opts
  const server = new Server(SERVER_INFO, {
    capabilities: { tools: { listChanged: true } },
    instructions: 'Tools of tool-gateway for this API key and allow-list (the functions, mcp and userId query parameters of the endpoint URL).'
  })
  const allow = { functions: splitComma(scope.functions), mcp: splitComma(scope.mcp) }
  const budget = opts.limits !== undefined ? new CallBudget(opts.limits) : undefined
  const report = (err: unknown): McpError => {
    if (!(err instanceof HttpError) && !(err instanceof McpError)) opts.onError?.(err)
    return toMcpError(err)
  }

  server.setRequestHandler(ListToolsRequestSchema, async (_request, extra) => {
    try {
      const listing = await gateway.listTools({ ...scope, format: 'mcp' }, caller, withSignal(extra.signal, opts.signal))
      return { tools: listing.tools as Tool[] }
    } catch (err) {
      throw report(err)
    }
  })

  server.setRequestHandler(CallToolRequestSchema, async (request, extra): Promise<CallToolResult> => {
    const { name } = request.params
    const refused = budget?.take()
    if (refused !== undefined) {
      opts.onCall?.({ ok: false, name, error: refused })
      throw toMcpError(refused)
    }
    const invoke = async (): ReturnType<Gateway['invoke']> => await gateway.invoke({
      name,
      arguments: request.params.arguments ?? {},
      ...(scope.userId !== undefined ? { userId: scope.userId } : {}),
      allow,
      trace: true
    }, caller, withSignal(extra.signal, opts.signal))
    let outcome
    try {
      outcome = budget !== undefined ? await budget.run(invoke) : await invoke()
    } catch (err) {
      throw report(err)
    }
    if (!outcome.ok) {
      opts.onCall?.({ ok: false, name, error: outcome.error })
      throw toMcpError(outcome.error)
    }
    opts.onCall?.({ ok: true, result: outcome.result })
    return { content: [{ type: 'text', text: outcome.result.output }], isError: outcome.result.isError }
  })

  return server
}

/** The JSON-RPC error for a failed MCP request, as toJsonRpcFailure (src/errors.ts) maps it. */
export function toMcpError (err: unknown): McpError {
  if (err instanceof McpError) return err
  const { rpcCode, message, data } = toJsonRpcFailure(err)
  return new McpError(rpcCode, message, data)
}

function withSignal (a: AbortSignal, b: AbortSignal | undefined): AbortSignal {
  return b === undefined ? a : AbortSignal.any([a, b])
}
