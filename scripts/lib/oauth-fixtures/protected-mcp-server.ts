/**
 * An OAuth-protected streamable-HTTP MCP server for tests, on `http://127.0.0.1:{port}/mcp`: the
 * SDK's McpServer behind a stateless StreamableHTTPServerTransport (one server per request), guarded
 * by a bearer check that verifies JWT access tokens with jose against the issuer's JWKS (`iss`,
 * `aud` == this server's `/mcp` URL, `exp`, RS256/ES256 only).
 *
 * - `GET /.well-known/oauth-protected-resource/mcp`: RFC 9728 metadata (`resource` = the /mcp URL,
 *   `authorization_servers: [issuer]`, `scopes_supported`);
 * - no token, or one that does not verify: `401` with
 *   `WWW-Authenticate: Bearer resource_metadata="...", scope="{requiredScope}"` (plus
 *   `error="invalid_token"` when a token was sent);
 * - a token without `requiredScope`, or a tools/call of `admin_action` without `adminScope`: `403`
 *   with `WWW-Authenticate: Bearer error="insufficient_scope", scope="{the scopes needed}", resource_metadata="..."`.
 *
 * Tools: `whoami` (JSON text `{ sub, scopes, aud }` of the token the call carried), `echo {text}`
 * (text `"{marker}:{text}"`), `admin_action` (text `"admin done by {sub}"`).
 *
 * Options (ProtectedMcpServerOptions): `issuer` (required), `jwksUrl` (default `{issuer}/jwks`, where
 * oidc-provider serves it), `requiredScope` (default `mcp:read`; `''` for none), `adminScope`
 * (default `mcp:admin`), `scopesSupported` (default both), `marker` (default `protected`),
 * `resourceMetadataInHeader` (default true; false leaves the client to the well-known fallback), `port`.
 *
 * `seen` records what reached it, never a token: per request the token's `sub`/`aud`/scopes and the
 * status given, and counters of 401s, 403s, expired tokens, tokens this issuer did not issue and
 * metadata requests.
 */
import { createServer } from 'node:http'
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import { createRemoteJWKSet, errors as joseErrors, jwtVerify } from 'jose'
import type { JWTPayload } from 'jose'
import * as z from 'zod'
import { readJson } from '../mcp-fixtures/http-servers.js'

/** Options of startProtectedMcpServer (see the header comment). */
export interface ProtectedMcpServerOptions {
  issuer: string
  jwksUrl?: string
  requiredScope?: string
  adminScope?: string
  scopesSupported?: string[]
  marker?: string
  resourceMetadataInHeader?: boolean
  port?: number
}

/** One request as the server saw it. */
export interface SeenRequest {
  /** The JSON-RPC method (or methods, comma-separated, of a batch), else the HTTP method. */
  method: string
  /** The tool called, for tools/call. */
  tool?: string
  /** From a verified token only. */
  sub?: string
  aud?: string | string[]
  scopes?: string[]
  /** 200 for a request passed to MCP, else the status the guard answered. */
  status: number
  /** A token was sent but it was not one of this issuer's (bad signature, unknown key, other iss, not a JWT). */
  foreign: boolean
}

/** What reached the server; counters only grow. */
export interface ProtectedMcpSeen {
  requests: SeenRequest[]
  unauthorized: number
  forbidden: number
  /** Requests whose token this issuer did not issue. */
  foreignTokens: number
  /** Requests whose token was this issuer's but expired. */
  expiredTokens: number
  /** GETs of the protected resource metadata. */
  metadataRequests: number
}

/** A running protected MCP server. */
export interface ProtectedMcpServer {
  /** The MCP endpoint and resource identifier, `http://127.0.0.1:{port}/mcp`. */
  url: string
  port: number
  /** The RFC 9728 metadata URL. */
  resourceMetadataUrl: string
  seen: ProtectedMcpSeen
  close: () => Promise<void>
}

interface Verified { sub: string, aud: string | string[] | undefined, scopes: string[] }

type Checked = { ok: true, token: Verified } | { ok: false, sent: boolean, foreign: boolean, expired: boolean }

function buildServer (marker: string, token: Verified): McpServer {
  const server = new McpServer({ name: `protected-${marker}`, version: '1.0.0' })
  const text = (t: string): { content: Array<{ type: 'text', text: string }> } => ({ content: [{ type: 'text', text: t }] })
  server.registerTool('whoami', { description: 'the identity and scopes of the calling token', inputSchema: {} },
    async () => text(JSON.stringify({ sub: token.sub, scopes: token.scopes, aud: token.aud })))
  server.registerTool('echo', { description: 'echoes text', inputSchema: { text: z.string() } },
    async ({ text: t }) => text(`${marker}:${t}`))
  server.registerTool('admin_action', { description: 'needs the admin scope', inputSchema: {} },
    async () => text(`admin done by ${token.sub}`))
  return server
}

interface RpcSummary { method: string, tools: string[] }

function summarize (httpMethod: string, body: unknown): RpcSummary {
  const messages = (Array.isArray(body) ? body : [body]).filter((m): m is Record<string, unknown> => typeof m === 'object' && m !== null)
  if (messages.length === 0) return { method: httpMethod, tools: [] }
  const tools = messages
    .filter((m) => m.method === 'tools/call')
    .map((m) => String((m.params as Record<string, unknown> | undefined)?.name))
  return { method: messages.map((m) => String(m.method ?? 'response')).join(','), tools }
}

/** Starts the server; see the header comment. */
export async function startProtectedMcpServer (opts: ProtectedMcpServerOptions): Promise<ProtectedMcpServer> {
  const requiredScope = opts.requiredScope ?? 'mcp:read'
  const adminScope = opts.adminScope ?? 'mcp:admin'
  const scopesSupported = opts.scopesSupported ?? [requiredScope, adminScope].filter((s) => s !== '')
  const marker = opts.marker ?? 'protected'
  const jwks = createRemoteJWKSet(new URL(opts.jwksUrl ?? `${opts.issuer}/jwks`))
  const seen: ProtectedMcpSeen = { requests: [], unauthorized: 0, forbidden: 0, foreignTokens: 0, expiredTokens: 0, metadataRequests: 0 }

  const http = createServer()
  await new Promise<void>((resolve, reject) => {
    http.once('error', reject)
    http.listen(opts.port ?? 0, '127.0.0.1', () => { http.off('error', reject); resolve() })
  })
  const port = (http.address() as AddressInfo).port
  const resource = `http://127.0.0.1:${port}/mcp`
  const resourceMetadataUrl = `http://127.0.0.1:${port}/.well-known/oauth-protected-resource/mcp`
  const metadataParam = opts.resourceMetadataInHeader === false ? [] : [`resource_metadata="${resourceMetadataUrl}"`]

  const check = async (req: IncomingMessage): Promise<Checked> => {
    const header = req.headers.authorization ?? ''
    const match = /^Bearer ([^\s]+)$/i.exec(header)
    if (match?.[1] === undefined) return { ok: false, sent: header !== '', foreign: header !== '', expired: false }
    let payload: JWTPayload
    try {
      ({ payload } = await jwtVerify(match[1], jwks, { issuer: opts.issuer, audience: resource, algorithms: ['RS256', 'ES256'] }))
    } catch (err) {
      // jose checks the signature before the claims: an expired or wrong-audience token is still this issuer's.
      const expired = err instanceof joseErrors.JWTExpired
      const ours = expired || (err instanceof joseErrors.JWTClaimValidationFailed && err.claim !== 'iss')
      return { ok: false, sent: true, foreign: !ours, expired }
    }
    const scopes = typeof payload.scope === 'string' ? payload.scope.split(' ').filter((s) => s !== '') : []
    return { ok: true, token: { sub: String(payload.sub), aud: payload.aud, scopes } }
  }

  const challenge = (res: ServerResponse, status: 401 | 403, params: string[]): void => {
    res.writeHead(status, { 'www-authenticate': `Bearer ${params.join(', ')}`, 'content-type': 'application/json' })
    res.end(JSON.stringify({ error: status === 401 ? 'invalid_token' : 'insufficient_scope' }))
  }

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', resource)
    if (req.method === 'GET' && url.pathname === '/.well-known/oauth-protected-resource/mcp') {
      seen.metadataRequests++
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ resource, authorization_servers: [opts.issuer], scopes_supported: scopesSupported, bearer_methods_supported: ['header'] }))
      return
    }
    if (url.pathname !== '/mcp') {
      res.writeHead(404).end()
      return
    }
    const body = req.method === 'POST' ? await readJson(req).catch(() => undefined) : undefined
    const rpc = summarize(req.method ?? 'GET', body)
    const checked = await check(req)
    if (!checked.ok) {
      seen.unauthorized++
      if (checked.foreign) seen.foreignTokens++
      if (checked.expired) seen.expiredTokens++
      seen.requests.push({ method: rpc.method, tool: rpc.tools[0], status: 401, foreign: checked.foreign })
      const scope = requiredScope === '' ? [] : [`scope="${requiredScope}"`]
      challenge(res, 401, [...(checked.sent ? ['error="invalid_token"'] : []), ...metadataParam, ...scope])
      return
    }
    const { token } = checked
    const needed = [requiredScope, ...(rpc.tools.includes('admin_action') ? [adminScope] : [])].filter((s) => s !== '')
    const record: SeenRequest = { method: rpc.method, tool: rpc.tools[0], sub: token.sub, aud: token.aud, scopes: token.scopes, status: 200, foreign: false }
    seen.requests.push(record)
    if (!needed.every((s) => token.scopes.includes(s))) {
      seen.forbidden++
      record.status = 403
      challenge(res, 403, ['error="insufficient_scope"', `scope="${needed.join(' ')}"`, ...metadataParam])
      return
    }
    // Stateless: a server per request, so each call sees the identity of the token it carried.
    const server = buildServer(marker, token)
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true })
    res.on('close', () => {
      transport.close().catch(() => {})
      server.close().catch(() => {})
    })
    await server.connect(transport)
    await transport.handleRequest(req, res, body)
  }

  http.on('request', (req: IncomingMessage, res: ServerResponse) => {
    handle(req, res).catch(() => {
      if (res.headersSent) { res.destroy(); return }
      res.writeHead(500, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32603, message: 'internal error' }, id: null }))
    })
  })

  let closing: Promise<void> | undefined
  return {
    url: resource,
    port,
    resourceMetadataUrl,
    seen,
    close: async () => {
      closing ??= new Promise<void>((resolve) => {
        http.close(() => resolve())
        http.closeAllConnections()
      })
      return await closing
    }
  }
}
