import { Type } from '@sinclair/typebox'
import { IdString } from './common.js'

const Pattern = Type.String({
  minLength: 1,
  maxLength: 128,
  pattern: '^[A-Za-z0-9_*-]+$',
  description: "An exposed tool name; '*' matches any run of characters (user_*, write_*, *__search, bash)"
})
const Patterns = (description: string) => Type.Array(Pattern, { maxItems: 256, description })
const Limit = (description: string) => Type.Optional(Type.Integer({ minimum: 1, description }))

/**
 * A tool policy, as written and as stored. The route validates it in the domain (parsePolicy), so
 * that every mistake is a 400 GW_INVALID_POLICY naming the entry; this schema documents the same rules.
 */
export const Policy = Type.Object({
  deny: Type.Optional(Patterns(
    'Tools never listed and never invoked (403 GW_POLICY_DENIED). A pattern matches a tool when it matches any name that calls it: its exposed name, its qualified {serverId}__{tool} name, the raw MCP tool name'
  )),
  allowOnly: Type.Optional(Patterns('When present, only tools matching one of these are listed and invoked; [] allows none')),
  readOnly: Type.Optional(Type.Boolean({
    description: 'Only read_file, glob and grep among built-ins, and other tools only when annotated readOnlyHint: true'
  })),
  requireApproval: Type.Optional(Type.Array(Type.Union([
    Pattern,
    Type.Object({
      annotation: Type.Union([Type.Literal('destructiveHint'), Type.Literal('openWorldHint')], {
        description: 'Every tool with this MCP hint, read as MCP defines it (absent counts as true; destructiveHint not for a readOnlyHint tool)'
      })
    }, { additionalProperties: false })
  ]), {
    maxItems: 256,
    description: 'Calls held for a human\'s approval: POST /invoke answers 202 with an approvalId, decided with POST /approvals/{approvalId}. ' +
      'Name patterns, or {annotation} for every tool with that hint'
  })),
  guardrails: Type.Optional(Type.Array(Type.Object({
    on: Type.Union([Type.Literal('arguments'), Type.Literal('result')], { description: 'The call\'s arguments before it runs, or its result' }),
    check: Type.Union([Type.Literal('secrets'), Type.Literal('pii'), Type.Literal('injection'), Type.Literal('webhook')]),
    action: Type.Union([Type.Literal('redact'), Type.Literal('block'), Type.Literal('flag')], {
      description: 'redact: replace what was found; block: a tool error GW_GUARDRAIL_BLOCKED naming the check, never the text; flag: report it in trace, journal and metrics'
    }),
    tools: Type.Optional(Patterns('The tools it applies to (all when absent)')),
    url: Type.Optional(Type.String({ description: 'check webhook: where the payload is POSTed, signed with GUARDRAIL_WEBHOOK_SECRET' })),
    timeoutMs: Type.Optional(Type.Integer({ minimum: 1, maximum: 30_000, description: 'check webhook: the answer\'s deadline (default 2000)' })),
    failOpen: Type.Optional(Type.Boolean({ description: 'check webhook: a timeout or an error lets the call through (default false)' }))
  }, { additionalProperties: false }), { maxItems: 32, description: 'Checks on arguments and results, in order (SPEC 18)' })),
  bash: Type.Optional(Type.Object({
    denyCommands: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 512 }), {
      maxItems: 64,
      description: 'JavaScript regular expressions tested against the whole command of bash exec and start; a match refuses the call (tool error GW_POLICY_DENIED naming the rule). A guard rail against mistakes, not a sandbox: a shell offers endless spellings of a command'
    }))
  }, { additionalProperties: false })),
  limits: Type.Optional(Type.Object({
    readMaxChars: Limit('Ceiling of context.limits.readMaxChars'),
    commandTimeoutMs: Limit('Ceiling of context.limits.commandTimeoutMs'),
    bashLogChars: Limit('Ceiling of context.limits.bashLogChars'),
    maxProcessOutputChars: Limit('Ceiling of context.limits.maxProcessOutputChars'),
    outputMaxChars: Limit('Ceiling of every tool output of the tenant (and of context.limits.outputMaxChars)'),
    timeoutMs: Limit('Ceiling of a call\'s deadline (below INVOKE_TIMEOUT_MS)')
  }, { additionalProperties: false, description: 'Ceilings a request cannot raise' }))
}, {
  additionalProperties: false,
  description: 'A tool policy. The default and a tenant\'s combine: deny, requireApproval and bash.denyCommands are the union, a tool must pass each allowOnly present, readOnly if either says so, each limit the lower'
})

export const PolicyUserParams = Type.Object({ userId: IdString })

export const PolicyResponse = Type.Object({
  userId: Type.Optional(IdString),
  policy: Type.Union([Policy, Type.Null()], { description: 'The stored policy; null when none is set' }),
  version: Type.Integer({ description: 'Grows with every write and delete of this policy; 0 when never written' }),
  updatedAt: Type.Union([Type.String(), Type.Null()]),
  defaultPolicy: Type.Optional(Type.Union([Policy, Type.Null()], { description: 'The default policy, which the tenant\'s calls obey too' }))
})

export const PutPolicyResponse = Type.Object({
  userId: Type.Optional(IdString),
  policy: Policy,
  version: Type.Integer(),
  updatedAt: Type.String(),
  created: Type.Boolean()
})

export const DeleteDefaultPolicyResponse = Type.Object({
  deleted: Type.Boolean({ description: 'False when there was no default policy' }),
  version: Type.Integer()
})

export const DeletePolicyResponse = Type.Object({
  userId: IdString,
  deleted: Type.Boolean({ description: 'False when the tenant had no policy' }),
  version: Type.Integer()
})
