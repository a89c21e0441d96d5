/**
 * The trace of a built-in call (`"trace": true`, and the journal): what the tool did, never what it
 * read or wrote. It is derived from the tool's result, so it can hold nothing the result does not:
 * scalars (paths, byte and line counts, exit codes, flags) are kept, and every text or list is
 * replaced by its size. docs/ARCHITECTURE.md#result-and-trace
 */

/** Result fields that carry file contents, command text or output: always reduced to their size. */
const CONTENT_KEYS = new Set(['content', 'stdout', 'stderr', 'output', 'command', 'input', 'diff', 'patch', 'text', 'lines', 'matches', 'logs'])

/** A string longer than this is content, whatever its key. */
const MAX_KEPT_CHARS = 256

/** Nested objects past this depth are reduced to their key count. */
const MAX_DEPTH = 2

/** The size of a value a trace does not repeat. */
type Size = { chars: number } | { items: number } | { keys: number }

export interface BuiltinTrace {
  tool: string
  workspaceId: string
  /** Whether the call ran under the workspace's write lock, and how long it waited for it. */
  lockWaitMs?: number
  toolMs: number
  /** The result's fields, reduced (absent when the call failed). */
  result?: Record<string, unknown>
  /** The failure's reason, for a call that failed. */
  failure?: string
  truncated?: boolean
  checkpointId?: string
}

/** The result's fields with texts and lists reduced to their sizes. */
export function summarizeResult (value: unknown): Record<string, unknown> | undefined {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return undefined
  return summarizeObject(value as Record<string, unknown>, 0)
}

function summarizeObject (obj: Record<string, unknown>, depth: number): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const [key, v] of Object.entries(obj)) {
    out[key] = CONTENT_KEYS.has(key) ? sizeOf(v) : summarizeValue(v, depth)
  }
  return out
}

function summarizeValue (v: unknown, depth: number): unknown {
  if (v === null || typeof v === 'number' || typeof v === 'boolean') return v
  if (typeof v === 'string') return v.length <= MAX_KEPT_CHARS && !v.includes('\n') ? v : { chars: v.length }
  if (Array.isArray(v)) return { items: v.length }
  if (typeof v === 'object') return depth + 1 >= MAX_DEPTH ? { keys: Object.keys(v).length } : summarizeObject(v as Record<string, unknown>, depth + 1)
  return null
}

function sizeOf (v: unknown): Size | unknown {
  if (typeof v === 'string') return { chars: v.length }
  if (Array.isArray(v)) return { items: v.length }
  if (v !== null && typeof v === 'object') return { keys: Object.keys(v).length }
  return v
}
