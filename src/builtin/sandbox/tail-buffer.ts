/** How a TailBuffer cuts and joins its chunks: strings (characters) or Buffers (bytes). */
export interface ChunkKind<T extends { readonly length: number }> {
  /** The chunk from `from` on; it may share the chunk's memory. */
  cut: (chunk: T, from: number) => T
  /** The last `n` of a chunk longer than the whole tail: a copy where `cut` shares memory, so the (possibly large) chunk can be garbage-collected. */
  last: (chunk: T, n: number) => T
  join: (chunks: T[]) => T
}

export const TEXT_CHUNKS: ChunkKind<string> = {
  cut: (text, from) => text.slice(from),
  last: (text, n) => text.slice(text.length - n),
  join: (chunks) => chunks.join('')
}

export const BYTE_CHUNKS: ChunkKind<Buffer> = {
  cut: (bytes, from) => bytes.subarray(from),
  last: (bytes, n) => Buffer.from(bytes.subarray(bytes.length - n)),
  join: (chunks) => Buffer.concat(chunks)
}

/**
 * The last `max` characters or bytes of what was pushed, kept as the chunks that hold them: what
 * no longer fits is dropped from the front as it comes, so a stream of any length holds at most
 * `max` in memory.
 */
export class TailBuffer<T extends { readonly length: number }> {
  readonly #max: number
  readonly #kind: ChunkKind<T>
  #chunks: T[] = []
  #length = 0

  constructor (max: number, kind: ChunkKind<T>) {
    this.#max = max
    this.#kind = kind
  }

  /** What is kept (at most `max`). */
  get length (): number {
    return this.#length
  }

  get chunkCount (): number {
    return this.#chunks.length
  }

  /** Appends a chunk and drops what no longer fits; answers how much was dropped. */
  push (chunk: T): number {
    if (chunk.length >= this.#max) {
      const dropped = this.#length + chunk.length - this.#max
      this.#chunks = [this.#kind.last(chunk, this.#max)]
      this.#length = this.#max
      return dropped
    }
    this.#chunks.push(chunk)
    this.#length += chunk.length
    let dropped = 0
    while (this.#length > this.#max) {
      const first = this.#chunks[0]
      if (first === undefined) break
      const excess = this.#length - this.#max
      if (first.length <= excess) {
        this.#chunks.shift()
        this.#length -= first.length
        dropped += first.length
      } else {
        this.#chunks[0] = this.#kind.cut(first, excess)
        this.#length -= excess
        dropped += excess
      }
    }
    return dropped
  }

  /** What is kept, as one chunk; the chunks are merged into it, so the next read is cheap. */
  contents (): T {
    if (this.#chunks.length === 1) return this.#chunks[0] as T
    const all = this.#kind.join(this.#chunks)
    if (this.#chunks.length > 1) this.#chunks = [all]
    return all
  }
}
