import { test } from 'node:test'
import assert from 'node:assert/strict'
import type { TestContext } from 'node:test'
import { buildTestApp } from '../helpers/app.js'
import { startAuthorizationServer } from '../../scripts/lib/oauth-fixtures/index.js'

// Incoming OAuth against a real authorization server implementation (oidc-provider through the
// OAuth fixtures): its discovery (OpenID only, no RFC 8414 document), its JWKS and the JWT access
// tokens it issues for a resource indicator (RFC 8707) by client credentials, as an MCP client's
// machine user would get them. The hand-made issuer of test/helpers/oauth-issuer.ts covers the refusals.

const PUBLIC_URL = 'https://gateway.example'
const SECRET = 'client-secret-0123456789abcdef'

async function startProvider (t: TestContext): Promise<{ issuer: string, token: (client: string, resource: string, scope: string) => Promise<string> }> {
  const client = (id: string): { client_id: string } & Record<string, unknown> => ({
    client_id: id,
    client_secret: SECRET,
    grant_types: ['client_credentials'],
    redirect_uris: [],
    response_types: [],
    token_endpoint_auth_method: 'client_secret_basic'
  })
  const as = await startAuthorizationServer({ scopes: ['gateway:admin', 'gateway:approve', 'tools'], clients: [client('acme'), client('ops-robot')] })
  t.after(async () => await as.close())
  const token = async (id: string, resource: string, scope: string): Promise<string> => {
    const res = await fetch(`${as.issuer}/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Basic ${Buffer.from(`${id}:${SECRET}`).toString('base64')}` },
      body: new URLSearchParams({ grant_type: 'client_credentials', resource, scope })
    })
    const body = await res.json() as { access_token?: string }
    assert.equal(res.status, 200, JSON.stringify(body))
    assert.ok(body.access_token !== undefined)
    return body.access_token
  }
  return { issuer: as.issuer, token }
}

test('oidc-provider\'s JWT access tokens: discovered through OpenID discovery, tenant from sub, roles from scope, audience checked', async (t) => {
  const op = await startProvider(t)
  const app = await buildTestApp(t, {
    env: { PUBLIC_URL, OAUTH_ISSUER: op.issuer, OAUTH_ADMIN_SCOPE: 'gateway:admin', OAUTH_APPROVER_SCOPE: 'gateway:approve' }
  })
  const who = async (token: string): Promise<{ status: number, body: any, challenge: string }> => {
    const res = await app.inject({ method: 'GET', url: '/whoami', headers: { authorization: `Bearer ${token}` } })
    return { status: res.statusCode, body: res.json(), challenge: String(res.headers['www-authenticate']) }
  }

  const tenant = await who(await op.token('acme', `${PUBLIC_URL}/mcp`, 'tools'))
  assert.equal(tenant.status, 200, JSON.stringify(tenant.body))
  assert.deepEqual([tenant.body.role, tenant.body.userId], ['tenant', 'acme'])
  const tools = await app.inject({
    method: 'GET', url: '/tools?functions=calculate&userId=acme', headers: { authorization: `Bearer ${await op.token('acme', `${PUBLIC_URL}/mcp`, 'tools')}` }
  })
  assert.equal(tools.statusCode, 200, tools.body)

  const approver = await who(await op.token('acme', `${PUBLIC_URL}/mcp`, 'gateway:approve'))
  assert.deepEqual([approver.body.role, approver.body.userId], ['approver', 'acme'])
  const admin = await who(await op.token('ops-robot', PUBLIC_URL, 'gateway:admin'))
  assert.equal(admin.body.role, 'admin')

  // A token the same server issued for another resource is not for this gateway.
  const other = await who(await op.token('acme', 'https://other.example/api', 'tools'))
  assert.equal(other.status, 401)
  assert.match(other.challenge, /error="invalid_token", error_description="The access token is not for this gateway/)
})
