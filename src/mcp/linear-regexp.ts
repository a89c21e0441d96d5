import type { RegExpEngine } from 'ajv/dist/types/index.js'
import { RE2JS } from 're2js'

/**
 * The RegExp engine of every Ajv that validates a schema an MCP server published (tool arguments,
 * `structuredContent`): RE2's linear-time matching (re2js) instead of V8's backtracking. A server's
 * `"pattern": "^(a+)+$"` and an argument of 28 `a`s and a `!` held the gateway's event loop for 2 s
 * in Ajv's default engine (doubling with each `a`); a tenant controls both, through its own server.
 * ECMAScript syntax RE2 cannot run in linear time (lookarounds, backreferences) is not checked by
 * the gateway (`test` accepts): the server stays the authority on its own schema. A pattern that is
 * not a valid ECMAScript RegExp either still fails the schema's compile, as with Ajv's own engine.
 * (`code` names it for Ajv's standalone code generation, which the gateway does not use.)
 */
export const linearRegExp: RegExpEngine = Object.assign((pattern: string, flags: string) => {
  const key = `/${pattern}/${flags}`
  let re: RE2JS
  try {
    re = RE2JS.compile(RE2JS.translateRegExp(pattern))
  } catch {
    // eslint-disable-next-line no-new -- only to throw, as Ajv's engine would, for an invalid pattern
    new RegExp(pattern, flags)
    return { test: () => true, toString: () => key }
  }
  return { test: (input: string) => re.test(input), toString: () => key }
}, { code: 'linearRegExp' })
