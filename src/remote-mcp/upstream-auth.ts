/**
 * What an HTTP transport to an OAuth-protected MCP server (SPEC 16) asks of the OAuth client:
 * the Authorization header of each request, and what a refusal (401, or 403 insufficient_scope)
 * means. The transports call it (lean-http-transport.ts directly, the SDK's through
 * authorizedFetch); service.ts implements it per tenant and server.
 */
import type { FetchLike } from '@modelcontextprotocol/client'
import { UpstreamError } from './errors.js'

export interface UpstreamAuthorization {
  /**
   * The Authorization header value for a request to `url` now (refreshed first when the token is
   * about to expire), or undefined for another origin than the server's: a token goes only where
   * it was issued for. Throws OAuthRequiredError when there is no usable token.
   */
  header: (url: URL) => Promise<string | undefined>
  /**
   * The server refused a request sent with `sent` (the header value, or undefined): `retry` once
   * with a new header (refreshed, or another instance's newer token), `pass` (not an OAuth
   * refusal: the answer goes on as it is), or a throw of OAuthRequiredError when the user must
   * authorize (again, or for more scope). `again` is true for the refusal of the retry.
   */
  refused: (status: number, wwwAuthenticate: string | undefined, sent: string | undefined, again: boolean) => Promise<'retry' | 'pass'>
}

/**
 * The server needs the tenant's OAuth authorization: none is stored, its refresh failed, or the
 * server asks for more scope. An answer to relay to the user (connect the service), not a
 * failure of the server: the circuit breaker does not count it.
 */
export class OAuthRequiredError extends UpstreamError {
  /** The route that starts the authorization (relative to the gateway), for listings and messages. */
  readonly authorize: string
  constructor (message: string, authorize: string) {
    super('GW_OAUTH_REQUIRED', message)
    this.name = 'OAuthRequiredError'
    this.authorize = authorize
  }
}

/** The OAuthRequiredError in `err` or its causes (the SDK wraps what a transport throws), else undefined. */
export function oauthRequiredIn (err: unknown): OAuthRequiredError | undefined {
  let current: unknown = err
  for (let depth = 0; depth < 5 && current !== undefined && current !== null; depth++) {
    if (current instanceof OAuthRequiredError) return current
    current = (current as { cause?: unknown }).cause
  }
  return undefined
}

/** A fetch (the SDK's transports) that sends `auth`'s header and retries once after a refusal it can fix. */
export function authorizedFetch (base: FetchLike, auth: UpstreamAuthorization): FetchLike {
  return async (input, init) => {
    const url = new URL(input instanceof Request ? input.url : String(input))
    const send = async (): Promise<{ response: Response, sent: string | undefined }> => {
      const sent = await auth.header(url)
      const headers = new Headers(init?.headers)
      if (sent !== undefined) headers.set('authorization', sent)
      else headers.delete('authorization')
      return { response: await base(input, { ...init, headers }), sent }
    }
    let { response, sent } = await send()
    for (const again of [false, true]) {
      if (response.status !== 401 && response.status !== 403) break
      const verdict = await auth.refused(response.status, response.headers.get('www-authenticate') ?? undefined, sent, again)
      if (verdict === 'pass') break
      await response.body?.cancel().catch(() => {})
      ;({ response, sent } = await send())
    }
    return response
  }
}
