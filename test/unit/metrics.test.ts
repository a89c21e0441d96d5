import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createMetrics } from '../../src/metrics.js'

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
