/**
 * What the lean transport (lean-http-transport.ts) accepts of a server's messages besides their
 * bytes (response-limits.ts): how wide a message's objects may be, how many messages a request's
 * stream may carry, and how fast the standalone GET stream may talk. Each bound is a cost a
 * tenant's server could otherwise put on the gateway's event loop at will.
 */
import { hasObjectWiderThan, MAX_OBJECT_MEMBERS } from '../routing/wide-json.js'
import type { JSONRPCMessage } from '@modelcontextprotocol/client'
import { isRequest } from './lean-wire.js'
import { MessageTooWideError, TooManyMessagesError } from './response-limits.js'

/**
 * Messages a request's SSE stream may carry: past MAX_STREAM_NOTIFICATIONS its notifications (progress, log messages)
 * are dropped unread by the Client, past MAX_STREAM_MESSAGES the stream is cut and its requests fail. A server
 * streaming progress at loopback speed cost the gateway ~50-65 us per notification (the Client's validation and
 * dispatch): 200,000 during one call were 10 s of its CPU.
 */
const MAX_STREAM_NOTIFICATIONS = 10_000
const MAX_STREAM_MESSAGES = 100_000

/**
 * Messages the standalone GET stream (list changes, resource updates, log messages, the server's requests) may carry
 * per minute: past it the stream is closed and opened again when the minute ends, whatever the server's `retry:`.
 * A server flooding notifications/tools/list_changed there took the gateway's whole CPU for as long as its client
 * lived (17 s of CPU in 5 s, measured: each is dispatched, and refreshes the list).
 */
export const GET_STREAM_MESSAGES_PER_MINUTE = 6000

/**
 * The server's own requests (ping, elicitation, sampling, roots, any method with an id) a request's stream may
 * carry, and the standalone GET stream per minute: past them a request's stream is cut (its call fails,
 * GW_UPSTREAM_TOO_LARGE) and the GET stream closed until the minute ends. Each request makes the gateway answer it
 * (a POST back to the server, on a connection of its own while the others are busy) or hold it for the call's
 * client: 20,000 pings on one call's stream opened 15,000-19,000 sockets and took ~15 s of the gateway's CPU, and
 * 30,000 questions held for a REST caller made every new one cost more (4.7 s of CPU), measured by an audit.
 */
export const MAX_STREAM_REQUESTS = 100
const GET_STREAM_REQUESTS_PER_MINUTE = 300

/** The standalone GET stream carried more messages (or requests) than a minute may: it was closed (reported through onerror). */
export class StreamFloodError extends Error {
  /** When the minute ends: the stream is opened again then, whatever the server's `retry:`. */
  readonly retryInMs: number
  constructor (limit: number, what: 'messages' | 'requests', retryInMs: number) {
    super(`The MCP server sent more than ${limit} ${what} in a minute on its standalone SSE stream: the stream was closed until the minute ends`)
    this.name = 'StreamFloodError'
    this.retryInMs = retryInMs
  }
}

/** A request's stream's bounds: its messages (past MAX_STREAM_NOTIFICATIONS its notifications are dropped) and the server's requests. */
export class CallStreamCount {
  #messages = 0
  #requests = 0

  /** Counts a message (before it is parsed); TooManyMessagesError past MAX_STREAM_MESSAGES. */
  message (): void {
    if (++this.#messages > MAX_STREAM_MESSAGES) throw new TooManyMessagesError(MAX_STREAM_MESSAGES)
  }

  /** Counts a request of the server; TooManyMessagesError past MAX_STREAM_REQUESTS. */
  request (): void {
    if (++this.#requests > MAX_STREAM_REQUESTS) throw new TooManyMessagesError(MAX_STREAM_REQUESTS, 'requests')
  }

  /** Whether a notification now is dropped unread (it only tells, and each cost ~50-65 us). */
  dropsNotifications (): boolean {
    return this.#messages > MAX_STREAM_NOTIFICATIONS
  }
}

/** The standalone GET stream's bounds per minute: its messages, and of them the server's requests. */
export class GetStreamWindows {
  readonly #messages: MinuteCount
  readonly #requests = new MinuteCount(GET_STREAM_REQUESTS_PER_MINUTE)

  constructor (messagesPerMinute: number) {
    this.#messages = new MinuteCount(messagesPerMinute)
  }

  /** Counts a message (before it is parsed); StreamFloodError past the minute's. */
  message (): void {
    if (this.#messages.over()) throw new StreamFloodError(this.#messages.cap, 'messages', this.#messages.msLeft())
  }

  /** Counts a request of the server; StreamFloodError past the minute's. */
  request (): void {
    if (this.#requests.over()) throw new StreamFloodError(this.#requests.cap, 'requests', this.#requests.msLeft())
  }

  /** Notifications are bounded by the minute's messages here. */
  dropsNotifications (): boolean {
    return false
  }
}

/** Messages counted in fixed windows of a minute. */
class MinuteCount {
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

/** How long a request waits: a stream (no body timeout), a call (undici's defaults: the call's own deadline ends it), a POST that only tells. */
export type PostTiming = 'stream' | 'call' | 'tell'

/**
 * A POST that only tells (the gateway's answer to a server's own request, a notification) waits at most 10 s for the
 * server's 202: a server that keeps them unanswered would otherwise hold a socket each for undici's 300 s.
 */
export const TELL_TIMEOUTS = { headersTimeout: 10_000, bodyTimeout: 10_000 }

/** Whether a message (or batch) carries no request: nothing of it is answered on its POST's response. */
export function tellsOnly (message: JSONRPCMessage | JSONRPCMessage[]): boolean {
  return Array.isArray(message) ? !message.some(isRequest) : !isRequest(message)
}
