import { test } from 'node:test'
import assert from 'node:assert/strict'
import { CLUSTER_TOKEN_MAX_AGE_MS, ClusterTokens, ClusterTokenVerifier } from '../../../src/cluster/index.js'

const SECRET = 'a-cluster-secret-of-some-length'
const req = { method: 'POST', path: '/internal/cluster/processes', body: '{"op":"logs","processId":"proc_1"}' }

test('a token signed for a request verifies once, for that request only', async () => {
  const tokens = new ClusterTokens(SECRET)
  const verifier = new ClusterTokenVerifier(tokens)
  const token = tokens.sign(req)
  assert.match(token, /^v1\.\d+\.[0-9a-f]{24}\.[0-9a-f]{64}$/)
  assert.deepEqual(await verifier.verify(token, req), { ok: true })
  // Replayed within its lifetime.
  assert.deepEqual(await verifier.verify(token, req), { ok: false, reason: 'replayed' })
})

test('another body, path, method or secret fails the signature', async () => {
  const tokens = new ClusterTokens(SECRET)
  const token = tokens.sign(req)
  for (const other of [{ ...req, body: req.body.replace('logs', 'stop') }, { ...req, path: '/internal/cluster/other' }, { ...req, method: 'PUT' }]) {
    assert.deepEqual(await new ClusterTokenVerifier(tokens).verify(token, other), { ok: false, reason: 'bad-signature' })
  }
  assert.deepEqual(await new ClusterTokenVerifier(new ClusterTokens(`${SECRET}x`)).verify(token, req), { ok: false, reason: 'bad-signature' })
})

test('a tampered token (timestamp moved, mac flipped) is refused; a malformed or missing one says so', async () => {
  const tokens = new ClusterTokens(SECRET)
  const verifier = new ClusterTokenVerifier(tokens)
  const token = tokens.sign(req)
  const [v, ts, nonce, mac] = token.split('.') as [string, string, string, string]
  assert.equal((await verifier.verify(`${v}.${Number(ts) + 1}.${nonce}.${mac}`, req)).ok, false)
  const flipped = mac.slice(0, -1) + (mac.endsWith('0') ? '1' : '0')
  assert.deepEqual(await verifier.verify(`${v}.${ts}.${nonce}.${flipped}`, req), { ok: false, reason: 'bad-signature' })
  assert.deepEqual(await verifier.verify('Bearer abc', req), { ok: false, reason: 'malformed' })
  assert.deepEqual(await verifier.verify(undefined, req), { ok: false, reason: 'missing' })
  assert.deepEqual(await verifier.verify('', req), { ok: false, reason: 'missing' })
})

test('a token older (or newer) than the maximum age is expired, even with a right signature', async () => {
  const tokens = new ClusterTokens(SECRET)
  const verifier = new ClusterTokenVerifier(tokens)
  const now = Date.now()
  assert.deepEqual(await verifier.verify(tokens.sign(req, now - CLUSTER_TOKEN_MAX_AGE_MS - 1), req, now), { ok: false, reason: 'expired' })
  assert.deepEqual(await verifier.verify(tokens.sign(req, now + CLUSTER_TOKEN_MAX_AGE_MS + 1), req, now), { ok: false, reason: 'expired' })
  assert.deepEqual(await verifier.verify(tokens.sign(req, now - CLUSTER_TOKEN_MAX_AGE_MS + 1000), req, now), { ok: true })
})

test('a secret shorter than 16 characters is refused', async () => {
  assert.throws(() => new ClusterTokens('short'), /at least 16/)
})

test('the verifier forgets nonces once they expired, so its memory does not grow with time', async () => {
  const tokens = new ClusterTokens(SECRET)
  const verifier = new ClusterTokenVerifier(tokens)
  const t0 = Date.now()
  const first = tokens.sign(req, t0)
  assert.equal((await verifier.verify(first, req, t0)).ok, true)
  // Long after: the old nonce is dropped on the next verification; a fresh token still works once.
  const later = t0 + 3 * CLUSTER_TOKEN_MAX_AGE_MS
  const second = tokens.sign(req, later)
  assert.equal((await verifier.verify(second, req, later)).ok, true)
  assert.equal((await verifier.verify(second, req, later)).ok, false)
  // The first is now refused as expired (its nonce is gone, its age is not).
  assert.deepEqual(await verifier.verify(first, req, later), { ok: false, reason: 'expired' })
})

test('a nonce store that cannot answer refuses the call (never accepts it unrecorded)', async () => {
  const tokens = new ClusterTokens(SECRET)
  const down = { claim: async (): Promise<boolean> => { throw new Error('Connection is closed.') } }
  assert.deepEqual(await new ClusterTokenVerifier(tokens, down).verify(tokens.sign(req), req), { ok: false, reason: 'unavailable' })
})
