import { test } from 'node:test'
import assert from 'node:assert/strict'
import { capField, isSecretKey, MASK, maskString, maskValue, MAX_DEPTH, prepareField, prepareText, TOO_DEEP, utf8Head } from '../../../src/journal/redact.js'

test('secret-looking key and header names, and names that only look close', () => {
  for (const k of ['token', 'access_token', 'refreshToken', 'id-token', 'password', 'db_password', 'PASSWD', 'secret', 'client_secret', 'Authorization', 'proxy-authorization',
    'api_key', 'apiKey', 'X-Api-Key', 'API KEY', 'access_key', 'awsAccessKeyId', 'private_key', 'privateKey', 'cookie', 'Set-Cookie', 'credentials', 'session_id', 'basic_auth', 'auth', 'pwd']) {
    assert.equal(isSecretKey(k), true, k)
  }
  for (const k of ['max_tokens', 'tokenizer', 'author', 'path', 'command', 'key', 'keys', 'name', 'description', 'passage', 'monkey']) {
    assert.equal(isSecretKey(k), false, k)
  }
})

test('masking reaches every depth, arrays, and [name, value] header pairs; the input is untouched', () => {
  const input = {
    path: 'a.txt',
    token: 'abc',
    nested: { deeper: [{ headers: { Authorization: 'Bearer sk-live-123456789', accept: 'json' } }, { list: [{ password: 'hunter2' }] }] },
    rawHeaders: [['X-Api-Key', 'k-123'], ['Accept', 'text/plain']],
    empty: { secret: '' },
    count: 3,
    max_tokens: 100
  }
  const copy = structuredClone(input)
  const out = maskValue(input, { strings: true }) as typeof input
  assert.deepEqual(input, copy, 'the input is not modified')
  assert.equal(out.token, MASK)
  assert.equal((out.nested.deeper[0] as any).headers.Authorization, MASK)
  assert.equal((out.nested.deeper[0] as any).headers.accept, 'json')
  assert.equal((out.nested.deeper[1] as any).list[0].password, MASK)
  assert.deepEqual(out.rawHeaders, [['X-Api-Key', MASK], ['Accept', 'text/plain']])
  assert.equal(out.empty.secret, '', 'an empty value stays visibly empty')
  assert.equal(out.count, 3)
  assert.equal(out.max_tokens, 100)
  assert.ok(!JSON.stringify(out).includes('hunter2') && !JSON.stringify(out).includes('sk-live') && !JSON.stringify(out).includes('k-123'))
})

test('a secret hidden below the depth limit is cut off, never kept', () => {
  let v: unknown = { password: 'deep-secret' }
  for (let i = 0; i < MAX_DEPTH + 10; i++) v = { a: v }
  const text = JSON.stringify(maskValue(v, { strings: true }))
  assert.ok(!text.includes('deep-secret'))
  assert.ok(text.includes(TOO_DEEP))
})

test('credentials inside strings: Bearer tokens and key=value pairs whose key looks secret', () => {
  assert.equal(maskString("curl -H 'Authorization: Bearer abcdefghijkl' https://x"), "curl -H 'Authorization: Bearer ****' https://x")
  assert.equal(maskString('GET /a?api_key=12345678&page=2'), 'GET /a?api_key=****&page=2')
  assert.equal(maskString('mysql --password=hunter22 -u root'), 'mysql --password=**** -u root')
  assert.equal(maskString('{"token": "abcdef123"}'), '{"token": "****"}')
  assert.equal(maskString('max_tokens=1000 page=2'), 'max_tokens=1000 page=2')
  assert.equal(maskString('Authorization: Basic dXNlcjpwYXNz'), 'Authorization: Basic ****')
  assert.equal(maskString('x-api-key: k-123456'), 'x-api-key: ****')
})

test('capping: under the budget a value is kept as is; over it, a marked head of at most the budget', () => {
  assert.deepEqual(capField({ a: 1 }, 100), { a: 1 })
  assert.equal(capField('short', 100), 'short')
  const big = 'é'.repeat(100)
  const capped = capField(big, 51) as { $capped: true, bytes: number, limit: number, head: string }
  assert.equal(capped.$capped, true)
  assert.equal(capped.bytes, 200)
  assert.equal(capped.limit, 51)
  assert.equal(capped.head, 'é'.repeat(25), 'never a split character')
  assert.equal(utf8Head('a😀b', 3), 'a')
  assert.equal(utf8Head('a😀b', 5), 'a😀')
})

test('a 10 MB argument is capped to 16 KiB, hashed whole, and its head masked', () => {
  const args = { token: 'tok-secret-1', blob: 'x'.repeat(10 * 1024 * 1024), note: 'Bearer abcdefghijklmnop' }
  const { stored, json } = prepareField(args, 16 * 1024)
  const s = stored as { $capped: boolean, bytes: number, head: string }
  assert.equal(s.$capped, true)
  assert.ok(s.bytes > 10 * 1024 * 1024)
  assert.ok(Buffer.byteLength(s.head) <= 16 * 1024)
  assert.ok(!s.head.includes('tok-secret-1'))
  assert.ok(json.length > 10 * 1024 * 1024, 'the hash covers the whole (masked) value')
  assert.ok(!json.includes('tok-secret-1'), 'what is hashed is masked')
  const out = prepareText('y'.repeat(100_000), 16 * 1024) as { $capped: boolean, bytes: number }
  assert.equal(out.$capped, true)
  assert.equal(out.bytes, 100_000)
})
