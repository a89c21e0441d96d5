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
  readonly #capacity: number
  #chunks: string[] = []
  #length = 0
  /** Absolute offset of the first retained character. */
  #start = 0

  constructor (capacity: number) {
    this.#capacity = Math.max(1, Math.floor(capacity))
  }

  get start (): number { return this.#start }
  get end (): number { return this.#start + this.#length }

  append (text: string): void {
    if (text.length === 0) return
    if (text.length >= this.#capacity) {
      this.#start += this.#length + text.length - this.#capacity
      this.#chunks = [text.slice(text.length - this.#capacity)]
      this.#length = this.#capacity
      return
    }
    this.#chunks.push(text)
    this.#length += text.length
    while (this.#length > this.#capacity) {
      const first = this.#chunks[0]
      if (first === undefined) break
      const excess = this.#length - this.#capacity
      if (first.length <= excess) {
        this.#chunks.shift()
        this.#length -= first.length
        this.#start += first.length
      } else {
        this.#chunks[0] = first.slice(excess)
        this.#length -= excess
        this.#start += excess
      }
    }
    // Many tiny lines make many chunks: merge now and then so reads stay cheap.
    if (this.#chunks.length > 1024) this.#chunks = [this.#chunks.join('')]
  }

  read (offset: number, limit: number): LogSlice {
    const requested = Math.max(0, Math.floor(offset))
    const truncated = requested < this.#start
    const from = Math.min(Math.max(requested, this.#start), this.end)
    const max = Math.max(0, Math.floor(limit))
    const all = this.#chunks.length === 1 ? (this.#chunks[0] ?? '') : this.#chunks.join('')
    if (this.#chunks.length > 1) this.#chunks = [all]
    const content = all.slice(from - this.#start, from - this.#start + max)
    return { offset: from, nextOffset: from + content.length, truncated, content }
  }
}
