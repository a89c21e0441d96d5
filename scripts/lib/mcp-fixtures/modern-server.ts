/**
 * A loopback MCP fixture of the 2026-07-28 revision only: an SDK v2 `McpServer` behind the
 * SDK's per-request entry (`createMcpHandler`, legacy requests refused), on node:http. Tools:
 * `echo {text}` -> text `"{marker}:{text}"`, and `tNN` marker tools when asked for. It counts
 * the requests it receives by JSON-RPC method (a bench asserts one request per server per listing),
 * also served as JSON at `GET /stats` for a fixture in another process.
 */
import { createServer } from 'node:http'
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { AddressInfo, Socket } from 'node:net'
import { McpServer, createMcpHandler, fromJsonSchema } from '@modelcontextprotocol/server'

export interface ModernFixture {
  url: string
  /** Requests received, by JSON-RPC method (`GET`/`DELETE` for bodiless ones). */
  requests: Map<string, number>
  /** Adds a tool `added_N` and announces it on every open subscriptions/listen stream; its name. */
  addTool: () => string
  /** Announces a tool list change without changing anything. */
  announce: () => void
  close: () => Promise<void>
}

export interface ModernFixtureOptions {
  marker?: string
  /** Extra tools `t00`..: each answers `{marker}:{tool}`. */
  extraTools?: number
  /** Registers tools of a test's own on each request's server (e.g. one that answers input_required). */
  register?: (server: McpServer) => void
}

type JsonSchema = Parameters<typeof fromJsonSchema>[0]
const TEXT_SCHEMA = { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] } as unknown as JsonSchema
const NO_ARGS = { type: 'object', properties: {} } as unknown as JsonSchema

/** Reads a POST body whole (fixture bodies are small). */
async function readBody (req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = []
  for await (const c of req) chunks.push(c as Buffer)
  if (chunks.length === 0) return undefined
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'))
  } catch {
    return undefined
  }
}

export async function startModernFixture (options: ModernFixtureOptions = {}): Promise<ModernFixture> {
  const marker = options.marker ?? 'modern'
  const extra = Array.from({ length: options.extraTools ?? 0 }, (_, i) => `t${String(i).padStart(2, '0')}`)
  const requests = new Map<string, number>()
  const added: string[] = []
  // Listings change only through addTool: the server advertises it (listen streams are then honoured).
  const advertise = { tools: { listChanged: true }, logging: {} }
  const handler = createMcpHandler(() => {
    const server = new McpServer({ name: `modern-${marker}`, version: '1.0.0' }, { capabilities: advertise })
    server.registerTool('echo', { description: 'Echoes text', inputSchema: fromJsonSchema<{ text: string }>(TEXT_SCHEMA) },
      async ({ text }) => ({ content: [{ type: 'text', text: `${marker}:${text}` }] }))
    for (const name of [...extra, ...added]) {
      server.registerTool(name, { description: `marker tool ${name}`, inputSchema: fromJsonSchema(NO_ARGS) },
        async () => ({ content: [{ type: 'text', text: `${marker}:${name}` }] }))
    }
    options.register?.(server)
    return server
  }, { legacy: 'reject' })

  const serve = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (req.method === 'GET' && req.url === '/stats') {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify(Object.fromEntries(requests)))
      return
    }
    const body = req.method === 'POST' ? await readBody(req) : undefined
    const method = typeof (body as { method?: unknown } | undefined)?.method === 'string' ? (body as { method: string }).method : req.method ?? '?'
    requests.set(method, (requests.get(method) ?? 0) + 1)
    const headers = new Headers()
    for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) headers.append(req.rawHeaders[i]!, req.rawHeaders[i + 1]!)
    const abort = new AbortController()
    res.once('close', () => { if (!res.writableFinished) abort.abort() })
    const response = await handler.fetch(new Request(`http://127.0.0.1${req.url ?? '/'}`, { method: req.method ?? 'POST', headers, signal: abort.signal }), { parsedBody: body })
    const out: Record<string, string> = {}
    response.headers.forEach((v, k) => { out[k] = v })
    res.writeHead(response.status, out)
    if (response.body === null) {
      res.end()
      return
    }
    for await (const chunk of response.body) res.write(chunk)
    res.end()
  }
  const sockets = new Set<Socket>()
  const http = createServer((req, res) => {
    serve(req, res).catch(() => {
      if (!res.headersSent) res.writeHead(500)
      res.end()
    })
  })
  http.on('connection', (s) => {
    sockets.add(s)
    s.once('close', () => sockets.delete(s))
  })
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`,
    requests,
    addTool: () => {
      const name = `added_${added.length}`
      added.push(name)
      handler.notify.toolsChanged()
      return name
    },
    announce: () => { handler.notify.toolsChanged() },
    close: async () => {
      await handler.close()
      for (const s of sockets) s.destroy()
      await new Promise<void>((resolve) => http.close(() => resolve()))
    }
  }
}
