import { HttpError } from '../errors.js'
import { compileNamePattern, NAME_PATTERN_SYNTAX } from './pattern.js'

/**
 * A tool policy as an operator writes it (PUT /policy, PUT /users/{userId}/policy) and as it is
 * stored. Every field is optional; an absent field restricts nothing.
 */
export interface PolicyDocument {
  /** Name patterns (`*` matches any run of characters) of tools never listed nor invoked. */
  deny?: string[]
  /** When present, only tools matching one of these patterns are listed and invoked ([] allows none). */
  allowOnly?: string[]
  /** Only tools that cannot change anything: read_file, glob, grep, and tools annotated readOnlyHint. */
  readOnly?: boolean
  /**
   * Tools whose calls are held until a human approves them: name patterns, or `{annotation}` for
   * every tool whose MCP annotations give it that hint (SPEC 18).
   */
  requireApproval?: Array<string | AnnotationRule>
  /** Checks on a call's arguments and result (SPEC 18), in order. */
  guardrails?: GuardrailRule[]
  /**
   * A remote tool whose definition changed since it was pinned (SPEC 18): `warn` (default) reports it,
   * `hold` withholds it from listings and calls until accepted. Either layer's `hold` holds.
   */
  pinning?: 'warn' | 'hold'
  bash?: {
    /** JavaScript regular expressions tested against the whole command of bash exec and start. */
    denyCommands?: string[]
  }
  /** Ceilings on a call: a request's context.limits (and the deadline) can only go below them. */
  limits?: PolicyLimitsDocument
}

/** `requireApproval` by annotation: the hints that mark a tool as risky (MCP's defaults apply: absent is true unless readOnlyHint). */
export const APPROVAL_ANNOTATIONS = ['destructiveHint', 'openWorldHint'] as const
export interface AnnotationRule { annotation: typeof APPROVAL_ANNOTATIONS[number] }

export const GUARDRAIL_CHECKS = ['secrets', 'pii', 'injection', 'webhook'] as const
export const GUARDRAIL_ACTIONS = ['redact', 'block', 'flag'] as const

/** One guardrail: what it checks, on which side of the call, what it does on a finding, for which tools (all when absent). */
export interface GuardrailRule {
  on: 'arguments' | 'result'
  check: typeof GUARDRAIL_CHECKS[number]
  /** For `webhook`: what the receiver's answer does not override (the receiver answers the action itself). */
  action: typeof GUARDRAIL_ACTIONS[number]
  /** Name patterns of the tools it applies to; absent: every tool. */
  tools?: string[]
  /** `webhook`: where the payload is POSTed (an admin writes every policy). */
  url?: string
  /** `webhook`: how long the receiver may take (default 2000 ms). */
  timeoutMs?: number
  /** `webhook`: a timeout or an error lets the call through (default false: it is blocked). */
  failOpen?: boolean
}

export interface PolicyLimitsDocument {
  readMaxChars?: number
  commandTimeoutMs?: number
  bashLogChars?: number
  maxProcessOutputChars?: number
  outputMaxChars?: number
  timeoutMs?: number
}

/** Bounds of a policy: a listing tests every tool against every pattern, so their number is capped. */
const POLICY_BOUNDS = {
  /** Entries of each pattern list (deny, allowOnly, requireApproval). */
  maxPatterns: 256,
  /** Characters of a pattern (exposed names have at most 64). */
  maxPatternLength: 128,
  maxCommandRules: 64,
  maxCommandRuleLength: 512,
  maxGuardrails: 32,
  maxWebhookTimeoutMs: 30_000
} as const

export const LIMIT_KEYS = ['readMaxChars', 'commandTimeoutMs', 'bashLogChars', 'maxProcessOutputChars', 'outputMaxChars', 'timeoutMs'] as const

const TOP_KEYS = new Set(['deny', 'allowOnly', 'readOnly', 'requireApproval', 'guardrails', 'pinning', 'bash', 'limits'])
const PATTERN_LISTS = ['deny', 'allowOnly'] as const
const GUARDRAIL_KEYS = ['on', 'check', 'action', 'tools', 'url', 'timeoutMs', 'failOpen'] as const

function invalid (where: string, message: string): HttpError {
  // Paths in Fastify's form (body/deny/3), like every other 400 that names a field.
  return new HttpError('GW_INVALID_POLICY', `Invalid policy: ${where === 'the body' ? where : `body/${where}`} ${message}`)
}

function isPlainObject (value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** A value quoted for an error message, cut so a huge entry does not make a huge message. */
function shown (value: string): string {
  return JSON.stringify(value.length > 80 ? value.slice(0, 80) + '...' : value)
}

function unknownKey (where: string, key: string, known: Iterable<string>): HttpError {
  return invalid(`${where}${shown(key).slice(1, -1)}`, `is not a policy field (known: ${[...known].join(', ')})`)
}

/**
 * Validates a policy strictly and returns a copy holding only its fields: an unknown key, a wrong
 * type, a pattern outside the name syntax, a regular expression that does not compile, or too many
 * or too long entries is a 400 GW_INVALID_POLICY naming the entry (`deny/3`, `bash/denyCommands/0`).
 */
export function parsePolicy (input: unknown): PolicyDocument {
  if (!isPlainObject(input)) throw invalid('the body', 'must be a JSON object')
  for (const key of Object.keys(input)) {
    if (!TOP_KEYS.has(key)) throw unknownKey('', key, TOP_KEYS)
  }
  const out: PolicyDocument = {}
  for (const list of PATTERN_LISTS) {
    const value = input[list]
    if (value === undefined) continue
    out[list] = parsePatterns(list, value)
  }
  if (input.requireApproval !== undefined) out.requireApproval = parseApprovals(input.requireApproval)
  if (input.guardrails !== undefined) out.guardrails = parseGuardrails(input.guardrails)
  if (input.pinning !== undefined) {
    if (input.pinning !== 'warn' && input.pinning !== 'hold') throw invalid('pinning', 'must be "warn" or "hold"')
    out.pinning = input.pinning
  }
  if (input.readOnly !== undefined) {
    if (typeof input.readOnly !== 'boolean') throw invalid('readOnly', 'must be a boolean')
    out.readOnly = input.readOnly
  }
  if (input.bash !== undefined) {
    if (!isPlainObject(input.bash)) throw invalid('bash', 'must be an object')
    for (const key of Object.keys(input.bash)) {
      if (key !== 'denyCommands') throw unknownKey('bash/', key, ['denyCommands'])
    }
    const rules = input.bash.denyCommands
    out.bash = {}
    if (rules !== undefined) {
      out.bash.denyCommands = parseList('bash/denyCommands', rules, POLICY_BOUNDS.maxCommandRules, (entry, where) => {
        if (entry.length === 0 || entry.length > POLICY_BOUNDS.maxCommandRuleLength) throw invalid(where, `must have 1 to ${POLICY_BOUNDS.maxCommandRuleLength} characters`)
        try {
          // Compiling is linear in the source; only matching can backtrack (that runs off the event loop).
          RegExp(entry)
        } catch (err) {
          throw invalid(where, `${shown(entry)} is not a valid regular expression: ${(err as Error).message.replace(/^Invalid regular expression: /, '')}`)
        }
      })
    }
  }
  if (input.limits !== undefined) {
    if (!isPlainObject(input.limits)) throw invalid('limits', 'must be an object')
    const limits: PolicyLimitsDocument = {}
    for (const [key, value] of Object.entries(input.limits)) {
      if (!(LIMIT_KEYS as readonly string[]).includes(key)) throw unknownKey('limits/', key, LIMIT_KEYS)
      if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) throw invalid(`limits/${key}`, 'must be a positive integer')
      limits[key as keyof PolicyLimitsDocument] = value
    }
    out.limits = limits
  }
  return out
}

function parsePatterns (where: string, value: unknown): string[] {
  return parseList(where, value, POLICY_BOUNDS.maxPatterns, (entry, at) => {
    if (entry.length === 0 || entry.length > POLICY_BOUNDS.maxPatternLength) throw invalid(at, `must have 1 to ${POLICY_BOUNDS.maxPatternLength} characters`)
    if (compileNamePattern(entry) === undefined) throw invalid(at, `${shown(entry)} is not a valid pattern: ${NAME_PATTERN_SYNTAX}`)
  })
}

/** requireApproval: name patterns and `{annotation}` rules. */
function parseApprovals (value: unknown): Array<string | AnnotationRule> {
  if (!Array.isArray(value)) throw invalid('requireApproval', 'must be an array of name patterns and {annotation} rules')
  if (value.length > POLICY_BOUNDS.maxPatterns) throw invalid('requireApproval', `must have at most ${POLICY_BOUNDS.maxPatterns} entries`)
  const out: Array<string | AnnotationRule> = []
  value.forEach((entry: unknown, i) => {
    const where = `requireApproval/${i}`
    if (typeof entry === 'string') {
      const [pattern] = parsePatterns('requireApproval', [entry])
      if (pattern !== undefined && !out.includes(pattern)) out.push(pattern)
      return
    }
    if (!isPlainObject(entry)) throw invalid(where, 'must be a name pattern or {annotation}')
    for (const key of Object.keys(entry)) if (key !== 'annotation') throw unknownKey(`${where}/`, key, ['annotation'])
    const hint = entry.annotation
    if (typeof hint !== 'string' || !(APPROVAL_ANNOTATIONS as readonly string[]).includes(hint)) {
      throw invalid(`${where}/annotation`, `must be one of ${APPROVAL_ANNOTATIONS.join(', ')}`)
    }
    if (!out.some((o) => typeof o === 'object' && o.annotation === hint)) out.push({ annotation: hint as AnnotationRule['annotation'] })
  })
  return out
}

function oneOf<T extends string> (where: string, value: unknown, allowed: readonly T[]): T {
  if (typeof value !== 'string' || !(allowed as readonly string[]).includes(value)) throw invalid(where, `must be one of ${allowed.join(', ')}`)
  return value as T
}

/** guardrails: each rule's side, check and action; `url`, `timeoutMs` and `failOpen` for a webhook only. */
function parseGuardrails (value: unknown): GuardrailRule[] {
  if (!Array.isArray(value)) throw invalid('guardrails', 'must be an array of rules')
  if (value.length > POLICY_BOUNDS.maxGuardrails) throw invalid('guardrails', `must have at most ${POLICY_BOUNDS.maxGuardrails} entries`)
  return value.map((entry: unknown, i): GuardrailRule => {
    const where = `guardrails/${i}`
    if (!isPlainObject(entry)) throw invalid(where, 'must be an object {on, check, action, tools?}')
    for (const key of Object.keys(entry)) if (!(GUARDRAIL_KEYS as readonly string[]).includes(key)) throw unknownKey(`${where}/`, key, GUARDRAIL_KEYS)
    const rule: GuardrailRule = {
      on: oneOf(`${where}/on`, entry.on, ['arguments', 'result'] as const),
      check: oneOf(`${where}/check`, entry.check, GUARDRAIL_CHECKS),
      action: oneOf(`${where}/action`, entry.action, GUARDRAIL_ACTIONS)
    }
    if (entry.tools !== undefined) rule.tools = parsePatterns(`${where}/tools`, entry.tools)
    if (rule.check !== 'webhook') {
      for (const key of ['url', 'timeoutMs', 'failOpen']) if (entry[key] !== undefined) throw invalid(`${where}/${key}`, 'is for check webhook only')
      return rule
    }
    let url: URL | undefined
    try { url = new URL(String(entry.url)) } catch {}
    if (typeof entry.url !== 'string' || url === undefined || (url.protocol !== 'https:' && url.protocol !== 'http:')) {
      throw invalid(`${where}/url`, 'must be an http or https URL (check webhook)')
    }
    rule.url = entry.url
    if (entry.timeoutMs !== undefined) {
      const ms = entry.timeoutMs
      if (typeof ms !== 'number' || !Number.isSafeInteger(ms) || ms < 1 || ms > POLICY_BOUNDS.maxWebhookTimeoutMs) {
        throw invalid(`${where}/timeoutMs`, `must be an integer from 1 to ${POLICY_BOUNDS.maxWebhookTimeoutMs}`)
      }
      rule.timeoutMs = ms
    }
    if (entry.failOpen !== undefined) {
      if (typeof entry.failOpen !== 'boolean') throw invalid(`${where}/failOpen`, 'must be a boolean')
      rule.failOpen = entry.failOpen
    }
    return rule
  })
}

function parseList (where: string, value: unknown, max: number, check: (entry: string, where: string) => void): string[] {
  if (!Array.isArray(value)) throw invalid(where, 'must be an array of strings')
  if (value.length > max) throw invalid(where, `must have at most ${max} entries`)
  const out: string[] = []
  value.forEach((entry: unknown, i) => {
    if (typeof entry !== 'string') throw invalid(`${where}/${i}`, 'must be a string')
    check(entry, `${where}/${i}`)
    if (!out.includes(entry)) out.push(entry)
  })
  return out
}
