import { BYTE_CHUNKS, TailBuffer } from './tail-buffer.js'

/**
 * Keeps the first and last bytes of a stream while it is read, so a command printing
 * gigabytes never holds more than `maxBytes` in memory.
 */
export class HeadTailCapture {
  readonly #headMax: number
  readonly #tailMax: number
  #head: Buffer[] = []
  #headLen = 0
  readonly #tail: TailBuffer<Buffer>
  #total = 0

  constructor (maxBytes: number) {
    const max = Math.max(2, Math.floor(maxBytes))
    this.#headMax = Math.ceil(max / 2)
    this.#tailMax = max - this.#headMax
    this.#tail = new TailBuffer(this.#tailMax, BYTE_CHUNKS)
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
    this.#tail.push(rest)
  }

  /** Decoded text; when bytes were dropped, head and tail are joined by a `[... truncated N bytes ...]` marker. */
  text (): string {
    const head = Buffer.concat(this.#head).toString('utf8')
    const dropped = this.#total - this.#headLen - this.#tail.length
    const tail = this.#tail.contents().toString('utf8')
    if (dropped <= 0) return head + tail
    return `${head}\n[... truncated ${dropped} bytes ...]\n${tail}`
  }
}
