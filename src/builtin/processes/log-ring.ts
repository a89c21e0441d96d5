import { TailBuffer, TEXT_CHUNKS } from '../sandbox/index.js'

/** A slice of the log as `logs` returns it. */
export interface LogSlice {
  offset: number
  nextOffset: number
  /** The requested offset fell before the oldest retained character. */
  truncated: boolean
  content: string
}

/**
 * Character ring buffer addressed by absolute offsets: offset N always means the N-th character
 * ever written, so a reader's cursor stays valid while old text is dropped.
 */
export class LogRing {
  readonly #tail: TailBuffer<string>
  /** Absolute offset of the first retained character. */
  #start = 0

  constructor (capacity: number) {
    this.#tail = new TailBuffer(Math.max(1, Math.floor(capacity)), TEXT_CHUNKS)
  }

  get start (): number { return this.#start }
  get end (): number { return this.#start + this.#tail.length }

  append (text: string): void {
    if (text.length === 0) return
    this.#start += this.#tail.push(text)
    // Many tiny lines make many chunks: merge now and then so reads stay cheap.
    if (this.#tail.chunkCount > 1024) this.#tail.contents()
  }

  read (offset: number, limit: number): LogSlice {
    const requested = Math.max(0, Math.floor(offset))
    const truncated = requested < this.#start
    const from = Math.min(Math.max(requested, this.#start), this.end)
    const max = Math.max(0, Math.floor(limit))
    const all = this.#tail.contents()
    const content = all.slice(from - this.#start, from - this.#start + max)
    return { offset: from, nextOffset: from + content.length, truncated, content }
  }
}
