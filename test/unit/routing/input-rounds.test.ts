import { test } from 'node:test'
import assert from 'node:assert/strict'
import { argumentsDigest, RequestStateSealer, requestStateRefusal } from '../../../src/routing/input-rounds.js'

const ARGS = argumentsDigest({ city: 'Paris', days: 2 })
const ROUND = { tenant: 'acme', keyId: 'k1', name: 'greet', args: ARGS, server: 'conf', state: 'upstream {"s":1} é', callId: 'call_1', approvalId: 'apr_1' }
const EXPECT = { tenant: 'acme', keyId: 'k1', name: 'greet', args: ARGS }
const OPENED = { ok: true, server: 'conf', state: ROUND.state, callId: 'call_1', approvalId: 'apr_1' }

test('a handle opens to its server, the upstream state byte for byte, the callId and the approval, ' +
  'for the tenant, key, tool and arguments it was sealed for', () => {
  const sealer = new RequestStateSealer({ secret: 'k' })
  assert.equal(sealer.ephemeral, false)
  const handle = sealer.seal(ROUND)
  assert.match(handle, /^g2\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/)
  assert.deepEqual(sealer.open(handle, EXPECT), OPENED)
  // No upstream state and no approval: none comes back.
  assert.deepEqual(sealer.open(sealer.seal({ ...ROUND, state: undefined, approvalId: undefined }), EXPECT),
    { ...OPENED, state: undefined, approvalId: undefined })
  // Another sealer with the same secret (another instance) opens it; one with another secret does not.
  assert.deepEqual(new RequestStateSealer({ secret: 'k' }).open(handle, EXPECT), OPENED)
  assert.deepEqual(new RequestStateSealer({ secret: 'other' }).open(handle, EXPECT), { ok: false, why: 'signature' })
})

test('altered, foreign, malformed and expired handles are refused with the reason', () => {
  let now = 1_000_000
  const sealer = new RequestStateSealer({ secret: 'k', ttlMs: 1000, now: () => now })
  const handle = sealer.seal(ROUND)
  const [v, payload, mac] = handle.split('.') as [string, string, string]
  const forged = (over: Record<string, unknown>): string =>
    `${v}.${Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(payload, 'base64url').toString()), ...over })).toString('base64url')}.${mac}`
  assert.deepEqual(sealer.open(forged({ t: 'globex' }), { ...EXPECT, tenant: 'globex' }), { ok: false, why: 'signature' })
  // An approval written into a handle by its holder does not make it pass.
  assert.deepEqual(sealer.open(forged({ a: 'apr_forged' }), EXPECT), { ok: false, why: 'signature' })
  assert.deepEqual(sealer.open(`${handle}x`, EXPECT), { ok: false, why: 'signature' })
  assert.deepEqual(sealer.open('g2.e30', EXPECT), { ok: false, why: 'malformed' })
  assert.deepEqual(sealer.open('', EXPECT), { ok: false, why: 'malformed' })
  // A handle of the earlier format (no arguments, callId or approval in it) is not this gateway's.
  assert.deepEqual(sealer.open(handle.replace(/^g2\./, 'g1.'), EXPECT), { ok: false, why: 'malformed' })
  assert.deepEqual(sealer.open(handle, { ...EXPECT, tenant: 'globex' }), { ok: false, why: 'tenant' })
  assert.deepEqual(sealer.open(handle, { ...EXPECT, keyId: 'k2' }), { ok: false, why: 'key' })
  assert.deepEqual(sealer.open(handle, { ...EXPECT, name: 'plain' }), { ok: false, why: 'tool' })
  assert.deepEqual(sealer.open(handle, { ...EXPECT, args: argumentsDigest({ city: 'Rome', days: 2 }) }), { ok: false, why: 'arguments' })
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

test('the arguments digest is the same for the same arguments as an object, a model\'s JSON string or in another key order, and differs otherwise', () => {
  assert.equal(argumentsDigest({ days: 2, city: 'Paris' }), ARGS)
  assert.equal(argumentsDigest('{"city":"Paris","days":2}'), ARGS)
  assert.equal(argumentsDigest({ a: { y: 1, x: [1, { q: 2, p: 1 }] } }), argumentsDigest({ a: { x: [1, { p: 1, q: 2 }], y: 1 } }))
  assert.equal(argumentsDigest(undefined), argumentsDigest({}))
  assert.equal(argumentsDigest(''), argumentsDigest({}))
  assert.notEqual(argumentsDigest({ city: 'Paris', days: '2' }), ARGS)
  assert.notEqual(argumentsDigest({ a: [1, 2] }), argumentsDigest({ a: [2, 1] }))
  assert.notEqual(argumentsDigest('not json'), argumentsDigest({}))
})

test('a refusal has a stable code and says why, never what the handle held', () => {
  const refusal = requestStateRefusal('tenant')
  assert.equal(refusal.code, 'GW_INVALID_REQUEST_STATE')
  assert.equal(refusal.statusCode, 400)
  assert.match(refusal.message, /^Invalid or expired requestState \(it belongs to another tenant\); call the tool again without inputResponses and requestState$/)
  assert.match(requestStateRefusal('call').message, /another callId/)
  assert.match(requestStateRefusal('arguments').message, /other arguments/)
})

test('a handle of a tool call opens for no request without its arguments (prompts/get, resources/read), and the reverse', () => {
  const sealer = new RequestStateSealer({ secret: 'k' })
  const surface = sealer.seal({ tenant: 'acme', keyId: 'k1', name: 'greet', server: 'conf' })
  assert.deepEqual(sealer.open(surface, { tenant: 'acme', keyId: 'k1', name: 'greet' }),
    { ok: true, server: 'conf', state: undefined, callId: undefined, approvalId: undefined })
  assert.deepEqual(sealer.open(surface, EXPECT), { ok: false, why: 'arguments' })
  assert.deepEqual(sealer.open(sealer.seal(ROUND), { tenant: 'acme', keyId: 'k1', name: 'greet' }), { ok: false, why: 'arguments' })
})
