import type { CheckedResult, GuardrailReport, GuardrailRunner, GuardrailSubject, GuardrailVerdict } from '../routing/guardrails.js'
import type { Guardrail } from '../routing/policy.js'
import { CheckIncomplete, OFFLOAD_MIN_WEIGHT, offloadBudget, ScanOffload } from './offload.js'
import type { OffloadCall } from './offload.js'
import { scanArguments, scanResult, weightOf } from './scan.js'
import type { BuiltinCheck, Scan, SideName } from './scan.js'
import { askWebhook, DEFAULT_WEBHOOK_TIMEOUT_MS } from './webhook.js'
import type { WebhookAnswer } from './webhook.js'

/** One side of a call as the checks see it: the arguments object, or the result's text and structuredContent. */
interface Side<T> {
  name: SideName
  scan: (check: BuiltinCheck, value: T) => Scan<T>
  /** How much reading the value costs the checks (scan.ts weightOf), counted up to `limit`. */
  weight: (value: T, limit: number) => number
  /** What a webhook is sent of the value, beside the rule and the call. */
  payload: (value: T) => Record<string, unknown>
  /** A webhook's replacement as a value of this side, or undefined when it is not one. */
  replacement: (answer: WebhookAnswer) => T | undefined
}

const ARGUMENTS: Side<Record<string, unknown>> = {
  name: 'arguments',
  scan: scanArguments,
  weight: weightOf,
  payload: (args) => ({ arguments: args }),
  replacement: ({ replacement: v }) => v !== null && typeof v === 'object' && !Array.isArray(v) ? v as Record<string, unknown> : undefined
}

/** The result: its text and its structuredContent (scan.ts scanResult). */
const RESULT: Side<CheckedResult> = {
  name: 'result',
  scan: scanResult,
  weight: (value, limit) => value.text.length + (value.structuredContent === undefined ? 0 : weightOf(value.structuredContent, limit)),
  payload: (value) => ({ result: value.text, ...(value.structuredContent !== undefined ? { structuredContent: value.structuredContent } : {}) }),
  // The replacement is the text; structuredContent is the answer's own, or none (the gateway cannot tell what to redact in it).
  replacement: (answer) => {
    const v = answer.replacement
    const text = typeof v === 'string' ? v : v === undefined ? undefined : JSON.stringify(v)
    if (text === undefined) return undefined
    return { text, structuredContent: answer.structuredContent }
  }
}

export interface GuardrailEngineOptions {
  /** GUARDRAIL_WEBHOOK_SECRET: what webhook checks are signed with; without it a webhook check fails (then failOpen decides). */
  webhookSecret?: string | undefined
  /**
   * Where values heavier than `offloadMinWeight` are checked: worker threads (offload.ts; the
   * default, started on first use), or `false`: in process, whatever their size (benchmarks).
   */
  offload?: ScanOffload | false
  /** OFFLOAD_MIN_WEIGHT unless set (tests). */
  offloadMinWeight?: number
}

/**
 * The policies' guardrails (SPEC 18), run by the router on a call's arguments before it runs and
 * on its result's text and structuredContent after: `secrets` (the journal's detector), `pii` (pii.ts), `injection`
 * (injection.ts) and `webhook` (webhook.ts), each redacting, blocking or flagging what it finds.
 * Rules run in order; a block ends the run. A report names what was found by kind, never the text.
 * A large value is checked off the event loop (offload.ts); a check that could not complete
 * there blocks the call (a `flag` rule flags it): nothing passes unchecked.
 */
export class GuardrailEngine implements GuardrailRunner {
  readonly #secret: string | undefined
  readonly #offload: ScanOffload | false
  readonly #minWeight: number

  constructor (opts: GuardrailEngineOptions = {}) {
    this.#secret = opts.webhookSecret === '' ? undefined : opts.webhookSecret
    this.#offload = opts.offload ?? new ScanOffload()
    this.#minWeight = opts.offloadMinWeight ?? OFFLOAD_MIN_WEIGHT
  }

  /** Stops the workers of large values (shutdown). */
  async close (): Promise<void> {
    if (this.#offload !== false) await this.#offload.close()
  }

  async arguments (rules: readonly Guardrail[], subject: GuardrailSubject<Record<string, unknown>>): Promise<GuardrailVerdict<Record<string, unknown>>> {
    return await this.#run(rules, subject, ARGUMENTS)
  }

  async result (rules: readonly Guardrail[], subject: GuardrailSubject<CheckedResult>): Promise<GuardrailVerdict<CheckedResult>> {
    return await this.#run(rules, subject, RESULT)
  }

  async #run<T> (rules: readonly Guardrail[], subject: GuardrailSubject<T>, side: Side<T>): Promise<GuardrailVerdict<T>> {
    let value = subject.value
    const reports: GuardrailReport[] = []
    // Decided once per side: a redaction does not make a value much lighter.
    const offload = this.#offload !== false && side.weight(value, this.#minWeight) > this.#minWeight ? this.#offload : undefined
    let call: OffloadCall | undefined
    for (const rule of rules) {
      const report: GuardrailReport = { id: rule.id, on: rule.on, check: rule.check, outcome: 'passed', kinds: [] }
      reports.push(report)
      let action: Guardrail['action'] | 'allow' = rule.action
      let redacted: T | undefined
      if (rule.check === 'webhook') {
        const asked = await this.#ask(rule, subject, value, side)
        if (asked.error !== undefined) report.error = asked.error
        action = asked.action
        redacted = asked.replacement
        if (action !== 'allow') report.kinds = ['webhook']
      } else {
        let scan: Scan<T>
        try {
          scan = offload === undefined
            ? side.scan(rule.check, value)
            : await offload.scan(side.name, rule.check, value, call ??= { tenant: subject.userId ?? '', signal: subject.signal, budget: offloadBudget() })
        } catch (err) {
          if (!(err instanceof CheckIncomplete)) throw err
          // Not checked, so not passed on: blocked, unless the rule only flags (a flagged value goes on either way).
          report.error = `the check could not complete: ${err.message}`
          report.kinds = ['incomplete']
          report.outcome = rule.action === 'flag' ? 'flagged' : 'blocked'
          if (report.outcome === 'flagged') continue
          return { value, blocked: blockMessage(rule, report), reports }
        }
        report.kinds = scan.kinds
        if (scan.kinds.length === 0) continue
        redacted = scan.redacted
      }
      if (action === 'allow') continue
      if (action === 'block') {
        report.outcome = 'blocked'
        return { value, blocked: blockMessage(rule, report), reports }
      }
      if (action === 'redact' && redacted !== undefined) {
        value = redacted
        report.outcome = 'redacted'
      } else {
        report.outcome = 'flagged'
      }
    }
    return { value, blocked: undefined, reports }
  }

  /** A webhook's verdict; a failure is `block` unless the rule fails open (then `allow`), with the reason. */
  async #ask<T> (rule: Guardrail, subject: GuardrailSubject<T>, value: T, side: Side<T>): Promise<WebhookVerdict<T>> {
    const failed = (error: string): { action: 'block' | 'allow', error: string } => ({ action: rule.failOpen === true ? 'allow' : 'block', error })
    if (this.#secret === undefined) return failed('GUARDRAIL_WEBHOOK_SECRET is not set: the gateway sends no unsigned check')
    if (rule.url === undefined) return failed('the rule has no url')
    const payload = {
      on: side.name,
      tool: subject.name,
      userId: subject.userId ?? null,
      route: subject.entry.route,
      source: subject.entry.source,
      ...side.payload(value)
    }
    try {
      const timeoutMs = rule.timeoutMs ?? DEFAULT_WEBHOOK_TIMEOUT_MS
      const answer = await askWebhook(rule.url, payload, { secret: this.#secret, timeoutMs, signal: subject.signal })
      if (answer.action !== 'redact') return { action: answer.action }
      const replacement = side.replacement(answer)
      if (replacement === undefined) return failed(`answered redact without a replacement ${side.name === 'arguments' ? 'object' : 'text'}`)
      return { action: 'redact', replacement }
    } catch (err) {
      return failed(`the webhook ${(err as Error).message}`)
    }
  }
}

/** What a webhook check says: its action (a failure's is what failOpen says), a replacement, why it failed. */
interface WebhookVerdict<T> { action: Guardrail['action'] | 'allow', replacement?: T, error?: string }

/** A block's message: the rule and what kinds it found, never the text (SPEC 18). */
function blockMessage (rule: Guardrail, report: GuardrailReport): string {
  const what = rule.check === 'webhook'
    ? `its webhook${report.error !== undefined ? ` failed (${report.error}) and failOpen is false` : ' said block'}`
    : report.error !== undefined ? `${report.error}; a value not checked is not passed on` : `found ${report.kinds.join(', ')}`
  const side = rule.on === 'arguments' ? 'the call\'s arguments; the tool did not run' : 'the tool\'s result; the tool ran, its result is withheld'
  return `Blocked by the ${rule.id} (${rule.check} on ${side}): ${what}`
}
