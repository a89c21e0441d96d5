/**
 * The framing of code mode's socket (SPEC 19): each message is a 4-byte big-endian length and
 * that many bytes of UTF-8 JSON (one JSON-RPC 2.0 message). Length-prefixed, so a reader never
 * scans for a delimiter and never holds more than one frame's bytes: a frame over the limit is
 * refused from its header, before its body arrives.
 */

import { hasObjectWiderThan, MAX_OBJECT_MEMBERS } from '../routing/wide-json.js'

/** Bytes of a frame's length header. */
const HEADER_BYTES = 4

/** One message, encoded. */
export function encodeFrame (message: unknown): Buffer {
  const body = Buffer.from(JSON.stringify(message), 'utf8')
  const frame = Buffer.allocUnsafe(HEADER_BYTES + body.length)
  frame.writeUInt32BE(body.length, 0)
  body.copy(frame, HEADER_BYTES)
  return frame
}

/** What a chunk of the stream held: whole messages, or the reason the stream must be closed. */
export type FrameResult = { ok: true, messages: unknown[] } | { ok: false, reason: string }

/**
 * Cuts a byte stream into messages, holding at most one partial frame (bounded by `maxFrameBytes`).
 * After a failure it answers the same failure: the stream is not trusted again.
 */
export class FrameReader {
  readonly #maxFrameBytes: number
  #pending: Buffer[] = []
  #pendingBytes = 0
  #failed: string | undefined

  constructor (maxFrameBytes: number) {
    this.#maxFrameBytes = maxFrameBytes
  }

  push (chunk: Buffer): FrameResult {
    if (this.#failed !== undefined) return { ok: false, reason: this.#failed }
    this.#pending.push(chunk)
    this.#pendingBytes += chunk.length
    const messages: unknown[] = []
    let buf = this.#pending.length === 1 ? chunk : Buffer.concat(this.#pending, this.#pendingBytes)
    while (buf.length >= HEADER_BYTES) {
      const length = buf.readUInt32BE(0)
      if (length > this.#maxFrameBytes) return this.#fail(`a frame of ${length} bytes is over the limit of ${this.#maxFrameBytes}`)
      if (buf.length < HEADER_BYTES + length) break
      const text = buf.toString('utf8', HEADER_BYTES, HEADER_BYTES + length)
      // As a request body is (plugins/json-body.ts): an object this wide costs more to parse and walk than any other JSON of its size.
      if (hasObjectWiderThan(text, MAX_OBJECT_MEMBERS)) return this.#fail(`a frame holding an object of more than ${MAX_OBJECT_MEMBERS} members`)
      let message: unknown
      try {
        message = JSON.parse(text)
      } catch {
        return this.#fail('a frame that is not JSON')
      }
      messages.push(message)
      buf = buf.subarray(HEADER_BYTES + length)
    }
    this.#pending = buf.length > 0 ? [Buffer.from(buf)] : []
    this.#pendingBytes = buf.length
    return { ok: true, messages }
  }

  #fail (reason: string): FrameResult {
    this.#failed = reason
    this.#pending = []
    this.#pendingBytes = 0
    return { ok: false, reason }
  }
}
