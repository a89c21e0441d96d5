/** What a task run under a cluster-wide write lease gets. */
export interface LeaseContext {
  /** The fencing token: strictly increasing per key across every holder on every instance. */
  fence: number
  /** Aborts when this holder lost the lease (another holder may already be writing). */
  signal: AbortSignal
}

/**
 * A per-key write lock: tasks with the same key run one at a time, different keys concurrently.
 * The in-process KeyedMutex (one instance) and LeaseLock (every instance sharing a Redis) both
 * are one; only LeaseLock hands the task a LeaseContext.
 */
export interface WriteLock {
  run: <T>(key: string, task: (lease?: LeaseContext) => Promise<T>, opts?: { signal?: AbortSignal | undefined }) => Promise<T>
}
