import { timingSafeEqual } from 'node:crypto'
import { chmod, chown } from 'node:fs/promises'
import { createServer } from 'node:net'
import type { Server, Socket } from 'node:net'
import { encodeFrame, FrameReader } from './frames.js'

/** A tool call a script made: a name as its listing shows it, and the arguments object. */
export interface InnerCall {
  name: string
  arguments: Record<string, unknown>
}

/** What the script is answered: the inner call's result as POST /invoke gives it. */
export interface InnerAnswer {
  callId: string
  isError: boolean
  output: string
  error: { code: string, message: string } | null
}

/** One inner call as the script call's trace lists it: its name, then its journal id and outcome once answered. */
export interface InnerCallRecord {
  name: string
  callId?: string
  isError?: boolean
  code?: string | null
}

/** What the script ended with, as it said over the socket (`script/result`, `script/error`). */
export type ScriptEnd = { ok: true, value: unknown } | { ok: false, message: string }

export interface CallSocketOptions {
  /** Where to listen (a path in the call's own directory, bound into its sandbox alone). */
  path: string
  /** Every message carries it: the socket answers this call's script alone. */
  token: string
  /** The socket is the sandbox uid's (mode 0600): the script can connect, no other uid (but root). */
  owner?: { uid: number, gid: number } | undefined
  /** Inner calls the script may make (CODE_MODE_MAX_CALLS); past it each is refused. */
  maxCalls: number
  /** Inner calls run at once; the others wait in arrival order (at most maxCalls of them). */
  concurrency: number
  /** Largest frame read (an inner call's arguments, the script's value). */
  maxFrameBytes: number
  /** Connections at once (a script uses one; a child process may open its own). */
  maxConnections: number
  /** Answers queued to a connection that does not read them: past this it is closed. */
  maxUnreadBytes: number
  /** Runs one inner call through the gateway; `signal` aborts when the script's call ends. */
  call: (call: InnerCall, signal: AbortSignal) => Promise<InnerAnswer>
}

/** JSON-RPC error codes of the socket: the JSON-RPC 2.0 ones, and -32000 for a limit (data.code says which). */
const RPC = { parse: -32700, invalidRequest: -32600, methodNotFound: -32601, invalidParams: -32602, limit: -32000 } as const

/** Messages past maxCalls by this many more: a flood, the connection is closed. */
const FLOOD_SLACK = 16
/** Problems kept for the answer (a script may open and break connections in a loop until its deadline). */
const MAX_PROBLEMS = 20

/**
 * The gateway's end of one script's socket (SPEC 19): a small framed JSON-RPC (frames.ts) over a
 * Unix socket in the call's own directory. `tools/call` runs an inner call through `call` (the
 * gateway's router, with the script call's allow-list, tenancy and limits); `script/result` and
 * `script/error` say how the script ended. Everything a script can send is bounded: a frame's
 * size, the calls (CODE_MODE_MAX_CALLS, then refusals, then the connection is closed as a flood),
 * the calls in flight, the connections, and the answers it leaves unread.
 */
export class CallSocket {
  /** Inner calls run (accepted), in the order they were asked. */
  readonly calls: InnerCallRecord[] = []
  /** Why connections were closed (a bad frame, a wrong token, a flood, a reader that does not read). */
  readonly problems: string[] = []
  /** How the script ended, when it said so. */
  end: ScriptEnd | undefined
  readonly #opts: CallSocketOptions
  readonly #server: Server
  readonly #sockets = new Set<Socket>()
  readonly #abort = new AbortController()
  readonly #token: Buffer
  #inFlight = 0
  #messages = 0
  readonly #waiting: Array<() => void> = []
  readonly #refused = new WeakSet<Socket>()

  private constructor (opts: CallSocketOptions) {
    this.#opts = opts
    this.#token = Buffer.from(opts.token)
    this.#server = createServer((socket) => { this.#accept(socket) })
    this.#server.maxConnections = opts.maxConnections
  }

  /** Listens on `opts.path`, owned by the sandbox uid with mode 0600. */
  static async listen (opts: CallSocketOptions): Promise<CallSocket> {
    const socket = new CallSocket(opts)
    await new Promise<void>((resolve, reject) => {
      socket.#server.once('error', reject)
      socket.#server.listen(opts.path, () => { socket.#server.off('error', reject); resolve() })
    })
    if (opts.owner !== undefined) await chown(opts.path, opts.owner.uid, opts.owner.gid)
    await chmod(opts.path, 0o600)
    return socket
  }

  /**
   * Resolves once the script's connections are closed, or after `ms`. Called when its process has
   * exited: the kernel closed its end, so what it wrote before exiting is read (and its answer
   * known) before anyone concludes that it never answered; the child's exit and the socket's last
   * data reach the gateway in either order.
   */
  async drained (ms: number): Promise<void> {
    // One poll phase first: a connection made just before the exit may not be accepted yet.
    await new Promise((resolve) => setImmediate(resolve))
    if (this.end !== undefined || this.#sockets.size === 0) return
    await new Promise<void>((resolve) => {
      let left = this.#sockets.size
      const timer = setTimeout(resolve, ms)
      for (const s of this.#sockets) {
        s.once('close', () => {
          if (--left > 0) return
          clearTimeout(timer)
          resolve()
        })
      }
    })
  }

  /** Stops listening, closes every connection and aborts the inner calls still running. */
  async close (): Promise<void> {
    this.#abort.abort(new Error('the script ended'))
    for (const s of this.#sockets) s.destroy()
    await new Promise<void>((resolve) => { this.#server.close(() => { resolve() }) })
  }

  #accept (socket: Socket): void {
    this.#sockets.add(socket)
    socket.once('close', () => this.#sockets.delete(socket))
    socket.on('error', () => {})
    const reader = new FrameReader(this.#opts.maxFrameBytes)
    socket.on('data', (chunk: Buffer) => {
      if (this.#refused.has(socket)) return
      const read = reader.push(chunk)
      if (!read.ok) {
        this.#refuse(socket, null, RPC.parse, read.reason)
        return
      }
      for (const message of read.messages) {
        if (socket.destroyed || this.#refused.has(socket)) return
        this.#handle(socket, message)
      }
    })
  }

  #handle (socket: Socket, message: unknown): void {
    const m = message as { id?: unknown, method?: unknown, params?: unknown } | null
    const id = m !== null && typeof m === 'object' && (typeof m.id === 'number' || typeof m.id === 'string') ? m.id : null
    if (m === null || typeof m !== 'object' || Array.isArray(m) || typeof m.method !== 'string') {
      this.#refuse(socket, id, RPC.invalidRequest, 'not a JSON-RPC request')
      return
    }
    const params = m.params as { token?: unknown } | null | undefined
    if (params === null || typeof params !== 'object' || !this.#tokenMatches(params.token)) {
      this.#refuse(socket, id, RPC.invalidRequest, 'a message without this call\'s token')
      return
    }
    if (++this.#messages > this.#opts.maxCalls + FLOOD_SLACK) {
      this.#refuse(socket, id, RPC.limit, `more than ${this.#opts.maxCalls + FLOOD_SLACK} messages: a flood`)
      return
    }
    if (m.method === 'script/result' || m.method === 'script/error') {
      this.#ended(m.method, params as Record<string, unknown>)
      return
    }
    if (m.method !== 'tools/call' || id === null) {
      this.#answer(socket, { jsonrpc: '2.0', id, error: { code: RPC.methodNotFound, message: `unknown method ${JSON.stringify(m.method).slice(0, 80)}` } })
      return
    }
    const call = params as { name?: unknown, arguments?: unknown }
    const args = call.arguments ?? {}
    if (typeof call.name !== 'string' || call.name === '' || args === null || typeof args !== 'object' || Array.isArray(args)) {
      this.#answer(socket, { jsonrpc: '2.0', id, error: { code: RPC.invalidParams, message: 'tools/call takes {name: string, arguments: object}' } })
      return
    }
    if (this.calls.length >= this.#opts.maxCalls) {
      const message = `The script made more than CODE_MODE_MAX_CALLS (${this.#opts.maxCalls}) tool calls; this one was not run`
      this.#answer(socket, { jsonrpc: '2.0', id, error: { code: RPC.limit, message, data: { code: 'GW_SCRIPT_LIMIT' } } })
      return
    }
    const inner: InnerCall = { name: call.name, arguments: args as Record<string, unknown> }
    const record: InnerCallRecord = { name: call.name }
    this.calls.push(record)
    this.#run(socket, id, inner, record).catch(() => {})
  }

  async #run (socket: Socket, id: number | string, inner: InnerCall, record: InnerCallRecord): Promise<void> {
    if (this.#inFlight >= this.#opts.concurrency) await new Promise<void>((resolve) => this.#waiting.push(resolve))
    this.#inFlight++
    let answer: InnerAnswer
    try {
      answer = this.#abort.signal.aborted
        ? { callId: '', isError: true, output: '', error: { code: 'GW_CANCELLED', message: 'The script ended before this call ran' } }
        : await this.#opts.call(inner, this.#abort.signal)
    } catch (err) {
      answer = { callId: '', isError: true, output: '', error: { code: 'GW_TOOL_ERROR', message: (err as Error)?.message ?? String(err) } }
    } finally {
      this.#inFlight--
      this.#waiting.shift()?.()
    }
    record.callId = answer.callId
    record.isError = answer.isError
    record.code = answer.error?.code ?? null
    if (!socket.destroyed) this.#answer(socket, { jsonrpc: '2.0', id, result: answer })
  }

  #ended (method: string, params: Record<string, unknown>): void {
    if (this.end !== undefined) return
    this.end = method === 'script/result'
      ? { ok: true, value: params.value }
      : { ok: false, message: typeof params.message === 'string' ? params.message : 'the script failed' }
  }

  #tokenMatches (token: unknown): boolean {
    if (typeof token !== 'string') return false
    const given = Buffer.from(token)
    return given.length === this.#token.length && timingSafeEqual(given, this.#token)
  }

  #answer (socket: Socket, message: unknown): void {
    socket.write(encodeFrame(message))
    if (socket.writableLength > this.#opts.maxUnreadBytes) {
      this.#problem(`the script left more than ${this.#opts.maxUnreadBytes} bytes of answers unread; its connection was closed`)
      socket.destroy()
    }
  }

  #problem (reason: string): void {
    if (this.problems.length < MAX_PROBLEMS) this.problems.push(reason)
    else if (this.problems.length === MAX_PROBLEMS) this.problems.push('more problems were not kept')
  }

  /** A protocol violation: answered once, recorded, and the connection closed. */
  #refuse (socket: Socket, id: number | string | null, code: number, reason: string): void {
    if (this.#refused.has(socket)) return
    this.#refused.add(socket)
    this.#problem(reason)
    if (!socket.destroyed) socket.end(encodeFrame({ jsonrpc: '2.0', id, error: { code, message: reason, data: { code: 'GW_SCRIPT_LIMIT' } } }))
    socket.destroySoon()
  }
}
