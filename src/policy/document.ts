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
  /** Tools whose calls are held until a human approves them. */
  requireApproval?: string[]
  bash?: {
    /** JavaScript regular expressions tested against the whole command of bash exec and start. */
    denyCommands?: string[]
  }
  /** Ceilings on a call: a request's context.limits (and the deadline) can only go below them. */
  limits?: PolicyLimitsDocument
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
  maxCommandRuleLength: 512
} as const

export const LIMIT_KEYS = ['readMaxChars', 'commandTimeoutMs', 'bashLogChars', 'maxProcessOutputChars', 'outputMaxChars', 'timeoutMs'] as const

const TOP_KEYS = new Set(['deny', 'allowOnly', 'readOnly', 'requireApproval', 'bash', 'limits'])
const PATTERN_LISTS = ['deny', 'allowOnly', 'requireApproval'] as const

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
    out[list] = parseList(list, value, POLICY_BOUNDS.maxPatterns, (entry, where) => {
      if (entry.length === 0 || entry.length > POLICY_BOUNDS.maxPatternLength) throw invalid(where, `must have 1 to ${POLICY_BOUNDS.maxPatternLength} characters`)
      if (compileNamePattern(entry) === undefined) throw invalid(where, `${shown(entry)} is not a valid pattern: ${NAME_PATTERN_SYNTAX}`)
    })
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
