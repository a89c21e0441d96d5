import { test } from 'node:test'
import assert from 'node:assert/strict'
import { AuthFailureGuard } from '../../../src/auth/failure-guard.js'

test('AuthFailureGuard: blocks at the limit until the window ends, per address; 0 is off', () => {
  const guard = new AuthFailureGuard(3, 60_000)
  const t0 = 1_000_000
  for (let i = 0; i < 2; i++) guard.recordFailure('a', t0 + i)
  assert.equal(guard.blockedFor('a', t0 + 10), 0)
  guard.recordFailure('a', t0 + 20)
  assert.equal(guard.blockedFor('a', t0 + 30), 60_000 - 30)
  assert.equal(guard.blockedFor('b', t0 + 30), 0)
  // the window ends: a fresh count
  assert.equal(guard.blockedFor('a', t0 + 60_000), 0)
  guard.recordFailure('a', t0 + 60_001)
  assert.equal(guard.blockedFor('a', t0 + 60_002), 0)

  const off = new AuthFailureGuard(0)
  for (let i = 0; i < 100; i++) off.recordFailure('a')
  assert.equal(off.blockedFor('a'), 0)
  assert.equal(off.size, 0)
})

test('AuthFailureGuard: memory stays bounded under addresses that never repeat', () => {
  const guard = new AuthFailureGuard(1, 60_000)
  const now = Date.now()
  for (let i = 0; i < 60_000; i++) guard.recordFailure(`10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`, now)
  assert.ok(guard.size <= 50_000, `${guard.size} addresses tracked`)
  // the newest are the ones kept
  assert.ok(guard.blockedFor('10.0.234.95', now) > 0)
})
