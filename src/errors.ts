/**
 * Errors for requests that never reached a tool (SPEC 3). They carry an HTTP status and a
 * stable `GW_` code; the HTTP layer renders `{ statusCode, code, error, message }`.
 * Failures of a tool itself are not errors: they are ToolOutcome values.
 */
export const HTTP_ERROR_CODES = {
  GW_BAD_REQUEST: 400,
  GW_MALFORMED_JSON: 400,
  GW_INVALID_ARGUMENTS_TYPE: 400,
  GW_UNRESOLVED: 400,
  /** A masked secret (`Bearer ****`) sent back with a server URL of another origin: it would carry the stored secret there. */
  GW_SECRET_ORIGIN_CHANGED: 400,
  GW_UNAUTHORIZED: 401,
  GW_FORBIDDEN: 403,
  GW_TENANT_MISMATCH: 403,
  GW_NOT_ALLOWED: 403,
  GW_EGRESS_BLOCKED: 403,
  GW_TOOL_NOT_FOUND: 404,
  GW_NOT_FOUND: 404,
  GW_SERVER_NOT_FOUND: 404,
  GW_METHOD_NOT_ALLOWED: 405,
  GW_REQUEST_TIMEOUT: 408,
  GW_PAYLOAD_TOO_LARGE: 413,
  GW_UNSUPPORTED_MEDIA_TYPE: 415,
  GW_RATE_LIMITED: 429,
  GW_INTERNAL: 500,
  GW_UPSTREAM_ERROR: 502,
  GW_REGISTRY_UNAVAILABLE: 503,
  GW_NOT_READY: 503
} as const

export type HttpErrorCode = keyof typeof HTTP_ERROR_CODES

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

/** Tool-level error codes (the `error.code` of a 200 result with isError true). */
export const TOOL_ERROR_CODES = {
  'invalid-arguments': 'GW_INVALID_ARGUMENTS',
  timeout: 'GW_TOOL_TIMEOUT',
  upstream: 'GW_UPSTREAM_ERROR',
  'tool-error': 'GW_TOOL_ERROR',
  sandbox: 'GW_SANDBOX_ERROR',
  forbidden: 'GW_PATH_FORBIDDEN',
  cancelled: 'GW_CANCELLED'
} as const
