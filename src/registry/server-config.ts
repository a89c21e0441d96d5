import { Type, type Static } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'
import type { HttpErrorCode } from '../errors.js'

/**
 * Remote MCP server config (docs/ARCHITECTURE.md#registry): one shape for global and per-tenant servers, in the
 * AI4J / Claude Desktop style. `normalizeServerConfig` turns what a caller or a config file
 * sends into the canonical form that the registry stores and the client pool consumes.
 */

// One source of truth for the id rule: the naming module, which the router uses to decode names.
export { ID_PATTERN, isValidId } from '../naming/names.js'

export const SERVER_TYPES = ['streamable_http', 'sse', 'stdio'] as const
export type ServerType = typeof SERVER_TYPES[number]

/**
 * Which MCP protocol era the gateway speaks to the server: `auto` sends `server/discover` once
 * per config (the verdict is remembered) and falls back to `initialize`; `legacy` always
 * initializes (2025-11-25 and earlier); `2026-07-28` speaks that revision without a probe.
 * Default: `auto` for streamable_http, `legacy` for stdio (its probe spawns the command a second
 * time) and sse (a legacy-only transport, which accepts nothing else).
 */
const SERVER_PROTOCOLS = ['auto', 'legacy', '2026-07-28'] as const

/** How the gateway gets a server's OAuth tokens (SPEC 16). */
const OAUTH_GRANTS = ['authorization_code', 'client_credentials'] as const
// RFC 6749 section 3.3 scope-token: printable ASCII without space, `"` and `\`.
const SCOPE_TOKEN = '^[!#-\\[\\]-~]+$'

/** Accepted spellings of `type`, all lower-cased before lookup. Anything else is a 400. */
const SERVER_TYPE_ALIASES: Readonly<Record<string, ServerType>> = {
  streamable_http: 'streamable_http',
  'streamable-http': 'streamable_http',
  http: 'streamable_http',
  mcp: 'streamable_http',
  sse: 'sse',
  stdio: 'stdio'
}

/** Size bounds: a config is stored in Redis and loaded by every instance, so nothing is unbounded. */
export const SERVER_CONFIG_LIMITS = {
  urlLength: 2048,
  headerCount: 32,
  headerNameLength: 128,
  headerValueLength: 8192,
  commandLength: 1024,
  argCount: 64,
  argLength: 4096,
  envCount: 64,
  envNameLength: 128,
  envValueLength: 8192,
  descriptionLength: 2000,
  disabledToolCount: 256,
  toolNameLength: 256,
  timeoutMsMin: 100,
  timeoutMsMax: 600_000,
  priorityMin: -1_000_000,
  priorityMax: 1_000_000,
  oauthFieldLength: 4096,
  scopeLength: 256,
  scopeCount: 64,
  /** UTF-8 bytes of the whole config as JSON: each field's bound alone would let one config hold ~1 MB. */
  configBytes: 64 * 1024
} as const

const L = SERVER_CONFIG_LIMITS

/** What a caller may send (before aliases are resolved and cross-field rules applied). */
export const ServerConfigInputSchema = Type.Object({
  type: Type.Optional(Type.String({ maxLength: 32, description: 'streamable_http | sse | stdio (aliases: http, streamable-http, mcp)' })),
  url: Type.Optional(Type.String({ minLength: 1, maxLength: L.urlLength, description: 'http(s) URL; required for streamable_http and sse' })),
  headers: Type.Optional(Type.Record(Type.String({ minLength: 1, maxLength: L.headerNameLength }), Type.String({ maxLength: L.headerValueLength }), {
    maxProperties: L.headerCount,
    description: 'Sent on every request; values encrypted at rest and masked on read'
  })),
  command: Type.Optional(Type.String({ minLength: 1, maxLength: L.commandLength, description: 'stdio only (admin only)' })),
  args: Type.Optional(Type.Array(Type.String({ maxLength: L.argLength }), { maxItems: L.argCount })),
  env: Type.Optional(Type.Record(Type.String({ minLength: 1, maxLength: L.envNameLength }), Type.String({ maxLength: L.envValueLength }), {
    maxProperties: L.envCount,
    description: 'stdio only; values encrypted at rest and masked on read'
  })),
  enabled: Type.Optional(Type.Boolean({ default: true })),
  timeoutMs: Type.Optional(Type.Integer({ minimum: L.timeoutMsMin, maximum: L.timeoutMsMax })),
  priority: Type.Optional(Type.Integer({
    minimum: L.priorityMin,
    maximum: L.priorityMax,
    default: 0,
    description: 'Higher wins among global servers; ties go to the smaller serverId'
  })),
  description: Type.Optional(Type.String({ maxLength: L.descriptionLength })),
  disabledTools: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: L.toolNameLength }), { maxItems: L.disabledToolCount })),
  protocol: Type.Optional(Type.Union(SERVER_PROTOCOLS.map((p) => Type.Literal(p)), {
    description: 'MCP protocol era: auto (server/discover once per config, else initialize; the default for streamable_http), legacy (initialize; the default for stdio and sse), 2026-07-28 (no probe)'
  })),
  auth: Type.Optional(Type.Object({
    type: Type.Literal('oauth'),
    grant: Type.Optional(Type.Union(OAUTH_GRANTS.map((g) => Type.Literal(g)), {
      description: 'authorization_code (default: each tenant connects its own account) or client_credentials (global servers only: one identity of the gateway)'
    })),
    clientId: Type.Optional(Type.String({ minLength: 1, maxLength: L.oauthFieldLength, description: 'A client pre-registered with the authorization server' })),
    clientSecret: Type.Optional(Type.String({ minLength: 1, maxLength: L.oauthFieldLength, description: 'Its secret; encrypted at rest and masked on read' })),
    scopes: Type.Optional(Type.Array(Type.String({ pattern: SCOPE_TOKEN, maxLength: L.scopeLength }), {
      maxItems: L.scopeCount,
      description: 'Scopes to ask for; default: what the server\'s 401 or its metadata names'
    })),
    authorizationServer: Type.Optional(Type.String({
      minLength: 1,
      maxLength: L.urlLength,
      description: 'The authorization server\'s issuer URL, when the server\'s protected resource metadata does not name it'
    }))
  }, { additionalProperties: false, description: 'OAuth 2.1 to the server (SPEC 16): connected per tenant through /oauth/authorize' }))
}, { additionalProperties: false, $id: 'ServerConfigInput' })
export type ServerConfigInput = Static<typeof ServerConfigInputSchema>

/** The canonical, stored form: `type` resolved, defaults applied, fields of the other transport absent. */
export const ServerConfigSchema = Type.Object({
  type: Type.Union(SERVER_TYPES.map((t) => Type.Literal(t))),
  url: Type.Optional(Type.String()),
  headers: Type.Optional(Type.Record(Type.String(), Type.String())),
  command: Type.Optional(Type.String()),
  args: Type.Optional(Type.Array(Type.String())),
  env: Type.Optional(Type.Record(Type.String(), Type.String())),
  enabled: Type.Boolean(),
  timeoutMs: Type.Optional(Type.Integer()),
  priority: Type.Integer(),
  description: Type.Optional(Type.String()),
  disabledTools: Type.Optional(Type.Array(Type.String())),
  protocol: Type.Optional(Type.Union(SERVER_PROTOCOLS.map((p) => Type.Literal(p)))),
  auth: Type.Optional(Type.Object({
    type: Type.Literal('oauth'),
    grant: Type.Union(OAUTH_GRANTS.map((g) => Type.Literal(g))),
    clientId: Type.Optional(Type.String()),
    clientSecret: Type.Optional(Type.String()),
    scopes: Type.Optional(Type.Array(Type.String())),
    authorizationServer: Type.Optional(Type.String())
  }, { additionalProperties: false }))
}, { additionalProperties: false, $id: 'ServerConfig' })
export type ServerAuth = NonNullable<ServerConfig['auth']>
export type ServerConfig = Static<typeof ServerConfigSchema>

export interface NormalizeOptions {
  /** stdio runs a command on the gateway host: only admins (global servers) may register it. */
  allowStdio: boolean
  /**
   * `reject` (default, the REST API): an unknown field is a 400, so a typo never silently drops a
   * setting. `strip`: ignore unknown fields, for config files written for other clients
   * (Claude Desktop files carry keys such as `autoApprove`).
   */
  unknownKeys?: 'reject' | 'strip'
}

export type NormalizeResult =
  | { ok: true, config: ServerConfig }
  | { ok: false, code: Extract<HttpErrorCode, 'GW_BAD_REQUEST' | 'GW_FORBIDDEN' | 'GW_PAYLOAD_TOO_LARGE'>, message: string }

// RFC 9110 token characters.
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/
// Headers that would let a config redirect or desynchronise the request itself.
const RESERVED_HEADERS = new Set([
  'host', 'connection', 'content-length', 'transfer-encoding', 'keep-alive', 'upgrade', 'te',
  'trailer', 'proxy-authorization', 'proxy-authenticate', 'proxy-connection', 'expect'
])
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/
// CR/LF would split headers; NUL truncates C strings in exec/env.
const CONTROL_IN_HEADER = /[\0\r\n]/
const NUL = /\0/

function bad (message: string): NormalizeResult {
  return { ok: false, code: 'GW_BAD_REQUEST', message }
}

function firstSchemaError (input: unknown): string {
  const first = Value.Errors(ServerConfigInputSchema, input).First()
  if (first === undefined) return 'invalid server config'
  const where = first.path === '' ? 'config' : first.path
  return `${where}: ${first.message}`
}

/** Resolves an alias to the canonical type, or undefined for an unknown type. */
function canonicalServerType (type: string): ServerType | undefined {
  return Object.hasOwn(SERVER_TYPE_ALIASES, type.toLowerCase()) ? SERVER_TYPE_ALIASES[type.toLowerCase()] : undefined
}

/**
 * Validates and canonicalises a server config. Expected failures are values:
 * `GW_BAD_REQUEST` (400) for anything malformed, `GW_FORBIDDEN` (403) for stdio when
 * `allowStdio` is false. A missing `type` is inferred only when unambiguous (`url` alone means
 * streamable_http, `command` alone means stdio, as in Claude Desktop files); an unknown `type`
 * is always refused, never treated as stdio.
 */
export function normalizeServerConfig (input: unknown, options: NormalizeOptions): NormalizeResult {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) return bad('server config must be a JSON object')
  let candidate = input as Record<string, unknown>
  if (options.unknownKeys === 'strip') {
    const known = new Set(Object.keys(ServerConfigInputSchema.properties))
    candidate = Object.fromEntries(Object.entries(candidate).filter(([k]) => known.has(k)))
  }
  if (!Value.Check(ServerConfigInputSchema, candidate)) return bad(firstSchemaError(candidate))
  const raw = candidate as ServerConfigInput

  let type: ServerType
  if (raw.type !== undefined) {
    const canonical = canonicalServerType(raw.type)
    if (canonical === undefined) {
      return bad(`unknown server type '${raw.type.slice(0, 32)}': expected streamable_http, sse or stdio (aliases: http, streamable-http, mcp)`)
    }
    type = canonical
  } else if (raw.url !== undefined && raw.command === undefined) {
    type = 'streamable_http'
  } else if (raw.command !== undefined && raw.url === undefined) {
    type = 'stdio'
  } else {
    return bad('type is required: streamable_http, sse or stdio')
  }

  if (type === 'stdio' && !options.allowStdio) {
    return { ok: false, code: 'GW_FORBIDDEN', message: 'stdio servers run a command on the gateway host and may only be registered by an admin' }
  }

  const config: ServerConfig = { type, enabled: raw.enabled ?? true, priority: raw.priority ?? 0 }

  if (type === 'stdio') {
    if (raw.command === undefined) return bad('command is required for a stdio server')
    if (raw.url !== undefined) return bad('url is not allowed for a stdio server')
    if (raw.headers !== undefined) return bad('headers are not allowed for a stdio server (use env)')
    if (NUL.test(raw.command)) return bad('command must not contain NUL')
    config.command = raw.command
    if (raw.args !== undefined) {
      if (raw.args.some((a) => NUL.test(a))) return bad('args must not contain NUL')
      config.args = [...raw.args]
    }
    if (raw.env !== undefined) {
      const env: Record<string, string> = {}
      for (const [name, value] of Object.entries(raw.env)) {
        if (!ENV_NAME.test(name)) return bad(`env name '${name.slice(0, 64)}' must match ${ENV_NAME.source}`)
        if (NUL.test(value)) return bad(`env ${name} must not contain NUL`)
        env[name] = value
      }
      config.env = env
    }
  } else {
    if (raw.url === undefined) return bad(`url is required for a ${type} server`)
    if (raw.command !== undefined || raw.args !== undefined || raw.env !== undefined) {
      return bad(`command, args and env are only for stdio servers, not ${type}`)
    }
    const url = httpUrl(raw.url, 'url')
    if (typeof url === 'string') return bad(url)
    // Credentials in a URL would be stored in clear and echoed back: they belong in headers.
    if (url.username !== '' || url.password !== '') return bad('url must not contain credentials: send them in headers')
    config.url = url.href
    if (raw.headers !== undefined) {
      const headers: Record<string, string> = {}
      const seen = new Set<string>()
      for (const [name, value] of Object.entries(raw.headers)) {
        const lower = name.toLowerCase()
        if (!HEADER_NAME.test(name)) return bad(`header name '${name.slice(0, 64)}' is not a valid HTTP token`)
        if (RESERVED_HEADERS.has(lower) || lower.startsWith('proxy-')) return bad(`header ${name} may not be set by a server config`)
        if (seen.has(lower)) return bad(`header ${name} is given twice (header names are case-insensitive)`)
        if (CONTROL_IN_HEADER.test(value)) return bad(`header ${name} must not contain CR, LF or NUL`)
        seen.add(lower)
        headers[name] = value
      }
      config.headers = headers
    }
  }

  if (raw.protocol !== undefined) {
    if (type === 'sse' && raw.protocol !== 'legacy') return bad(`protocol ${raw.protocol} is not possible over the sse transport (HTTP+SSE is legacy only): use streamable_http`)
    config.protocol = raw.protocol
  }
  if (raw.auth !== undefined) {
    const auth = normalizeAuth(raw.auth, type, options)
    if (!('type' in auth)) return auth
    config.auth = auth
  }
  if (raw.timeoutMs !== undefined) config.timeoutMs = raw.timeoutMs
  if (raw.description !== undefined) config.description = raw.description
  if (raw.disabledTools !== undefined) config.disabledTools = [...new Set(raw.disabledTools)]
  const bytes = Buffer.byteLength(JSON.stringify(config))
  if (bytes > L.configBytes) {
    return { ok: false, code: 'GW_PAYLOAD_TOO_LARGE', message: `the server config is ${bytes} bytes as JSON; at most ${L.configBytes} are stored (headers, env and args together)` }
  }
  return { ok: true, config }
}

/** The `auth` of an http server: the grant resolved, client credentials only for global servers and with both parts. */
function normalizeAuth (raw: NonNullable<ServerConfigInput['auth']>, type: ServerType, options: NormalizeOptions): ServerAuth | NormalizeResult {
  if (type === 'stdio') return bad('auth is for http servers: a stdio server gets its credentials in env')
  const grant = raw.grant ?? 'authorization_code'
  if (grant === 'client_credentials') {
    // One identity of the gateway for every caller: the operator's choice, never a tenant's.
    if (!options.allowStdio) {
      return { ok: false, code: 'GW_FORBIDDEN', message: 'auth.grant client_credentials is for global servers: each tenant connects its own account' }
    }
    if (raw.clientId === undefined || raw.clientSecret === undefined) return bad('auth.grant client_credentials needs clientId and clientSecret')
    // The secret goes to the token endpoint of this issuer only, never to one the MCP server names.
    if (raw.authorizationServer === undefined) {
      return bad('auth.grant client_credentials needs auth.authorizationServer: the issuer its client secret may be sent to')
    }
  }
  if (raw.clientSecret !== undefined && raw.clientId === undefined) return bad('auth.clientSecret needs auth.clientId')
  if (raw.authorizationServer !== undefined) {
    const issuer = httpUrl(raw.authorizationServer, 'auth.authorizationServer')
    if (typeof issuer === 'string') return bad(issuer)
    if (issuer.username !== '' || issuer.password !== '' || issuer.search !== '' || issuer.hash !== '') {
      return bad('auth.authorizationServer must be an issuer URL: no credentials, query or fragment')
    }
  }
  return {
    type: 'oauth',
    grant,
    ...(raw.clientId !== undefined ? { clientId: raw.clientId } : {}),
    ...(raw.clientSecret !== undefined ? { clientSecret: raw.clientSecret } : {}),
    ...(raw.scopes !== undefined ? { scopes: [...new Set(raw.scopes)] } : {}),
    ...(raw.authorizationServer !== undefined ? { authorizationServer: raw.authorizationServer } : {})
  }
}

/** An absolute http(s) URL, or what is wrong with it (naming `field`). */
function httpUrl (raw: string, field: string): URL | string {
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return `${field} is not a valid absolute URL`
  }
  return url.protocol === 'http:' || url.protocol === 'https:' ? url : `${field} must be http or https`
}
