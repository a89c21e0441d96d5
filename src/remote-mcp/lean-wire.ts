/**
 * The wire helpers of the lean streamable-HTTP transport (lean-http-transport.ts): which headers
 * are its own, the params field `Mcp-Name` mirrors per method, cheap JSON-RPC shape checks, and
 * reading (capped) or discarding response bodies.
 */
import type { Dispatcher } from 'undici'
import { PROTOCOL_VERSION_META_KEY, ProtocolErrorCode } from '@modelcontextprotocol/client'
import type { JSONRPCMessage } from '@modelcontextprotocol/client'
import { EgressBlockedError } from '../egress/ssrf.js'
import { MessageTooLargeError } from './response-limits.js'
import type { ResponseCharge } from './response-limits.js'

/** Header names the transport derives itself; per-request headers never override them (as in the SDK). */
export const RESERVED_HEADERS = new Set([
  'authorization', 'content-type', 'accept', 'mcp-protocol-version', 'mcp-method', 'mcp-name', 'mcp-session-id', 'last-event-id'
])
/** The params field `Mcp-Name` mirrors, per method (2026-07-28 transports). */
export const NAME_FIELD: Readonly<Record<string, string>> = {
  'tools/call': 'name',
  'prompts/get': 'name',
  'resources/read': 'uri',
  // The Tasks extension (SEP-2663): a task request names its task.
  'tasks/get': 'taskId',
  'tasks/update': 'taskId',
  'tasks/cancel': 'taskId'
}
const ERROR_TEXT_CAP = 4096

/** A cheap structural check instead of the SDK's zod schema: the Client checks results itself. */
export function isJsonRpcMessage (value: unknown): value is JSONRPCMessage {
  if (typeof value !== 'object' || value === null) return false
  const m = value as Record<string, unknown>
  if (m.jsonrpc !== '2.0') return false
  if (typeof m.method === 'string') return true
  return ('result' in m || 'error' in m) && (typeof m.id === 'string' || typeof m.id === 'number')
}

export function isRequest (m: JSONRPCMessage): boolean {
  return 'method' in m && 'id' in m && m.id !== undefined
}

/** `message` is one message (not a batch) of `method`. */
export function isMethod (message: JSONRPCMessage | JSONRPCMessage[], method: string): message is JSONRPCMessage & { method: string, params?: unknown } {
  return !Array.isArray(message) && 'method' in message && message.method === method
}

/** The 2026-07-28 envelope's protocol version of a single request, else undefined (legacy). */
export function envelopeVersion (message: JSONRPCMessage | JSONRPCMessage[]): string | undefined {
  if (Array.isArray(message) || !('method' in message) || !('id' in message)) return undefined
  const meta = (message.params as { _meta?: Record<string, unknown> } | undefined)?._meta
  const v = meta?.[PROTOCOL_VERSION_META_KEY]
  return typeof v === 'string' ? v : undefined
}

/** A JSON-RPC error answer for each of `ids`, carrying `err` in its data (see ResponseStreamEndedError). */
export function failAll (ids: Iterable<string | number>, err: Error, deliver: (m: JSONRPCMessage) => void): void {
  for (const id of ids) deliver({ jsonrpc: '2.0', id, error: { code: ProtocolErrorCode.InternalError, message: err.message, data: err } } as JSONRPCMessage)
}

export function header (headers: Record<string, string | string[] | undefined>, name: string): string | undefined {
  const v = headers[name]
  return Array.isArray(v) ? v[0] : v
}

/** As fetch reports a failed request, so classify.ts (stale sockets) treats both transports alike. */
export function requestFailed (err: unknown): Error {
  if (err instanceof EgressBlockedError) return err
  const cause = (err as { cause?: unknown }).cause
  if (cause instanceof EgressBlockedError) return cause
  const name = (err as { name?: unknown }).name
  if (name === 'AbortError') return err as Error
  return new TypeError('fetch failed', { cause: err })
}

/**
 * Reads a whole body of at most `cap` bytes, charging what it holds to `charge` as it grows (the
 * caller releases it once the body is parsed). Past either bound the body is destroyed: the
 * rest is never read.
 */
export async function readCapped (body: Dispatcher.ResponseData['body'], cap: number, charge: ResponseCharge | undefined): Promise<Buffer> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of body) {
    size += (chunk as Buffer).length
    try {
      if (size > cap) throw new MessageTooLargeError(cap)
      charge?.hold(size)
    } catch (err) {
      discard(body)
      throw err
    }
    chunks.push(chunk as Buffer)
  }
  return chunks.length === 1 ? chunks[0] as Buffer : Buffer.concat(chunks, size)
}

/**
 * Stops reading a body for good. undici's destroy() of an unfinished body emits an 'error'
 * (RequestAbortedError) that nobody listens to any more: a no-op listener keeps it from
 * becoming an uncaught exception.
 */
export function discard (body: Dispatcher.ResponseData['body']): void {
  body.on('error', () => {})
  body.destroy()
}

export async function readErrorText (body: Dispatcher.ResponseData['body']): Promise<string> {
  let text = ''
  try {
    for await (const chunk of body) {
      text += (chunk as Buffer).toString('utf8')
      // Leaving the loop destroys the body: an error page is never read past the cap.
      if (text.length >= ERROR_TEXT_CAP) break
    }
  } catch {}
  return text.slice(0, ERROR_TEXT_CAP)
}

/** The progressToken of a single request (the tag of the stream that answers it). */
export function progressTokenOf (message: JSONRPCMessage | JSONRPCMessage[]): string | number | undefined {
  if (Array.isArray(message) || !('method' in message)) return undefined
  const token = (message as { params?: { _meta?: { progressToken?: unknown } } }).params?._meta?.progressToken
  return typeof token === 'string' || typeof token === 'number' ? token : undefined
}
