import { test } from 'node:test'
import assert from 'node:assert/strict'
import { checkHostHeaders, hostPolicyOf, hostRefusalMessage, parseAllowedHosts, parseHost } from '../../../src/auth/host-check.js'
import type { HostHeaders, HostPolicy } from '../../../src/auth/host-check.js'

const OPEN = hostPolicyOf('open', []) as HostPolicy
const req = (host: string | undefined, extra: Partial<HostHeaders> = {}): HostHeaders => ({ host, origin: undefined, forwardedHost: undefined, ...extra })

test('open mode: loopback names on any port pass; any other name (a rebinding page) is refused', () => {
  for (const host of ['localhost', 'localhost:80', 'LOCALHOST:8080', 'localhost.:3000', 'app.localhost:5173', '127.0.0.1', '127.0.0.1:8080',
    '127.1.2.3:9', '[::1]', '[::1]:8080', '[0:0:0:0:0:0:0:1]:8080', '[::ffff:127.0.0.1]:1', undefined, '']) {
    assert.deepEqual(checkHostHeaders(OPEN, req(host)), { ok: true }, String(host))
  }
  for (const host of ['evil.example', 'evil.example:8080', 'localhost.evil.example', 'evil-localhost', 'mylocalhost:80', '127.0.0.1.evil.example',
    '10.0.0.5:8080', '0.0.0.0:8080', '[::2]:80', 'localhost:99999', 'localhost:80:80', 'local host', 'localhost/x', 'u@localhost', '[::1']) {
    const verdict = checkHostHeaders(OPEN, req(host))
    assert.equal(verdict.ok, false, host)
    assert.deepEqual(verdict, { ok: false, header: 'host', value: host })
  }
})

test('Origin: loopback origins pass, a foreign, opaque or unparsable one is refused even with a loopback Host', () => {
  for (const origin of ['http://localhost:8080', 'http://127.0.0.1:5173', 'https://[::1]', 'http://x.localhost']) {
    assert.deepEqual(checkHostHeaders(OPEN, req('localhost:8080', { origin })), { ok: true }, origin)
  }
  for (const origin of ['https://evil.example', 'http://localhost.evil.example:8080', 'null', 'not a url', 'file:///etc/passwd', 'chrome-extension://abcdef']) {
    assert.deepEqual(checkHostHeaders(OPEN, req('localhost:8080', { origin })), { ok: false, header: 'origin', value: origin }, origin)
  }
})

test('keyed mode checks nothing without ALLOWED_HOSTS; with it, the names listed (and loopback) pass', () => {
  assert.equal(hostPolicyOf('keyed', []), undefined)
  const policy = hostPolicyOf('keyed', ['gw.example.com', 'api.example.com:8443', '*.internal.example', '[2001:db8::1]:8080', '10.0.0.5']) as HostPolicy
  const pass = [
    'gw.example.com', 'GW.example.com:8080', 'api.example.com:8443', 'a.internal.example', 'b.a.internal.example:1',
    '[2001:db8:0::1]:8080', '10.0.0.5:80', 'localhost:8080'
  ]
  for (const host of pass) assert.deepEqual(checkHostHeaders(policy, req(host)), { ok: true }, host)
  const refused = ['evil.example', 'api.example.com', 'api.example.com:443', 'internal.example', 'xinternal.example', '[2001:db8::1]:80', '10.0.0.6']
  for (const host of refused) assert.equal(checkHostHeaders(policy, req(host)).ok, false, host)
  // The console served at the listed name posts with its own Origin (a default port omitted).
  assert.deepEqual(checkHostHeaders(policy, req('gw.example.com', { origin: 'https://gw.example.com' })), { ok: true })
  assert.deepEqual(checkHostHeaders(policy, req('api.example.com:8443', { origin: 'https://api.example.com:8443' })), { ok: true })
  assert.equal(checkHostHeaders(policy, req('gw.example.com', { origin: 'https://evil.example' })).ok, false)
  // A port-less Host is the scheme's default port.
  const tls = hostPolicyOf('keyed', ['gw.example.com:443']) as HostPolicy
  assert.deepEqual(checkHostHeaders(tls, req('gw.example.com', { origin: 'https://gw.example.com' })), { ok: true })
  assert.equal(checkHostHeaders(tls, req('gw.example.com:8443')).ok, false)
})

test('X-Forwarded-Host never replaces Host; behind a trusted proxy every hop of it must be allowed too', () => {
  // Not believed (no TRUST_PROXY): it neither passes a foreign Host nor is judged.
  assert.equal(checkHostHeaders(OPEN, req('evil.example', { forwardedHost: 'localhost' })).ok, false)
  assert.deepEqual(checkHostHeaders(OPEN, req('localhost', { forwardedHost: 'evil.example' })), { ok: true })
  const proxied = hostPolicyOf('keyed', ['gw.example.com'], { trustProxy: true }) as HostPolicy
  assert.deepEqual(checkHostHeaders(proxied, req('127.0.0.1:8080', { forwardedHost: 'gw.example.com' })), { ok: true })
  assert.deepEqual(checkHostHeaders(proxied, req('127.0.0.1:8080', { forwardedHost: 'gw.example.com, evil.example' })),
    { ok: false, header: 'x-forwarded-host', value: 'evil.example' })
  assert.equal(checkHostHeaders(proxied, req('evil.example', { forwardedHost: 'gw.example.com' })).ok, false)
})

test('ALLOWED_HOSTS entries are validated; parseHost canonicalises like a browser', () => {
  assert.deepEqual(parseAllowedHosts(['Gw.Example.com:8443', '*.svc.cluster.local']), [
    { name: 'gw.example.com', wildcard: false, port: 8443 },
    { name: 'svc.cluster.local', wildcard: true, port: undefined }
  ])
  for (const bad of ['http://gw.example.com', 'gw.example.com/', '*', '*.', 'a.*.example', 'gw:99999', 'a b', '']) {
    assert.throws(() => parseAllowedHosts([bad]), /ALLOWED_HOSTS/, bad)
  }
  assert.deepEqual(parseHost('[0:0::1]:80'), { name: '::1', port: 80 })
  assert.deepEqual(parseHost('0x7f.1'), { name: '127.0.0.1', port: undefined })
})

test('the refusal says what was refused and how to allow it', () => {
  const verdict = checkHostHeaders(OPEN, req('evil.example:8080'))
  assert.equal(verdict.ok, false)
  if (verdict.ok) return
  assert.match(hostRefusalMessage(verdict, 'open'), /Host "evil.example:8080" is not allowed .*ALLOWED_HOSTS/)
})
