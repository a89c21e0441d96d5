/**
 * A 2026-07-28-only MCP server on the SDK v2 over real HTTP on loopback, for the tests of multi
 * round-trip (`input_required`): the test registers its tools on a fresh McpServer per request
 * (the SDK's stateless handler), and every tools/call is recorded with what the gateway sent:
 * the name, the arguments, the requestState, the inputResponses and the declared capabilities.
 */
import assert from 'node:assert/strict'
import { createServer } from 'node:http'
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { TestContext } from 'node:test'
import { CLIENT_CAPABILITIES_META_KEY, createMcpHandler, McpServer } from '@modelcontextprotocol/server'
import type { ServerContext } from '@modelcontextprotocol/server'

export interface UpstreamCall {
  tool: string
  requestState: unknown
  inputResponses: unknown
  capabilities: unknown
}

export interface ModernUpstream {
  url: string
  /** Every tools/call the server received, in order. */
  calls: UpstreamCall[]
}

/** What a tool handler records of its call (call it first thing in the handler). */
export type RecordCall = (tool: string, ctx: ServerContext) => void

export async function startModernUpstream (t: TestContext, register: (server: McpServer, record: RecordCall) => void): Promise<ModernUpstream> {
  const calls: UpstreamCall[] = []
  const record: RecordCall = (tool, ctx) => {
    calls.push({
      tool,
      requestState: ctx.mcpReq.requestState(),
      inputResponses: ctx.mcpReq.inputResponses,
      capabilities: (ctx.mcpReq.envelope as { [key: string]: unknown } | undefined)?.[CLIENT_CAPABILITIES_META_KEY]
    })
  }
  const handler = createMcpHandler(() => {
    const server = new McpServer({ name: 'mrtr-upstream', version: '1.0.0' }, { capabilities: { tools: {} } })
    register(server, record)
    return server
  }, { legacy: 'reject' })
  const http = createServer((req, res) => { serve(req, res).catch(() => { if (!res.headersSent) res.writeHead(500); res.end() }) })
  async function serve (req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = []
    for await (const c of req) chunks.push(c as Buffer)
    const raw = Buffer.concat(chunks)
    const body = raw.length > 0 ? JSON.parse(raw.toString('utf8')) : undefined
    const headers = new Headers()
    for (const [k, v] of Object.entries(req.headers)) if (v !== undefined) headers.set(k, Array.isArray(v) ? v.join(', ') : v)
    const request = new Request(`http://127.0.0.1${req.url ?? '/'}`, { method: req.method, headers, ...(req.method === 'POST' ? { body: new Uint8Array(raw) } : {}) })
    const response = await handler.fetch(request, { parsedBody: body })
    res.writeHead(response.status, Object.fromEntries(response.headers))
    res.end(Buffer.from(await response.arrayBuffer()))
  }
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
  t.after(async () => {
    await handler.close()
    await new Promise<void>((resolve) => http.close(() => resolve()))
  })
  const address = http.address()
  assert.ok(address !== null && typeof address === 'object')
  return { url: `http://127.0.0.1:${address.port}/mcp`, calls }
}
