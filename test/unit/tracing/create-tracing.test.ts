import { test } from 'node:test'
import type { TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace'
import type { ReadableSpan } from '@opentelemetry/sdk-trace'
import { SpanKind, SpanStatusCode } from '@opentelemetry/api'
import { createTracing, NO_TRACING } from '../../../src/tracing/index.js'
import type { Tracing } from '../../../src/tracing/index.js'
import { StartupError } from '../../../src/errors.js'

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736'
const CALLER_SPAN = '00f067aa0ba902b7'
const ENDPOINT = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' }

async function traced (t: TestContext, env: Record<string, string> = {}): Promise<{ tracing: Tracing, spans: () => ReadableSpan[] }> {
  const exporter = new InMemorySpanExporter()
  const tracing = await createTracing(env, { exporter })
  t.after(async () => await tracing.shutdown())
  return { tracing, spans: () => exporter.getFinishedSpans() }
}

const OK = { ok: true as const, result: { isError: false, error: null } }

test('off unless an OTLP endpoint is set, and off again with OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none', async () => {
  assert.equal(await createTracing({}), NO_TRACING)
  assert.equal(await createTracing({ OTEL_EXPORTER_OTLP_ENDPOINT: '  ' }), NO_TRACING)
  assert.equal(await createTracing({ ...ENDPOINT, OTEL_SDK_DISABLED: 'true' }), NO_TRACING)
  assert.equal(await createTracing({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://127.0.0.1:9/v1/traces', OTEL_TRACES_EXPORTER: 'none' }), NO_TRACING)
  assert.equal(NO_TRACING.enabled, false)
})

test('on with an endpoint; a protocol, sampler or ratio it cannot honour stops start-up naming the variable', async () => {
  const on = await createTracing({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://127.0.0.1:9/v1/traces', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' })
  assert.equal(on.enabled, true)
  await on.shutdown()
  await assert.rejects(createTracing({ ...ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }), (err: unknown) => err instanceof StartupError && /OTEL_EXPORTER_OTLP_PROTOCOL 'grpc'/.test(err.message))
  await assert.rejects(createTracing({ ...ENDPOINT, OTEL_TRACES_SAMPLER: 'sometimes' }), /OTEL_TRACES_SAMPLER 'sometimes'/)
  await assert.rejects(createTracing({ ...ENDPOINT, OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '2' }), /OTEL_TRACES_SAMPLER_ARG/)
})

test('NO_TRACING runs everything as it is and writes nothing', async () => {
  const params: Record<string, unknown> = { name: 'x' }
  assert.equal(await NO_TRACING.upstream({ serverId: 's', method: 'tools/call' }, params, async () => 7), 7)
  assert.deepEqual(params, { name: 'x' })
  const headers: Record<string, string> = {}
  NO_TRACING.inject(headers)
  assert.deepEqual(headers, {})
  assert.equal(NO_TRACING.within(NO_TRACING.startRequest('GET', '/x', {}), () => 3), 3)
})

test('request, tool call and upstream spans form one chain under the caller\'s traceparent; the upstream context goes into _meta and headers', async (t) => {
  const { tracing, spans } = await traced(t)
  const request = tracing.startRequest('POST', '/invoke', { traceparent: `00-${TRACE_ID}-${CALLER_SPAN}-01`, tracestate: 'a=b' })
  const params: Record<string, unknown> = { name: 'probe', arguments: { text: 'secret-arg' }, _meta: { progressToken: 4 } }
  const headers: Record<string, string> = {}
  const call = { name: 'srv__probe', callId: 'c-1', via: 'invoke', userId: undefined as string | undefined, route: undefined as string | undefined }
  await tracing.within(request, async () => await tracing.toolCall(call, async () => {
    call.userId = 'acme'
    call.route = 'user_mcp'
    await tracing.upstream({ serverId: 'srv', method: 'tools/call', target: 'probe' }, params, async () => { tracing.inject(headers) })
    return OK
  }))
  request.end(200)
  request.end(500) // a second end changes nothing

  const [upstream, toolCall, server] = spans()
  assert.equal(spans().length, 3)
  assert.ok(server !== undefined && toolCall !== undefined && upstream !== undefined)
  assert.equal(server.name, 'POST /invoke')
  assert.equal(server.kind, SpanKind.SERVER)
  assert.equal(server.parentSpanContext?.spanId, CALLER_SPAN)
  assert.equal(server.attributes['http.response.status_code'], 200)
  assert.equal(toolCall.parentSpanContext?.spanId, server.spanContext().spanId)
  const a = toolCall.attributes
  assert.deepEqual(
    [a['gateway.tool.name'], a['gateway.tier'], a['gateway.tenant'], a['gateway.outcome'], a['gateway.call_id']],
    ['srv__probe', 'user_mcp', 'acme', 'ok', 'c-1'])
  assert.equal(upstream.kind, SpanKind.CLIENT)
  assert.equal(upstream.parentSpanContext?.spanId, toolCall.spanContext().spanId)
  for (const s of [server, toolCall, upstream]) assert.equal(s.spanContext().traceId, TRACE_ID)
  const expected = `00-${TRACE_ID}-${upstream.spanContext().spanId}-01`
  assert.deepEqual(params._meta, { progressToken: 4, traceparent: expected, tracestate: 'a=b' })
  assert.deepEqual(headers, { traceparent: expected, tracestate: 'a=b' })
  assert.ok(!JSON.stringify(spans().map((s) => s.attributes)).includes('secret-arg'))

  // Outside every span there is nothing to propagate.
  const outside: Record<string, string> = {}
  tracing.inject(outside)
  assert.deepEqual(outside, {})
})

test('a refused call and a failed upstream request are errors named by their codes, never their messages', async (t) => {
  const { tracing, spans } = await traced(t)
  const call = { name: 'nope', callId: 'c-2', via: 'batch', userId: undefined, route: undefined }
  await tracing.toolCall(call, async () => ({ ok: false as const, error: { code: 'GW_TOOL_NOT_FOUND' } }))
  const failure = Object.assign(new Error('token sk-abc leaked in a message'), { code: 'GW_UPSTREAM_TIMEOUT' })
  await assert.rejects(tracing.upstream({ serverId: 's', method: 'tools/call' }, undefined, async () => { throw failure }), failure)
  const [refused, upstream] = spans()
  assert.equal(refused?.attributes['gateway.outcome'], 'GW_TOOL_NOT_FOUND')
  assert.equal(refused?.status.code, SpanStatusCode.ERROR)
  assert.equal(refused?.parentSpanContext, undefined)
  assert.equal(upstream?.attributes['error.type'], 'GW_UPSTREAM_TIMEOUT')
  assert.ok(!JSON.stringify(spans().map((s) => [s.attributes, s.status, s.events])).includes('sk-abc'))
})

test('OTEL_TRACES_SAMPLER=always_off: spans are not recorded, nor exported', async (t) => {
  const { tracing, spans } = await traced(t, { OTEL_TRACES_SAMPLER: 'always_off' })
  const request = tracing.startRequest('GET', '/tools', {})
  const call = { name: 'x', callId: 'c', via: 'invoke', userId: undefined, route: undefined }
  await tracing.within(request, async () => await tracing.toolCall(call, async () => OK))
  request.end(200)
  assert.equal(spans().length, 0)
})
