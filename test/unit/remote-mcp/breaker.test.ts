/**
 * The circuit breaker's state machine on its own, with explicit clocks: consecutive failures
 * within the window open it, a success ends the run, one probe at a time once the open period
 * is over, a failed probe reopens, a reset forgets, and memory stays bounded.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { CircuitBreakers } from '../../../src/remote-mcp/breaker.js'

const opts = { failures: 3, windowMs: 1000, openMs: 5000, maxEntries: 10 }

test('opens after N consecutive failures within the window, not when a success or the window breaks the run', () => {
  const b = new CircuitBreakers(opts)
  b.failure('s#1', 's', 'e', 0)
  b.failure('s#1', 's', 'e', 100)
  b.success('s#1')
  b.failure('s#1', 's', 'e', 200)
  b.failure('s#1', 's', 'e', 300)
  assert.deepEqual(b.admit('s#1', 301), { ok: true, probe: false }, 'a success ended the first run')
  // The run started at 200: a failure past 1200 starts a new run instead of completing this one.
  b.failure('s#1', 's', 'e', 1500)
  assert.equal(b.admit('s#1', 1501).ok, true)
  assert.equal(b.snapshot()[0]?.consecutiveFailures, 1)
  b.failure('s#1', 's', 'e', 1600)
  b.failure('s#1', 's', 'boom', 1700)
  const refused = b.admit('s#1', 1800)
  assert.equal(refused.ok, false)
  assert.ok(!refused.ok && refused.retryAt === 6700 && /3 consecutive failures \(last failure: boom\)/.test(refused.message), JSON.stringify(refused))
  assert.equal(b.openedTotal, 1)
  assert.deepEqual(b.counts(), { open: 1, halfOpen: 0 })
})

test('after the open period exactly one probe goes through; its failure reopens, its success closes, no verdict lets the next one probe', () => {
  const b = new CircuitBreakers(opts)
  for (let i = 0; i < 3; i++) b.failure('s#1', 's', 'e', 0)
  assert.equal(b.admit('s#1', 4999).ok, false)
  assert.deepEqual(b.admit('s#1', 5000), { ok: true, probe: true })
  assert.equal(b.admit('s#1', 5001).ok, false, 'one probe at a time')
  b.release('s#1')
  assert.deepEqual(b.admit('s#1', 5002), { ok: true, probe: true }, 'a probe without a verdict hands over')
  b.failure('s#1', 's', 'still down', 5003)
  assert.equal(b.openedTotal, 2)
  const again = b.admit('s#1', 5004)
  assert.ok(!again.ok && again.retryAt === 10_003)
  assert.deepEqual(b.admit('s#1', 10_003), { ok: true, probe: true })
  b.success('s#1')
  assert.deepEqual(b.admit('s#1', 10_004), { ok: true, probe: false })
  assert.deepEqual(b.snapshot(), [])
})

test('reset forgets matching breakers; memory is bounded and open breakers are kept over closed ones', () => {
  const b = new CircuitBreakers({ ...opts, maxEntries: 3 })
  for (let i = 0; i < 3; i++) b.failure('open#1', 'open', 'e', 0)
  for (let i = 0; i < 10; i++) b.failure(`c${i}#1`, `c${i}`, 'e', 0)
  assert.equal(b.snapshot().length, 3)
  assert.equal(b.admit('open#1', 1).ok, false, 'the open breaker survived the eviction of closed ones')
  b.reset((key) => key === 'open')
  assert.equal(b.admit('open#1', 1).ok, true)
})
