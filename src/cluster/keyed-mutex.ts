import type { WriteLock } from './write-lock.js'

/** Runs tasks with the same key one after another; different keys run concurrently (one instance). */
export class KeyedMutex implements WriteLock {
  readonly #tails = new Map<string, Promise<unknown>>()

  async run<T> (key: string, task: () => Promise<T>): Promise<T> {
    const previous = this.#tails.get(key) ?? Promise.resolve()
    const current = previous.then(task, task)
    const tail = current.then(() => {}, () => {})
    this.#tails.set(key, tail)
    try {
      return await current
    } finally {
      // Drop the key once nothing is queued behind us, so the map does not grow forever.
      if (this.#tails.get(key) === tail) this.#tails.delete(key)
    }
  }

  /** Settles once every task queued now has settled (a bounded close waits on it). */
  async settled (): Promise<void> {
    await Promise.allSettled([...this.#tails.values()])
  }
}
