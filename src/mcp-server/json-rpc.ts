import { Type } from '@sinclair/typebox'
import type { Static } from '@sinclair/typebox'
import { HttpError, toJsonRpcRefusal } from '../errors.js'
import { ToolsQuery } from '../api/tools.js'
import type { ListToolsRequest } from '../listing/listings.js'

/** The /mcp endpoint URL's query: GET /tools' allow-list and tenant (the format is always mcp). */
export const McpQuery = Type.Object({
  functions: ToolsQuery.properties.functions,
  mcp: ToolsQuery.properties.mcp,
  userId: ToolsQuery.properties.userId,
  mode: ToolsQuery.properties.mode,
  pinned: ToolsQuery.properties.pinned
}, { additionalProperties: false })
export type McpQueryT = Static<typeof McpQuery>

/**
 * The listing /mcp serves for its URL: GET /tools in the mcp format, and in search mode with the
 * tools this client's searches found (an MCP host lets its model call listed tools only).
 */
export function mcpListingQuery (scope: McpQueryT): ListToolsRequest {
  return { ...scope, format: 'mcp', withFound: true }
}

/**
 * The methods /mcp serves: POST (JSON-RPC messages, both revisions) and GET (the legacy revisions'
 * notification stream). Every 405 of /mcp names them, in its message and its Allow header; a
 * 2026-07-28 GET's names POST only (its revision has no GET stream: endpoint.ts).
 */
export const MCP_METHODS = 'GET, POST'

/** The 405 of `method` on /mcp (GW_METHOD_NOT_ALLOWED) when the endpoint takes `allow`; `why` follows. */
export function methodNotAllowed (method: string, allow: string = MCP_METHODS, why = ''): HttpError {
  return new HttpError('GW_METHOD_NOT_ALLOWED', `${method} is not allowed on /mcp: it takes ${allow}${why}`)
}

/** A JSON-RPC error response: how /mcp refuses a request, at any stage. */
export const JsonRpcErrorResponse = Type.Object({
  jsonrpc: Type.Literal('2.0'),
  id: Type.Union([Type.String(), Type.Number(), Type.Null()]),
  error: Type.Object({
    code: Type.Integer({ description: '-32700 parse error, -32600 invalid request, -32000 refused by the gateway (the HTTP status tells why)' }),
    message: Type.String(),
    data: Type.Optional(Type.Object({
      statusCode: Type.Integer(),
      code: Type.String({ description: 'The gateway\'s stable GW_ code' })
    }))
  })
}, { description: 'JSON-RPC error (MCP clients read it; the HTTP status is the same as on other routes)' })

export interface JsonRpcErrorBody {
  jsonrpc: '2.0'
  id: string | number | null
  error: { code: number, message: string, data: { statusCode: number, code: string } }
}

/**
 * The JSON-RPC error body refusing a /mcp request, of anything thrown (toJsonRpcRefusal: the
 * status and GW_ code of the HTTP error, in `error.data`). The HTTP status to answer with is
 * `error.data.statusCode`. `body` is the request's, when it was read: the refusal of a single
 * request carries its id (a client matches the error to its request), a batch's or an
 * unreadable one's is null.
 */
export function jsonRpcRefusalBody (err: unknown, body?: unknown): JsonRpcErrorBody {
  const { statusCode, code, message, rpcCode } = toJsonRpcRefusal(err)
  return { jsonrpc: '2.0', id: requestIdOf(body), error: { code: rpcCode, message, data: { statusCode, code } } }
}

/**
 * The first id two requests of a batch share, else undefined. Answers are matched to requests by
 * id (JSON-RPC: exactly, so 1 and "1" are two ids): the SDK's transport answered the first request
 * of such an id alone, ran the other and dropped its answer.
 */
export function duplicateRequestId (batch: readonly unknown[]): string | number | undefined {
  const seen = new Set<string | number>()
  for (const message of batch) {
    if (message === null || typeof message !== 'object' || typeof (message as { method?: unknown }).method !== 'string') continue
    const id = (message as { id?: unknown }).id
    if (typeof id !== 'string' && typeof id !== 'number') continue
    if (seen.has(id)) return id
    seen.add(id)
  }
  return undefined
}

/** The id of a single JSON-RPC request (a string or a number), else null. */
function requestIdOf (body: unknown): string | number | null {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return null
  const id = (body as { id?: unknown }).id
  return typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id)) ? id : null
}
