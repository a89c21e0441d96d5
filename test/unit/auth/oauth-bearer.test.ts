import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { hasJwtShape, metadataUrls, OAuthBearerVerifier } from '../../../src/auth/oauth-bearer.js'
import { startTestIssuer } from '../../helpers/oauth-issuer.js'

const AUD = 'https://gateway.example/mcp'

function verifierOf (issuer: string, more: Partial<ConstructorParameters<typeof OAuthBearerVerifier>[0]> = {}): OAuthBearerVerifier {
  return new OAuthBearerVerifier({ issuer, audiences: [AUD], tenantClaim: 'sub', discoveryRetryMs: 0, ...more })
}

test('metadataUrls: RFC 8414 path insertion, then OpenID discovery inserted and appended', () => {
  assert.deepEqual(metadataUrls('https://as.example'), [
    'https://as.example/.well-known/oauth-authorization-server',
    'https://as.example/.well-known/openid-configuration'
  ])
  assert.deepEqual(metadataUrls('https://as.example/'), metadataUrls('https://as.example'))
  assert.deepEqual(metadataUrls('https://as.example:8443/realms/acme/'), [
    'https://as.example:8443/.well-known/oauth-authorization-server/realms/acme',
    'https://as.example:8443/.well-known/openid-configuration/realms/acme',
    'https://as.example:8443/realms/acme/.well-known/openid-configuration'
  ])
})

test('hasJwtShape: three base64url segments (the last may be empty), at most 8 KiB', () => {
  assert.equal(hasJwtShape('eyJh.eyJz.c2ln'), true)
  assert.equal(hasJwtShape('eyJh.eyJz.'), true)
  assert.equal(hasJwtShape('admin-key-0123456789abcdef'), false)
  assert.equal(hasJwtShape('a.b'), false)
  assert.equal(hasJwtShape('a.b.c.d'), false)
  assert.equal(hasJwtShape('a+b.c.d'), false)
  assert.equal(hasJwtShape(`a.${'b'.repeat(8 * 1024)}.c`), false)
})

test('an issuer with a path is found by path insertion; OpenID discovery alone is enough', async (t) => {
  for (const metadata of ['oauth', 'openid'] as const) {
    const issuer = await startTestIssuer({ path: '/realms/acme', metadata })
    t.after(async () => await issuer.close())
    const verdict = await verifierOf(issuer.issuer).verify(await issuer.sign({ sub: 'acme', aud: AUD }))
    assert.deepEqual(verdict.ok && verdict.caller.userId, 'acme', JSON.stringify(verdict))
  }
})

test('a metadata document naming another issuer is not used (RFC 8414 section 3.3)', async (t) => {
  const issuer = await startTestIssuer()
  t.after(async () => await issuer.close())
  // A server that answers the metadata path with the real issuer's document: its `issuer` is not this one.
  const impostor = createServer((req, res) => {
    if (req.url === '/.well-known/oauth-authorization-server') {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ issuer: issuer.issuer, jwks_uri: `${issuer.issuer}/jwks` }))
    } else res.writeHead(404).end()
  })
  await new Promise<void>((resolve) => impostor.listen(0, '127.0.0.1', resolve))
  t.after(() => { impostor.close() })
  const impostorIssuer = `http://127.0.0.1:${(impostor.address() as AddressInfo).port}`
  const token = await issuer.sign({ sub: 'acme', aud: AUD, iss: impostorIssuer })
  const verdict = await verifierOf(impostorIssuer).verify(token)
  assert.equal(verdict.ok, false)
  assert.equal(!verdict.ok && verdict.reason, 'unavailable')
  assert.match(!verdict.ok && verdict.reason === 'unavailable' ? verdict.detail : '', /its issuer .* is not/)
  assert.ok(!JSON.stringify(verdict).includes(token))
})

test('discovery is lazy, shared by concurrent requests, and tried again after a failure', async (t) => {
  const issuer = await startTestIssuer()
  t.after(async () => await issuer.close())
  const verifier = verifierOf(issuer.issuer)
  assert.equal(issuer.hits.size, 0, 'nothing is fetched before the first token')
  issuer.setDown(true)
  const token = await issuer.sign({ sub: 'acme', aud: AUD })
  const down = await verifier.verify(token)
  assert.equal(!down.ok && down.reason, 'unavailable')
  issuer.setDown(false)
  const verdicts = await Promise.all([1, 2, 3, 4].map(async () => await verifier.verify(token)))
  assert.ok(verdicts.every((v) => v.ok), JSON.stringify(verdicts))
  assert.equal(issuer.hits.get('/jwks'), 1)
  // Two discoveries in all: the failed one (both documents tried) and one shared by the four verifications.
  assert.equal(issuer.hits.get('/.well-known/oauth-authorization-server'), 2)
})

test('a failed discovery is not retried within discoveryRetryMs', async (t) => {
  const issuer = await startTestIssuer()
  t.after(async () => await issuer.close())
  issuer.setDown(true)
  const verifier = verifierOf(issuer.issuer, { discoveryRetryMs: 60_000 })
  const token = await issuer.sign({ sub: 'acme', aud: AUD })
  for (let i = 0; i < 3; i++) assert.equal((await verifier.verify(token)).ok, false)
  assert.equal(issuer.hits.get('/.well-known/oauth-authorization-server'), 1)
})

test('roles: the admin scope wins over the approver scope; keyId is per issuer and subject, not per token', async (t) => {
  const issuer = await startTestIssuer()
  t.after(async () => await issuer.close())
  const verifier = verifierOf(issuer.issuer, { adminScope: 'adm', approverScope: 'appr' })
  const caller = async (claims: Record<string, unknown>): Promise<unknown> => {
    const v = await verifier.verify(await issuer.sign({ aud: AUD, ...claims }))
    assert.ok(v.ok, JSON.stringify(v))
    return v.caller
  }
  const a = await caller({ sub: 'acme', scope: 'appr adm' }) as { isAdmin: boolean, keyId: string }
  assert.equal(a.isAdmin, true)
  assert.deepEqual(await caller({ sub: 'acme', scope: 'appr' }), { userId: 'acme', isAdmin: false, keyId: a.keyId, role: 'approver' })
  assert.deepEqual(await caller({ sub: 'acme', jti: 'other' }), { userId: 'acme', isAdmin: false, keyId: a.keyId })
  assert.notEqual((await caller({ sub: 'globex' }) as { keyId: string }).keyId, a.keyId)
})

test('a token over 8 KiB is refused before parsing', async () => {
  const verdict = await verifierOf('http://127.0.0.1:9').verify(`a.${'b'.repeat(9000)}.c`)
  assert.deepEqual(verdict, { ok: false, reason: 'invalid', message: 'The access token is longer than 8192 characters' })
})
