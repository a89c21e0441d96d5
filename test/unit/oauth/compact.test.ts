/**
 * What a flow keeps of the OAuth documents a tenant's servers choose (src/oauth/compact.ts, through FlowProvider):
 * the fields it uses, bounded. A tenant's server of ~1 MiB documents made the gateway hold ~8 MiB per connected
 * server and ~4 MiB per pending authorization (an audit).
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { FlowProvider } from '../../../src/oauth/provider.js'
import type { ConnectionRecord } from '../../../src/oauth/provider.js'

const PAD = 'p'.repeat(100_000)

test('a 1 MB discovery and registration are kept as the few kilobytes a flow uses', () => {
  const record: ConnectionRecord = { serverUrl: 'https://mcp.example.com/mcp', status: 'authorization_required', updatedAt: 0 }
  const provider = new FlowProvider(record, { clientMetadata: { redirect_uris: ['https://gw.example.com/oauth/callback'] }, now: () => 0 })
  const padded = Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`x_${i}`, PAD]))
  provider.saveDiscoveryState({
    authorizationServerUrl: 'https://login.example.com',
    resourceMetadataUrl: 'https://mcp.example.com/.well-known/oauth-protected-resource',
    resourceMetadata: { resource: 'https://mcp.example.com/mcp', authorization_servers: ['https://login.example.com', ...Array(500).fill(PAD)], ...padded },
    authorizationServerMetadata: {
      issuer: 'https://login.example.com',
      authorization_endpoint: 'https://login.example.com/authorize',
      token_endpoint: 'https://login.example.com/token',
      response_types_supported: ['code'],
      code_challenge_methods_supported: ['S256'],
      scopes_supported: Array.from({ length: 10_000 }, (_, i) => `scope${i}`),
      ...padded
    }
  } as never)
  provider.saveClientInformation({ client_id: 'c-1', client_secret: 's-1', redirect_uris: ['https://gw.example.com/oauth/callback'], contacts: Array(10).fill(PAD), ...padded } as never)
  const kept = JSON.stringify(record)
  assert.ok(kept.length < 16_384, `${kept.length} bytes kept`)
  assert.equal(record.discovery?.authorizationServerMetadata?.token_endpoint, 'https://login.example.com/token')
  assert.deepEqual(record.discovery?.resourceMetadata?.authorization_servers, ['https://login.example.com'], 'a string too long is left out, never cut')
  assert.equal(record.discovery?.authorizationServerMetadata?.scopes_supported?.length, 64)
  assert.deepEqual(record.client, { client_id: 'c-1', client_secret: 's-1', redirect_uris: ['https://gw.example.com/oauth/callback'] })
})
