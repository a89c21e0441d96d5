import { PROTOCOL_VERSION_META_KEY } from '@modelcontextprotocol/server'
import { quoted } from '../errors.js'

/**
 * The SDK's refusals of a protocol revision it does not serve quote the revision the request named
 * whole, however long: in the message, and again in `data` (`requested`, `mismatch.header`). A 5 KB
 * MCP-Protocol-Version header came back 5 KB, twice; a claim in the `_meta` envelope of a 2 MB body,
 * 4 MB. No revision is longer than a quote may be (errors.ts `quoted`): the revisions a request names
 * (its header, as the SDK reads it, and its envelope's claim) that are, so that their quotes can be
 * cut (withRevisionsCut); none for any request the SDK could serve.
 */
export function longRevisions (header: string | null | undefined, body: unknown): string[] {
  const long: string[] = []
  // The SDK reads the header without the whitespace around it (web Headers and its classifier strip it).
  const named = header?.trim()
  if (named !== undefined && quoted(named) !== named) long.push(named)
  const params = body !== null && typeof body === 'object' && !Array.isArray(body) ? (body as { params?: unknown }).params : undefined
  const meta = params !== null && typeof params === 'object' ? (params as { _meta?: unknown })._meta : undefined
  const claim = meta !== null && typeof meta === 'object' ? (meta as Record<string, unknown>)[PROTOCOL_VERSION_META_KEY] : undefined
  if (typeof claim === 'string' && quoted(claim) !== claim && claim !== named) long.push(claim)
  return long
}

/**
 * `response` with every quote of the `long` revisions cut to what `quoted` keeps (marked `...`),
 * when it is a refusal (4xx, JSON: one small body besides the quotes); as it is otherwise. The
 * quotes are found in the JSON text as JSON writes them (escaping does not depend on the context).
 */
export async function withRevisionsCut (response: Response, long: readonly string[]): Promise<Response> {
  if (long.length === 0 || response.status < 400 || response.headers.get('content-type')?.startsWith('application/json') !== true) return response
  let text = await response.text()
  // The longest first: a revision may hold the other.
  for (const revision of [...long].sort((a, b) => b.length - a.length)) {
    text = text.replaceAll(JSON.stringify(revision).slice(1, -1), JSON.stringify(quoted(revision)).slice(1, -1))
  }
  const headers = new Headers(response.headers)
  headers.delete('content-length')
  return new Response(text, { status: response.status, statusText: response.statusText, headers })
}
