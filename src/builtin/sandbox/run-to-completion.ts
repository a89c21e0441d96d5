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

/** How bwrap, prlimit, setpriv and the launcher start the message they print when they fail. */
const LAUNCHER_ERROR = /^(?:bwrap|prlimit|setpriv|tool-gateway): /

/**
 * The reason (for the model; no host paths) when the sandbox itself failed before the command
 * ran: bwrap never reported its namespaces, or a launcher step failed with its own message and
 * nothing was printed on stdout. Undefined when the command ran (whatever its exit status).
 */
export async function sandboxFailure (proc: SandboxedProcess, r: RunOutcome): Promise<string | undefined> {
  if (r.timedOut || r.aborted || r.outputLimitExceeded || r.exitCode === 0) return undefined
  const started = await proc.started
  const launcherSaidSo = r.stdout === '' && (r.exitCode === 1 || r.exitCode === 125) && LAUNCHER_ERROR.test(r.stderr)
  if (started && !launcherSaidSo) return undefined
  if (/Resource temporarily unavailable|Cannot allocate memory|No space left/i.test(r.stderr)) {
    return 'The sandbox could not start the command: this tenant\'s process or memory limit is reached ' +
      '(too many processes running; stop background processes and retry)'
  }
  return 'The sandbox could not start the command'
}
