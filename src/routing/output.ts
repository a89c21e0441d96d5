import { TOOL_ERROR_CODES } from '../errors.js'
import type { ToolFailureReason } from './types.js'

/**
 * Turns what a tool returned into the string a model sees (docs/ARCHITECTURE.md#result-and-trace): strings as is, anything
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
  const cut = capSpans(text.length, max)
  if (cut === undefined) return { text, truncated: false }
  return { text: text.slice(0, cut.head) + cut.marker + (cut.tail > 0 ? text.slice(text.length - cut.tail) : ''), truncated: true }
}

/** How capOutput cuts a text of `length` chars: the head and tail it keeps and the marker between; undefined when it fits. */
export function capSpans (length: number, max: number): { head: number, tail: number, marker: string } | undefined {
  if (length <= max) return undefined
  const marker = `\n[... truncated ${length - max} chars ...]\n`
  const keep = Math.max(0, max - marker.length)
  const head = Math.ceil(keep / 2)
  return { head, tail: keep - head, marker }
}

/** Maps a failure reason to its errorType in the `TOOL_ERROR:` payload. */
const ERROR_TYPES: Record<ToolFailureReason, string> = {
  'invalid-arguments': 'InvalidArguments',
  timeout: 'Timeout',
  upstream: 'UpstreamError',
  'upstream-unavailable': 'UpstreamUnavailable',
  'upstream-too-large': 'UpstreamTooLarge',
  'upstream-budget': 'UpstreamBudgetExhausted',
  'oauth-required': 'OAuthRequired',
  'tool-error': 'ToolError',
  sandbox: 'SandboxError',
  forbidden: 'Forbidden',
  cancelled: 'Cancelled',
  quota: 'QuotaExceeded',
  'tenant-quota': 'TenantQuotaExceeded',
  policy: 'PolicyDenied',
  guardrail: 'GuardrailBlocked',
  'definition-changed': 'DefinitionChanged',
  'script-limit': 'ScriptLimit',
  'approval-pending': 'ApprovalPending',
  // As named in the approvals contract, which clients match on.
  'approval-denied': 'APPROVAL_DENIED',
  'approval-expired': 'APPROVAL_EXPIRED'
}

export function toolErrorCode (reason: ToolFailureReason): string {
  return TOOL_ERROR_CODES[reason]
}

/** AI4J's agent-layer convention, so an orchestrator can hand the output straight to the model. */
export function toolErrorOutput (reason: ToolFailureReason, message: string, tool: string, callId: string): string {
  return 'TOOL_ERROR: ' + JSON.stringify({ errorType: ERROR_TYPES[reason], error: message, tool, callId })
}

/**
 * The `TOOL_ERROR:` output of a call that never reached a tool (unknown name, not allowed, bad
 * entry): the same form as a tool failure, so an orchestrator answering a batch needs no other
 * case. The errorType is the `GW_` code in PascalCase (`GW_TOOL_NOT_FOUND` is `ToolNotFound`).
 */
export function refusalOutput (code: string, message: string, tool: string, callId: string): string {
  const errorType = code.replace(/^GW_/, '').toLowerCase().split('_').filter((w) => w !== '').map((w) => w[0]?.toUpperCase() + w.slice(1)).join('')
  return 'TOOL_ERROR: ' + JSON.stringify({ errorType, error: message, tool, callId })
}

/** Chars `s` takes inside a JSON string literal (JSON.stringify's escapes). */
function escapedLength (code: number, s: string, i: number): number {
  if (code === 0x22 || code === 0x5c) return 2
  if (code < 0x20) return code === 0x08 || code === 0x09 || code === 0x0a || code === 0x0c || code === 0x0d ? 2 : 6
  if (code >= 0xd800 && code <= 0xdfff) {
    // A well-formed pair is kept as is; a lone surrogate is written as \uXXXX.
    const pairedHigh = code <= 0xdbff && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00
    const pairedLow = code >= 0xdc00 && (s.charCodeAt(i - 1) & 0xfc00) === 0xd800
    return pairedHigh || pairedLow ? 1 : 6
  }
  return 1
}

/**
 * Cuts `s` so that its JSON literal (quotes included) is at most `target` chars, keeping head and
 * tail around a `[... truncated N chars ...]` marker. Never splits a surrogate pair.
 */
export function cutJsonString (s: string, target: number): string {
  if (JSON.stringify(s).length <= target) return s
  // The marker's own length, with N's digits bounded by s.length's; "\n" is 2 chars escaped.
  const markerCost = `\\n[... truncated ${s.length} chars ...]\\n`.length
  const budget = Math.max(0, target - 2 - markerCost)
  const headBudget = Math.ceil(budget / 2)
  let head = 0
  let used = 0
  while (head < s.length) {
    const c = escapedLength(s.charCodeAt(head), s, head)
    if (used + c > headBudget) break
    used += c
    head++
  }
  if (head > 0 && (s.charCodeAt(head - 1) & 0xfc00) === 0xd800) head--
  let tail = s.length
  let tailUsed = 0
  while (tail > head) {
    const c = escapedLength(s.charCodeAt(tail - 1), s, tail - 1)
    if (used + tailUsed + c > budget) break
    tailUsed += c
    tail--
  }
  if (tail < s.length && (s.charCodeAt(tail) & 0xfc00) === 0xdc00) tail++
  return `${s.slice(0, head)}\n[... truncated ${tail - head} chars ...]\n${s.slice(tail)}`
}

/** Where a string or array sits in the tree, to replace it. */
interface Slot { parent: Record<string, unknown> | unknown[], key: string | number, size: number }

function collect (node: unknown, parent: Slot['parent'] | undefined, key: string | number, strings: Slot[], arrays: Slot[]): void {
  if (typeof node === 'string') {
    if (parent !== undefined) strings.push({ parent, key, size: JSON.stringify(node).length })
  } else if (Array.isArray(node)) {
    if (parent !== undefined && node.length > 1) arrays.push({ parent, key, size: JSON.stringify(node).length })
    node.forEach((item, i) => collect(item, node, i, strings, arrays))
  } else if (node !== null && typeof node === 'object') {
    for (const [k, v] of Object.entries(node)) collect(v, node as Record<string, unknown>, k, strings, arrays)
  }
}

const get = (slot: Slot): unknown => (slot.parent as Record<string | number, unknown>)[slot.key]
const put = (slot: Slot, v: unknown): void => { (slot.parent as Record<string | number, unknown>)[slot.key] = v }

/**
 * Makes a JSON value fit in `max` chars once serialised (an output that is JSON stays
 * valid JSON under the cap). The largest string is cut around a marker inside it (head and tail
 * kept); when an array of many small items is what is large, its last items are dropped. This
 * repeats until the JSON fits; a plain object result gets `truncated: true`. Best effort: when
 * keys and numbers alone exceed `max`, the smallest value it reached is returned. `text` is the
 * returned value's JSON (undefined for a value JSON cannot write), so that no caller writes it again.
 */
export function fitJsonValue (value: unknown, max: number): { value: unknown, truncated: boolean, text: string | undefined } {
  const text = JSON.stringify(value) as string | undefined
  if (text === undefined || text.length <= max) return { value, truncated: false, text }
  // A deep copy that is plain JSON: the tool's own objects are not changed.
  const root = { v: JSON.parse(text) as unknown }
  const isRecord = root.v !== null && typeof root.v === 'object' && !Array.isArray(root.v)
  // Room for the flag added at the end.
  const limit = isRecord ? max - ',"truncated":true'.length : max
  let length = text.length
  for (let round = 0; round < 200 && length > limit; round++) {
    const excess = length - limit
    const strings: Slot[] = []
    const arrays: Slot[] = []
    collect(root.v, root, 'v', strings, arrays)
    const str = strings.reduce<Slot | undefined>((a, b) => (a === undefined || b.size > a.size ? b : a), undefined)
    const arr = arrays.reduce<Slot | undefined>((a, b) => (a === undefined || b.size > a.size ? b : a), undefined)
    // A string much smaller than its array (e.g. one of 1000 short grep matches) is not worth cutting.
    if (str !== undefined && (arr === undefined || str.size * 4 >= arr.size) && str.size > 64) {
      put(str, cutJsonString(get(str) as string, Math.max(64, str.size - excess)))
    } else if (arr !== undefined) {
      const items = get(arr) as unknown[]
      let drop = 0
      let saved = 0
      while (drop < items.length - 1 && saved < excess) {
        saved += JSON.stringify(items[items.length - 1 - drop]).length + 1
        drop++
      }
      items.length -= Math.max(1, drop)
    } else {
      break
    }
    length = JSON.stringify(root.v).length
  }
  if (isRecord) (root.v as Record<string, unknown>).truncated = true
  return { value: root.v, truncated: true, text: JSON.stringify(root.v) }
}
