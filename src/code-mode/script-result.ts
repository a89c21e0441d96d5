import type { ToolOutcome } from '../routing/types.js'
import type { CallSocket } from './call-socket.js'

/** How a script's process ended (the sandbox's ExecResult). */
export interface ScriptRun {
  stdout: string
  stderr: string
  exitCode: number
  timedOut: boolean
  outputLimitExceeded: boolean
  aborted: boolean
}

/** The model's text: what the script printed (stdout, then stderr labelled), then its value. */
function printed (run: ScriptRun): string {
  const parts: string[] = []
  if (run.stdout.trim() !== '') parts.push(run.stdout.trimEnd())
  if (run.stderr.trim() !== '') parts.push(`[stderr]\n${run.stderr.trimEnd()}`)
  return parts.join('\n')
}

function valueText (value: unknown): string {
  return typeof value === 'string' ? value : JSON.stringify(value ?? null, null, 2)
}

/**
 * A script's outcome from its process and its socket: the value it returned (with what it
 * printed), or a tool error that says why it failed (its exception, the deadline, a limit of the
 * socket) and keeps what it printed. The trace lists its inner calls.
 */
export function scriptOutcome (r: { run: ScriptRun, socket: CallSocket, timeoutMs: number, durationMs: number, language: string }): ToolOutcome {
  const { run, socket } = r
  const calls = socket.calls.map((c) => ({ ...c }))
  const trace = {
    language: r.language,
    exitCode: run.exitCode,
    timedOut: run.timedOut,
    durationMs: Math.round(r.durationMs * 1000) / 1000,
    calls,
    ...(socket.problems.length > 0 ? { problems: socket.problems } : {})
  }
  const out = printed(run)
  const made = `${calls.length} tool call${calls.length === 1 ? '' : 's'} made`
  const withOutput = (message: string): string => out === '' ? message : `${message}\nWhat it printed:\n${out}`
  if (run.timedOut) {
    return { ok: false, reason: 'timeout', message: withOutput(`The script ran past its deadline of ${r.timeoutMs} ms and was stopped (${made})`), trace }
  }
  if (run.aborted) return { ok: false, reason: 'cancelled', message: withOutput(`The script was cancelled (${made})`), trace }
  if (run.outputLimitExceeded) {
    return { ok: false, reason: 'tool-error', message: withOutput(`The script printed too much and was stopped (${made})`), trace }
  }
  const end = socket.end
  if (end?.ok === true && run.exitCode === 0) {
    const value = valueText(end.value)
    return { ok: true, value: out === '' ? value : `${out}\nResult: ${value}`, trace }
  }
  if (end === undefined && socket.problems.length > 0) {
    return { ok: false, reason: 'script-limit', message: withOutput(`The script failed (${made}): the gateway closed its socket: ${socket.problems.join('; ')}`), trace }
  }
  const why = end?.ok === false
    ? end.message.trimEnd()
    : run.exitCode === 127
      ? `its interpreter was not found in the sandbox (${run.stderr.trim().slice(0, 200)})`
      : `it exited with status ${run.exitCode} before it answered`
  return { ok: false, reason: 'tool-error', message: withOutput(`The script failed (${made}): ${why}`), trace }
}
