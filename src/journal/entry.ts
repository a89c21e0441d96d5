import { hash } from 'node:crypto'
import { maskText } from '../secrets/detector.js'
import { hasObjectWiderThan, MAX_OBJECT_MEMBERS } from '../routing/wide-json.js'
import type { InvokeResult } from '../routing/router.js'
import { prepareField, prepareText, utf8Head } from './redact.js'

/** `full` stores arguments, output and trace; `meta` everything else; `off` nothing. */
export type JournalMode = 'full' | 'meta' | 'off'

/** Byte budgets of the stored fields (UTF-8 of the JSON text; of the text itself for output). */
export const CAPS = { arguments: 16 * 1024, output: 16 * 1024, trace: 64 * 1024 } as const

/**
 * Where calls without a tenant are journaled (open mode, or an admin key naming no userId). The
 * leading underscore keeps it apart from every userId (they start with a letter or digit); only an
 * admin reads it (`GET /users/_global/invocations`).
 */
export const GLOBAL_TENANT = '_global'

/** The fields a journaled call shares with the router's result, as the router gives them. */
type ResultFields = Pick<InvokeResult, 'callId' | 'name' | 'isError' | 'error' | 'truncated' | 'durationMs' | 'toolMs'>

/** One call as the gateway saw it, before the journal masks and caps it. */
export interface CallRecord extends ResultFields {
  /** Epoch ms at which the call ended (its result was made). */
  endedAt: number
  /** The tenant the call acted for; undefined when it named none. */
  userId: string | undefined
  /** The tier that served it; null when the call was refused before a tool. */
  route: string | null
  /** The remote MCP server of tiers user_mcp and global_mcp. */
  serverId: string | null
  /** As the caller sent them: an object, or the JSON string a model emitted. */
  arguments: unknown
  output: string | null
  trace: unknown
  /** The short hash of the API key (16 hex of its SHA-256); null in open mode. */
  keyId: string | null
  checkpointId: string | null
  approvalId: string | null
  /** The `run_tools_script` call whose script made this call (code mode); null otherwise. */
  parentCallId?: string | null
  /**
   * `input_required`: a round whose MCP server asked for input (neither a result nor an error);
   * `definition_changed`: no call, a remote tool's definition changed since it was pinned (SPEC 18); absent or null otherwise.
   */
  status?: 'input_required' | 'definition_changed' | null
}

/** A journal entry as it is stored and read back. Absent values are null, never missing. */
export interface JournalEntry extends ResultFields {
  /** ISO 8601 time the call ended; it started durationMs earlier. */
  ts: string
  userId: string | null
  route: string | null
  serverId: string | null
  /** Masked; a CappedField over 16 KiB; null with JOURNAL=meta. */
  arguments: unknown
  /** SHA-256 (hex) of the arguments' JSON after masking by key, before capping. */
  argumentsSha256: string | null
  /** Masked; a CappedField over 16 KiB; null with JOURNAL=meta or for a refused call. */
  output: unknown
  /** Masked; a CappedField over 64 KiB; null with JOURNAL=meta or when the source gave none. */
  trace: unknown
  keyId: string | null
  instance: string
  checkpointId: string | null
  approvalId: string | null
  /** The `run_tools_script` call whose script made this call (code mode); null otherwise (absent in entries written before it existed). */
  parentCallId: string | null
  /** `input_required` for a round whose MCP server asked for input; null otherwise (absent in entries written before it existed). */
  status: 'input_required' | 'definition_changed' | null
}

/**
 * Arguments a model emitted as a JSON string are stored as the object they encode, when they do
 * (and it is not too wide to parse: then, as the call refused them, the string itself).
 */
function argumentsValue (raw: unknown): unknown {
  if (typeof raw !== 'string') return raw ?? null
  if (raw.trim() === '') return {}
  if (hasObjectWiderThan(raw, MAX_OBJECT_MEMBERS)) return raw
  try {
    return JSON.parse(raw)
  } catch {
    return raw
  }
}

/** `JSON.stringify` of a string or null. */
function jsonText (s: string | null): string {
  return s === null ? 'null' : JSON.stringify(s)
}

/** A number as JSON writes it (non-finite numbers are null). */
function jsonNumber (n: number): string {
  return Number.isFinite(n) ? String(n) : 'null'
}

// Entries end a few per millisecond under load, thousands per second: the date and time up to the second are
// made once per second ('2026-12-07T18:53:38.'), the milliseconds written onto them.
let isoSecond = Number.NaN
let isoPrefix = ''

/** `new Date(ms).toISOString()`; its text up to the second remembered for the last second asked. */
function isoTime (ms: number): string {
  if (!Number.isSafeInteger(ms) || ms < 0) return new Date(ms).toISOString()
  const milli = ms % 1000
  const second = ms - milli
  if (second !== isoSecond) {
    const text = new Date(second).toISOString()
    // Everything before the milliseconds and the Z (a year past 9999 is written longer).
    isoPrefix = text.slice(0, -4)
    isoSecond = second
  }
  return isoPrefix + (milli < 10 ? '00' : milli < 100 ? '0' : '') + String(milli) + 'Z'
}

/**
 * Where an entry's argumentsSha256 is still to be written (a store that writes it when the entry is read: the memory
 * ring): the entry holds `null` at `at`, and the stored arguments, `from`..`to`, are the text the hash is of.
 */
export interface DeferredHash { from: number, to: number, at: number }

/**
 * The stored form of a call (a JournalEntry: masked, capped, and stripped to metadata with `meta`)
 * as the JSON text the stores keep. Written field by field from each field's own JSON, so the
 * arguments are serialised once (their text is what argumentsSha256 hashes, and what is stored
 * when masking their strings found nothing), and no entry object is made per call.
 */
export function entryJson (record: CallRecord, mode: Exclude<JournalMode, 'off'>, instance: string): string {
  return entryText(record, mode, instance, false).json
}

/**
 * entryJson; with `deferHash`, when the entry stores the very text argumentsSha256 is of (JOURNAL=full, no string
 * of the arguments masked, not capped), the hash is left for the reader (`hashLater`, fillHash): an entry is
 * written on every call and read by few, and the hash was a sixth of the memory journal's CPU per entry.
 */
export function entryText (
  record: CallRecord, mode: Exclude<JournalMode, 'off'>, instance: string, deferHash: boolean
): { json: string, hashLater?: DeferredHash } {
  const args = prepareField(argumentsValue(record.arguments), CAPS.arguments)
  const full = mode === 'full'
  const error = record.error === null
    ? 'null'
    : '{"code":' + JSON.stringify(record.error.code) + ',"message":' + JSON.stringify(maskText(utf8Head(record.error.message, CAPS.output))) + '}'
  const trace = full && record.trace !== null && record.trace !== undefined ? prepareField(record.trace, CAPS.trace).storedJson : 'null'
  const stored = full ? args.storedJson : 'null'
  const head = '{"callId":' + JSON.stringify(record.callId) +
    ',"ts":"' + isoTime(record.endedAt) +
    '","userId":' + jsonText(record.userId ?? null) +
    ',"name":' + JSON.stringify(record.name) +
    ',"route":' + jsonText(record.route) +
    ',"serverId":' + jsonText(record.serverId) +
    ',"arguments":' + stored +
    ',"argumentsSha256":'
  const later = deferHash && full && args.storedJson === args.json
  const json = head +
    // One-shot hash (Node >= 20.12): no Hash object per entry.
    (later ? 'null' : '"' + hash('sha256', args.json, 'hex') + '"') +
    ',"output":' + (full ? JSON.stringify(prepareText(record.output, CAPS.output)) : 'null') +
    ',"isError":' + String(record.isError) +
    ',"error":' + error +
    ',"truncated":' + String(record.truncated) +
    ',"trace":' + trace +
    ',"durationMs":' + jsonNumber(record.durationMs) +
    ',"toolMs":' + jsonNumber(Math.round(record.toolMs * 1000) / 1000) +
    ',"keyId":' + jsonText(record.keyId) +
    ',"instance":' + JSON.stringify(instance) +
    ',"checkpointId":' + jsonText(record.checkpointId) +
    ',"approvalId":' + jsonText(record.approvalId) +
    ',"parentCallId":' + jsonText(record.parentCallId ?? null) +
    ',"status":' + jsonText(record.status ?? null) + '}'
  if (!later) return { json }
  const from = head.length - ARGUMENTS_SHA_KEY.length - stored.length
  return { json, hashLater: { from, to: from + stored.length, at: head.length } }
}

const ARGUMENTS_SHA_KEY = ',"argumentsSha256":'

/** An entry whose hash was left for the reader (entryText's `hashLater`), with it written: the SHA-256 of its stored arguments. */
export function fillHash (json: string, later: DeferredHash): string {
  return json.slice(0, later.at) + '"' + hash('sha256', json.slice(later.from, later.to), 'hex') + '"' + json.slice(later.at + 4)
}
