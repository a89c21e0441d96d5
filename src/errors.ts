import { STATUS_CODES } from 'node:http'

/**
 * The gateway's error contract: every `GW_` code it can emit, in one table, and the one mapping
 * from a thrown error to each wire form (the HTTP error body, the JSON-RPC error of /mcp). The
 * README's "Errors" table is rendered from ERROR_CODES (`npm run docs`; a test compares them),
 * and a test fails when a `GW_` code appears in the source but not here.
 *
 * Errors for requests that never reached a tool are HttpErrors (a status and an http code).
 * Failures of a tool itself are not errors: they are ToolOutcome values, whose reason
 * TOOL_ERROR_CODES turns into the `error.code` of a 200 result with isError true.
 */

/**
 * Where a code reaches a client: `http`, an error response with `status`; `tool`, the
 * `error.code` of a 200 result with isError true; `internal`, carried by errors inside the
 * gateway (and written to its logs) but mapped to another code before a response is made.
 */
export type ErrorKind = 'http' | 'tool' | 'internal'

export interface ErrorCodeInfo {
  readonly kind: readonly ErrorKind[]
  /** The HTTP status of the error response; 200 for tool-only codes; null for internal ones. */
  readonly status: number | null
  /** One line for the README's table. */
  readonly meaning: string
  /** Whether the same request may succeed later, unchanged. */
  readonly retryable: boolean
}

// The kind stays a literal type so HttpErrorCode and the tool codes are derived from the table.
type Row<K extends ErrorKind> = ErrorCodeInfo & { readonly kind: readonly K[] }
const http = (status: number, meaning: string, retryable = false): Row<'http'> => ({ kind: ['http'], status, meaning, retryable })
const tool = (meaning: string, retryable = false): Row<'tool'> => ({ kind: ['tool'], status: 200, meaning, retryable })
const internal = (meaning: string, retryable = false): Row<'internal'> => ({ kind: ['internal'], status: null, meaning, retryable })

export const ERROR_CODES = {
  GW_BAD_REQUEST: http(400, 'An invalid body, query or header; the message names the field'),
  GW_MALFORMED_JSON: http(400, 'The body is not parsable JSON (on `/mcp`: JSON-RPC `-32700`)'),
  GW_PROTOTYPE_KEY: http(
    400,
    'A JSON body holding a `__proto__` member, or a `constructor` member whose object has a `prototype` one, at any depth: refused whole, before any of it is used (such keys can change object prototypes); rename the key. On `/mcp`: JSON-RPC `-32600`'
  ),
  GW_DUPLICATE_REQUEST_ID: http(
    400,
    'A JSON-RPC batch on `/mcp` holding two requests of the same id (JSON-RPC `-32600`): refused whole, none of its requests ran (their answers could not be told apart); give each request its own id'
  ),
  GW_INVALID_ARGUMENTS_TYPE: http(400, 'Reserved, not sent by this version (arguments that fail a tool\'s schema are the tool-level `GW_INVALID_ARGUMENTS`)'),
  GW_UNRESOLVED: http(400, '`strict=true` and some requested names resolve to no tool'),
  GW_SECRET_ORIGIN_CHANGED: http(400, 'A masked secret (`Bearer ****`) sent back with a server URL of another origin: it would carry the stored secret there'),
  GW_INVALID_POLICY: http(
    400,
    'A tool policy that is not valid: an unknown key, a pattern or regular expression that does not compile, too many or too long entries; the message names the entry (`deny/3`)'
  ),
  GW_BAD_ARCHIVE: http(
    400,
    'An uploaded workspace archive that is corrupt, truncated, a gzip that holds no tar, or holds an entry that is refused (absolute path, `..`, a link leaving the workspace or written through, a device, FIFO, setuid/setgid bit); the message names the entry'
  ),
  GW_INVALID_CURSOR: http(
    400,
    'A journal `cursor` this gateway did not return (`GET /users/{userId}/invocations`): pass the previous page\'s `nextCursor` as is'
  ),
  GW_INVALID_REQUEST_STATE: http(
    400,
    'A retry of a call whose MCP server asked for input (`requestState`) with a handle that was altered, expired (10 min), or is another tenant\'s, API key\'s, tool\'s, arguments\' or callId\'s; on `/mcp` JSON-RPC `-32602` with `data.reason` `invalid_request_state`. Call the tool again without `inputResponses` and `requestState`'
  ),
  GW_INVALID_RANGE: http(400, 'A journal `since` or `until` that is not an ISO 8601 time or epoch milliseconds, or `since` after `until`'),
  GW_UNAUTHORIZED: http(
    401,
    'Keys (or `OAUTH_ISSUER`) are configured and the `Authorization: Bearer <key>` header is missing, of another scheme, empty or unknown, ' +
      'or an access token is invalid: expired, not yet valid, another audience or issuer, a refused algorithm, a bad signature, no tenant claim ' +
      '(with `WWW-Authenticate: Bearer`; with `OAUTH_ISSUER` also `resource_metadata` and `error_description`)'
  ),
  GW_FORBIDDEN: http(403,
    'A tenant key on an admin-only route or action (global servers, stdio servers); a console asset path the static route refuses (a dot-file)'),
  GW_HOST_NOT_ALLOWED: http(
    403,
    'DNS rebinding and cross-site protection: a `Host` (behind `TRUST_PROXY` also `X-Forwarded-Host`) that is neither a loopback name nor in `ALLOWED_HOSTS`, or an `Origin` of another host; checked in open mode always, with keys when `ALLOWED_HOSTS` is set; the message says how to allow the name'
  ),
  GW_TENANT_MISMATCH: http(403, 'A userId, tool or server of another tenant than the key\'s'),
  GW_NOT_ALLOWED: http(403, 'A tool outside the request\'s allow-list'),
  GW_POLICY_DENIED: {
    kind: ['http', 'tool'] as Array<'http' | 'tool'>,
    status: 403,
    meaning: 'The tool policy (the default or the tenant\'s) denies the tool (403; never listed), or a `bash.denyCommands` rule refused the command (tool result naming the rule)',
    retryable: false
  },
  GW_EGRESS_BLOCKED: http(403, 'A server URL that the egress (SSRF) guard refuses'),
  GW_TOOL_NOT_FOUND: http(404, 'No tool of that name'),
  GW_NOT_FOUND: http(404, 'No such route, or no such file in the workspace (`GET /users/{userId}/workspaces/{workspaceId}/files/{path}`)'),
  GW_SERVER_NOT_FOUND: http(404, 'No such registered MCP server'),
  GW_CHECKPOINT_NOT_FOUND: http(404, 'No checkpoint of that id for this workspace (never made, deleted, or dropped past `CHECKPOINTS_PER_WORKSPACE`)'),
  GW_TENANT_QUOTA_EXCEEDED: {
    kind: ['http', 'tool'] as Array<'http' | 'tool'>,
    status: 403,
    meaning: 'The tenant is at `TENANT_MAX_WORKSPACES` (a new workspace, by a tool call or an upload), would pass `TENANT_QUOTA_BYTES` (its workspaces and checkpoints together: an upload or a checkpoint), is at `TENANT_MAX_SERVERS` (registering one more remote MCP server), or at `TENANT_MAX_PENDING_APPROVALS` (holding one more call for approval: it did not run), or accepting definitions would pin more than 20,000 tools in one scope; nothing was changed. Delete workspaces, checkpoints or servers, or decide held calls, to make room',
    retryable: false
  },
  GW_WORKSPACE_NOT_FOUND: http(404, 'No workspace of that id for this tenant (never used, deleted, or expired past `WORKSPACE_IDLE_TTL`)'),
  GW_TASK_NOT_FOUND: http(
    404,
    'No MCP task of that id for this tenant and API key (an altered, expired or another tenant\'s task handle, or the server that ran it no longer knows it)'
  ),
  GW_APPROVAL_NOT_FOUND: http(404, 'No approval of that id (never made, or its record was dropped a day after it expired or was decided)'),
  GW_APPROVAL_DECIDED: http(409, 'The approval was already decided (approved or denied, by this or another approver)'),
  APPROVAL_EXPIRED: {
    kind: ['http', 'tool'] as Array<'http' | 'tool'>,
    status: 410,
    meaning: 'A held call was not decided within `APPROVAL_TTL`: deciding it is 410; its result (GET /approvals/{approvalId}) is a tool error',
    retryable: false
  },
  GW_INVOCATION_NOT_FOUND: http(
    404,
    'No journal entry for that callId in this tenant\'s journal (never made, `JOURNAL=off`, or past `JOURNAL_RETENTION` or `JOURNAL_MAX_ENTRIES`)'
  ),
  GW_WORKSPACE_BUSY: http(
    409,
    'The workspace changed under a long operation: a checkpoint restore kept being undone by the tenant\'s own running processes writing to the workspace (stop them, or wait), or a merge upload\'s workspace was replaced or deleted while its archive was extracted; nothing was changed by the merge: retry',
    true
  ),
  GW_METHOD_NOT_ALLOWED: http(405,
    'A method the path does not take (the `Allow` header lists those it does); `/mcp` takes `GET` and `POST` (`DELETE`: the endpoint is stateless, there is no session to end; a `GET` of the 2026-07-28 revision, `Allow: POST`: it has no GET stream, POST `subscriptions/listen`)'),
  GW_REQUEST_TIMEOUT: http(408, 'The request body did not arrive within `REQUEST_TIMEOUT_MS`', true),
  GW_PAYLOAD_TOO_LARGE: http(
    413,
    'A body over `BODY_LIMIT_BYTES` or holding a JSON object of more than 10,000 members (refused before it is parsed), a workspace upload past `WORKSPACE_QUOTA_BYTES` or `WORKSPACE_MAX_FILES`, or an MCP server config over 64 KiB as JSON'),
  GW_UNSUPPORTED_MEDIA_TYPE: http(
    415,
    'A body that is not JSON, or a JSON body with a `Content-Encoding` (it is not decompressed: send it plain); a workspace upload: a body that is neither ' +
      'a tar nor a tar.gz by its bytes, whatever its declared type; the message says what was expected'
  ),
  GW_RATE_LIMITED: http(
    429,
    'Over the tenant\'s `RATE_LIMIT_PER_MINUTE` or `MAX_CONCURRENT_PER_TENANT`, or too many failed authentications; retry after `Retry-After`',
    true
  ),
  GW_INTERNAL: http(500, 'A bug: the message hides internals, the log has the request id'),
  GW_UPSTREAM_ERROR: {
    kind: ['http', 'tool'] as Array<'http' | 'tool'>,
    status: 502,
    meaning: 'A remote MCP server failed: its live tool listing (502), or a call (tool result; the call may have run, retry only what is safe to repeat)',
    retryable: true
  },
  GW_REGISTRY_UNAVAILABLE: http(503, 'The registry (Redis) does not answer', true),
  GW_WORKSPACE_LOCK_UNAVAILABLE: http(
    503,
    'The workspace write lock (a Redis lease shared by the instances) could not be taken because Redis does not answer; nothing was changed (a tool call gets a `GW_TOOL_ERROR` saying so)',
    true
  ),
  GW_JOURNAL_UNAVAILABLE: http(503, 'The journal store (Redis) does not answer a journal read; calls are unaffected', true),
  GW_ISSUER_UNAVAILABLE: http(
    503,
    'Incoming OAuth: the authorization server\'s metadata or keys (JWKS) could not be fetched, so an access token could not be checked ' +
      '(it may be valid: keep it and retry after `Retry-After`); API keys are unaffected',
    true
  ),
  GW_NOT_READY: http(
    503,
    '`GET /console` when the console was not built (`npm run build:console`; `npm ci` builds it); `GET /readyz` answers 503 with its own body',
    true
  ),

  GW_INVALID_ARGUMENTS: tool('The arguments failed the tool\'s JSON Schema, or were unparsable JSON'),
  GW_UPSTREAM_UNAVAILABLE: tool(
    'A remote MCP server\'s circuit breaker is open after repeated transport failures: the call failed fast without reaching it; the message says when it will be tried again (`retryAt` in listings)',
    true
  ),
  GW_UPSTREAM_TOO_LARGE: tool(
    'A remote MCP server\'s answer (one JSON body or SSE event) passed `MCP_MAX_MESSAGE_BYTES`, held a JSON object of more than 10,000 members, or a call\'s stream carried more than 100,000 messages: the gateway stopped reading it (or did not parse it) and the call failed (the tool may have run); ask for less (a narrower query, a page)'
  ),
  GW_UPSTREAM_BUDGET_EXHAUSTED: tool(
    'Too many remote MCP answers in flight: holding this one would pass the tenant\'s `MCP_RESPONSE_BUDGET_TENANT_BYTES` or the gateway\'s `MCP_RESPONSE_BUDGET_BYTES`; the answer was not read further (the tool may have run)',
    true
  ),
  GW_OAUTH_REQUIRED: {
    kind: ['http', 'tool'] as Array<'http' | 'tool'>,
    status: 409,
    meaning: 'The MCP server needs the tenant\'s OAuth authorization, which is missing, failed to refresh, or lacks a scope the server now asks for: ' +
      'the user must connect the service (`POST /users/{userId}/mcp/servers/{serverId}/oauth/authorize`); listings show the server in `unavailable` ' +
      'with this code and the `authorize` route, a call is a tool error, the live listing of the server (`GET .../mcp/servers/{serverId}/tools`) a 409',
    retryable: false
  },
  GW_OAUTH_STATE_INVALID: http(
    400,
    '`GET /oauth/callback` with a `state` that is unknown, already used, expired (10 min) or altered, or an authorization server\'s error or `iss` that does not match; nothing was stored'
  ),
  GW_OAUTH_NOT_CONFIGURED: http(
    400,
    'An OAuth route for a server whose config has no `auth: {type: "oauth"}`, or the gateway has no `PUBLIC_URL` (the redirect URI)'
  ),
  GW_RETURN_NOT_ALLOWED: http(400, 'A `returnTo` whose origin is not in `OAUTH_RETURN_ALLOW` (compared exactly: scheme, host and port)'),
  GW_TOOL_TIMEOUT: tool('The tool ran past its deadline (`INVOKE_TIMEOUT_MS`, a server\'s `timeoutMs`); it may have had effects', true),
  GW_TOOL_ERROR: tool('The tool itself failed; the message says why'),
  GW_SANDBOX_ERROR: tool('The sandbox could not run the command (the tenant is over its process limit, a start failure)', true),
  GW_PATH_FORBIDDEN: tool('A path outside the workspace and its read roots'),
  GW_CANCELLED: tool('The caller cancelled the call (it went away, or MCP `notifications/cancelled`)', true),
  GW_GUARDRAIL_BLOCKED: tool(
    'A guardrail of the tenant\'s policy blocked the call\'s arguments (nothing ran) or its result (the tool ran; its result is withheld); the message names the check and the rule, never the text it found (SPEC 18)'
  ),
  GW_DEFINITION_CHANGED: {
    kind: ['http', 'tool'] as Array<'http' | 'tool'>,
    status: 409,
    meaning: 'The tool\'s definition (name, description, schemas, annotations) is not the one pinned for the tenant and server, and the policy says ' +
      '`pinning: "hold"`: a call is a tool error (nothing ran) and the tool is withheld from listings until an admin or the tenant accepts it ' +
      '(`POST /users/{userId}/mcp/servers/{serverId}/pins`); that POST answers 409 when a `digests` precondition no longer holds (SPEC 18)',
    retryable: false
  },
  GW_SCRIPT_LIMIT: tool(
    'A code-mode script passed a limit of its socket: more than `CODE_MODE_MAX_CALLS` tool calls (that call was not run), a frame too large, too wide (an object of more than 10,000 members) or malformed, a flood, answers left unread; the script gets it as an exception, and a script the gateway cut off for it ends with it (SPEC 19)'
  ),
  GW_APPROVAL_PENDING: tool(
    'The tool policy holds the call for a human\'s approval (`requireApproval`): it has not run; the message names the approvalId (`/mcp`; `POST /invoke` answers 202)'
  ),
  // The three codes without the GW_ prefix (APPROVAL_EXPIRED above, these two): legacy names that
  // clients already match on, kept as they are (the workspace quota code is part of the workspace contract).
  APPROVAL_DENIED: tool('A human denied the held call; the message carries the reason'),
  WORKSPACE_QUOTA_EXCEEDED: tool(
    'A file tool\'s write would pass the workspace\'s `WORKSPACE_QUOTA_BYTES` or `WORKSPACE_MAX_FILES` (nothing written), or a bash command or background process was stopped because the workspace passed them'
  ),

  GW_UPSTREAM_CONNECT: internal('A remote MCP server could not be connected or initialised; callers get `GW_UPSTREAM_ERROR`', true),
  GW_UPSTREAM_TIMEOUT: internal('A request to a remote MCP server ran past its deadline; callers get `GW_TOOL_TIMEOUT`', true),
  GW_UPSTREAM_REDIRECT: internal('A remote MCP server answered with a redirect, which is never followed; callers get `GW_UPSTREAM_ERROR`'),
  GW_BAD_MCP_CONFIG: internal('A server config that makes no transport (no url or command, not http/https); callers get `GW_UPSTREAM_ERROR`'),
  GW_SANDBOX_UNAVAILABLE: internal('`SANDBOX=bwrap` and bwrap does not work on this host: start-up stops')
} as const satisfies Record<`GW_${string}` | 'WORKSPACE_QUOTA_EXCEEDED' | 'APPROVAL_DENIED' | 'APPROVAL_EXPIRED', ErrorCodeInfo>

export type GwCode = keyof typeof ERROR_CODES
/** Some codes of the table, for a narrower type; a code not in the table does not compile. */
export type GwCodes<T extends GwCode> = T

type CodeOfKind<K extends ErrorKind> = { [C in GwCode]: K extends (typeof ERROR_CODES)[C]['kind'][number] ? C : never }[GwCode]

/**
 * The README's error table (between `<!-- errors:start -->` and `<!-- errors:end -->`), one row
 * per code in table order. `npm run docs` writes it; a test fails when the README differs.
 */
export function renderErrorTable (): string {
  const rows = Object.entries(ERROR_CODES).map(([code, info]: [string, ErrorCodeInfo]) => {
    const status = info.status === null ? '-' : info.kind.includes('http') ? String(info.status) : '200, isError'
    return `| \`${code}\` | ${info.kind.join(', ')} | ${status} | ${info.meaning.replaceAll('|', '\\|')} | ${info.retryable ? 'yes' : 'no'} |`
  })
  return ['| code | kind | status | meaning | retryable |', '|---|---|---|---|---|', ...rows].join('\n')
}

export function isGwCode (code: unknown): code is GwCode {
  return typeof code === 'string' && Object.hasOwn(ERROR_CODES, code)
}

/** The codes of HTTP error responses and their status (also the metrics' known outcomes). */
export const HTTP_ERROR_CODES = Object.fromEntries(
  Object.entries(ERROR_CODES).flatMap(([code, info]: [string, ErrorCodeInfo]) =>
    info.kind.includes('http') && info.status !== null ? [[code, info.status]] : [])
) as Readonly<Record<CodeOfKind<'http'>, number>>

export type HttpErrorCode = CodeOfKind<'http'>

export class HttpError extends Error {
  readonly statusCode: number
  readonly code: HttpErrorCode
  constructor (code: HttpErrorCode, message: string) {
    super(message)
    this.name = 'HttpError'
    this.code = code
    this.statusCode = HTTP_ERROR_CODES[code]
  }
}

/** A start-up problem the process reports and exits on (no stack trace needed): a setting that parses but cannot be used. */
export class StartupError extends Error {
  constructor (message: string) {
    super(message)
    this.name = 'StartupError'
  }
}

/** A tool failure's reason (ToolFailureReason) to its code, the `error.code` of a 200 result with isError true. */
export const TOOL_ERROR_CODES = {
  'invalid-arguments': 'GW_INVALID_ARGUMENTS',
  timeout: 'GW_TOOL_TIMEOUT',
  upstream: 'GW_UPSTREAM_ERROR',
  'tool-error': 'GW_TOOL_ERROR',
  sandbox: 'GW_SANDBOX_ERROR',
  forbidden: 'GW_PATH_FORBIDDEN',
  cancelled: 'GW_CANCELLED',
  quota: 'WORKSPACE_QUOTA_EXCEEDED',
  'tenant-quota': 'GW_TENANT_QUOTA_EXCEEDED',
  policy: 'GW_POLICY_DENIED',
  guardrail: 'GW_GUARDRAIL_BLOCKED',
  'definition-changed': 'GW_DEFINITION_CHANGED',
  'script-limit': 'GW_SCRIPT_LIMIT',
  'upstream-unavailable': 'GW_UPSTREAM_UNAVAILABLE',
  'upstream-too-large': 'GW_UPSTREAM_TOO_LARGE',
  'upstream-budget': 'GW_UPSTREAM_BUDGET_EXHAUSTED',
  'oauth-required': 'GW_OAUTH_REQUIRED',
  'approval-pending': 'GW_APPROVAL_PENDING',
  'approval-denied': 'APPROVAL_DENIED',
  'approval-expired': 'APPROVAL_EXPIRED'
} as const satisfies Record<string, CodeOfKind<'tool'>>

/** The longest piece of a client's input a message or a log line quotes: a name can be anything the body limit allows. */
const QUOTED_MAX = 200

/** `text` as a message or a log line quotes it: its first QUOTED_MAX characters, then `...` where it was cut. */
export function quoted (text: string): string {
  return text.length > QUOTED_MAX ? text.slice(0, QUOTED_MAX) + '...' : text
}

/** The message of every GW_INTERNAL response: no stack traces, host paths or secrets leave the gateway. */
export const INTERNAL_MESSAGE = 'Internal error; the request id is in the logs'

/** JSON-RPC error codes the gateway answers with (MCP's own, from the JSON-RPC 2.0 spec, and -32000). */
export const JSON_RPC_CODES = {
  parseError: -32700,
  invalidRequest: -32600,
  invalidParams: -32602,
  internalError: -32603,
  /** The gateway refused the HTTP request (auth, tenancy, size, rate): the HTTP status says which. */
  refused: -32000
} as const

/** What an HTTP error response says. */
export interface HttpFailure {
  statusCode: number
  code: HttpErrorCode
  message: string
}

/** A bare 4xx from a library (no GW_ code of its own) keeps its status and gets the code for it. */
const CODE_BY_STATUS: Partial<Record<number, HttpErrorCode>> = {
  403: 'GW_FORBIDDEN',
  404: 'GW_NOT_FOUND',
  413: 'GW_PAYLOAD_TOO_LARGE',
  415: 'GW_UNSUPPORTED_MEDIA_TYPE',
  429: 'GW_RATE_LIMITED'
}

/**
 * The HTTP form of anything thrown while serving a request: an HttpError as it is; an error
 * carrying an http GW_ code of its own (e.g. RegistryUnavailableError) with the table's status;
 * another 4xx by its status; anything else is a bug, 500 GW_INTERNAL with INTERNAL_MESSAGE.
 * Other 5xx messages (GW_UPSTREAM_ERROR, GW_REGISTRY_UNAVAILABLE) are written for callers and kept.
 */
export function toHttpFailure (err: unknown): HttpFailure {
  const failure = classifyHttp(err)
  if (failure.code === 'GW_INTERNAL') failure.message = INTERNAL_MESSAGE
  return failure
}

/** The one body of every HTTP error response (docs/ARCHITECTURE.md#errors). */
export interface HttpErrorBody {
  statusCode: number
  code: HttpErrorCode
  /** The status's reason phrase (`Too Many Requests`). */
  error: string
  message: string
}

/**
 * The HTTP error body of anything thrown (toHttpFailure). Every writer of an error response uses
 * it: the error handler, the 404 handler, the body timeout that answers on the raw socket.
 */
export function toHttpErrorBody (err: unknown): HttpErrorBody {
  const { statusCode, code, message } = toHttpFailure(err)
  return { statusCode, code, error: STATUS_CODES[statusCode] ?? 'Error', message }
}

function classifyHttp (err: unknown): HttpFailure {
  if (err instanceof HttpError) return { statusCode: err.statusCode, code: err.code, message: err.message }
  const { code, statusCode, message } = (err ?? {}) as { code?: unknown, statusCode?: unknown, message: string }
  if (typeof code === 'string' && Object.hasOwn(HTTP_ERROR_CODES, code)) {
    return { statusCode: HTTP_ERROR_CODES[code as HttpErrorCode], code: code as HttpErrorCode, message }
  }
  if (typeof statusCode === 'number' && statusCode >= 400 && statusCode < 500) {
    return { statusCode, code: CODE_BY_STATUS[statusCode] ?? 'GW_BAD_REQUEST', message }
  }
  return { statusCode: 500, code: 'GW_INTERNAL', message }
}

/**
 * An HTTP-level refusal on /mcp (before any JSON-RPC message is handled): the status and code of
 * toHttpFailure in a JSON-RPC error body. Every 5xx message is hidden there, not only GW_INTERNAL's.
 */
export function toJsonRpcRefusal (err: unknown): HttpFailure & { rpcCode: number } {
  const failure = toHttpFailure(err)
  return {
    ...failure,
    message: failure.statusCode >= 500 ? INTERNAL_MESSAGE : failure.message,
    rpcCode: REFUSAL_RPC_CODES[failure.code] ?? JSON_RPC_CODES.refused
  }
}

/** The refusals that are JSON-RPC's own errors (a body no message can be read from, or a message refused as it is); the others are -32000. */
const REFUSAL_RPC_CODES: Partial<Record<HttpErrorCode, number>> = {
  GW_MALFORMED_JSON: JSON_RPC_CODES.parseError,
  GW_PROTOTYPE_KEY: JSON_RPC_CODES.invalidRequest,
  GW_DUPLICATE_REQUEST_ID: JSON_RPC_CODES.invalidRequest
}

/** The JSON-RPC error answering one MCP request (tools/list, tools/call). */
export interface JsonRpcFailure {
  rpcCode: number
  message: string
  data: { code: string, statusCode?: number, reason?: string }
}

/**
 * A request-level failure inside the MCP server (unknown tool, not in the allow-list, another
 * tenant's tool) is a JSON-RPC error, as MCP has them for unknown tools: -32602 for the caller's
 * mistakes, -32000 for a rate limit (the gateway refused, as on the HTTP level), -32603 for the
 * gateway's own. `data.code` carries the GW_ code; an error of another kind is hidden as GW_INTERNAL.
 */
export function toJsonRpcFailure (err: unknown): JsonRpcFailure {
  if (err instanceof HttpError) {
    const rpcCode = err.statusCode >= 500 ? JSON_RPC_CODES.internalError : err.statusCode === 429 ? JSON_RPC_CODES.refused : JSON_RPC_CODES.invalidParams
    // MCP names a requestState that fails its integrity check by data.reason (2026-07-28).
    const data = { code: err.code, statusCode: err.statusCode }
    return { rpcCode, message: err.message, data: err.code === 'GW_INVALID_REQUEST_STATE' ? { ...data, reason: 'invalid_request_state' } : data }
  }
  const typed = err as { code?: unknown, message?: unknown } | null
  if (isGwCode(typed?.code)) {
    return { rpcCode: JSON_RPC_CODES.internalError, message: String(typed?.message ?? 'Internal error'), data: { code: typed.code } }
  }
  return { rpcCode: JSON_RPC_CODES.internalError, message: INTERNAL_MESSAGE, data: { code: 'GW_INTERNAL' } }
}
