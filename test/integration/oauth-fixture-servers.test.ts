// The OAuth fixtures (scripts/lib/oauth-fixtures) against the SDK's own OAuth client: discovery from
// the 401, dynamic registration, PKCE, resource indicators, `iss`, refresh with rotation, scope
// step-up, client_credentials, revocation. It proves the fixtures are real before the gateway's
// tests rely on them.
import assert from 'node:assert/strict'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, test } from 'node:test'
import { Client, StreamableHTTPClientTransport, UnauthorizedError } from '@modelcontextprotocol/client'
import type {
  OAuthClientMetadata, OAuthClientProvider, OAuthDiscoveryState, StoredOAuthClientInformation, StoredOAuthTokens
} from '@modelcontextprotocol/client'
import { SignJWT, decodeJwt, generateKeyPair } from 'jose'
import { browser, startAuthorizationServer, startProtectedMcpServer } from '../../scripts/lib/oauth-fixtures/index.js'
import type { AuthorizationServer, ProtectedMcpServer } from '../../scripts/lib/oauth-fixtures/index.js'

const SERVICE = { id: 'service-basic', secret: 'service-basic-secret' }
const SERVICE_POST = { id: 'service-post', secret: 'service-post-secret' }
const SERVICE_CLIENT = { grant_types: ['client_credentials'], redirect_uris: [], response_types: [] }

let as: AuthorizationServer
let mcp: ProtectedMcpServer
// Stands in for the gateway's /oauth/callback: records the query it got, answers 302 like the gateway would.
const callbacks: URLSearchParams[] = []
const gateway = createServer((req, res) => {
  callbacks.push(new URL(req.url ?? '/', 'http://127.0.0.1').searchParams)
  res.writeHead(302, { location: '/connected' }).end()
})
let redirectUri = ''

before(async () => {
  as = await startAuthorizationServer({
    clients: [
      { ...SERVICE_CLIENT, client_id: SERVICE.id, client_secret: SERVICE.secret, token_endpoint_auth_method: 'client_secret_basic' },
      { ...SERVICE_CLIENT, client_id: SERVICE_POST.id, client_secret: SERVICE_POST.secret, token_endpoint_auth_method: 'client_secret_post' }
    ]
  })
  mcp = await startProtectedMcpServer({ issuer: as.issuer })
  await new Promise<void>((resolve) => gateway.listen(0, '127.0.0.1', resolve))
  redirectUri = `http://127.0.0.1:${(gateway.address() as AddressInfo).port}/oauth/callback`
})

after(async () => {
  await mcp.close()
  await as.close()
  gateway.closeAllConnections()
  await new Promise<void>((resolve) => gateway.close(() => resolve()))
})

/** An in-memory OAuthClientProvider: a public client registered dynamically, as the gateway would be. */
class MemoryProvider implements OAuthClientProvider {
  info: StoredOAuthClientInformation | undefined
  saved: StoredOAuthTokens | undefined
  verifier = ''
  authorizationUrl: URL | undefined
  discovery: OAuthDiscoveryState | undefined
  get redirectUrl (): string { return redirectUri }
  get clientMetadata (): OAuthClientMetadata {
    return {
      client_name: 'fixture self-test',
      redirect_uris: [redirectUri],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none'
    }
  }

  clientInformation (): StoredOAuthClientInformation | undefined { return this.info }
  saveClientInformation (info: StoredOAuthClientInformation): void { this.info = info }
  tokens (): StoredOAuthTokens | undefined { return this.saved }
  saveTokens (tokens: StoredOAuthTokens): void { this.saved = tokens }
  redirectToAuthorization (url: URL): void { this.authorizationUrl = url }
  saveCodeVerifier (verifier: string): void { this.verifier = verifier }
  codeVerifier (): string { return this.verifier }
  saveDiscoveryState (state: OAuthDiscoveryState): void { this.discovery = state }
  discoveryState (): OAuthDiscoveryState | undefined { return this.discovery }
}

async function connect (provider: MemoryProvider, server = mcp): Promise<Client> {
  const client = new Client({ name: 'oauth-fixtures-test', version: '1.0.0' })
  await client.connect(new StreamableHTTPClientTransport(new URL(server.url), { authProvider: provider }))
  return client
}

/** Connects, and when the server asks for authorization, signs `account` in and connects again. */
async function authorize (provider: MemoryProvider, account: string, server = mcp): Promise<Client> {
  const transport = new StreamableHTTPClientTransport(new URL(server.url), { authProvider: provider })
  const client = new Client({ name: 'oauth-fixtures-test', version: '1.0.0' })
  await assert.rejects(client.connect(transport), UnauthorizedError)
  assert.ok(provider.authorizationUrl !== undefined)
  const callback = new URL(await browser(provider.authorizationUrl, { account }))
  await transport.finishAuth(callback.searchParams)
  return await connect(provider, server)
}

async function call (client: Client, name: string): Promise<string> {
  const result = await client.callTool({ name, arguments: {} })
  const first = (result.content as Array<{ type: string, text?: string }>)[0]
  assert.equal(result.isError ?? false, false)
  return first?.text ?? ''
}

test('discovery from the 401, registration, PKCE and resource, code via the browser: the call carries the account', async () => {
  const before = as.stats()
  const provider = new MemoryProvider()
  const transport = new StreamableHTTPClientTransport(new URL(mcp.url), { authProvider: provider })
  const first = new Client({ name: 'oauth-fixtures-test', version: '1.0.0' })
  await assert.rejects(first.connect(transport), UnauthorizedError)
  assert.equal(as.stats().registrations, before.registrations + 1)
  const url = provider.authorizationUrl
  assert.ok(url !== undefined)
  assert.equal(url.origin, as.issuer)
  assert.equal(url.searchParams.get('code_challenge_method'), 'S256')
  assert.equal(url.searchParams.get('resource'), mcp.url)
  // The SDK adds offline_access because the server lists it.
  assert.deepEqual(url.searchParams.get('scope')?.split(' ').sort(), ['mcp:read', 'offline_access'])

  const callback = new URL(await browser(url, { account: 'alice' }))
  assert.equal(callback.origin + callback.pathname, redirectUri)
  assert.equal(callback.searchParams.get('iss'), as.issuer)
  assert.equal(callback.searchParams.get('state'), url.searchParams.get('state'))
  assert.ok(callback.searchParams.get('code'))
  await transport.finishAuth(callback.searchParams)
  assert.equal(as.stats().grants.authorization_code, before.grants.authorization_code + 1)

  const tokens = provider.saved
  assert.ok(tokens?.refresh_token, 'a refresh token without offline_access')
  const claims = decodeJwt(tokens.access_token)
  assert.equal(claims.iss, as.issuer)
  assert.equal(claims.aud, mcp.url)
  assert.equal(claims.sub, 'alice')

  const client = await connect(provider)
  assert.deepEqual(JSON.parse(await call(client, 'whoami')), { sub: 'alice', scopes: ['mcp:read'], aud: mcp.url })
  assert.equal(await call(client, 'echo').catch(() => 'invalid'), 'invalid', 'echo needs its text argument')
  const seen = mcp.seen.requests.filter((r) => r.sub === 'alice')
  assert.ok(seen.length > 0)
  assert.ok(seen.every((r) => r.aud === mcp.url && r.status === 200 && !r.foreign))
  await client.close()
})

test('a code is redeemed once, and the browser can complete the flow at the client in one call', async () => {
  const provider = new MemoryProvider()
  const client = new Client({ name: 'oauth-fixtures-test', version: '1.0.0' })
  await assert.rejects(client.connect(new StreamableHTTPClientTransport(new URL(mcp.url), { authProvider: provider })), UnauthorizedError)
  assert.ok(provider.authorizationUrl !== undefined)
  const response = await browser(provider.authorizationUrl, { account: 'bob', follow: true })
  assert.equal(response.status, 302)
  assert.equal(response.headers.get('location'), '/connected')
  const got = callbacks.at(-1)
  assert.equal(got?.get('iss'), as.issuer)
  assert.equal(got.get('state'), provider.authorizationUrl.searchParams.get('state'))

  const exchange = async (): Promise<Response> => await fetch(`${as.issuer}/token`, {
    method: 'POST',
    body: new URLSearchParams({
      grant_type: 'authorization_code',
      code: got.get('code') ?? '',
      redirect_uri: redirectUri,
      code_verifier: provider.verifier,
      client_id: provider.info?.client_id ?? '',
      resource: mcp.url
    })
  })
  const ok = await exchange()
  assert.equal(ok.status, 200)
  assert.equal(decodeJwt(((await ok.json()) as { access_token: string }).access_token).sub, 'bob')
  const again = await exchange()
  assert.equal(again.status, 400)
  assert.equal(((await again.json()) as { error: string }).error, 'invalid_grant')
})

test('PKCE is required: an authorization request without code_challenge is refused', async () => {
  const provider = new MemoryProvider()
  const client = new Client({ name: 'oauth-fixtures-test', version: '1.0.0' })
  await assert.rejects(client.connect(new StreamableHTTPClientTransport(new URL(mcp.url), { authProvider: provider })), UnauthorizedError)
  const url = new URL(provider.authorizationUrl ?? '')
  url.searchParams.delete('code_challenge')
  url.searchParams.delete('code_challenge_method')
  // oidc-provider reports it to the redirect URI, as RFC 6749 4.1.2.1 says.
  const callback = new URL(await browser(url, { account: 'alice' }))
  assert.equal(callback.searchParams.get('error'), 'invalid_request')
  assert.match(callback.searchParams.get('error_description') ?? '', /PKCE/)
})

test('admin_action answers 403 insufficient_scope until a token with mcp:admin is obtained (step-up)', async () => {
  const provider = new MemoryProvider()
  const client = await authorize(provider, 'carol')
  const forbidden = mcp.seen.forbidden
  provider.authorizationUrl = undefined
  await assert.rejects(client.callTool({ name: 'admin_action', arguments: {} }), UnauthorizedError)
  assert.equal(mcp.seen.forbidden, forbidden + 1)
  assert.deepEqual(mcp.seen.requests.at(-1), {
    method: 'tools/call', tool: 'admin_action', sub: 'carol', aud: mcp.url, scopes: ['mcp:read'], status: 403, foreign: false
  })
  const stepUp = provider.authorizationUrl as URL | undefined
  assert.ok(stepUp !== undefined)
  assert.deepEqual(stepUp.searchParams.get('scope')?.split(' ').sort(), ['mcp:admin', 'mcp:read', 'offline_access'])
  await client.close()

  const transport = new StreamableHTTPClientTransport(new URL(mcp.url), { authProvider: provider })
  await transport.finishAuth(new URL(await browser(stepUp, { account: 'carol' })).searchParams)
  const admin = await connect(provider)
  assert.equal(await call(admin, 'admin_action'), 'admin done by carol')
  // The access token carries the resource's scopes only.
  assert.deepEqual(JSON.parse(await call(admin, 'whoami')).scopes.sort(), ['mcp:admin', 'mcp:read'])
  await admin.close()

  // The raw challenge, as the gateway's client will parse it.
  const raw = await fetch(mcp.url, {
    method: 'POST',
    headers: { authorization: `Bearer ${await plainToken('dave')}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'admin_action', arguments: {} } })
  })
  assert.equal(raw.status, 403)
  assert.equal(raw.headers.get('www-authenticate'),
    `Bearer error="insufficient_scope", scope="mcp:read mcp:admin", resource_metadata="${mcp.resourceMetadataUrl}"`)
})

/** A mcp:read token for `account` through the whole code flow, without the SDK. */
async function plainToken (account: string): Promise<string> {
  const provider = new MemoryProvider()
  const client = await authorize(provider, account)
  await client.close()
  return provider.saved?.access_token ?? ''
}

test('after the access token expires the SDK refreshes it; the refresh token rotates and a replay is refused', async () => {
  as.setAccessTokenTtl(2)
  const provider = new MemoryProvider()
  const client = await authorize(provider, 'erin')
  const first = provider.saved
  assert.ok(first?.refresh_token)
  const exp = decodeJwt(first.access_token).exp ?? 0
  const refreshes = as.stats().grants.refresh_token
  const expired = mcp.seen.expiredTokens
  // Waits for the expiry the token states (seconds), not for a guessed duration.
  while (Date.now() / 1000 < exp + 0.1) await new Promise((resolve) => setTimeout(resolve, 100))
  as.setAccessTokenTtl(300)

  assert.equal(JSON.parse(await call(client, 'whoami')).sub, 'erin')
  assert.equal(mcp.seen.expiredTokens, expired + 1)
  assert.equal(as.stats().grants.refresh_token, refreshes + 1)
  const second = provider.saved
  assert.ok(second?.refresh_token)
  assert.notEqual(second.refresh_token, first.refresh_token)
  assert.notEqual(second.access_token, first.access_token)
  await client.close()

  const replay = await fetch(`${as.issuer}/token`, {
    method: 'POST',
    body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: first.refresh_token, client_id: provider.info?.client_id ?? '' })
  })
  assert.equal(replay.status, 400)
  assert.equal(((await replay.json()) as { error: string }).error, 'invalid_grant')
  // Reuse detection: the replay revoked the grant, so the token it rotated to is dead too.
  const rotated = await fetch(`${as.issuer}/token`, {
    method: 'POST',
    body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: second.refresh_token, client_id: provider.info?.client_id ?? '' })
  })
  assert.equal(rotated.status, 400)
})

test('forgetGrants: the next refresh is refused, as when the user revoked the app at the server', async () => {
  const provider = new MemoryProvider()
  await (await authorize(provider, 'grace')).close()
  const refresh = async (): Promise<Response> => await fetch(`${as.issuer}/token`, {
    method: 'POST',
    body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: provider.saved?.refresh_token ?? '', client_id: provider.info?.client_id ?? '' })
  })
  const ok = await refresh()
  assert.equal(ok.status, 200)
  provider.saved = (await ok.json()) as StoredOAuthTokens
  as.forgetGrants()
  const refused = await refresh()
  assert.equal(refused.status, 400)
  assert.equal(((await refused.json()) as { error: string }).error, 'invalid_grant')
})

test('revocation of a refresh token is counted and the token no longer refreshes', async () => {
  const provider = new MemoryProvider()
  await (await authorize(provider, 'frank')).close()
  const refreshToken = provider.saved?.refresh_token ?? ''
  const clientId = provider.info?.client_id ?? ''
  const revocations = as.stats().revocations
  const revoked = await fetch(`${as.issuer}/token/revocation`, {
    method: 'POST',
    body: new URLSearchParams({ token: refreshToken, token_type_hint: 'refresh_token', client_id: clientId })
  })
  assert.equal(revoked.status, 200)
  assert.equal(as.stats().revocations, revocations + 1)
  const refresh = await fetch(`${as.issuer}/token`, {
    method: 'POST',
    body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: refreshToken, client_id: clientId })
  })
  assert.equal(refresh.status, 400)
})

test('client_credentials for pre-registered confidential clients (basic and post) gives a JWT for the resource', async () => {
  const grants = as.stats().grants.client_credentials
  const basic = await fetch(`${as.issuer}/token`, {
    method: 'POST',
    headers: { authorization: `Basic ${Buffer.from(`${SERVICE.id}:${SERVICE.secret}`).toString('base64')}` },
    body: new URLSearchParams({ grant_type: 'client_credentials', resource: mcp.url, scope: 'mcp:read' })
  })
  assert.equal(basic.status, 200)
  const post = await fetch(`${as.issuer}/token`, {
    method: 'POST',
    body: new URLSearchParams({
      grant_type: 'client_credentials', resource: mcp.url, scope: 'mcp:read', client_id: SERVICE_POST.id, client_secret: SERVICE_POST.secret
    })
  })
  assert.equal(post.status, 200)
  const wrongSecret = await fetch(`${as.issuer}/token`, {
    method: 'POST',
    body: new URLSearchParams({ grant_type: 'client_credentials', resource: mcp.url, client_id: SERVICE_POST.id, client_secret: 'wrong' })
  })
  assert.equal(wrongSecret.status, 401)
  assert.equal(as.stats().grants.client_credentials, grants + 2)

  const { access_token: token } = (await basic.json()) as { access_token: string }
  assert.equal(decodeJwt(token).aud, mcp.url)
  const client = new Client({ name: 'oauth-fixtures-test', version: '1.0.0' })
  await client.connect(new StreamableHTTPClientTransport(new URL(mcp.url), { requestInit: { headers: { authorization: `Bearer ${token}` } } }))
  assert.equal(JSON.parse(await call(client, 'whoami')).sub, SERVICE.id)
  await client.close()
})

test('the protected server: metadata, the 401 challenge, and a token of another issuer is foreign', async () => {
  const metadata = await (await fetch(mcp.resourceMetadataUrl)).json()
  assert.deepEqual(metadata, {
    resource: mcp.url, authorization_servers: [as.issuer], scopes_supported: ['mcp:read', 'mcp:admin'], bearer_methods_supported: ['header']
  })

  const rpc = { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }
  const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }
  const anonymous = await fetch(mcp.url, { method: 'POST', headers, body: JSON.stringify(rpc) })
  assert.equal(anonymous.status, 401)
  assert.equal(anonymous.headers.get('www-authenticate'), `Bearer resource_metadata="${mcp.resourceMetadataUrl}", scope="mcp:read"`)

  // Same iss and aud, signed by a key that is not the issuer's.
  const { privateKey } = await generateKeyPair('RS256')
  const forged = await new SignJWT({ scope: 'mcp:read mcp:admin' })
    .setProtectedHeader({ alg: 'RS256', kid: 'fixture-rs256' })
    .setIssuer(as.issuer).setAudience(mcp.url).setSubject('mallory').setIssuedAt().setExpirationTime('5m')
    .sign(privateKey)
  const foreign = mcp.seen.foreignTokens
  const res = await fetch(mcp.url, { method: 'POST', headers: { ...headers, authorization: `Bearer ${forged}` }, body: JSON.stringify(rpc) })
  assert.equal(res.status, 401)
  assert.match(res.headers.get('www-authenticate') ?? '', /^Bearer error="invalid_token", resource_metadata=/)
  assert.equal(mcp.seen.foreignTokens, foreign + 1)
  assert.equal(mcp.seen.requests.at(-1)?.sub, undefined)
  assert.ok(!JSON.stringify(mcp.seen).includes(forged), 'seen never holds a token')
})

test('without resource_metadata in the challenge, the SDK finds the metadata at the well-known path', async (t) => {
  const quiet = await startProtectedMcpServer({ issuer: as.issuer, resourceMetadataInHeader: false, marker: 'quiet' })
  t.after(async () => { await quiet.close() })
  const anonymous = await fetch(quiet.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })
  assert.equal(anonymous.headers.get('www-authenticate'), 'Bearer scope="mcp:read"')

  const provider = new MemoryProvider()
  const client = await authorize(provider, 'heidi', quiet)
  assert.equal(provider.authorizationUrl?.searchParams.get('resource'), quiet.url)
  assert.ok(quiet.seen.metadataRequests > 0)
  assert.equal(JSON.parse(await call(client, 'whoami')).sub, 'heidi')
  assert.equal(quiet.seen.requests.at(-1)?.sub, 'heidi')
  await client.close()
})

test('nothing failed inside the authorization server', () => {
  assert.equal(as.stats().serverErrors, 0)
})
