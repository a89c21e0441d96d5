import { test } from 'node:test'
import assert from 'node:assert/strict'
import { RequestStateSealer } from '../../../src/mcp-server/request-state.js'

const ROUND = { tenant: 'acme', keyId: 'k1', name: 'greet', server: 'conf', state: 'upstream {"s":1} é' }
const EXPECT = { tenant: 'acme', keyId: 'k1', name: 'greet' }

test('a handle opens to its server and the upstream state byte for byte, for the tenant, key and tool it was sealed for', () => {
  const sealer = new RequestStateSealer({ secret: 'k' })
  assert.equal(sealer.ephemeral, false)
  const handle = sealer.seal(ROUND)
  assert.match(handle, /^g1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/)
  assert.deepEqual(sealer.open(handle, EXPECT), { ok: true, server: 'conf', state: ROUND.state })
  // No upstream state: none comes back.
  assert.deepEqual(sealer.open(sealer.seal({ ...ROUND, state: undefined }), EXPECT), { ok: true, server: 'conf', state: undefined })
  // Another sealer with the same secret (another instance) opens it; one with another secret does not.
  assert.equal(new RequestStateSealer({ secret: 'k' }).open(handle, EXPECT).ok, true)
  assert.deepEqual(new RequestStateSealer({ secret: 'other' }).open(handle, EXPECT), { ok: false, why: 'signature' })
})

test('altered, foreign, malformed and expired handles are refused with the reason', () => {
  let now = 1_000_000
  const sealer = new RequestStateSealer({ secret: 'k', ttlMs: 1000, now: () => now })
  const handle = sealer.seal(ROUND)
  const [v, payload, mac] = handle.split('.') as [string, string, string]
  const forged = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(payload, 'base64url').toString()), t: 'globex' })).toString('base64url')
  assert.deepEqual(sealer.open(`${v}.${forged}.${mac}`, { ...EXPECT, tenant: 'globex' }), { ok: false, why: 'signature' })
  assert.deepEqual(sealer.open(`${handle}x`, EXPECT), { ok: false, why: 'signature' })
  assert.deepEqual(sealer.open('g1.e30', EXPECT), { ok: false, why: 'malformed' })
  assert.deepEqual(sealer.open('', EXPECT), { ok: false, why: 'malformed' })
  assert.deepEqual(sealer.open(handle, { ...EXPECT, tenant: 'globex' }), { ok: false, why: 'tenant' })
  assert.deepEqual(sealer.open(handle, { ...EXPECT, keyId: 'k2' }), { ok: false, why: 'key' })
  assert.deepEqual(sealer.open(handle, { ...EXPECT, name: 'plain' }), { ok: false, why: 'tool' })
  now += 999
  assert.equal(sealer.open(handle, EXPECT).ok, true)
  now += 1
  assert.deepEqual(sealer.open(handle, EXPECT), { ok: false, why: 'expired' })
})

test('without a secret the key is the process\'s own: two sealers do not open each other\'s handles', () => {
  const a = new RequestStateSealer()
  const b = new RequestStateSealer()
  assert.equal(a.ephemeral, true)
  assert.equal(a.open(a.seal(ROUND), EXPECT).ok, true)
  assert.deepEqual(b.open(a.seal(ROUND), EXPECT), { ok: false, why: 'signature' })
})
