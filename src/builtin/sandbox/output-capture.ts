/**
 * Keeps the first and last bytes of a stream while it is read, so a command printing
 * gigabytes never holds more than `maxBytes` in memory.
 */
export class HeadTailCapture {
  readonly #headMax: number
  readonly #tailMax: number
  #head: Buffer[] = []
  #headLen = 0
  #tail: Buffer[] = []
  #tailLen = 0
  #total = 0

  constructor (maxBytes: number) {
    const max = Math.max(2, Math.floor(maxBytes))
    this.#headMax = Math.ceil(max / 2)
    this.#tailMax = max - this.#headMax
  }

  /** Bytes seen so far, kept or not. */
  get totalBytes (): number {
    return this.#total
  }

  push (chunk: Buffer): void {
    this.#total += chunk.length
    let rest = chunk
    if (this.#headLen < this.#headMax) {
      const take = Math.min(this.#headMax - this.#headLen, rest.length)
      this.#head.push(rest.subarray(0, take))
      this.#headLen += take
      rest = rest.subarray(take)
    }
    if (rest.length === 0 || this.#tailMax === 0) return
    if (rest.length >= this.#tailMax) {
      // Copy so the (possibly large) source chunk can be garbage-collected.
      this.#tail = [Buffer.from(rest.subarray(rest.length - this.#tailMax))]
      this.#tailLen = this.#tailMax
      return
    }
    this.#tail.push(rest)
    this.#tailLen += rest.length
    while (this.#tailLen > this.#tailMax) {
      const first = this.#tail[0]
      if (first === undefined) break
      const excess = this.#tailLen - this.#tailMax
      if (first.length <= excess) {
        this.#tail.shift()
        this.#tailLen -= first.length
      } else {
        this.#tail[0] = first.subarray(excess)
        this.#tailLen -= excess
      }
    }
  }

  /** Decoded text; when bytes were dropped, head and tail are joined by a `[... truncated N bytes ...]` marker. */
  text (): string {
    const head = Buffer.concat(this.#head).toString('utf8')
    const dropped = this.#total - this.#headLen - this.#tailLen
    const tail = Buffer.concat(this.#tail).toString('utf8')
    if (dropped <= 0) return head + tail
    return `${head}\n[... truncated ${dropped} bytes ...]\n${tail}`
  }
}
