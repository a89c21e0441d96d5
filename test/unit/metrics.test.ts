import { test } from 'node:test'
import assert from 'node:assert/strict'
import { HttpError } from '../../src/errors.js'
import { createMetrics } from '../../src/metrics.js'
import type { CallEvent } from '../../src/routing/call-events.js'
import type { InvokeResult } from '../../src/routing/router.js'

const sources = { status: () => ({ globalClients: 0, userClients: 0, connectedClients: 0 }), counters: { mcpConnectFailures: 0, registryUnavailable: 0 } }

/** The sample lines of one metric family, without HELP/TYPE. */
function lines (text: string, family: string): string[] {
  return text.split('\n').filter((l) => l.startsWith(family))
}

test('per-request histograms: cumulative buckets in the Prometheus text format, +Inf, sum and count per label set', async () => {
  const m = createMetrics(sources as never)
  // Overhead in ms: 0.2 ms falls in le=0.00025, 0.3 in le=0.0005, 2 in le=0.0025, 5000 past the last bound (1 s).
  for (const ms of [0.2, 0.3, 2, 5000]) m.recordOverhead('/invoke', ms)
  m.recordOverhead('/tools', 0.05)
  const text = await m.render()
  const invoke = lines(text, 'gateway_overhead_seconds').filter((l) => l.includes('endpoint="/invoke"'))
  assert.deepEqual(invoke, [
    'gateway_overhead_seconds_bucket{le="0.0001",endpoint="/invoke"} 0',
    'gateway_overhead_seconds_bucket{le="0.00025",endpoint="/invoke"} 1',
    'gateway_overhead_seconds_bucket{le="0.0005",endpoint="/invoke"} 2',
    'gateway_overhead_seconds_bucket{le="0.001",endpoint="/invoke"} 2',
    'gateway_overhead_seconds_bucket{le="0.0025",endpoint="/invoke"} 3',
    'gateway_overhead_seconds_bucket{le="0.005",endpoint="/invoke"} 3',
    'gateway_overhead_seconds_bucket{le="0.01",endpoint="/invoke"} 3',
    'gateway_overhead_seconds_bucket{le="0.025",endpoint="/invoke"} 3',
    'gateway_overhead_seconds_bucket{le="0.05",endpoint="/invoke"} 3',
    'gateway_overhead_seconds_bucket{le="0.1",endpoint="/invoke"} 3',
    'gateway_overhead_seconds_bucket{le="0.25",endpoint="/invoke"} 3',
    'gateway_overhead_seconds_bucket{le="1",endpoint="/invoke"} 3',
    'gateway_overhead_seconds_bucket{le="+Inf",endpoint="/invoke"} 4',
    `gateway_overhead_seconds_sum{endpoint="/invoke"} ${(0.2 + 0.3 + 2 + 5000) / 1000}`,
    'gateway_overhead_seconds_count{endpoint="/invoke"} 4'
  ])
  assert.ok(lines(text, 'gateway_overhead_seconds_count').includes('gateway_overhead_seconds_count{endpoint="/tools"} 1'))
  assert.match(text, /^# TYPE gateway_overhead_seconds histogram$/m)
})

test('the invocation counter counts per label set; unknown label values become other; refused calls observe no duration', async () => {
  const m = createMetrics(sources as never)
  m.recordInvocation({ endpoint: '/invoke', route: 'function', outcome: 'ok', durationMs: 3 })
  m.recordInvocation({ endpoint: '/invoke', route: 'function', outcome: 'ok', durationMs: 4 })
  m.recordInvocation({ endpoint: '/invoke', route: undefined, outcome: 'GW_TOOL_NOT_FOUND', durationMs: undefined })
  m.recordInvocation({ endpoint: '/somewhere', route: 'bogus_tier', outcome: 'made-up', durationMs: 1 })
  const text = await m.render()
  assert.deepEqual(lines(text, 'gateway_invocations_total{'), [
    'gateway_invocations_total{endpoint="/invoke",route="function",outcome="ok"} 2',
    'gateway_invocations_total{endpoint="/invoke",route="none",outcome="GW_TOOL_NOT_FOUND"} 1',
    'gateway_invocations_total{endpoint="other",route="none",outcome="other"} 1'
  ])
  assert.match(text, /^# TYPE gateway_invocations_total counter$/m)
  assert.deepEqual(lines(text, 'gateway_invoke_duration_seconds_count'), ['gateway_invoke_duration_seconds_count{route="function"} 2'])
  assert.ok(lines(text, 'gateway_invoke_duration_seconds_sum').includes('gateway_invoke_duration_seconds_sum{route="function"} 0.007'))
})

test('recordCall: a call event counts under its endpoint; a held call is route none except over /mcp; a decision via approval is not counted', async () => {
  const m = createMetrics(sources as never)
  const result = (route: string, code?: string): InvokeResult => ({
    callId: 'c',
    name: 't',
    route: route as InvokeResult['route'],
    output: '',
    isError: code !== undefined,
    error: code !== undefined ? { code, message: '' } : null,
    truncated: false,
    trace: null,
    durationMs: 5,
    toolMs: 5
  })
  const event = (via: CallEvent['via'], end: CallEvent['end'], outcome: CallEvent['outcome']): CallEvent => ({
    ...{ via, end, outcome, callId: 'c', name: 't', arguments: {}, userId: undefined, serverId: undefined, keyId: undefined, startedAt: 0 },
    ...{ approvalId: undefined, parentCallId: undefined }
  })
  m.recordCall(event('invoke', 'finished', { ok: true, result: result('function') }))
  m.recordCall(event('batch', 'refused', { ok: false, error: new HttpError('GW_BAD_REQUEST', 'bad'), toolMs: 0 }))
  m.recordCall(event('batch', 'held', { ok: true, result: result('function', 'GW_APPROVAL_PENDING'), pending: { approvalId: 'a' } }))
  m.recordCall(event('mcp', 'held', { ok: true, result: result('function', 'GW_APPROVAL_PENDING'), pending: { approvalId: 'a' } }))
  m.recordCall(event('invoke', 'decided', { ok: true, result: result('builtin', 'APPROVAL_DENIED') }))
  m.recordCall(event('approval', 'finished', { ok: true, result: result('function') }))
  const text = await m.render()
  assert.deepEqual(lines(text, 'gateway_invocations_total{'), [
    'gateway_invocations_total{endpoint="/invoke",route="function",outcome="ok"} 1',
    'gateway_invocations_total{endpoint="/invoke/batch",route="none",outcome="GW_BAD_REQUEST"} 1',
    'gateway_invocations_total{endpoint="/invoke/batch",route="none",outcome="GW_APPROVAL_PENDING"} 1',
    'gateway_invocations_total{endpoint="/mcp",route="function",outcome="GW_APPROVAL_PENDING"} 1',
    'gateway_invocations_total{endpoint="/invoke",route="builtin",outcome="APPROVAL_DENIED"} 1'
  ])
  assert.deepEqual(
    lines(text, 'gateway_invoke_duration_seconds_count'),
    ['gateway_invoke_duration_seconds_count{route="function"} 2', 'gateway_invoke_duration_seconds_count{route="builtin"} 1']
  )
})
