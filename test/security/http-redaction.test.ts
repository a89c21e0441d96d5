/**
 * HTTP side of tenant isolation, the rules behind the end-to-end tests in http-secrets and http-log-auth:
 * which parts of a secret are redacted, which query values the request log hides, and when a
 * masked secret may be kept.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { redactUrl } from '../../plugins/request-log.js'
import { maskedSecretsChangingOrigin } from '../../src/registry/secrets.js'
import type { ServerConfig } from '../../src/registry/server-config.js'
import { MIN_REDACTED_LENGTH, redactSecrets, secretVariants } from '../../src/remote-mcp/errors.js'

test('redactSecrets: the value, the credential after a known scheme, Basic parts, URL-encoded forms; not tiny parts', () => {
  const basic = Buffer.from('svc-user:p@ss/word+1').toString('base64')
  const secrets = ['Bearer tok_9f8e7d6c5b', `Basic ${basic}`, 'token  abcdef-123456', 'Key k=v&z 998877', 'abc', 'Bot 12345']
  const message = [
    'got Bearer tok_9f8e7d6c5b', 'token=tok_9f8e7d6c5b', `auth ${basic}`, 'user svc-user:p@ss/word+1', 'pw=p@ss/word+1',
    `pw=${encodeURIComponent('p@ss/word+1')}`, 'x abcdef-123456 y', `q=${encodeURIComponent('k=v&z 998877')}`, 'abc stays', 'bot 12345 stays'
  ].join(' | ')
  const out = redactSecrets(message, secrets)
  for (const leaked of ['tok_9f8e7d6c5b', basic, 'p@ss/word+1', encodeURIComponent('p@ss/word+1'), 'abcdef-123456', encodeURIComponent('k=v&z 998877')]) {
    assert.ok(!out.includes(leaked), `${leaked} in ${out}`)
  }
  // Values and parts under MIN_REDACTED_LENGTH would mangle every message: left alone.
  assert.equal(MIN_REDACTED_LENGTH, 6)
  assert.match(out, /abc stays/)
  assert.match(out, /bot 12345 stays/)
  assert.ok(!secretVariants('Bearer 12345').includes('12345'))
  // A value without a scheme is redacted as it is.
  assert.equal(redactSecrets('k=plainvalue-77', ['plainvalue-77']), 'k=[redacted]')
})

test('redactUrl: values of credential-like query names are hidden, whatever their case or encoding; the rest is kept', () => {
  assert.equal(redactUrl('/tools'), '/tools')
  assert.equal(redactUrl('/tools?functions=a,b&userId=acme&format=mcp'), '/tools?functions=a,b&userId=acme&format=mcp')
  assert.equal(redactUrl('/tools?api_key=K&apikey=K&key=K&token=K&access_token=K&secret=K&password=K&auth=K'),
    '/tools?api_key=[redacted]&apikey=[redacted]&key=[redacted]&token=[redacted]&access_token=[redacted]&secret=[redacted]&password=[redacted]&auth=[redacted]')
  assert.equal(redactUrl('/x?API-KEY=K&Client%5FSecret=K&refresh_token=K&X-Amz-Signature=K&sig=K&passwd=K&flag'),
    '/x?API-KEY=[redacted]&Client%5FSecret=[redacted]&refresh_token=[redacted]&X-Amz-Signature=[redacted]&sig=[redacted]&passwd=[redacted]&flag')
  // A malformed escape in a name is still judged by its raw text, never a throw.
  assert.equal(redactUrl('/x?%E0%A4%A=1&token%ZZ=2'), '/x?%E0%A4%A=1&token%ZZ=[redacted]')
  // The one secret detector: a token in the path, userinfo in a query value.
  const pat = 'ghp_' + 'A1b2C3d4E5'.repeat(4)
  assert.equal(redactUrl(`/hooks/${pat}?page=2`), '/hooks/[redacted]?page=2')
  assert.equal(redactUrl('/x?next=https%3A%2F%2Fa&db=postgres://app:s3cret@db/app'), '/x?next=https%3A%2F%2Fa&db=postgres://app:[redacted]@db/app')
})

test('redactSecrets: credentials the config does not hold are redacted too (a token or URL the server quotes)', () => {
  const jwt = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJib2IifQ.c2lnbmF0dXJlLXNpZ25hdHVyZQ'
  const message = `401 from https://deploy:pw-998877@api.example.com/mcp\nWWW-Authenticate: Bearer error="invalid_token"\nAuthorization: Bearer ${jwt}\napi_key=k-55443322 (config token tok_9f8e7d6c5b)`
  const out = redactSecrets(message, ['Bearer tok_9f8e7d6c5b'])
  for (const leaked of ['pw-998877', jwt, 'k-55443322', 'tok_9f8e7d6c5b']) assert.ok(!out.includes(leaked), `${leaked} in ${out}`)
  assert.match(out, /^401 from https:\/\/deploy:\[redacted\]@api\.example\.com\/mcp\n/)
  assert.match(out, /Authorization: Bearer \[redacted\]\napi_key=\[redacted\] \(config token \[redacted\]\)$/)
})

test('maskedSecretsChangingOrigin: a masked value may stay only on the same scheme, host and port', () => {
  const stored: ServerConfig = { type: 'streamable_http', enabled: true, priority: 0, url: 'https://api.example.com/mcp', headers: { Authorization: 'Bearer sk-operator-123456', 'X-Plain': 'v' } }
  const at = (url: string, headers: Record<string, string>): ServerConfig => ({ ...stored, url, headers })
  const masked = { authorization: 'Bearer ****' }
  assert.deepEqual(maskedSecretsChangingOrigin(at('https://api.example.com/other?x=1', masked), stored), [])
  assert.deepEqual(maskedSecretsChangingOrigin(at('https://api.example.com:443/mcp', masked), stored), [])
  for (const url of ['http://api.example.com/mcp', 'https://api.example.com:8443/mcp', 'https://evil.example.net/mcp', 'https://api.example.com.evil.net/mcp']) {
    assert.deepEqual(maskedSecretsChangingOrigin(at(url, masked), stored), ['header authorization'], url)
  }
  // A new origin with real values (or no masked one) is the caller's own choice.
  assert.deepEqual(maskedSecretsChangingOrigin(at('https://evil.example.net/mcp', { Authorization: 'Bearer mine-654321' }), stored), [])
})

test('maskedSecretsChangingOrigin: a masked OAuth client secret stays only with the same server origin and the same authorization server', () => {
  // The client secret goes to the issuer's token and revocation endpoints, not to the server's URL.
  const auth = { type: 'oauth', grant: 'authorization_code', clientId: 'operator-app', clientSecret: 'operator-client-secret-1', authorizationServer: 'https://login.example.com' } as const
  const stored: ServerConfig = { type: 'streamable_http', enabled: true, priority: 0, url: 'https://api.example.com/mcp', headers: { Authorization: 'Bearer sk-operator-123456' }, auth }
  const withAuth = (auth: Partial<NonNullable<ServerConfig['auth']>>, url = stored.url): ServerConfig =>
    ({ ...stored, url, headers: { authorization: 'Bearer ****' }, auth: { ...stored.auth, ...auth } as NonNullable<ServerConfig['auth']> })
  assert.deepEqual(maskedSecretsChangingOrigin(withAuth({ clientSecret: '****' }), stored), [])
  assert.deepEqual(maskedSecretsChangingOrigin(withAuth({ clientSecret: '****', authorizationServer: 'https://login.example.com:443/' }), stored), [])
  for (const issuer of ['https://evil.example.net', 'http://login.example.com', 'https://login.example.com/tenant-b', undefined]) {
    const moved = withAuth({ clientSecret: '****', authorizationServer: issuer })
    assert.deepEqual(maskedSecretsChangingOrigin(moved, stored), ['oauth clientSecret'], String(issuer))
  }
  // The server's header may stay while only the issuer moves; both are named when the server moves.
  assert.deepEqual(maskedSecretsChangingOrigin(withAuth({ clientSecret: '****' }, 'https://evil.example.net/mcp'), stored), ['header authorization', 'oauth clientSecret'])
  // A new issuer with the secret's actual value is the caller's own choice.
  assert.deepEqual(maskedSecretsChangingOrigin(withAuth({ clientSecret: 'mine-654321', authorizationServer: 'https://evil.example.net' }), stored), [])
})
