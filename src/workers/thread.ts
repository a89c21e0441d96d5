import { readFileSync, readlinkSync } from 'node:fs'
import { setPriority } from 'node:os'

const TICK_MS = 10 // USER_HZ is 100 on every Linux ABI Node supports.

/** Nice value of the pools' worker threads (unprivileged: a thread may always lower its own priority). */
const WORKER_NICE = 10

/** CPU ms (user + system) a thread of this process has used, or undefined where unreadable. */
export function threadCpuMs (tid: number | undefined): number | undefined {
  if (tid === undefined) return undefined
  try {
    // Small procfs read: no disk, microseconds; done on a 50 ms tick only while a job runs.
    const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'latin1')
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return (Number(fields[11]) + Number(fields[12])) * TICK_MS
  } catch {
    return undefined
  }
}

/**
 * What a pool's worker does first (FairWorkerPool): tells the pool its kernel thread id, so the
 * pool can read the CPU time the thread uses, and lowers its own priority: Linux's nice value is
 * per thread, so a busy worker yields the CPU to the event loop, which serves every tenant.
 */
export function announceThread (port: { postMessage: (msg: unknown) => void }): void {
  try {
    const tid = /task\/(\d+)$/.exec(readlinkSync('/proc/thread-self'))
    if (tid === null) return
    port.postMessage({ tid: Number(tid[1]) })
    try { setPriority(Number(tid[1]), WORKER_NICE) } catch {}
  } catch {}
}
