import { test } from 'node:test'
import assert from 'node:assert/strict'
import { buildTestApp } from '../../helpers/app.js'
import { startTestIssuer } from '../../helpers/oauth-issuer.js'
import { StartupError } from '../../../src/errors.js'

// RFC 9728 protected resource metadata of the gateway's incoming OAuth (README "Incoming OAuth").

const PUBLIC_URL = 'https://gateway.example'

test('GET /.well-known/oauth-protected-resource[/mcp]: public, the resource, the issuer, header bearer, the role scopes', async (t) => {
  const issuer = await startTestIssuer()
  t.after(async () => await issuer.close())
  const app = await buildTestApp(t, {
    env: {
      API_KEYS: 'admin-key-0123456789abcdef:*',
      PUBLIC_URL: `${PUBLIC_URL}/`,
      OAUTH_ISSUER: issuer.issuer,
      OAUTH_ADMIN_SCOPE: 'gw:admin',
      OAUTH_APPROVER_SCOPE: 'gw:approve'
    }
  })
  const mcp = await app.inject({ method: 'GET', url: '/.well-known/oauth-protected-resource/mcp' })
  assert.equal(mcp.statusCode, 200, mcp.body)
  assert.match(String(mcp.headers['content-type']), /^application\/json/)
  assert.deepEqual(mcp.json(), {
    resource: `${PUBLIC_URL}/mcp`,
    authorization_servers: [issuer.issuer],
    bearer_methods_supported: ['header'],
    scopes_supported: ['gw:admin', 'gw:approve'],
    resource_name: 'tool-gateway'
  })
  const root = await app.inject({ method: 'GET', url: '/.well-known/oauth-protected-resource' })
  assert.equal(root.statusCode, 200, root.body)
  assert.equal(root.json().resource, PUBLIC_URL)
  assert.deepEqual(root.json().authorization_servers, [issuer.issuer])
  // Serving the documents asks nothing of the issuer.
  assert.equal(issuer.hits.size, 0)
  // The 401 of a protected route names the /mcp document.
  const refused = await app.inject({ method: 'GET', url: '/tools' })
  assert.equal(refused.statusCode, 401)
  assert.equal(refused.headers['www-authenticate'], `Bearer realm="tool-gateway", resource_metadata="${PUBLIC_URL}/.well-known/oauth-protected-resource/mcp"`)
})

test('no scopes configured: scopes_supported is left out', async (t) => {
  const app = await buildTestApp(t, { env: { PUBLIC_URL, OAUTH_ISSUER: 'https://issuer.example' } })
  const res = await app.inject({ method: 'GET', url: '/.well-known/oauth-protected-resource/mcp' })
  assert.equal(res.statusCode, 200)
  assert.equal('scopes_supported' in res.json(), false)
})

test('without OAUTH_ISSUER (or without PUBLIC_URL) the documents are 404; API keys alone send no resource_metadata', async (t) => {
  const keyed = await buildTestApp(t, { env: { API_KEYS: 'admin-key-0123456789abcdef:*', PUBLIC_URL } })
  for (const url of ['/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/mcp']) {
    const res = await keyed.inject({ method: 'GET', url })
    assert.equal(res.statusCode, 404)
    assert.equal(res.json().code, 'GW_NOT_FOUND')
  }
  assert.equal((await keyed.inject({ method: 'GET', url: '/tools' })).headers['www-authenticate'], 'Bearer realm="tool-gateway"')

  // OAUTH_AUDIENCE instead of PUBLIC_URL: tokens can be checked, but there is no resource URL to publish.
  const noUrl = await buildTestApp(t, { env: { OAUTH_ISSUER: 'https://issuer.example', OAUTH_AUDIENCE: 'urn:gw' } })
  assert.equal(noUrl.authMode, 'keyed')
  assert.equal((await noUrl.inject({ method: 'GET', url: '/.well-known/oauth-protected-resource/mcp' })).statusCode, 404)
  assert.equal((await noUrl.inject({ method: 'GET', url: '/tools' })).headers['www-authenticate'], 'Bearer realm="tool-gateway"')
})

test('OAUTH_ISSUER without PUBLIC_URL and OAUTH_AUDIENCE stops start-up, naming both', async (t) => {
  await assert.rejects(buildTestApp(t, { env: { OAUTH_ISSUER: 'https://issuer.example' } }), (err: Error) => {
    assert.ok(err instanceof StartupError, String(err))
    assert.match(err.message, /OAUTH_ISSUER.*PUBLIC_URL.*OAUTH_AUDIENCE/)
    return true
  })
})
