/**
 * The built-in checks (secrets, pii, injection) over one side of a call: what they find by kind,
 * and the value with it redacted. Pure functions of their input: the engine runs them in process,
 * or in a worker thread for a large value (offload.ts, scan-worker.ts).
 */
import { maskText, maskValue, MAX_DEPTH, TOO_DEEP } from '../secrets/detector.js'
import type { CheckedResult } from '../routing/guardrails.js'
import type { Finding } from './finding.js'
import { findInjection } from './injection.js'
import { findPii } from './pii.js'
import { redactFindings } from './redact.js'

/** A check the gateway runs itself (a webhook is the receiver's). */
export type BuiltinCheck = 'secrets' | 'pii' | 'injection'

/** Which side of a call a value is: the arguments object, or the result's text and structuredContent. */
export type SideName = 'arguments' | 'result'

/** What a check found in one value (kinds, never the text), and the value with it redacted: the value itself when nothing was found. */
export interface Scan<T> { kinds: string[], redacted: T }

const FINDERS: Record<'pii' | 'injection', (text: string) => Finding[]> = { pii: findPii, injection: findInjection }

function kindsOf (findings: readonly Finding[]): string[] {
  return findings.length === 0 ? [] : [...new Set(findings.map((f) => f.kind))]
}

function scanText (check: BuiltinCheck, text: string): Scan<string> {
  if (check === 'secrets') {
    // The journal's own detector (src/secrets/): what it would mask is what this check finds.
    const masked = maskText(text)
    return { kinds: masked === text ? [] : ['secret'], redacted: masked }
  }
  const findings = FINDERS[check](text)
  return { kinds: kindsOf(findings), redacted: findings.length === 0 ? text : redactFindings(text, findings) }
}

/** Every string of a JSON value through `f` (bounded depth, as the secret detector); the value itself when nothing changed. */
function mapStrings (value: unknown, f: (s: string) => string, tooDeep: () => void, depth = 0): unknown {
  if (typeof value === 'string') return f(value)
  if (value === null || typeof value !== 'object') return value
  // What the checks cannot read is not passed on unread: it becomes the secret detector's marker (and a finding).
  if (depth >= MAX_DEPTH) {
    tooDeep()
    return TOO_DEEP
  }
  if (Array.isArray(value)) {
    const out = value.map((v) => mapStrings(v, f, tooDeep, depth + 1))
    return out.every((v, i) => v === value[i]) ? value : out
  }
  let changed = false
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(value)) {
    out[k] = mapStrings(v, f, tooDeep, depth + 1)
    if (out[k] !== v) changed = true
  }
  return changed ? out : value
}

/** Every string of a JSON value checked (and, under a secret-looking key, the value masked, as the journal masks arguments). */
function scanValue<T> (check: BuiltinCheck, value: T): Scan<T> {
  if (check === 'secrets') {
    // By key (`password`, `api_key`...) and inside strings, as the journal masks arguments.
    const masked = maskValue(value, { strings: true }) as T
    return { kinds: masked === value ? [] : ['secret'], redacted: masked }
  }
  const kinds = new Set<string>()
  const redacted = mapStrings(value, (s) => {
    const scan = scanText(check, s)
    scan.kinds.forEach((k) => kinds.add(k))
    return scan.redacted
  }, () => kinds.add('nested-too-deep')) as T
  return { kinds: [...kinds], redacted }
}

/** The arguments: every string of the object, and values under secret-looking keys. */
export const scanArguments: (check: BuiltinCheck, value: Record<string, unknown>) => Scan<Record<string, unknown>> = scanValue

/**
 * The result: its text, and its structuredContent string by string (the router bounds its size
 * and depth: src/routing/guardrails.ts). A finding in either counts; each is redacted where it was
 * found (the structuredContent keeps its shape).
 */
export function scanResult (check: BuiltinCheck, value: CheckedResult): Scan<CheckedResult> {
  const text = scanText(check, value.text)
  if (value.structuredContent === undefined) {
    return { kinds: text.kinds, redacted: text.redacted === value.text ? value : { text: text.redacted, structuredContent: undefined } }
  }
  const structured = scanValue(check, value.structuredContent)
  const kinds = [...new Set([...text.kinds, ...structured.kinds])]
  const same = text.redacted === value.text && structured.redacted === value.structuredContent
  return { kinds, redacted: same ? value : { text: text.redacted, structuredContent: structured.redacted } }
}

/** What a string counts for at least in `weightOf`: the checks' set-up per string costs about as much as reading this many characters. */
const STRING_WEIGHT = 32

/**
 * How much reading a value costs the checks, in characters (each string at least STRING_WEIGHT,
 * each other value its JSON's length, roughly), counted only until it passes `limit`: the count's
 * own work is bounded by the limit, whatever the value's size. A value nested deeper than the
 * checks read counts up to where they stop.
 */
export function weightOf (value: unknown, limit: number): number {
  let size = 0
  const walk = (v: unknown, depth: number): void => {
    if (typeof v === 'string') size += Math.max(v.length, STRING_WEIGHT)
    else if (v === null || typeof v !== 'object' || depth >= MAX_DEPTH) size += STRING_WEIGHT
    else if (Array.isArray(v)) {
      for (const item of v) {
        if (size > limit) break
        walk(item, depth + 1)
      }
    } else {
      for (const k in v) {
        if (size > limit) break
        if (!Object.hasOwn(v, k)) continue
        size += k.length
        walk((v as Record<string, unknown>)[k], depth + 1)
      }
    }
  }
  walk(value, 0)
  return size
}
