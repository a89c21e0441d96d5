import { TOOL_ERROR_CODES } from '../errors.js'
import type { ToolFailureReason } from './types.js'

/**
 * Turns what a tool returned into the string a model sees (SPEC 3): strings as is, anything
 * else as JSON. `undefined`, functions, circular objects and BigInts are tool errors.
 */
export function stringifyToolValue (value: unknown): { ok: true, text: string } | { ok: false, message: string } {
  if (typeof value === 'string') return { ok: true, text: value }
  if (value === undefined) return { ok: false, message: 'The tool returned no result (undefined)' }
  try {
    const text = JSON.stringify(value)
    if (text === undefined) return { ok: false, message: `The tool returned a value that is not JSON (${typeof value})` }
    return { ok: true, text }
  } catch (err) {
    return { ok: false, message: `The tool returned a value that cannot be serialised as JSON: ${(err as Error).message}` }
  }
}

/**
 * Caps `text` at `max` chars, keeping head and tail around a marker so the model sees both
 * the start and the end of long output.
 */
export function capOutput (text: string, max: number): { text: string, truncated: boolean } {
  if (text.length <= max) return { text, truncated: false }
  const removed = text.length - max
  const marker = `\n[... truncated ${removed} chars ...]\n`
  const keep = Math.max(0, max - marker.length)
  const head = Math.ceil(keep / 2)
  const tail = keep - head
  return { text: text.slice(0, head) + marker + (tail > 0 ? text.slice(text.length - tail) : ''), truncated: true }
}

/** Maps a failure reason to its errorType in the `TOOL_ERROR:` payload. */
const ERROR_TYPES: Record<ToolFailureReason, string> = {
  'invalid-arguments': 'InvalidArguments',
  timeout: 'Timeout',
  upstream: 'UpstreamError',
  'tool-error': 'ToolError',
  sandbox: 'SandboxError',
  forbidden: 'Forbidden',
  cancelled: 'Cancelled'
}

export function toolErrorCode (reason: ToolFailureReason): string {
  return TOOL_ERROR_CODES[reason]
}

/** AI4J's agent-layer convention, so an orchestrator can hand the output straight to the model. */
export function toolErrorOutput (reason: ToolFailureReason, message: string, tool: string, callId: string): string {
  return 'TOOL_ERROR: ' + JSON.stringify({ errorType: ERROR_TYPES[reason], error: message, tool, callId })
}
