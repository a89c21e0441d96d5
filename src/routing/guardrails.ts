import { capOutput, capSpans, stringifyToolValue } from './output.js'
import type { Guardrail } from './policy.js'
import type { CatalogEntry } from './source.js'
import type { ToolOutcome } from './types.js'

/** What one guardrail did on one call: in the result's trace (`guardrails`), the journal (with it) and the metrics. */
export interface GuardrailReport {
  /** The rule, as its policy writes it: `tenant guardrails/0`. */
  id: string
  on: Guardrail['on']
  check: Guardrail['check']
  /** `passed`: nothing found; the others: what was done about a finding (or, for a webhook that failed, what failOpen said). */
  outcome: 'passed' | 'redacted' | 'blocked' | 'flagged'
  /** What kinds of things were found (`card`, `email`, `instruction`, `github-token`...), never the text itself. */
  kinds: string[]
  /** A webhook that did not answer in time or answered badly: why (the outcome is what failOpen says). */
  error?: string
}

/** One side of a call the guardrails look at: the arguments before the call, or the result after it. */
export interface GuardrailSubject<T> {
  entry: CatalogEntry
  /** The name the call used, the tenant it acts for: what a webhook is told. */
  name: string
  userId: string | undefined
  value: T
  signal: AbortSignal
}

/** The checks' outcome on one side: the value to go on with (redacted or replaced), or the message of a block. */
export interface GuardrailVerdict<T> {
  value: T
  blocked: string | undefined
  reports: GuardrailReport[]
}

/**
 * What the result's checks read: the text the model is given and, for an MCP result, its
 * structuredContent (what `/mcp` clients receive beside it), `undefined` when there is none or it
 * is over the bound (boundStructured). A verdict's `structuredContent` is what goes on: the same
 * value when nothing in it changed, a copy of the same shape with strings redacted, or
 * `undefined` (dropped: a webhook replaced the text and gave no structuredContent of its own).
 */
export interface CheckedResult {
  text: string
  structuredContent: unknown
}

/**
 * Runs a policy's guardrails (SPEC 18; src/guardrails/ implements it): the router asks it before
 * a call (arguments) and after (the result's text and structuredContent), only when the policy names rules for the tool.
 */
export interface GuardrailRunner {
  arguments: (rules: readonly Guardrail[], subject: GuardrailSubject<Record<string, unknown>>) => Promise<GuardrailVerdict<Record<string, unknown>>>
  result: (rules: readonly Guardrail[], subject: GuardrailSubject<CheckedResult>) => Promise<GuardrailVerdict<CheckedResult>>
}

/** The rules of a tool without guardrails: one array, never a new one. */
export const NO_RULES: readonly Guardrail[] = []

type Subject = Omit<GuardrailSubject<unknown>, 'value'>

/** The arguments' guardrails (the `on: arguments` ones of `rules`): arguments to go on with (redacted), or a block. */
export async function guardArguments (
  runner: GuardrailRunner,
  rules: readonly Guardrail[],
  subject: GuardrailSubject<Record<string, unknown>>
): Promise<GuardrailVerdict<Record<string, unknown>> | undefined> {
  const mine = rules.filter((r) => r.on === 'arguments')
  if (mine.length === 0) return undefined
  return await runner.arguments(mine, subject)
}

/**
 * The result's guardrails (the `on: result` ones), on its text as the model would read it and on
 * an MCP result's structuredContent: the outcome to go on with (its value the redacted text, or a
 * guardrail failure), and what they did.
 *
 * The checks see what the caller can receive and little more: a text over `maxChars` (the
 * router's output cap for this call) is read as the router cuts it (capOutput: head, marker,
 * tail) with CUT_MARGIN characters more on each side of the cut (checkedWindow), and the checked
 * text, cut as the router cuts, is the value, marked truncated. structuredContent is read whole
 * when its JSON is at most `maxChars` and it is nested at most STRUCTURED_MAX_DEPTH deep; beyond
 * that it is dropped, unread (boundStructured; the trace says why in `structuredContentDropped`).
 * The CPU of a call is then bounded by the cap, not by what a tenant's server sends (up to
 * MCP_MAX_MESSAGE_BYTES), and no byte that was not checked reaches the model or an `/mcp` client
 * (README.md#guardrails).
 *
 * An MCP result's trace holds the raw items that `/mcp` passes through and the journal keeps:
 * when the checks blocked, replaced or cut the text, its items are replaced by what was scanned,
 * and its structuredContent by the checked one (checkedTrace), so no unscanned copy gets out.
 */
export async function guardResult (
  runner: GuardrailRunner,
  rules: readonly Guardrail[],
  outcome: ToolOutcome & { ok: true },
  subject: Subject,
  maxChars: number
): Promise<{ outcome: ToolOutcome, reports: GuardrailReport[] }> {
  const mine = rules.filter((r) => r.on === 'result')
  if (mine.length === 0 || outcome.inputRequired !== undefined || outcome.task !== undefined) return { outcome, reports: [] }
  const text = stringifyToolValue(outcome.value)
  if (!text.ok) return { outcome, reports: [] }
  const window = checkedWindow(text.text, maxChars)
  const structured = structuredOf(outcome.trace)
  const over = structured === undefined ? undefined : boundStructured(structured, maxChars)
  const checked = over === undefined ? structured : undefined
  const verdict = await runner.result(mine, { ...subject, value: { text: window.text, structuredContent: checked } })
  if (verdict.blocked !== undefined) {
    const trace = checkedTrace(outcome.trace, null, undefined, undefined)
    const blocked: ToolOutcome = { ok: false, reason: 'guardrail', message: verdict.blocked, ...(trace !== undefined ? { trace } : {}) }
    return { outcome: blocked, reports: verdict.reports }
  }
  const textSame = verdict.value.text === text.text
  // A webhook's structuredContent replaces the result's; it does not give one to a result without.
  const kept = structured === undefined ? undefined : verdict.value.structuredContent
  if (textSame && kept === structured) return { outcome, reports: verdict.reports }
  const value = textSame ? outcome.value : window.cut(verdict.value.text)
  const dropped = over ?? (structured !== undefined && kept === undefined ? 'a webhook check replaced the result without one' : undefined)
  const trace = checkedTrace(outcome.trace, textSame ? undefined : value as string, kept, dropped)
  const next: ToolOutcome = { ...outcome, value, ...(!textSame && (value !== verdict.value.text || window.text !== text.text) ? { truncated: true } : {}) }
  if (trace !== undefined) next.trace = trace
  return { outcome: next, reports: verdict.reports }
}

/**
 * How deep the result's checks read structuredContent: an object or array nested deeper is not
 * walked, so a structuredContent nested deeper is dropped, not passed through unread. The secret
 * detector's MAX_DEPTH (src/secrets/detector.ts; routing does not import it, a test holds them equal).
 */
export const STRUCTURED_MAX_DEPTH = 32

/** An MCP result's structuredContent, from its trace (the result as received); undefined when there is none. */
function structuredOf (trace: unknown): unknown {
  if (trace === null || typeof trace !== 'object' || Array.isArray(trace)) return undefined
  return (trace as { structuredContent?: unknown }).structuredContent
}

/**
 * What a string of structuredContent counts for at least, in characters, against the cap: the
 * checks cost about a microsecond per string whatever its length (each detector's set-up), so a
 * structuredContent of many short strings is bounded as one of that weight would be (some 3,000
 * strings at most under the default cap: about 2.3 ms of CPU, 5 times a text at the cap; row 18.1 of
 * bench/guardrails.ts), not by its length alone (20,000 strings: about 16 ms).
 */
export const STRUCTURED_STRING_WEIGHT = 32

/**
 * Why a structuredContent is not read (and so dropped), or undefined when it is within bounds: its
 * JSON (strings counted unescaped, and each at least STRUCTURED_STRING_WEIGHT) at most `max`
 * characters, no object or array deeper than STRUCTURED_MAX_DEPTH. The walk stops as soon as
 * either is passed: its work is bounded by `max`.
 */
export function boundStructured (value: unknown, max: number): string | undefined {
  let size = 0
  const tooBig = `its JSON is over the output cap (${max} chars, a string counting as at least ${STRUCTURED_STRING_WEIGHT})`
  const walk = (v: unknown, depth: number): string | undefined => {
    if (typeof v === 'string') size += Math.max(v.length + 2, STRUCTURED_STRING_WEIGHT)
    else if (v === null || typeof v !== 'object') size += String(v).length
    else if (depth >= STRUCTURED_MAX_DEPTH) return `it is nested deeper than ${STRUCTURED_MAX_DEPTH}`
    else if (Array.isArray(v)) {
      size += 2
      for (let i = 0; i < v.length && size <= max; i++) {
        size += 1
        const why = walk(v[i], depth + 1)
        if (why !== undefined) return why
      }
    } else {
      size += 2
      for (const k in v) {
        if (size > max) break
        if (!Object.hasOwn(v, k)) continue
        size += k.length + 4
        const why = walk((v as Record<string, unknown>)[k], depth + 1)
        if (why !== undefined) return why
      }
    }
    return size > max ? tooBig : undefined
  }
  return walk(value, 0)
}

/**
 * How far past the cut, on each side, the checks read a text over the cap: a secret or a PEM block
 * across the cut is then found whole and masked, not left half in the head or the tail. Bounds
 * what they read to the cap plus twice this.
 */
export const CUT_MARGIN = 4096

/**
 * What the checks read of a text, and how their answer becomes the value: a text over `max` is
 * read as capOutput keeps it (head, marker, tail) with CUT_MARGIN more characters of head and of
 * tail toward the cut, and their answer is cut back to capOutput's head, marker and tail. Where
 * the marker is not found once in the answer (a webhook replaced the text), the answer is capped
 * as a whole: every character of it was checked either way.
 */
function checkedWindow (text: string, max: number): { text: string, cut: (checked: string) => string } {
  const spans = capSpans(text.length, max)
  if (spans === undefined) return { text, cut: (checked) => capOutput(checked, max).text }
  const headEnd = spans.head + CUT_MARGIN
  const tailStart = text.length - spans.tail - CUT_MARGIN
  if (headEnd >= tailStart) return { text, cut: (checked) => capOutput(checked, max).text }
  return {
    text: text.slice(0, headEnd) + spans.marker + text.slice(tailStart),
    cut: (checked) => {
      const at = checked.indexOf(spans.marker)
      if (at < 0 || checked.indexOf(spans.marker, at + 1) >= 0) return capOutput(checked, max).text
      const after = checked.slice(at + spans.marker.length)
      return checked.slice(0, Math.min(at, spans.head)) + spans.marker + (spans.tail > 0 ? after.slice(Math.max(0, after.length - spans.tail)) : '')
    }
  }
}

// Items of an MCP result that carry no text of their own (as /mcp keeps beside a capped text).
const NON_TEXT_TYPES: ReadonlySet<unknown> = new Set(['image', 'audio', 'resource_link'])

/**
 * An MCP result's trace (`{content, structuredContent}` as received) as the checks left it: its
 * text replaced by `scanned`, the text they passed (redacted, replaced, cut), or by nothing when
 * they blocked (`null`), items without text (images, audio, links, blob resources) kept; with
 * `scanned` undefined, its items are kept as they are (the text did not change). Its
 * structuredContent is `structured`, the one the checks passed, or is gone (blocked, dropped:
 * `dropped` says why, in `structuredContentDropped`). Any other trace is returned as it is: only
 * MCP results carry their content in the trace.
 */
function checkedTrace (trace: unknown, scanned: string | null | undefined, structured: unknown, dropped: string | undefined): unknown {
  if (trace === null || typeof trace !== 'object' || Array.isArray(trace)) return trace
  const raw = trace as { content?: unknown, structuredContent?: unknown }
  if (!Array.isArray(raw.content) && raw.structuredContent === undefined) return trace
  const { content, structuredContent: _checked, ...rest } = raw
  const out: Record<string, unknown> = { ...rest, content: scanned === undefined ? content : textless(content, scanned) }
  if (structured !== undefined) out.structuredContent = structured
  if (dropped !== undefined) out.structuredContentDropped = dropped
  return out
}

/** The items without text of an MCP result's content, after the scanned text when there is one. */
function textless (content: unknown, scanned: string | null): unknown[] {
  const kept = (Array.isArray(content) ? content : []).filter((item: unknown) => {
    const it = item as { type?: unknown, resource?: unknown } | null
    if (it === null || typeof it !== 'object') return false
    return NON_TEXT_TYPES.has(it.type) || (it.type === 'resource' && it.resource !== null && typeof it.resource === 'object' && 'blob' in it.resource)
  })
  return scanned === null ? kept : [{ type: 'text', text: scanned }, ...kept]
}

/** What the guardrails did, on the result and in its trace (which the journal keeps). */
export function withGuardrails (result: { guardrails?: GuardrailReport[], trace: unknown }, reports: GuardrailReport[], includeTrace: boolean): void {
  result.guardrails = reports
  if (!includeTrace) return
  const trace = result.trace
  result.trace = trace === null || trace === undefined
    ? { guardrails: reports }
    : typeof trace === 'object' && !Array.isArray(trace) ? { ...trace as Record<string, unknown>, guardrails: reports } : trace
}
