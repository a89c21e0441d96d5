/**
 * The control client's OAuth for the suite's `auth/*` scenarios: an `OAuthClientProvider` held in
 * memory (one scenario, one process) and a fetch that answers the MCP server's 401 (and 403
 * insufficient_scope) with the SDK's `auth()`, the way an application in front of a person would.
 * The suite's authorization server approves at once: its authorization endpoint redirects with the
 * code, so the "browser" is one fetch that reads the code (and `iss`) from the Location.
 */
import { auth, extractWWWAuthenticateParams, UnauthorizedError } from '@modelcontextprotocol/client'
import type {
  FetchLike,
  OAuthClientMetadata,
  OAuthClientProvider,
  OAuthDiscoveryState,
  StoredOAuthClientInformation,
  StoredOAuthTokens
} from '@modelcontextprotocol/client'

/**
 * The client ID metadata document URL the suite expects (auth/basic-cimd: its authorization server
 * accepts this client_id without fetching it). Used only where the server advertises
 * client_id_metadata_document_supported; otherwise the SDK registers dynamically.
 */
const CLIENT_METADATA_URL = 'https://conformance-test.local/client-metadata.json'
// Never opened: the suite's authorization server answers the authorization request with a redirect
// to it, and the code is read from that Location instead of a listener.
const REDIRECT_URL = 'http://localhost:3000/callback'
/**
 * Authorizations (new or refreshed) one run may start on the server's challenges: auth/scope-retry-limit
 * keeps answering 403 insufficient_scope and checks that the client stops instead of looping.
 */
const MAX_AUTHORIZATIONS = 3

/** What the suite's authorization endpoint sent back to the redirect URI. */
interface Callback { code: string, iss?: string }

class MemoryOAuthProvider implements OAuthClientProvider {
  readonly clientMetadataUrl = CLIENT_METADATA_URL
  readonly clientMetadata: OAuthClientMetadata = {
    client_name: 'tool-gateway-conformance-client',
    redirect_uris: [REDIRECT_URL],
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code']
  }

  callback: Callback | undefined
  #client: StoredOAuthClientInformation | undefined
  #tokens: StoredOAuthTokens | undefined
  #verifier: string | undefined
  #discovery: OAuthDiscoveryState | undefined

  constructor (preRegistered?: { client_id: string, client_secret?: string }) {
    // A pre-registered client (auth/pre-registration) is the one the suite's server knows; the SDK stamps its issuer on it.
    if (preRegistered !== undefined) this.#client = { ...preRegistered, redirect_uris: [REDIRECT_URL] }
  }

  get redirectUrl (): string { return REDIRECT_URL }
  clientInformation (): StoredOAuthClientInformation | undefined { return this.#client }
  saveClientInformation (info: StoredOAuthClientInformation): void { this.#client = info }
  tokens (): StoredOAuthTokens | undefined { return this.#tokens }
  saveTokens (tokens: StoredOAuthTokens): void { this.#tokens = tokens }
  saveCodeVerifier (verifier: string): void { this.#verifier = verifier }
  // Kept between the two legs of one authorization: the SDK checks that the code goes back to the
  // authorization server it was obtained from (a changed one in between is a mix-up, SEP-2352).
  saveDiscoveryState (state: OAuthDiscoveryState): void { this.#discovery = state }
  discoveryState (): OAuthDiscoveryState | undefined { return this.#discovery }

  codeVerifier (): string {
    if (this.#verifier === undefined) throw new Error('no code verifier: no authorization was started')
    return this.#verifier
  }

  invalidateCredentials (scope: 'all' | 'client' | 'tokens' | 'verifier' | 'discovery'): void {
    if (scope === 'all' || scope === 'client') this.#client = undefined
    if (scope === 'all' || scope === 'tokens') this.#tokens = undefined
    if (scope === 'all' || scope === 'verifier') this.#verifier = undefined
    if (scope === 'all' || scope === 'discovery') this.#discovery = undefined
  }

  /** The person's browser: the suite's authorization endpoint redirects at once, with the code (or an error). */
  async redirectToAuthorization (url: URL): Promise<void> {
    this.callback = undefined
    const res = await fetch(url, { redirect: 'manual' })
    await res.body?.cancel()
    const location = res.headers.get('location')
    if (location === null) throw new Error(`the authorization endpoint did not redirect (HTTP ${res.status})`)
    const back = new URL(location, url).searchParams
    const code = back.get('code')
    if (code === null) throw new Error(`the authorization was refused: ${back.get('error') ?? 'no code in the redirect'}`)
    const iss = back.get('iss')
    this.callback = { code, ...(iss !== null ? { iss } : {}) }
  }
}

/** SEP-2350: a new authorization asks for what was granted plus what the server asks for now, not only the latter. */
function unionScopes (granted: string | undefined, challenged: string | undefined): string | undefined {
  const all = new Set([...(granted ?? '').split(' '), ...(challenged ?? '').split(' ')].filter((s) => s !== ''))
  return all.size > 0 ? [...all].join(' ') : undefined
}

/**
 * A fetch for the MCP transport that carries the provider's access token and, on the server's
 * refusal, authorizes (at most MAX_AUTHORIZATIONS times in all) and sends the request once more.
 * The OAuth requests themselves go through the plain fetch.
 */
export function oauthFetch (serverUrl: string, preRegistered?: { client_id: string, client_secret?: string }): FetchLike {
  const provider = new MemoryOAuthProvider(preRegistered)
  let authorizations = 0
  const send = async (input: string | URL, init?: RequestInit): Promise<Response> => {
    const headers = new Headers(init?.headers)
    const tokens = provider.tokens()
    if (tokens !== undefined) headers.set('authorization', `Bearer ${tokens.access_token}`)
    return await fetch(input, { ...init, headers })
  }
  const authorize = async (refusal: Response): Promise<void> => {
    if (++authorizations > MAX_AUTHORIZATIONS) throw new UnauthorizedError(`still refused (HTTP ${refusal.status}) after ${MAX_AUTHORIZATIONS} authorizations`)
    const challenge = extractWWWAuthenticateParams(refusal)
    const stepUp = refusal.status === 403
    const scope = unionScopes(provider.tokens()?.scope, challenge.scope)
    // A new challenge is discovered afresh (the server may have moved to another authorization
    // server, auth/authorization-server-migration); the saved state serves the callback leg below.
    provider.invalidateCredentials('discovery')
    const options = {
      serverUrl,
      fetchFn: fetch,
      ...(challenge.resourceMetadataUrl !== undefined ? { resourceMetadataUrl: challenge.resourceMetadataUrl } : {}),
      ...(scope !== undefined ? { scope } : {}),
      // A refresh cannot widen the scope (RFC 6749 section 6): a step-up is a new authorization.
      ...(stepUp ? { forceReauthorization: true } : {})
    }
    if (await auth(provider, options) === 'AUTHORIZED') return
    const callback = provider.callback
    if (callback === undefined) throw new UnauthorizedError('the authorization left no code')
    const done = await auth(provider, { ...options, authorizationCode: callback.code, ...(callback.iss !== undefined ? { iss: callback.iss } : {}) })
    if (done !== 'AUTHORIZED') throw new UnauthorizedError(`the code exchange ended in ${done}`)
  }
  return async (input, init) => {
    let res = await send(input, init)
    // 403 only for insufficient_scope: any other 403 is the server's refusal, not a question of tokens.
    while (res.status === 401 || (res.status === 403 && extractWWWAuthenticateParams(res).error === 'insufficient_scope')) {
      await res.body?.cancel()
      await authorize(res)
      res = await send(input, init)
    }
    return res
  }
}
