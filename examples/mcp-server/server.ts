/**
 * A small remote MCP server (streamable HTTP) to try the gateway's registry with, offline:
 *
 *   npm run example:mcp-server        # http://127.0.0.1:3001/mcp (PORT, HOST to change)
 *
 * Stateless: every POST gets a fresh server and transport, so any number of gateway instances
 * and restarts can talk to it. Two tools: `search_docs` (a tiny built-in corpus) and `word_count`.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import { z } from 'zod'

const DOCS = [
  { title: 'Allow-lists', text: 'GET /tools returns only what the request names: functions=, mcp= and userId=.' },
  { title: 'Routing', text: 'POST /invoke routes by priority: built-in, tenant MCP, local MCP, function, global MCP.' },
  { title: 'Workspaces', text: 'Built-in tools run inside the request workspace; bash runs in a bubblewrap sandbox.' },
  { title: 'Registry', text: 'Tenants register their own MCP servers under /users/{userId}/mcp/servers.' }
]

export function createDocsServer (): McpServer {
  const server = new McpServer({ name: 'example-docs', version: '1.0.0' })
  server.registerTool('search_docs', {
    description: 'Search the gateway documentation; returns the matching sections',
    inputSchema: { query: z.string().min(1).describe('Words to look for'), limit: z.number().int().min(1).max(10).optional() },
    annotations: { readOnlyHint: true }
  }, ({ query, limit }) => {
    const words = query.toLowerCase().split(/\s+/).filter(Boolean)
    const hits = DOCS.filter((d) => words.some((w) => `${d.title} ${d.text}`.toLowerCase().includes(w))).slice(0, limit ?? 3)
    const text = hits.length === 0 ? `No section mentions "${query}".` : hits.map((d) => `## ${d.title}\n${d.text}`).join('\n\n')
    return { content: [{ type: 'text', text }] }
  })
  server.registerTool('word_count', {
    description: 'Count the words of a text',
    inputSchema: { text: z.string() },
    annotations: { readOnlyHint: true }
  }, ({ text }) => ({ content: [{ type: 'text', text: String(text.split(/\s+/).filter(Boolean).length) }] }))
  return server
}

async function readJson (req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length
    if (size > 1_000_000) throw new Error('body too large')
    chunks.push(chunk)
  }
  return JSON.parse(Buffer.concat(chunks).toString('utf8'))
}

async function handle (req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (req.url?.split('?')[0] !== '/mcp') { res.writeHead(404).end(); return }
  if (req.method !== 'POST') { res.writeHead(405, { allow: 'POST' }).end(); return }
  const server = createDocsServer()
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined })
  res.on('close', () => { transport.close().catch(() => {}); server.close().catch(() => {}) })
  await server.connect(transport)
  await transport.handleRequest(req, res, await readJson(req))
}

if (import.meta.url === `file://${process.argv[1] ?? ''}`) {
  const port = Number(process.env.PORT ?? 3001)
  const host = process.env.HOST ?? '127.0.0.1'
  const http = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) res.writeHead(400, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32700, message: err instanceof Error ? err.message : String(err) } }))
    })
  })
  http.listen(port, host, () => {
    const { port: bound } = http.address() as { port: number }
    console.log(`example MCP server on http://${host}:${bound}/mcp`)
  })
  const stop = (): void => { http.close(); http.closeAllConnections() }
  process.once('SIGTERM', stop)
  process.once('SIGINT', stop)
}
