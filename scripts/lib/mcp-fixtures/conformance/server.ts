/**
 * The conformance fixture server: one URL (`/mcp` on 127.0.0.1) serving MCP 2025-11-25 with sessions
 * (an event store and a retry interval, so SSE streams resume with Last-Event-ID) and 2026-07-28
 * statelessly (`createMcpHandler`): the SDK's inbound classifier sends each POST to one or the other.
 * Loopback Host and Origin only (dns-rebinding-protection). Run it alone with
 * `tsx scripts/lib/mcp-fixtures/conformance/server.ts [port]`: it prints its URL.
 */
import { randomUUID } from 'node:crypto'
import { createServer } from 'node:http'
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { AddressInfo, Socket } from 'node:net'
import { pathToFileURL } from 'node:url'
import {
  WebStandardStreamableHTTPServerTransport,
  classifyInboundRequest,
  createMcpHandler,
  hostHeaderValidationResponse,
  isInitializeRequest,
  localhostAllowedHostnames,
  localhostAllowedOrigins,
  originValidationResponse
} from '@modelcontextprotocol/server'
import type { EventStore, McpServer } from '@modelcontextprotocol/server'
import { buildConformanceServer } from './features.js'
import type { ConformanceHooks } from './features.js'

export interface ConformanceServer {
  url: string
  close: () => Promise<void>
}

interface Session {
  transport: WebStandardStreamableHTTPServerTransport
  server: McpServer
}

/** Events of every stream in memory; an id is `<stream>/<sequence>`, so it names its stream. */
function memoryEventStore (): EventStore {
  const streams = new Map<string, unknown[]>()
  return {
    async storeEvent (streamId, message) {
      const events = streams.get(streamId) ?? []
      streams.set(streamId, events)
      events.push(message)
      return `${streamId}/${events.length - 1}`
    },
    async replayEventsAfter (lastEventId, { send }) {
      const cut = lastEventId.lastIndexOf('/')
      const streamId = lastEventId.slice(0, cut)
      const events = streams.get(streamId) ?? []
      for (let i = Number(lastEventId.slice(cut + 1)) + 1; i < events.length; i++) await send(`${streamId}/${i}`, events[i] as never)
      return streamId
    }
  }
}

const header = (req: IncomingMessage, name: string): string | undefined => {
  const value = req.headers[name]
  return Array.isArray(value) ? value[0] : value
}

async function readBody (req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
}

function toWebRequest (req: IncomingMessage, body: Buffer, base: string): Request {
  const headers = new Headers()
  for (const [name, value] of Object.entries(req.headers)) {
    if (value !== undefined) headers.set(name, Array.isArray(value) ? value.join(', ') : value)
  }
  const hasBody = req.method !== 'GET' && req.method !== 'HEAD' && req.method !== 'DELETE'
  return new Request(new URL(req.url ?? '/', base), { method: req.method, headers, body: hasBody ? new Uint8Array(body) : undefined })
}

/** Writes a web Response to Node's, streaming its body; a client that goes away cancels the stream. */
async function sendWebResponse (res: ServerResponse, response: Response): Promise<void> {
  res.writeHead(response.status, Object.fromEntries(response.headers))
  if (response.body === null) { res.end(); return }
  res.flushHeaders()
  const reader = response.body.getReader()
  res.once('close', () => { reader.cancel().catch(() => {}) })
  try {
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      res.write(value)
    }
  } catch { /* cancelled: the client went away */ }
  res.end()
}

const jsonRpcError = (status: number, code: number, message: string): Response =>
  Response.json({ jsonrpc: '2.0', id: null, error: { code, message } }, { status })

/** Starts the fixture on 127.0.0.1 (`port` 0: a free one). */
export async function startConformanceServer (port = 0): Promise<ConformanceServer> {
  const sessions = new Map<string, Session>()
  const hooks: ConformanceHooks = {
    closeRequestStream: (ctx) => {
      if (ctx.sessionId !== undefined) sessions.get(ctx.sessionId)?.transport.closeSSEStream(ctx.mcpReq.id)
    },
    // The change reaches the 2026 listen streams and the legacy sessions' GET streams alike (a client
    // such as the gateway's upstream one may hold either).
    listChanged: (what) => {
      if (what === 'tools') modern.notify.toolsChanged(); else modern.notify.promptsChanged()
      for (const { server } of sessions.values()) {
        (what === 'tools' ? server.sendToolListChanged() : server.sendPromptListChanged())
      }
    }
  }
  // The handler reports each refused request (the scenarios send many on purpose): shown on demand only.
  const debug = process.env.CONFORMANCE_FIXTURE_DEBUG === '1'
  const modern = createMcpHandler(() => buildConformanceServer(hooks), { onerror: (err) => { if (debug) console.error('2026-07-28 handler:', err) } })

  async function legacy (request: Request, body: unknown): Promise<Response> {
    const sessionId = request.headers.get('mcp-session-id') ?? undefined
    const session = sessionId === undefined ? undefined : sessions.get(sessionId)
    if (session !== undefined) return await session.transport.handleRequest(request, { parsedBody: body })
    if (sessionId !== undefined) return jsonRpcError(404, -32001, 'Session not found')
    if (request.method !== 'POST' || !isInitializeRequest(body)) return jsonRpcError(400, -32000, 'Bad Request: no session (send initialize first)')
    const server = buildConformanceServer(hooks)
    const transport: WebStandardStreamableHTTPServerTransport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      eventStore: memoryEventStore(),
      retryInterval: 5000,
      onsessioninitialized: (id) => { sessions.set(id, { transport, server }) },
      onsessionclosed: (id) => { sessions.delete(id); server.close().catch(() => {}) }
    })
    await server.connect(transport)
    return await transport.handleRequest(request, { parsedBody: body })
  }

  async function handle (req: IncomingMessage, base: string): Promise<Response> {
    const raw = await readBody(req)
    const request = toWebRequest(req, raw, base)
    const refused = hostHeaderValidationResponse(request, localhostAllowedHostnames()) ?? originValidationResponse(request, localhostAllowedOrigins())
    if (refused !== undefined) return refused
    if (new URL(request.url).pathname !== '/mcp') return new Response('not found', { status: 404 })
    if (req.method !== 'POST') return await legacy(request, undefined)
    let body: unknown
    try { body = JSON.parse(raw.toString('utf8')) } catch { return jsonRpcError(400, -32700, 'Parse error') }
    const inbound = classifyInboundRequest({
      httpMethod: 'POST',
      protocolVersionHeader: header(req, 'mcp-protocol-version'),
      mcpMethodHeader: header(req, 'mcp-method'),
      mcpNameHeader: header(req, 'mcp-name'),
      body
    })
    if (inbound.kind !== 'legacy') return await modern.fetch(request, { parsedBody: body })
    return await legacy(request, body)
  }

  const sockets = new Set<Socket>()
  const http = createServer((req, res) => {
    const base = `http://${header(req, 'host') ?? '127.0.0.1'}`
    handle(req, base).then(async (response) => { await sendWebResponse(res, response) }, (err: unknown) => {
      console.error('conformance fixture:', err)
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32603, message: 'Internal error' } }))
    })
  })
  http.on('connection', (socket) => { sockets.add(socket); socket.once('close', () => sockets.delete(socket)) })
  await new Promise<void>((resolve) => http.listen(port, '127.0.0.1', resolve))
  const actual = (http.address() as AddressInfo).port
  return {
    url: `http://127.0.0.1:${actual}/mcp`,
    close: async () => {
      await Promise.allSettled([...sessions.values()].map(async ({ transport }) => { await transport.close() }))
      await modern.close()
      for (const socket of sockets) socket.destroy()
      await new Promise<void>((resolve) => http.close(() => resolve()))
    }
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const fixture = await startConformanceServer(Number(process.argv[2] ?? 0))
  console.log(fixture.url)
  const stop = (): void => { fixture.close().then(() => process.exit(0), () => process.exit(1)) }
  process.once('SIGTERM', stop)
  process.once('SIGINT', stop)
}
