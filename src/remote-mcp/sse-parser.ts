/**
 * The text/event-stream parser of the lean transport (lean-http-transport.ts): events parsed
 * incrementally on raw buffers, bounded in size.
 */
import { DEFAULT_MAX_MESSAGE_BYTES, MessageTooLargeError } from './response-limits.js'

/** One dispatched SSE event. */
export interface SseEvent { event: string, data: string, id: string | undefined }

/**
 * Incremental parser of the text/event-stream format (WHATWG HTML, server-sent events) on raw
 * buffers: lines end in LF, CRLF or CR (also split across chunks); only complete lines are
 * decoded (a line terminator never occurs inside a UTF-8 sequence, so decoding per line is
 * safe). An event (data plus the unfinished line) larger than `maxBytes` throws.
 */
export class SseParser {
  readonly #onEvent: (event: SseEvent) => void
  readonly #onRetry: (ms: number) => void
  readonly #maxBytes: number
  #pending: Buffer[] = []
  #pendingBytes = 0
  #skipLf = false
  #start = true
  #data: string[] = []
  #dataBytes = 0
  #event = ''
  #id: string | undefined
  #lastId: string | undefined

  constructor (onEvent: (event: SseEvent) => void, onRetry: (ms: number) => void = () => {}, maxBytes = DEFAULT_MAX_MESSAGE_BYTES) {
    this.#onEvent = onEvent
    this.#onRetry = onRetry
    this.#maxBytes = maxBytes
  }

  /** The id of the last event (for Last-Event-ID on a reconnect). */
  get lastEventId (): string | undefined { return this.#lastId }

  /** Bytes of the event under way held in memory (its data lines and the unfinished line). */
  get heldBytes (): number { return this.#pendingBytes + this.#dataBytes }

  push (chunk: Buffer): void {
    let pos = 0
    const len = chunk.length
    if (this.#skipLf && len > 0) {
      if (chunk[0] === 0x0a) pos = 1
      this.#skipLf = false
    }
    // Next LF and CR at or after pos; -1 once there is none left in this chunk.
    let lf = chunk.indexOf(0x0a, pos)
    let cr = chunk.indexOf(0x0d, pos)
    while (pos < len) {
      if (lf !== -1 && lf < pos) lf = chunk.indexOf(0x0a, pos)
      if (cr !== -1 && cr < pos) cr = chunk.indexOf(0x0d, pos)
      let end: number
      let next: number
      if (cr !== -1 && (lf === -1 || cr < lf)) {
        end = cr
        if (cr + 1 < len) next = chunk[cr + 1] === 0x0a ? cr + 2 : cr + 1
        else { next = cr + 1; this.#skipLf = true }
      } else if (lf !== -1) {
        end = lf
        next = lf + 1
      } else {
        break
      }
      if (this.#pending.length > 0) {
        // A line begun in earlier chunks: joined once, when its end arrives (no copying per chunk).
        this.#pending.push(chunk.subarray(pos, end))
        const line = Buffer.concat(this.#pending)
        this.#pending = []
        this.#pendingBytes = 0
        this.#line(line, 0, line.length)
      } else {
        this.#line(chunk, pos, end)
      }
      pos = next
    }
    if (pos < len) {
      this.#pendingBytes += len - pos
      if (this.#pendingBytes + this.#dataBytes > this.#maxBytes) throw new MessageTooLargeError(this.#maxBytes)
      // A copy: the chunk may be a view into the socket's read buffer.
      this.#pending.push(Buffer.from(chunk.subarray(pos)))
    }
  }

  /** The stream ended: an unfinished event is dropped, as the spec says. */
  end (): void {
    this.#pending = []
    this.#pendingBytes = 0
    this.#data = []
    this.#dataBytes = 0
    this.#event = ''
  }

  #line (buf: Buffer, start: number, end: number): void {
    if (this.#start) {
      // A UTF-8 byte order mark may open the stream (and is not part of the first field name).
      this.#start = false
      if (end - start >= 3 && buf[start] === 0xef && buf[start + 1] === 0xbb && buf[start + 2] === 0xbf) start += 3
    }
    if (start === end) { this.#dispatch(); return }
    if (buf[start] === 0x3a) return // ':' comment
    const colon = buf.indexOf(0x3a, start)
    let name: string
    let value: string
    if (colon === -1 || colon >= end) {
      name = buf.toString('latin1', start, end)
      value = ''
    } else {
      name = buf.toString('latin1', start, colon)
      const from = buf[colon + 1] === 0x20 ? colon + 2 : colon + 1
      value = from >= end ? '' : buf.toString('utf8', from, end)
    }
    switch (name) {
      case 'data':
        this.#dataBytes += end - start
        if (this.#dataBytes > this.#maxBytes) throw new MessageTooLargeError(this.#maxBytes)
        this.#data.push(value)
        break
      case 'event': this.#event = value; break
      case 'id': if (!value.includes('\0')) this.#id = value; break
      case 'retry': if (/^\d+$/.test(value)) this.#onRetry(Number(value)); break
    }
  }

  #dispatch (): void {
    if (this.#id !== undefined) this.#lastId = this.#id
    const id = this.#id
    this.#id = undefined
    if (this.#data.length === 0) { this.#event = ''; return }
    const data = this.#data.length === 1 ? this.#data[0] as string : this.#data.join('\n')
    const event = this.#event === '' ? 'message' : this.#event
    this.#data = []
    this.#dataBytes = 0
    this.#event = ''
    this.#onEvent({ event, data, id })
  }
}
