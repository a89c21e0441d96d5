import type { ToolOutcome } from './types.js'

/**
 * Runs `fn` with a deadline. In-process handlers cannot be killed, so on timeout the caller
 * gets a timeout outcome at once and the handler's signal is aborted for it to stop; its late
 * result is ignored.
 */
export async function runWithDeadline (
  timeoutMs: number,
  parent: AbortSignal,
  fn: (signal: AbortSignal) => Promise<ToolOutcome>,
  timeoutMessage: string
): Promise<ToolOutcome> {
  const controller = new AbortController()
  let timer: NodeJS.Timeout | undefined
  let onAbort: (() => void) | undefined
  const stop = new Promise<ToolOutcome>((resolve) => {
    timer = setTimeout(() => {
      controller.abort(new Error('timeout'))
      resolve({ ok: false, reason: 'timeout', message: timeoutMessage })
    }, timeoutMs)
    onAbort = () => {
      controller.abort(parent.reason)
      resolve({ ok: false, reason: 'cancelled', message: 'The caller cancelled the call' })
    }
    if (parent.aborted) onAbort()
    else parent.addEventListener('abort', onAbort, { once: true })
  })
  try {
    const work = fn(controller.signal)
    // A rejection after the deadline must not surface as an unhandled rejection.
    work.catch(() => {})
    return await Promise.race([work, stop])
  } finally {
    clearTimeout(timer)
    if (onAbort) parent.removeEventListener('abort', onAbort)
  }
}
