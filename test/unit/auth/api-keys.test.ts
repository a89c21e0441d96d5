import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadApiKeys, parseApiKeys, splitApiKeysEnv, splitApiKeysFile } from '../../../src/auth/api-keys.js'
import { ConfigError } from '../../../src/config.js'

const ADMIN = 'admin-key-0123456789abcdef'
const ACME = 'acme-key-0123456789abcdef'

function configError (fn: () => unknown, message: RegExp, secret?: string): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof ConfigError, String(err))
    assert.match(err.message, message)
    if (secret !== undefined) assert.ok(!err.message.includes(secret), `the key leaked into: ${err.message}`)
    return true
  })
}

test('API_KEYS: admin and tenant keys, looked up by the exact key', () => {
  const keys = parseApiKeys(splitApiKeysEnv(` ${ADMIN}:* , ${ACME}:acme,`))
  assert.equal(keys.size, 2)
  assert.deepEqual(keys.counts(), { admin: 1, tenant: 1, approver: 0 })
  assert.deepEqual(keys.lookup(ADMIN)?.scope, { kind: 'admin' })
  assert.deepEqual(keys.lookup(ACME)?.scope, { kind: 'tenant', userId: 'acme' })
  assert.equal(keys.lookup(ACME)?.origin, 'API_KEYS entry 2')
  for (const wrong of ['', ADMIN.slice(0, -1), ADMIN + 'x', ADMIN.toUpperCase(), ` ${ADMIN}`, 'x'.repeat(10_000)]) {
    assert.equal(keys.lookup(wrong), undefined, JSON.stringify(wrong.slice(0, 40)))
  }
})

test('the key id is stable, short, and not the key', () => {
  const a = parseApiKeys(splitApiKeysEnv(`${ADMIN}:*`)).lookup(ADMIN)
  const b = parseApiKeys(splitApiKeysEnv(`${ACME}:acme,${ADMIN}:*`)).lookup(ADMIN)
  assert.ok(a && b)
  assert.equal(a.id, b.id, 'the same key gets the same id on every instance')
  assert.match(a.id, /^[0-9a-f]{16}$/)
  assert.ok(!ADMIN.includes(a.id))
})

test('bad entries are start-up errors naming the entry, never the key', () => {
  const short = 'short-key-123'
  configError(() => parseApiKeys(splitApiKeysEnv(`${ADMIN}:*,${short}:acme`)), /API_KEYS entry 2 \(scope 'acme'\): the key must be at least 16 characters/, short)
  configError(() => parseApiKeys(splitApiKeysEnv(`${ADMIN}`)), /API_KEYS entry 1: expected key:scope/, ADMIN)
  configError(() => parseApiKeys(splitApiKeysEnv(`${ADMIN}:a_b`)), /API_KEYS entry 1: scope must be \* \(admin\), approver:\{userId\} or a userId/, ADMIN)
  configError(() => parseApiKeys(splitApiKeysEnv(`${ADMIN}:`)), /scope must be/, ADMIN)
  configError(() => parseApiKeys(splitApiKeysEnv(`${ADMIN}:${'u'.repeat(65)}`)), /scope must be/, ADMIN)
  const spaced = 'has space in the key 123'
  configError(() => parseApiKeys(splitApiKeysEnv(`${spaced}:*`)), /API_KEYS entry 1 \(scope \*\): the key may only use/, spaced)
  const quote = 'with"quote-0123456789'
  configError(() => parseApiKeys(splitApiKeysEnv(`${quote}:*`)), /may only use/, quote)
  configError(() => parseApiKeys(splitApiKeysEnv(`${'k'.repeat(513)}:*`)), /at most 512 characters/, 'k'.repeat(513))
  // A key cannot hold a colon: the scope is everything after the first one, and this one is no scope.
  configError(() => parseApiKeys(splitApiKeysEnv('abc:defghijklmnopqrstu:*')), /scope must be/, 'defghijklmnopqrstu')
  configError(() => parseApiKeys(splitApiKeysEnv(`${ADMIN}:approver:`)), /scope must be/, ADMIN)
  configError(() => parseApiKeys(splitApiKeysEnv(`${ADMIN}:approver:a_b`)), /scope must be/, ADMIN)
})

test('approver keys: key:approver:{userId} is an approver of that tenant, not a tenant key', () => {
  const keys = parseApiKeys(splitApiKeysEnv(`${ADMIN}:*,k-approve-7f3a9c2e41:approver:acme,${ACME}:acme`))
  assert.deepEqual(keys.lookup('k-approve-7f3a9c2e41')?.scope, { kind: 'approver', userId: 'acme' })
  assert.deepEqual(keys.lookup(ACME)?.scope, { kind: 'tenant', userId: 'acme' })
  assert.deepEqual(keys.counts(), { admin: 1, tenant: 1, approver: 1 })
})

test('duplicate keys are refused, even with different scopes', () => {
  configError(() => parseApiKeys(splitApiKeysEnv(`${ACME}:acme,${ADMIN}:*,${ACME}:*`)), /API_KEYS entry 3: the same key is already configured at API_KEYS entry 1/, ACME)
})

test('API_KEYS_FILE: one pair per line, # comments and blank lines ignored, CRLF accepted', () => {
  const text = `# tenants\r\n\r\n${ACME}:acme\r\n   # indented comment\n  ${ADMIN}:*  \n\n`
  const pairs = splitApiKeysFile(text)
  assert.deepEqual(pairs.map((p) => p.origin), ['API_KEYS_FILE line 3', 'API_KEYS_FILE line 5'])
  const keys = parseApiKeys(pairs)
  assert.deepEqual(keys.lookup(ADMIN)?.scope, { kind: 'admin' })
  configError(() => parseApiKeys(splitApiKeysFile(`# x\n${ACME}:acme\nnot-a-pair-but-long-enough\n`)), /API_KEYS_FILE line 3: expected key:scope/, 'not-a-pair-but-long-enough')
})

test('loadApiKeys: neither set is open mode; both are merged; duplicates across them refused; set-but-empty refused', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'tg-keys-'))
  t.after(async () => await rm(dir, { recursive: true, force: true }))
  const file = join(dir, 'keys')
  await writeFile(file, `# keys\n${ACME}:acme\n`)

  assert.equal((await loadApiKeys({})).size, 0)
  const both = await loadApiKeys({ apiKeys: `${ADMIN}:*`, apiKeysFile: file })
  assert.deepEqual(both.counts(), { admin: 1, tenant: 1, approver: 0 })
  assert.equal(both.lookup(ACME)?.origin, 'API_KEYS_FILE line 2')

  await assert.rejects(loadApiKeys({ apiKeys: `${ACME}:other`, apiKeysFile: file }), /API_KEYS_FILE line 2: the same key is already configured at API_KEYS entry 1/)
  await writeFile(file, '# nothing here\n\n')
  await assert.rejects(loadApiKeys({ apiKeysFile: file }), (err: unknown) => err instanceof ConfigError && /contain no key:scope pair/.test(err.message))
  await assert.rejects(loadApiKeys({ apiKeysFile: join(dir, 'missing') }), /API_KEYS_FILE: cannot read .*missing: ENOENT/)
})
