/**
 * Breaker admission as the pool uses it: refusals are GW_UPSTREAM_UNAVAILABLE with retryAt before
 * any I/O, a failure shared by many callers counts once, an answer of the server ends the run,
 * cancellations count neither way, a probe without a verdict hands over. (The state machine's own
 * rules and clocks: breaker.test.ts.)
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { ProtocolError, ProtocolErrorCode, SdkError, SdkErrorCode } from '@modelcontextprotocol/client'
import { BreakerAdmission } from '../../../src/remote-mcp/breaker-admission.js'
import { UpstreamError } from '../../../src/remote-mcp/errors.js'
import type { Logger } from '../../../src/logger.js'

function recordingLogger (): Logger & { lines: string[] } {
  const lines: string[] = []
  const push = (_obj: Record<string, unknown>, msg?: string): void => { lines.push(msg ?? '') }
  return { lines, debug: push, info: push, warn: push, error: push }
}

const target = { id: 's#1', key: 's' }
const describe = (err: unknown): string => (err as Error).message

test('failures open the breaker: admit throws GW_UPSTREAM_UNAVAILABLE with retryAt, openError says so, the opening is logged once', () => {
  const log = recordingLogger()
  const admission = new BreakerAdmission({ failures: 2, windowMs: 60_000, openMs: 60_000, maxEntries: 10 }, log)
  assert.deepEqual(admission.admit(target.id), { ok: true, probe: false })
  assert.equal(admission.openError(target.id), undefined)
  admission.countFailure(target, new UpstreamError('GW_UPSTREAM_CONNECT', 'refused'), 'connect', describe)
  admission.countFailure(target, new TypeError('fetch failed'), 'call', describe)
  assert.throws(() => admission.admit(target.id), (err: unknown) => {
    assert.ok(err instanceof UpstreamError)
    assert.equal(err.code, 'GW_UPSTREAM_UNAVAILABLE')
    assert.match(err.message, /2 consecutive failures \(last failure: fetch failed\)/)
    assert.ok(typeof err.retryAt === 'number' && err.retryAt > Date.now())
    return true
  })
  assert.equal(admission.openError(target.id)?.code, 'GW_UPSTREAM_UNAVAILABLE')
  assert.equal(admission.tryAdmit(target.id).ok, false, 'background work gets the refusal as a value')
  assert.equal(log.lines.filter((l) => l.includes('circuit breaker opened')).length, 1)
  const stats = admission.stats()
  assert.equal(stats.breakerOpens, 1)
  assert.equal(stats.open, 1)
  assert.equal(stats.breakers[0]?.key, 's')
})

test('one error reaching many callers counts once; answers end the run; cancellations and call timeouts count neither way', () => {
  const admission = new BreakerAdmission({ failures: 2, windowMs: 60_000, openMs: 60_000, maxEntries: 10 }, recordingLogger())
  const shared = new UpstreamError('GW_UPSTREAM_CONNECT', 'refused')
  for (let i = 0; i < 5; i++) admission.countFailure(target, shared, 'connect', describe)
  assert.equal(admission.admit(target.id).ok, true, 'five waiters of one connect are one failure')
  admission.countFailure(target, new ProtocolError(ProtocolErrorCode.InvalidParams, 'bad'), 'call', describe)
  assert.deepEqual(admission.stats().breakers, [], 'a JSON-RPC error is an answer: the run ended')
  admission.countFailure(target, new UpstreamError('GW_UPSTREAM_CONNECT', 'refused'), 'connect', describe)
  admission.countFailure(target, new UpstreamError('GW_CANCELLED', 'cancelled'), 'call', describe)
  admission.countFailure(target, new SdkError(SdkErrorCode.RequestTimeout, 'timed out'), 'call', describe)
  assert.equal(admission.admit(target.id).ok, true)
  assert.equal(admission.stats().breakers[0]?.consecutiveFailures, 1)
  admission.success(target.id)
  assert.deepEqual(admission.stats().breakers, [])
})

test('the half-open probe: one at a time, handed over by done() without a verdict, reset forgets', async () => {
  const admission = new BreakerAdmission({ failures: 1, windowMs: 60_000, openMs: 20, maxEntries: 10 }, recordingLogger())
  admission.countFailure(target, new TypeError('fetch failed'), 'list', describe)
  assert.equal(admission.tryAdmit(target.id).ok, false)
  await new Promise((resolve) => setTimeout(resolve, 40))
  const probe = admission.admit(target.id)
  assert.deepEqual(probe, { ok: true, probe: true })
  assert.throws(() => admission.admit(target.id), /being probed|probe is under way/)
  admission.done(target.id, probe)
  assert.deepEqual(admission.admit(target.id), { ok: true, probe: true }, 'the next operation probes')
  admission.reset((key) => key === 's')
  assert.deepEqual(admission.admit(target.id), { ok: true, probe: false })
})
