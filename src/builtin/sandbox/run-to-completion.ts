import type { Readable } from 'node:stream'
import { HeadTailCapture } from './output-capture.js'
import type { ExecResult, SandboxedProcess } from './types.js'

/** How long to keep reading pipes after the sandbox leader exited. */
const DRAIN_MS = 2000
/** Output beyond this (per stream) is not worth producing: the command is killed. */
const MIN_OVERFLOW_KILL_BYTES = 64 * 1024 * 1024

export interface RunOptions {
  timeoutMs: number
  maxOutputBytes: number
  signal?: AbortSignal | undefined
}

export interface RunOutcome extends ExecResult {
  spawnError: Error | undefined
}

function ended (s: Readable): Promise<void> {
  return new Promise((resolve) => {
    if (s.readableEnded || s.destroyed) { resolve(); return }
    s.once('end', resolve)
    s.once('close', resolve)
    s.once('error', () => resolve())
  })
}

/**
 * Waits for a sandboxed command, capturing head + tail of each stream while reading (memory stays
 * bounded whatever it prints) and killing it on timeout, abort or extreme output.
 */
export async function runToCompletion (proc: SandboxedProcess, opts: RunOptions): Promise<RunOutcome> {
  const out = new HeadTailCapture(opts.maxOutputBytes)
  const err = new HeadTailCapture(opts.maxOutputBytes)
  const overflowAt = Math.max(MIN_OVERFLOW_KILL_BYTES, opts.maxOutputBytes * 8)
  let timedOut = false
  let aborted = false
  let outputLimitExceeded = false

  const watch = (s: Readable, cap: HeadTailCapture): void => {
    s.on('data', (chunk: Buffer) => {
      cap.push(chunk)
      if (cap.totalBytes > overflowAt && !outputLimitExceeded) {
        outputLimitExceeded = true
        proc.kill()
      }
    })
    s.on('error', () => {})
  }
  watch(proc.stdout, out)
  watch(proc.stderr, err)

  const timer = setTimeout(() => { timedOut = true; proc.kill() }, opts.timeoutMs)
  const onAbort = (): void => { aborted = true; proc.kill() }
  if (opts.signal?.aborted === true) onAbort()
  else opts.signal?.addEventListener('abort', onAbort, { once: true })

  let exit
  try {
    exit = await proc.exited
  } finally {
    clearTimeout(timer)
    opts.signal?.removeEventListener('abort', onAbort)
  }

  // Normally the pipes close with the namespace; in mode none an escaped grandchild may keep them open.
  let drainTimer: NodeJS.Timeout | undefined
  await Promise.race([
    Promise.all([ended(proc.stdout), ended(proc.stderr)]),
    new Promise((resolve) => { drainTimer = setTimeout(resolve, DRAIN_MS) })
  ])
  clearTimeout(drainTimer)
  proc.stdout.destroy()
  proc.stderr.destroy()

  const killedByUs = timedOut || aborted || outputLimitExceeded
  return {
    stdout: out.text(),
    stderr: err.text(),
    exitCode: killedByUs || exit.exitCode === null ? -1 : exit.exitCode,
    timedOut,
    aborted,
    outputLimitExceeded,
    spawnError: proc.spawnError
  }
}
