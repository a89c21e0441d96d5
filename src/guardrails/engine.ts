import { maskText, maskValue, MAX_DEPTH, TOO_DEEP } from '../secrets/detector.js'
import type { CheckedResult, GuardrailReport, GuardrailRunner, GuardrailSubject, GuardrailVerdict } from '../routing/guardrails.js'
import type { Guardrail } from '../routing/policy.js'
import type { Finding } from './finding.js'
import { findInjection } from './injection.js'
import { findPii } from './pii.js'
import { redactFindings } from './redact.js'
import { askWebhook, DEFAULT_WEBHOOK_TIMEOUT_MS } from './webhook.js'
import type { WebhookAnswer } from './webhook.js'

/** What a detector found in one value, and the value with it redacted. */
interface Scan<T> { kinds: string[], redacted: T }

/** One side of a call as the checks see it: the arguments object, or the result's text and structuredContent. */
interface Side<T> {
  name: 'arguments' | 'result'
  scan: (check: 'secrets' | 'pii' | 'injection', value: T) => Scan<T>
  /** What a webhook is sent of the value, beside the rule and the call. */
  payload: (value: T) => Record<string, unknown>
  /** A webhook's replacement as a value of this side, or undefined when it is not one. */
  replacement: (answer: WebhookAnswer) => T | undefined
}

const FINDERS: Record<'pii' | 'injection', (text: string) => Finding[]> = { pii: findPii, injection: findInjection }

function kindsOf (findings: readonly Finding[]): string[] {
  return findings.length === 0 ? [] : [...new Set(findings.map((f) => f.kind))]
}

function scanText (check: 'secrets' | 'pii' | 'injection', text: string): Scan<string> {
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
function scanValue<T> (check: 'secrets' | 'pii' | 'injection', value: T): Scan<T> {
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

const ARGUMENTS: Side<Record<string, unknown>> = {
  name: 'arguments',
  scan: scanValue,
  payload: (args) => ({ arguments: args }),
  replacement: ({ replacement: v }) => v !== null && typeof v === 'object' && !Array.isArray(v) ? v as Record<string, unknown> : undefined
}

/**
 * The result: its text, and its structuredContent string by string (the router bounds its size
 * and depth: src/routing/guardrails.ts). Both are checked by each rule, so a finding in either
 * blocks, redacts (each where it was found: the structuredContent keeps its shape) or flags.
 */
const RESULT: Side<CheckedResult> = {
  name: 'result',
  scan: (check, value) => {
    const text = scanText(check, value.text)
    if (value.structuredContent === undefined) {
      return { kinds: text.kinds, redacted: text.redacted === value.text ? value : { text: text.redacted, structuredContent: undefined } }
    }
    const structured = scanValue(check, value.structuredContent)
    const kinds = [...new Set([...text.kinds, ...structured.kinds])]
    const same = text.redacted === value.text && structured.redacted === value.structuredContent
    return { kinds, redacted: same ? value : { text: text.redacted, structuredContent: structured.redacted } }
  },
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
}

/**
 * The policies' guardrails (SPEC 18), run by the router on a call's arguments before it runs and
 * on its result's text and structuredContent after: `secrets` (the journal's detector), `pii` (pii.ts), `injection`
 * (injection.ts) and `webhook` (webhook.ts), each redacting, blocking or flagging what it finds.
 * Rules run in order; a block ends the run. A report names what was found by kind, never the text.
 */
export class GuardrailEngine implements GuardrailRunner {
  readonly #secret: string | undefined

  constructor (opts: GuardrailEngineOptions = {}) {
    this.#secret = opts.webhookSecret === '' ? undefined : opts.webhookSecret
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
        const scan = side.scan(rule.check, value)
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
    : `found ${report.kinds.join(', ')}`
  const side = rule.on === 'arguments' ? 'the call\'s arguments; the tool did not run' : 'the tool\'s result; the tool ran, its result is withheld'
  return `Blocked by the ${rule.id} (${rule.check} on ${side}): ${what}`
}
