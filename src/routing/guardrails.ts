import { stringifyToolValue } from './output.js'
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

/** One side of a call the guardrails look at: the arguments before the call, or the result's text after it. */
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
 * Runs a policy's guardrails (SPEC 18; src/guardrails/ implements it): the router asks it before
 * a call (arguments) and after (the result's text), only when the policy names rules for the tool.
 */
export interface GuardrailRunner {
  arguments: (rules: readonly Guardrail[], subject: GuardrailSubject<Record<string, unknown>>) => Promise<GuardrailVerdict<Record<string, unknown>>>
  result: (rules: readonly Guardrail[], subject: GuardrailSubject<string>) => Promise<GuardrailVerdict<string>>
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
 * The result's guardrails (the `on: result` ones), on its text as the model would read it: the
 * outcome to go on with (its value the redacted text, or a guardrail failure), and what they did.
 */
export async function guardResult (
  runner: GuardrailRunner,
  rules: readonly Guardrail[],
  outcome: ToolOutcome & { ok: true },
  subject: Subject
): Promise<{ outcome: ToolOutcome, reports: GuardrailReport[] }> {
  const mine = rules.filter((r) => r.on === 'result')
  if (mine.length === 0 || outcome.inputRequired !== undefined || outcome.task !== undefined) return { outcome, reports: [] }
  const text = stringifyToolValue(outcome.value)
  if (!text.ok) return { outcome, reports: [] }
  const verdict = await runner.result(mine, { ...subject, value: text.text })
  if (verdict.blocked !== undefined) {
    const blocked: ToolOutcome = { ok: false, reason: 'guardrail', message: verdict.blocked, ...(outcome.trace !== undefined ? { trace: outcome.trace } : {}) }
    return { outcome: blocked, reports: verdict.reports }
  }
  return { outcome: verdict.value === text.text ? outcome : { ...outcome, value: verdict.value }, reports: verdict.reports }
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
