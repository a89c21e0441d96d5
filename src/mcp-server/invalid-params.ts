import { HttpError, quoted } from '../errors.js'
import { toJsonRpcError } from './handlers.js'

/**
 * The SDK's `Server` checks a request's params against the revision's schema before the handler
 * runs (Protocol.setRequestHandler's two-argument form, every spec method the gateway serves but
 * tools/call, which the Server checks itself), and throws a plain Error whose message is the
 * validator's issues as JSON: the client got -32603 (internal error) and that raw text for
 * `logging/setLevel` with an unknown level or `completion/complete` with an unknown `ref.type`.
 * `handler` as registered, with that refusal as the caller's mistake: -32602 "Invalid params for
 * {method}: {path}: {what is wrong}", `data.code` GW_BAD_REQUEST, as the gateway's other -32602.
 * Only the check's throw is changed: it comes before the handler is called, synchronously (the
 * handlers are async: their own errors are rejections), and its message parses as zod's issues.
 */
export function withInvalidParams<A extends unknown[], R> (method: string, handler: (...args: A) => Promise<R>): (...args: A) => Promise<R> {
  return (...args) => {
    try {
      return handler(...args)
    } catch (err) {
      const issues = validationIssuesOf(err)
      if (issues === undefined) throw err
      throw toJsonRpcError(new HttpError('GW_BAD_REQUEST', `Invalid params for ${method}: ${describeIssues(issues)}`))
    }
  }
}

/** One of zod's issues, as its error's message lists them (the fields read here). */
interface Issue {
  code?: unknown
  path?: unknown
  message?: unknown
  values?: unknown
  errors?: unknown
}

/** What a message says of one wrong place: the path from the request and what was expected there. */
interface Leaf { path: Array<string | number>, text: string }

/** The issues of a schema check's throw (a plain Error, no JSON-RPC code, a message of zod's issues), else undefined. */
function validationIssuesOf (err: unknown): Issue[] | undefined {
  if (!(err instanceof Error) || err.constructor !== Error || 'code' in err || !err.message.startsWith('[')) return undefined
  let issues: unknown
  try {
    issues = JSON.parse(err.message)
  } catch {
    return undefined
  }
  const valid = Array.isArray(issues) && issues.length > 0 && issues.every((i) => i !== null && typeof i === 'object' && Array.isArray((i as Issue).path))
  return valid ? issues as Issue[] : undefined
}

/** Every wrong place, `params.ref.type: expected one of "ref/prompt", "ref/resource"`, joined; a long text is cut. */
function describeIssues (issues: Issue[]): string {
  const text = issues.flatMap((issue) => leaves(issue, [])).map(({ path, text }) => `${pathText(path)}: ${text}`).join('; ')
  return quoted(text)
}

/**
 * The leaves of one issue under `prefix`. A union that no branch matched is told by what tells
 * its branches apart: a field every branch requires a literal of (`ref.type`, whose values are
 * listed together); else by the branch that came closest (one without a wrong literal, then the
 * fewest issues).
 */
function leaves (issue: Issue, prefix: Array<string | number>): Leaf[] {
  const path = [...prefix, ...pathOf(issue)]
  const branches = issue.code === 'invalid_union' && Array.isArray(issue.errors) ? issue.errors.filter(Array.isArray) as Issue[][] : []
  if (branches.length === 0) return [{ path, text: textOf(issue) }]
  const literals = branches.map((branch) => branch.filter((i) => i.code === 'invalid_value' && Array.isArray(i.values)))
  const shared = literals[0]!.map((i) => pathText(pathOf(i))).find((at) => literals.every((own) => own.some((i) => pathText(pathOf(i)) === at)))
  if (shared !== undefined) {
    const values = literals.flatMap((own) => own.filter((i) => pathText(pathOf(i)) === shared).flatMap((i) => i.values as unknown[]))
    const first = literals[0]!.find((i) => pathText(pathOf(i)) === shared)!
    return [{ path: [...path, ...pathOf(first)], text: expected(values) }]
  }
  const candidates = branches.filter((_, i) => literals[i]!.length === 0)
  const closest = (candidates.length > 0 ? candidates : branches).reduce((best, branch) => branch.length < best.length ? branch : best)
  return closest.flatMap((i) => leaves(i, path))
}

function pathOf (issue: Issue): Array<string | number> {
  return Array.isArray(issue.path) ? issue.path.filter((p): p is string | number => typeof p === 'string' || typeof p === 'number') : []
}

/** `params.ref.type`, `params.messages[0].role`; the request itself when empty. */
function pathText (path: Array<string | number>): string {
  const text = path.map((p, i) => typeof p === 'number' ? `[${p}]` : i === 0 ? p : `.${p}`).join('')
  return text === '' ? 'the request' : text
}

/** What zod says of one issue, without its "Invalid input: " opening; an enum as its values. */
function textOf (issue: Issue): string {
  if (issue.code === 'invalid_value' && Array.isArray(issue.values)) return expected(issue.values)
  const message = typeof issue.message === 'string' ? issue.message : 'invalid'
  return message.replace(/^Invalid (?:input|option): /, '')
}

function expected (values: unknown[]): string {
  const listed = values.map((v) => JSON.stringify(v)).join(', ')
  return values.length === 1 ? `expected ${listed}` : `expected one of ${listed}`
}
