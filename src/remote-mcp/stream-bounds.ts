/**
 * What the lean transport (lean-http-transport.ts) accepts of a server's messages besides their
 * bytes (response-limits.ts): how wide a message's objects may be, how many messages a request's
 * stream may carry, and how fast the standalone GET stream may talk. Each bound is a cost a
 * tenant's server could otherwise put on the gateway's event loop at will.
 */
import { hasObjectWiderThan, MAX_OBJECT_MEMBERS } from '../routing/wide-json.js'
import { MessageTooWideError } from './response-limits.js'

/**
 * Messages a request's SSE stream may carry: past MAX_STREAM_NOTIFICATIONS its notifications (progress, log messages)
 * are dropped unread by the Client, past MAX_STREAM_MESSAGES the stream is cut and its requests fail. A server
 * streaming progress at loopback speed cost the gateway ~50-65 us per notification (the Client's validation and
 * dispatch): 200,000 during one call were 10 s of its CPU.
 */
export const MAX_STREAM_NOTIFICATIONS = 10_000
export const MAX_STREAM_MESSAGES = 100_000

/**
 * Messages the standalone GET stream (list changes, resource updates, log messages, the server's requests) may carry
 * per minute: past it the stream is closed and opened again when the minute ends, whatever the server's `retry:`.
 * A server flooding notifications/tools/list_changed there took the gateway's whole CPU for as long as its client
 * lived (17 s of CPU in 5 s, measured: each is dispatched, and refreshes the list).
 */
export const GET_STREAM_MESSAGES_PER_MINUTE = 6000

/** The standalone GET stream carried more messages than a minute may: it was closed (reported through onerror). */
export class StreamFloodError extends Error {
  constructor (limit: number) {
    super(`The MCP server sent more than ${limit} messages in a minute on its standalone SSE stream: the stream was closed until the minute ends`)
    this.name = 'StreamFloodError'
  }
}

/** Messages counted in fixed windows of a minute. */
export class MinuteCount {
  readonly cap: number
  #start = 0
  #count = 0

  constructor (cap: number) {
    this.cap = cap
  }

  /** Counts one message; true past the cap in this minute. */
  over (now = Date.now()): boolean {
    if (now - this.#start >= 60_000) {
      this.#start = now
      this.#count = 0
    }
    return ++this.#count > this.cap
  }

  /** Milliseconds until this minute ends. */
  msLeft (now = Date.now()): number {
    return Math.max(0, this.#start + 60_000 - now)
  }
}

/** A message's text (a JSON body, an SSE event's data) checked before it is parsed: MessageTooWideError when an object in it is too wide. */
export function checkEventWidth (data: string): void {
  if (hasObjectWiderThan(data, MAX_OBJECT_MEMBERS)) throw new MessageTooWideError(MAX_OBJECT_MEMBERS)
}

/** A JSON answer parsed, unless it holds an object too wide to parse (src/routing/wide-json.ts). */
export function parseAnswer (text: string): unknown {
  checkEventWidth(text)
  return JSON.parse(text)
}
