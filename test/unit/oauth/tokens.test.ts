/**
 * The transports' side of the OAuth client (src/oauth/tokens.ts) over a memory store: a token goes
 * only to the origin of the server it was obtained for, not to a config pointing elsewhere; no token
 * means the request goes without one and the server's 401 becomes GW_OAUTH_REQUIRED naming the
 * route; a 403 that is not insufficient_scope passes through as the server's answer.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { KeyedMutex } from '../../../src/cluster/index.js'
import { silentLogger } from '../../../src/logger.js'
import { FlowProvider } from '../../../src/oauth/provider.js'
import { ConnectionRecords } from '../../../src/oauth/records.js'
import { MemoryOAuthStore } from '../../../src/oauth/store.js'
import { TokenKeeper } from '../../../src/oauth/tokens.js'
import { createSecretBox } from '../../../src/registry/secrets.js'

const SERVER = 'https://mcp.example/mcp'
const SCOPE = { kind: 'user', userId: 'alice' } as const
const AUTH = { type: 'oauth', grant: 'authorization_code' } as const

function keeper (): { keeper: TokenKeeper, records: ConnectionRecords, store: MemoryOAuthStore } {
  const made = createSecretBox({ key: Buffer.alloc(32, 7).toString('base64') })
  assert.ok(made.ok)
  const store = new MemoryOAuthStore()
  const records = new ConnectionRecords(store, made.box, Date.now)
  const tokens = new TokenKeeper({
    records,
    lock: new KeyedMutex(),
    fetchFor: () => globalThis.fetch,
    flow: (record) => new FlowProvider(record, { clientMetadata: { redirect_uris: [] }, now: Date.now }),
    logger: silentLogger,
    now: Date.now
  })
  return { keeper: tokens, records, store }
}

test('the token goes to the server\'s origin only, and only for the server URL it was obtained for', async () => {
  const { keeper: k, records, store } = keeper()
  await records.save(SCOPE, 'docs', {
    serverUrl: SERVER, status: 'connected', tokens: { access_token: 'tok-1', token_type: 'Bearer', expires_in: 3600, obtainedAt: Date.now() }, updatedAt: 0
  })
  const auth = k.authorization(SCOPE, 'docs', SERVER, AUTH)
  assert.equal(await auth.header(new URL(SERVER)), 'Bearer tok-1')
  assert.equal(await auth.header(new URL('https://mcp.example/other/path')), 'Bearer tok-1', 'same origin')
  assert.equal(await auth.header(new URL('https://evil.example/mcp')), undefined)
  assert.equal(await auth.header(new URL('http://mcp.example/mcp')), undefined, 'another scheme is another origin')
  // The same server id re-pointed elsewhere never gets the old URL's token.
  const moved = k.authorization(SCOPE, 'docs', 'https://elsewhere.example/mcp', AUTH)
  assert.equal(await moved.header(new URL('https://elsewhere.example/mcp')), undefined)
  // Sealed at rest.
  assert.doesNotMatch(await store.get(SCOPE, 'docs') ?? '', /tok-1/)
})

test('no token: the request goes without one, and the server\'s 401 asks the user, keeping its challenge', async () => {
  const { keeper: k, records } = keeper()
  const auth = k.authorization(SCOPE, 'docs', SERVER, AUTH)
  assert.equal(await auth.header(new URL(SERVER)), undefined)
  await assert.rejects(auth.refused(401, 'Bearer resource_metadata="https://mcp.example/.well-known/oauth-protected-resource/mcp", scope="read"', undefined, false), (err: Error & { code?: string, authorize?: string }) => {
    assert.equal(err.code, 'GW_OAUTH_REQUIRED')
    assert.equal(err.authorize, '/users/alice/mcp/servers/docs/oauth/authorize')
    return true
  })
  const record = await records.load(SCOPE, 'docs', true)
  assert.deepEqual(record?.challenge, { scope: 'read', resourceMetadataUrl: 'https://mcp.example/.well-known/oauth-protected-resource/mcp' })
  assert.equal(await auth.refused(403, 'Bearer error="invalid_token"', undefined, false), 'pass', 'a 403 that asks for no scope is the server\'s answer')
})
