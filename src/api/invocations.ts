import { Type } from '@sinclair/typebox'

/** A tenant's userId, or `_global` (admin only): the journal of calls that named no tenant. */
const JournalUserId = Type.String({
  pattern: '^(_global|[A-Za-z0-9][A-Za-z0-9-]{0,63})$',
  description: 'A userId, or _global (admin only) for calls that named none'
})

export const InvocationsParams = Type.Object({ userId: JournalUserId })
export const InvocationParams = Type.Object({ userId: JournalUserId, callId: Type.String({ minLength: 1, maxLength: 256 }) })

const Time = (what: string): ReturnType<typeof Type.String> => Type.String({ minLength: 1, maxLength: 64, description: `${what}: ISO 8601 (2026-01-31T12:00:00Z, or a date) or epoch milliseconds; inclusive` })

export const InvocationsQuery = Type.Object({
  since: Type.Optional(Time('Entries written at or after this time')),
  until: Type.Optional(Time('Entries written at or before this time')),
  tool: Type.Optional(Type.String({ minLength: 1, maxLength: 512, description: 'Only calls of this tool name (as invoked)' })),
  isError: Type.Optional(Type.Boolean({ description: 'Only failed (true) or successful (false) calls' })),
  limit: Type.Optional(Type.Integer({
    minimum: 1,
    maximum: 1_000_000,
    description: 'Entries per page (default 50, at most 500); with Accept: application/x-ndjson, entries in all (default: every entry selected)'
  })),
  cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 512, description: 'The nextCursor of the previous page, as is' }))
}, { additionalProperties: false })

export const InvocationEntry = Type.Object({
  callId: Type.String(),
  ts: Type.String({ format: 'date-time', description: 'When the call ended; it started durationMs earlier' }),
  userId: Type.Union([Type.String(), Type.Null()], { description: 'The tenant the call acted for; null for calls without one (journal _global)' }),
  name: Type.String({ description: 'The tool name as invoked' }),
  route: Type.Union([Type.String(), Type.Null()], { description: 'The tier that served it; null for a call refused before any tool ran' }),
  serverId: Type.Union([Type.String(), Type.Null()], { description: 'The remote MCP server (routes user_mcp and global_mcp)' }),
  arguments: Type.Unknown({
    description: 'The arguments, values under secret-looking keys (token, password, secret, authorization, api_key, cookie, ...) at any depth replaced by "****"; a capped field past 16 KiB; null with JOURNAL=meta'
  }),
  argumentsSha256: Type.Union([Type.String(), Type.Null()], { description: 'SHA-256 (hex) of the arguments\' JSON after masking, before capping' }),
  output: Type.Unknown({
    description: 'The output string the caller got, inline credentials masked; a capped field past 16 KiB; null with JOURNAL=meta or for a refused call'
  }),
  isError: Type.Boolean(),
  error: Type.Union([Type.Object({ code: Type.String(), message: Type.String() }), Type.Null()], {
    description: 'The tool error, or the GW_ error of a refused call'
  }),
  truncated: Type.Boolean({ description: 'The output was shortened to OUTPUT_MAX_CHARS for the caller' }),
  trace: Type.Unknown({
    description: 'The source\'s structured trace (recorded whether or not the caller asked for it), masked; a capped field past 64 KiB; null with JOURNAL=meta'
  }),
  durationMs: Type.Number(),
  toolMs: Type.Number({ description: 'Time inside the tool; the rest is gateway overhead' }),
  keyId: Type.Union([Type.String(), Type.Null()], {
    description: 'Short hash of the API key (16 hex of its SHA-256), never the key; for an OAuth access token `oauth:` + 16 hex of SHA-256(issuer|sub); null in open mode'
  }),
  instance: Type.String({ description: 'The gateway process that ran the call (host:pid)' }),
  checkpointId: Type.Union([Type.String(), Type.Null()]),
  approvalId: Type.Union([Type.String(), Type.Null()]),
  parentCallId: Type.Optional(Type.Union([Type.String(), Type.Null()], {
    description: 'The `run_tools_script` call whose script made this call (code mode): a script and its inner calls form one tree; null otherwise'
  })),
  status: Type.Optional(Type.Union([Type.Literal('input_required'), Type.Literal('definition_changed'), Type.Null()], {
    description: 'input_required: a round of a call whose MCP server asked for input (neither a result nor an error; the retry is another entry under the same callId); ' +
      'definition_changed: not a call: a remote tool\'s definition changed since the tenant pinned it (SPEC 18; the digests are in `trace`); null otherwise'
  }))
}, { description: 'One journal entry. A field over its budget is replaced by { $capped: true, bytes, limit, head }' })

export const InvocationPage = Type.Object({
  invocations: Type.Array(InvocationEntry, { description: 'Newest first' }),
  nextCursor: Type.Union([Type.String(), Type.Null()], {
    description: 'Pass as cursor for the next (older) page; null at the end. A page may hold fewer than limit entries (filters that match rarely) and still have a next page'
  })
})

export const InvocationsResponse = {
  description: 'A page of entries (application/json), or with Accept: application/x-ndjson every selected entry as one JSON line each, streamed',
  content: {
    'application/json': { schema: InvocationPage },
    'application/x-ndjson': { schema: { type: 'string', contentMediaType: 'application/x-ndjson' } }
  }
}
