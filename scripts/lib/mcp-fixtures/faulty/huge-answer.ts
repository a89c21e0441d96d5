/**
 * A raw node:http streamable-HTTP MCP server whose `huge` tool answers with one enormous SSE
 * event (a tenant's server inflating the gateway's memory). The event is
 * streamed in 64 KiB chunks with backpressure and never allocated whole, so the fixture itself
 * stays small however large the answer; it stops writing as soon as the client goes away.
 * Tools: `huge {bytes?}` (default `hugeBytes`), `small {text}` (a normal SSE answer). Binds
 * 127.0.0.1 on a random port; close() destroys every socket. `GET /stats` answers the counters
 * as JSON. spawnHugeAnswerServer() runs it in a child process, so that a test measuring the
 * gateway's latency does not measure the fixture's own writes in its event loop.
 */
import { spawn } from 'node:child_process'
import { createServer } from 'node:http'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { listenTracked } from './listen.js'
import { fileURLToPath } from 'node:url'

export interface HugeAnswerServer {
  /** The endpoint to register (`/mcp`). */
  url: string
  /** tools/call of `huge` received. */
  hugeCalls: () => number
  /** Bytes of huge answers written to sockets (what the gateway read, plus kernel buffers). */
  bytesWritten: () => number
  /** Huge answers the client stopped reading before their end. */
  abandoned: () => number
  /** Huge answers written to their end. */
  completed: () => number
  close: () => Promise<void>
}

export interface HugeAnswerOptions {
  /** Size of the text of a `huge` answer when the call does not say (default 300 MB). */
  hugeBytes?: number
}

const CHUNK = Buffer.alloc(64 * 1024, 0x78) // 'x'

const TOOLS = [
  { name: 'huge', description: 'Answers with one very large SSE event', inputSchema: { type: 'object', properties: { bytes: { type: 'integer' } } } },
  { name: 'small', description: 'Echoes its text', inputSchema: { type: 'object', properties: { text: { type: 'string' } } } }
]

async function drain (req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks).toString('utf8')
}

export async function startHugeAnswerServer (options: HugeAnswerOptions = {}): Promise<HugeAnswerServer> {
  const hugeBytes = options.hugeBytes ?? 300_000_000
  let hugeCalls = 0
  let bytesWritten = 0
  let abandoned = 0
  let completed = 0

  /** Writes `data: {...,"text":"xxx...` of `size` x's, then the end of the event, respecting backpressure. */
  const streamHuge = (res: ServerResponse, id: unknown, size: number): void => {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
    res.write(`event: message\ndata: {"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":{"content":[{"type":"text","text":"`)
    let left = size
    const state = { done: false }
    res.on('close', () => {
      if (!state.done) { state.done = true; abandoned++ }
    })
    const pump = (): void => {
      while (left > 0 && !state.done) {
        const n = Math.min(left, CHUNK.length)
        left -= n
        bytesWritten += n
        if (!res.write(n === CHUNK.length ? CHUNK : CHUNK.subarray(0, n))) {
          res.once('drain', pump)
          return
        }
      }
      if (state.done) return
      state.done = true
      completed++
      res.end('"}]}}\n\n')
    }
    pump()
  }

  const server = createServer((req, res) => {
    drain(req).then((raw) => {
      if (req.method === 'GET' && req.url === '/stats') {
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ hugeCalls, bytesWritten, abandoned, completed }))
        return
      }
      if (req.method === 'GET') { res.writeHead(405).end(); return }
      if (req.method === 'DELETE') { res.writeHead(200).end(); return }
      let body: { id?: unknown, method?: string, params?: { name?: string, arguments?: Record<string, unknown> } }
      try {
        body = JSON.parse(raw) as typeof body
      } catch {
        res.writeHead(400).end()
        return
      }
      if (body.id === undefined) { res.writeHead(202).end(); return }
      const json = (result: unknown, headers: Record<string, string> = {}): void => {
        res.writeHead(200, { 'content-type': 'application/json', ...headers }).end(JSON.stringify({ jsonrpc: '2.0', id: body.id, result }))
      }
      switch (body.method) {
        case 'initialize':
          json({ protocolVersion: '2025-06-18', capabilities: { tools: {} }, serverInfo: { name: 'huge-answer', version: '1' } }, { 'mcp-session-id': `s-${Math.random().toString(36).slice(2)}` })
          return
        case 'ping':
          json({})
          return
        case 'tools/list':
          json({ tools: TOOLS })
          return
        case 'tools/call': {
          const args = body.params?.arguments ?? {}
          if (body.params?.name === 'huge') {
            hugeCalls++
            streamHuge(res, body.id, typeof args.bytes === 'number' ? args.bytes : hugeBytes)
            return
          }
          res.writeHead(200, { 'content-type': 'text/event-stream' })
          res.end(`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: body.id, result: { content: [{ type: 'text', text: `small:${String(args.text)}` }] } })}\n\n`)
          return
        }
        default:
          res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({
            jsonrpc: '2.0',
            id: body.id,
            error: { code: -32601, message: 'Method not found' }
          }))
      }
    }, () => res.destroy())
  })
  const { port, sockets } = await listenTracked(server)
  let closing: Promise<void> | undefined
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    hugeCalls: () => hugeCalls,
    bytesWritten: () => bytesWritten,
    abandoned: () => abandoned,
    completed: () => completed,
    close: async () => {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve())
        for (const socket of sockets) socket.destroy()
      })
      return await closing
    }
  }
}

/** The counters of a fixture in a child process (`GET /stats`). */
export interface HugeAnswerStats { hugeCalls: number, bytesWritten: number, abandoned: number, completed: number }

export interface SpawnedHugeAnswerServer {
  url: string
  pid: number
  stats: () => Promise<HugeAnswerStats>
  close: () => Promise<void>
}

/** Runs the fixture in its own Node process (with tsx); close() kills it. */
export async function spawnHugeAnswerServer (options: HugeAnswerOptions = {}): Promise<SpawnedHugeAnswerServer> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', fileURLToPath(import.meta.url), String(options.hugeBytes ?? 300_000_000)],
    { stdio: ['ignore', 'pipe', 'inherit'] }
  )
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  const url = await new Promise<string>((resolve, reject) => {
    let out = ''
    const timer = setTimeout(() => reject(new Error(`the huge-answer fixture did not start: ${out}`)), 30_000)
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString()
      const m = /listening (\S+)/.exec(out)
      if (m?.[1] !== undefined) { clearTimeout(timer); resolve(m[1]) }
    })
    exited.then(() => { clearTimeout(timer); reject(new Error(`the huge-answer fixture exited: ${out}`)) }, () => {})
  })
  const base = new URL(url)
  return {
    url,
    pid: child.pid as number,
    stats: async () => await (await fetch(`${base.origin}/stats`)).json() as HugeAnswerStats,
    close: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
      await exited
    }
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const server = await startHugeAnswerServer({ hugeBytes: Number(process.argv[2] ?? 300_000_000) })
  process.stdout.write(`listening ${server.url}\n`)
}
