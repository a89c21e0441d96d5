/**
 * A raw MCP request of the 2026-07-28 revision to a gateway's /mcp: the `_meta` envelope added to
 * the params (unless `envelope: false`) and the revision's headers, so a test can send exactly
 * the request it needs, mismatched headers and missing envelopes included.
 */
export const MODERN = '2026-07-28'

export interface RawMcpMessage { id?: number | string, method: string, params?: Record<string, unknown> }

export interface RawMcpOptions {
  /** Extra or overriding headers (Mcp-Name, Mcp-Param-*, a wrong Mcp-Method...). */
  headers?: Record<string, string>
  /** Send the params without the `_meta` envelope. */
  envelope?: boolean
  /** The revision the envelope and header claim (default 2026-07-28). */
  version?: string
  /** The client capabilities the envelope declares (default none). */
  capabilities?: Record<string, unknown>
}

export interface RawMcpAnswer { status: number, contentType: string, json: any }

export async function postModernMcp (url: string, key: string, message: RawMcpMessage, opts: RawMcpOptions = {}): Promise<RawMcpAnswer> {
  const version = opts.version ?? MODERN
  const meta = {
    'io.modelcontextprotocol/protocolVersion': version,
    'io.modelcontextprotocol/clientCapabilities': opts.capabilities ?? {},
    'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' }
  }
  const params = opts.envelope === false
    ? message.params
    : { ...message.params, _meta: { ...meta, ...(message.params?._meta as object | undefined) } }
  const res = await fetch(url, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${key}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': version,
      'mcp-method': message.method,
      ...opts.headers
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: message.id ?? 1, method: message.method, ...(params !== undefined ? { params } : {}) })
  })
  return { status: res.status, contentType: res.headers.get('content-type') ?? '', json: await res.json() }
}
