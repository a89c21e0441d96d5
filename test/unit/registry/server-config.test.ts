import assert from 'node:assert/strict'
import { test } from 'node:test'
import { ID_PATTERN, isValidId, normalizeServerConfig, SERVER_CONFIG_LIMITS, type NormalizeResult } from '../../../src/registry/server-config.js'

const TENANT = { allowStdio: false }
const ADMIN = { allowStdio: true }

function expectBad (result: NormalizeResult, pattern: RegExp, code = 'GW_BAD_REQUEST'): void {
  assert.equal(result.ok, false, 'expected a refusal')
  if (result.ok) return
  assert.equal(result.code, code)
  assert.match(result.message, pattern)
}

test('type aliases resolve to the canonical type; defaults are applied', () => {
  for (const [type, canonical] of [
    ['streamable_http', 'streamable_http'], ['http', 'streamable_http'], ['streamable-http', 'streamable_http'],
    ['mcp', 'streamable_http'], ['HTTP', 'streamable_http'], ['sse', 'sse']
  ] as const) {
    const result = normalizeServerConfig({ type, url: 'https://mcp.example/x' }, TENANT)
    assert.ok(result.ok, type)
    assert.deepEqual(result.config, { type: canonical, url: 'https://mcp.example/x', enabled: true, priority: 0 })
  }
  const stdio = normalizeServerConfig({
    type: 'stdio',
    command: 'node',
    args: ['a.js'],
    env: { A_B: '1' },
    enabled: false,
    priority: -3,
    timeoutMs: 5000,
    description: 'd',
    disabledTools: ['x', 'x', 'y']
  }, ADMIN)
  assert.ok(stdio.ok)
  assert.deepEqual(stdio.config, {
    type: 'stdio',
    command: 'node',
    args: ['a.js'],
    env: { A_B: '1' },
    enabled: false,
    priority: -3,
    timeoutMs: 5000,
    description: 'd',
    disabledTools: ['x', 'y']
  })
})

test('an unknown type is refused, never treated as stdio', () => {
  expectBad(normalizeServerConfig({ type: 'websocket', url: 'https://a.example/' }, ADMIN), /unknown server type 'websocket'/)
  expectBad(normalizeServerConfig({ type: 'websocket', command: 'node' }, ADMIN), /unknown server type/)
  expectBad(normalizeServerConfig({ type: 'toString', command: 'node' }, ADMIN), /unknown server type/)
  expectBad(normalizeServerConfig({ type: '', command: 'node' }, ADMIN), /unknown server type/)
})

test('a missing type is inferred only when unambiguous', () => {
  const fromUrl = normalizeServerConfig({ url: 'http://a.example/' }, TENANT)
  assert.ok(fromUrl.ok && fromUrl.config.type === 'streamable_http')
  const fromCommand = normalizeServerConfig({ command: 'npx', args: ['-y', 'srv'] }, ADMIN)
  assert.ok(fromCommand.ok && fromCommand.config.type === 'stdio')
  expectBad(normalizeServerConfig({ command: 'npx' }, TENANT), /admin/, 'GW_FORBIDDEN')
  expectBad(normalizeServerConfig({}, ADMIN), /type is required/)
  expectBad(normalizeServerConfig({ url: 'http://a.example/', command: 'x' }, ADMIN), /type is required/)
})

test('stdio is admin only (403 code)', () => {
  expectBad(normalizeServerConfig({ type: 'stdio', command: 'node' }, TENANT), /admin/, 'GW_FORBIDDEN')
})

test('required and forbidden fields per transport', () => {
  expectBad(normalizeServerConfig({ type: 'sse' }, ADMIN), /url is required/)
  expectBad(normalizeServerConfig({ type: 'http' }, ADMIN), /url is required/)
  expectBad(normalizeServerConfig({ type: 'stdio' }, ADMIN), /command is required/)
  expectBad(normalizeServerConfig({ type: 'stdio', command: 'node', url: 'https://a.example/' }, ADMIN), /url is not allowed/)
  expectBad(normalizeServerConfig({ type: 'stdio', command: 'node', headers: { A: 'b' } }, ADMIN), /headers are not allowed/)
  expectBad(normalizeServerConfig({ type: 'sse', url: 'https://a.example/', command: 'node' }, ADMIN), /only for stdio/)
  expectBad(normalizeServerConfig({ type: 'sse', url: 'https://a.example/', env: { A: 'b' } }, ADMIN), /only for stdio/)
})

test('urls: http(s) only, absolute, no credentials', () => {
  for (const url of ['ftp://a.example/', 'file:///etc/passwd', 'javascript:alert(1)', 'gopher://a.example/', 'ws://a.example/']) {
    expectBad(normalizeServerConfig({ type: 'http', url }, ADMIN), /http or https/, 'GW_BAD_REQUEST')
  }
  expectBad(normalizeServerConfig({ type: 'http', url: '/relative' }, ADMIN), /not a valid absolute URL/)
  expectBad(normalizeServerConfig({ type: 'http', url: 'https://user:pw@a.example/' }, ADMIN), /credentials/)
  const ok = normalizeServerConfig({ type: 'http', url: 'HTTPS://A.Example:443/mcp' }, TENANT)
  assert.ok(ok.ok)
  assert.equal(ok.config.url, 'https://a.example/mcp', 'URL stored in WHATWG canonical form')
})

test('headers and env: names, values, reserved names, duplicates', () => {
  expectBad(normalizeServerConfig({ type: 'http', url: 'https://a.example/', headers: { 'Bad Name': 'x' } }, ADMIN), /not a valid HTTP token/)
  expectBad(normalizeServerConfig({ type: 'http', url: 'https://a.example/', headers: { A: 'x\r\nInjected: 1' } }, ADMIN), /CR, LF or NUL/)
  expectBad(normalizeServerConfig({ type: 'http', url: 'https://a.example/', headers: { Host: 'internal' } }, ADMIN), /may not be set/)
  expectBad(normalizeServerConfig({ type: 'http', url: 'https://a.example/', headers: { 'Proxy-Foo': 'x' } }, ADMIN), /may not be set/)
  expectBad(normalizeServerConfig({ type: 'http', url: 'https://a.example/', headers: { 'X-A': '1', 'x-a': '2' } }, ADMIN), /given twice/)
  expectBad(normalizeServerConfig({ type: 'stdio', command: 'node', env: { '1BAD': 'x' } }, ADMIN), /env name/)
  expectBad(normalizeServerConfig({ type: 'stdio', command: 'node', env: { A: 'x\0y' } }, ADMIN), /NUL/)
  expectBad(normalizeServerConfig({ type: 'stdio', command: 'no\0de' }, ADMIN), /NUL/)
  expectBad(normalizeServerConfig({ type: 'stdio', command: 'node', args: ['a\0'] }, ADMIN), /NUL/)
  const ok = normalizeServerConfig({ type: 'http', url: 'https://a.example/', headers: { Authorization: 'Bearer x', 'X-Empty': '' } }, TENANT)
  assert.ok(ok.ok)
  assert.deepEqual(ok.config.headers, { Authorization: 'Bearer x', 'X-Empty': '' })
})

test('sizes are bounded', () => {
  const L = SERVER_CONFIG_LIMITS
  const many = (n: number): Record<string, string> => Object.fromEntries(Array.from({ length: n }, (_, i) => [`H${i}`, 'v']))
  expectBad(normalizeServerConfig({ type: 'http', url: 'https://a.example/', headers: many(L.headerCount + 1) }, ADMIN), /headers/)
  assert.ok(normalizeServerConfig({ type: 'http', url: 'https://a.example/', headers: many(L.headerCount) }, ADMIN).ok)
  expectBad(normalizeServerConfig({ type: 'http', url: 'https://a.example/', headers: { A: 'x'.repeat(L.headerValueLength + 1) } }, ADMIN), /headers/)
  expectBad(normalizeServerConfig({ type: 'http', url: `https://a.example/${'x'.repeat(L.urlLength)}` }, ADMIN), /url/)
  expectBad(normalizeServerConfig({ type: 'stdio', command: 'node', args: Array.from({ length: L.argCount + 1 }, () => 'a') }, ADMIN), /args/)
  expectBad(normalizeServerConfig({ type: 'stdio', command: 'node', env: many(L.envCount + 1) }, ADMIN), /env/)
  expectBad(normalizeServerConfig({ type: 'http', url: 'https://a.example/', description: 'd'.repeat(L.descriptionLength + 1) }, ADMIN), /description/)
  expectBad(normalizeServerConfig({ type: 'http', url: 'https://a.example/', disabledTools: Array.from({ length: L.disabledToolCount + 1 }, (_, i) => `t${i}`) }, ADMIN), /disabledTools/)
  expectBad(normalizeServerConfig({ type: 'http', url: 'https://a.example/', timeoutMs: 10 }, ADMIN), /timeoutMs/)
  expectBad(normalizeServerConfig({ type: 'http', url: 'https://a.example/', timeoutMs: L.timeoutMsMax + 1 }, ADMIN), /timeoutMs/)
  expectBad(normalizeServerConfig({ type: 'http', url: 'https://a.example/', priority: 1.5 }, ADMIN), /priority/)
})

test('wrong shapes and unknown fields', () => {
  for (const input of [null, 'x', 42, [], undefined]) expectBad(normalizeServerConfig(input, ADMIN), /JSON object/)
  expectBad(normalizeServerConfig({ type: 'http', url: 'https://a.example/', enabled: 'yes' }, ADMIN), /enabled/)
  expectBad(normalizeServerConfig({ type: 'http', url: 'https://a.example/', headers: { A: 1 } }, ADMIN), /headers/)
  expectBad(normalizeServerConfig({ type: 'http', url: 'https://a.example/', autoApprove: [] }, ADMIN), /autoApprove|additional/i)
  const stripped = normalizeServerConfig({ command: 'npx', autoApprove: [] }, { allowStdio: true, unknownKeys: 'strip' })
  assert.ok(stripped.ok)
  assert.deepEqual(stripped.config, { type: 'stdio', command: 'npx', enabled: true, priority: 0 })
  const input = { type: 'http', url: 'https://a.example/', headers: { A: 'b' } }
  const result = normalizeServerConfig(input, ADMIN)
  assert.ok(result.ok)
  result.config.headers = {}
  assert.deepEqual(input.headers, { A: 'b' }, 'the input is not aliased')
})

test('ids: no underscore, 1 to 64 chars, starting alphanumeric', () => {
  for (const id of ['1', '1-2', 'a', 'A-b-9', 'x'.repeat(64)]) assert.ok(isValidId(id) && ID_PATTERN.test(id), id)
  for (const id of ['', '-a', 'a_b', 'x'.repeat(65), 'a.b', 'a b', 'ü', 'a/b']) assert.equal(isValidId(id), false, id)
})

test('auth: OAuth for http servers; client credentials only for global servers, with both parts and its issuer', () => {
  const plain = normalizeServerConfig({ url: 'https://mcp.example/x', auth: { type: 'oauth' } }, TENANT)
  assert.ok(plain.ok)
  assert.deepEqual(plain.config.auth, { type: 'oauth', grant: 'authorization_code' })
  const full = normalizeServerConfig({
    url: 'https://mcp.example/x',
    auth: { type: 'oauth', clientId: 'c1', clientSecret: 's1', scopes: ['a', 'b', 'a'], authorizationServer: 'https://auth.example' }
  }, TENANT)
  assert.ok(full.ok)
  assert.deepEqual(full.config.auth, { type: 'oauth', grant: 'authorization_code', clientId: 'c1', clientSecret: 's1', scopes: ['a', 'b'], authorizationServer: 'https://auth.example' })
  expectBad(normalizeServerConfig({ type: 'stdio', command: 'node', auth: { type: 'oauth' } }, ADMIN), /auth is for http servers/)
  expectBad(normalizeServerConfig({ url: 'https://mcp.example/x', auth: { type: 'basic' } }, TENANT), /auth/)
  expectBad(normalizeServerConfig({ url: 'https://mcp.example/x', auth: { type: 'oauth', clientSecret: 's' } }, TENANT), /clientSecret needs auth.clientId/)
  expectBad(normalizeServerConfig({ url: 'https://mcp.example/x', auth: { type: 'oauth', scopes: ['has space'] } }, TENANT), /scopes/)
  expectBad(normalizeServerConfig({ url: 'https://mcp.example/x', auth: { type: 'oauth', authorizationServer: 'https://u:p@auth.example' } }, TENANT), /no credentials/)
  const cc = { url: 'https://mcp.example/x', auth: { type: 'oauth', grant: 'client_credentials', clientId: 'c', clientSecret: 's', authorizationServer: 'https://auth.example' } }
  expectBad(normalizeServerConfig(cc, TENANT), /global servers/, 'GW_FORBIDDEN')
  assert.ok(normalizeServerConfig(cc, ADMIN).ok)
  expectBad(normalizeServerConfig({ ...cc, auth: { ...cc.auth, authorizationServer: undefined } }, ADMIN), /issuer its client secret may be sent to/)
  expectBad(normalizeServerConfig({ ...cc, auth: { type: 'oauth', grant: 'client_credentials', clientId: 'c' } }, ADMIN), /needs clientId and clientSecret/)
})
