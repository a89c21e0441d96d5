/**
 * The worker thread of offload.ts: runs one built-in check over one side of a call. A job is
 * `{ id, side, check, value }`; the answer `{ id, ok: true, out: { kinds, redacted } }`, with
 * `redacted` only when something was found (the engine keeps its own value otherwise), or
 * `{ id, ok: false, error }`.
 */
import { parentPort } from 'node:worker_threads'
import { announceThread } from '../workers/index.js'
import { scanArguments, scanResult } from './scan.js'
import type { BuiltinCheck, SideName } from './scan.js'

interface Job { id: number, side: SideName, check: BuiltinCheck, value: never }

const port = parentPort
if (port !== null) {
  announceThread(port)
  port.on('message', (job: Job) => {
    try {
      const scan = job.side === 'arguments' ? scanArguments(job.check, job.value) : scanResult(job.check, job.value)
      port.postMessage({ id: job.id, ok: true, out: { kinds: scan.kinds, ...(scan.kinds.length > 0 ? { redacted: scan.redacted } : {}) } })
    } catch (err) {
      port.postMessage({ id: job.id, ok: false, error: err instanceof Error ? err.message : String(err) })
    }
  })
}
