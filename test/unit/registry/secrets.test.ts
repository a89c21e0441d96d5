import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { test } from 'node:test'
import { createSecretBox, MASK, restoreMaskedSecrets, secretBoxFromEnv, secretContext, secretValues, type SecretBox } from '../../../src/registry/secrets.js'
import type { ServerConfig } from '../../../src/registry/server-config.js'

const KEY_A = randomBytes(32).toString('base64')
const KEY_B = randomBytes(32).toString('base64')

function box (key: string | undefined, previousKeys?: string): SecretBox {
  const result = createSecretBox({ key, previousKeys })
  assert.ok(result.ok, result.ok ? '' : result.message)
  return result.box
}

const plain: ServerConfig = {
  type: 'streamable_http',
  url: 'https://mcp.example/',
  headers: { Authorization: 'Bearer sk-live-123456', 'X-Api-Key': 'abcdef', 'X-Empty': '' },
  enabled: true,
  priority: 0
}
const stdio: ServerConfig = { type: 'stdio', command: 'node', args: ['s.js'], env: { TOKEN: 'tok-987', EMPTY: '' }, enabled: true, priority: 0 }
const CTX = secretContext({ kind: 'user', userId: '42' }, 'github')

test('sealConfig encrypts every header and env value; openConfig restores them', () => {
  const b = box(KEY_A)
  assert.equal(b.encrypted, true)
  const sealed = b.sealConfig(plain, CTX)
  for (const value of Object.values(sealed.headers ?? {})) {
    assert.match(value, /^enc:v1:k[0-9a-f]{8}:[\w-]+:[\w-]*:[\w-]+$/)
    assert.ok(!value.includes('sk-live') && !value.includes('abcdef'))
  }
  assert.equal(sealed.url, plain.url, 'only secrets are sealed')
  assert.deepEqual(plain.headers?.Authorization, 'Bearer sk-live-123456', 'input not mutated')
  const opened = b.openConfig(sealed, CTX)
  assert.ok(opened.ok)
  assert.deepEqual(opened.config, plain)

  const sealedEnv = b.sealConfig(stdio, CTX)
  assert.notEqual(sealedEnv.env?.TOKEN, 'tok-987')
  assert.deepEqual(b.openConfig(sealedEnv, CTX), { ok: true, config: stdio })
})

test('every value gets a fresh IV: sealing twice gives different ciphertexts', () => {
  const b = box(KEY_A)
  const one = b.sealValue('same')
  const two = b.sealValue('same')
  assert.notEqual(one, two)
  assert.notEqual(one.split(':')[3], two.split(':')[3])
  assert.deepEqual(b.openValue(one), { ok: true, value: 'same' })
})

test('a tampered ciphertext, tag or IV is a clear failure, never garbage', () => {
  const b = box(KEY_A)
  const sealed = b.sealValue('top secret value')
  const [prefix1, prefix2, id, iv, ct, tag] = sealed.split(':') as [string, string, string, string, string, string]
  const flip = (s: string): string => {
    const bytes = Buffer.from(s, 'base64url')
    bytes[0] = (bytes[0] ?? 0) ^ 1
    return bytes.toString('base64url')
  }
  for (const bad of [
    [prefix1, prefix2, id, iv, flip(ct), tag].join(':'),
    [prefix1, prefix2, id, iv, ct, flip(tag)].join(':'),
    [prefix1, prefix2, id, flip(iv), ct, tag].join(':')
  ]) {
    const result = b.openValue(bad)
    assert.equal(result.ok, false)
    assert.equal(result.ok ? '' : result.reason, 'tampered')
  }
  for (const malformed of ['enc:v1:', 'enc:v1:kx:abc', `enc:v1:${id}:!!:${ct}:${tag}`, `enc:v1:${id}:${iv.slice(2)}:${ct}:${tag}`]) {
    const result = b.openValue(malformed)
    assert.equal(result.ok ? 'ok' : result.reason, 'malformed', malformed)
  }
})

test('a value moved to another field, server or tenant does not open', () => {
  const b = box(KEY_A)
  const sealed = b.sealConfig(plain, CTX)
  const otherTenant = b.openConfig(sealed, secretContext({ kind: 'user', userId: '43' }, 'github'))
  assert.equal(otherTenant.ok ? 'ok' : otherTenant.reason, 'tampered')
  const swapped: ServerConfig = { ...sealed, headers: { 'X-Api-Key': sealed.headers?.Authorization ?? '' } }
  const moved = b.openConfig(swapped, CTX)
  assert.equal(moved.ok ? 'ok' : moved.reason, 'tampered')
  assert.match(moved.ok ? '' : moved.message, /^header X-Api-Key: /, 'the failure names the field')
  assert.doesNotMatch(moved.ok ? '' : moved.message, /sk-live/)
  const caseOnly: ServerConfig = { ...sealed, headers: { authorization: sealed.headers?.Authorization ?? '' } }
  assert.ok(b.openConfig(caseOnly, CTX).ok, 'header names are case-insensitive')
})

test('a value that looks sealed is still sealed as plaintext', () => {
  const b = box(KEY_A)
  const lookalike = b.sealValue('x', 'elsewhere')
  const config: ServerConfig = { ...plain, headers: { Authorization: lookalike } }
  const opened = b.openConfig(b.sealConfig(config, CTX), CTX)
  assert.ok(opened.ok)
  assert.equal(opened.config.headers?.Authorization, lookalike, 'opens to the literal string, not to the other context\'s secret')
})

test('rotation: the previous key opens old values, new values use the current key, unknown ids fail', () => {
  const oldBox = box(`old-1:${KEY_A}`)
  assert.equal(oldBox.keyId, 'old-1')
  const oldSealed = oldBox.sealConfig(plain, CTX)

  const rotated = box(KEY_B, `old-1:${KEY_A}`)
  assert.notEqual(rotated.keyId, 'old-1')
  assert.deepEqual(rotated.openConfig(oldSealed, CTX), { ok: true, config: plain })
  const resealed = rotated.sealConfig(plain, CTX)
  assert.ok(resealed.headers?.Authorization?.startsWith(`enc:v1:${rotated.keyId ?? ''}:`))

  const withoutOld = box(KEY_B)
  const failed = withoutOld.openConfig(oldSealed, CTX)
  assert.equal(failed.ok ? 'ok' : failed.reason, 'unknown-key')
  assert.match(failed.ok ? '' : failed.message, /old-1.*SECRETS_KEY_PREVIOUS/)

  assert.equal(box(KEY_A).keyId, box(KEY_A).keyId, 'derived ids are stable')
  assert.notEqual(box(KEY_A).keyId, box(KEY_B).keyId)
})

test('without a key values are stored as is and reported unencrypted', () => {
  const b = box(undefined)
  assert.equal(b.encrypted, false)
  assert.equal(b.keyId, undefined)
  assert.deepEqual(b.sealConfig(plain, CTX), plain)
  assert.deepEqual(b.openConfig(plain, CTX), { ok: true, config: plain })
  const sealedElsewhere = box(KEY_A).sealConfig(plain, CTX)
  const result = b.openConfig(sealedElsewhere, CTX)
  assert.equal(result.ok ? 'ok' : result.reason, 'no-key')

  const keyed = box(KEY_A)
  assert.deepEqual(keyed.openConfig(plain, CTX), { ok: true, config: plain }, 'plaintext stored before a key was set still opens')
})

test('masking hides every secret, keeps auth schemes and empties', () => {
  const b = box(KEY_A)
  const sealed = b.sealConfig(plain, CTX)
  const expected = { ...plain, headers: { Authorization: `Bearer ${MASK}`, 'X-Api-Key': MASK, 'X-Empty': '' } }
  assert.deepEqual(b.maskConfig(sealed, CTX), expected)
  assert.deepEqual(b.maskConfig(plain, CTX), expected, 'plaintext configs mask the same way')
  assert.deepEqual(box(KEY_B).maskConfig(sealed, CTX).headers?.Authorization, MASK, 'unopenable values mask fully')
  assert.deepEqual(b.maskConfig(b.sealConfig(stdio, CTX), CTX).env, { TOKEN: MASK, EMPTY: '' })
  const masked = JSON.stringify(b.maskConfig(sealed, CTX))
  assert.doesNotMatch(masked, /sk-live|abcdef|enc:v1/)
})

test('restoreMaskedSecrets keeps values a client sent back masked', () => {
  const incoming: ServerConfig = { ...plain, priority: 3, headers: { authorization: `Bearer ${MASK}`, 'X-Api-Key': 'new-key', 'X-New': MASK } }
  const restored = restoreMaskedSecrets(incoming, plain)
  assert.deepEqual(restored.headers, { authorization: 'Bearer sk-live-123456', 'X-Api-Key': 'new-key', 'X-New': MASK })
  assert.deepEqual(restoreMaskedSecrets({ ...stdio, env: { TOKEN: MASK } }, stdio).env, { TOKEN: 'tok-987' })
  assert.deepEqual(secretValues(plain).sort(), ['Bearer sk-live-123456', 'abcdef'])
})

test('key validation: length, alphabet, ids and clashes', () => {
  const bad = [
    { key: randomBytes(16).toString('base64') },
    { key: randomBytes(33).toString('base64') },
    { key: `${KEY_A.slice(0, -2)}!=` },
    { key: 'not base64 at all' },
    { key: `bad_id:${KEY_A}` },
    { key: KEY_A, previousKeys: `x:${randomBytes(8).toString('base64')}` },
    { key: `same:${KEY_A}`, previousKeys: `same:${KEY_B}` },
    { previousKeys: KEY_A }
  ]
  for (const options of bad) {
    const result = createSecretBox(options)
    assert.equal(result.ok, false, JSON.stringify(options))
    assert.doesNotMatch(result.ok ? '' : result.message, new RegExp(KEY_A.slice(0, 12).replace(/[+/]/g, '.')), 'never echoes a key')
  }
  assert.ok(createSecretBox({ key: KEY_A, previousKeys: ` ${KEY_B} , old:${KEY_A.replace(/^./, 'A')}` }).ok)
  const fromEnv = secretBoxFromEnv({ SECRETS_KEY: KEY_A, SECRETS_KEY_PREVIOUS: undefined })
  assert.ok(fromEnv.ok && fromEnv.box.encrypted)
  const empty = secretBoxFromEnv({})
  assert.ok(empty.ok && !empty.box.encrypted)
})

test('an OAuth client secret is sealed, masked on read, kept when sent back masked, and redacted from messages', () => {
  const b = box(KEY_A)
  const auth = { type: 'oauth', grant: 'authorization_code', clientId: 'client-1', clientSecret: 'oauth-secret-123456' } as const
  const withAuth: ServerConfig = { ...plain, headers: {}, auth }
  const sealed = b.sealConfig(withAuth, CTX)
  assert.match(sealed.auth?.clientSecret ?? '', /^enc:v1:/)
  assert.equal(sealed.auth?.clientId, 'client-1', 'the client id is no secret')
  const opened = b.openConfig(sealed, CTX)
  assert.ok(opened.ok)
  assert.equal(opened.config.auth?.clientSecret, 'oauth-secret-123456')
  // Bound to its server: the same ciphertext under another tenant's context does not open.
  assert.equal(b.openConfig(sealed, secretContext({ kind: 'user', userId: '43' }, 'github')).ok, false)
  const masked = b.maskConfig(sealed, CTX)
  assert.equal(masked.auth?.clientSecret, MASK)
  const restored = restoreMaskedSecrets({ ...withAuth, auth: { ...withAuth.auth, type: 'oauth', grant: 'authorization_code', clientSecret: MASK } }, withAuth)
  assert.equal(restored.auth?.clientSecret, 'oauth-secret-123456')
  assert.ok(secretValues(withAuth).includes('oauth-secret-123456'))
})
