import { test } from 'node:test'
import type { TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace'
import type { FastifyInstance } from 'fastify'
import { createTracing, NO_TRACING } from '../../../src/tracing/index.js'
import { buildTestApp, listenOnLoopback } from '../../helpers/app.js'
import { postModernMcp } from '../../helpers/mcp-raw.js'

// plugins/tracing.ts and the Gateway's call span over the in-process app, with the SDK's in-memory
// exporter (each span exported as it ends). The OTLP path is test/integration/tracing.test.ts.

const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'

async function appWith (t: TestContext, env: Record<string, string>): Promise<{ app: FastifyInstance, exporter: InMemorySpanExporter }> {
  const exporter = new InMemorySpanExporter()
  const tracing = await createTracing(env, { exporter })
  t.after(async () => await tracing.shutdown())
  return { app: await buildTestApp(t, { overrides: { tracing } }), exporter }
}

async function traffic (app: FastifyInstance): Promise<void> {
  const payload = { name: 'calculate', arguments: { expression: '6 * 7' } }
  const ok = await app.inject({ method: 'POST', url: '/invoke', headers: { traceparent: TRACEPARENT }, payload })
  assert.equal(ok.statusCode, 200, ok.body)
  assert.equal(JSON.parse(ok.json().output).result, 42)
  const missing = await app.inject({ method: 'POST', url: '/invoke', payload: { name: 'no_such_tool', arguments: {} } })
  assert.equal(missing.statusCode, 404, missing.body)
  assert.equal((await app.inject({ method: 'GET', url: '/nowhere' })).statusCode, 404)
}

test('off (OTEL_SDK_DISABLED=true even with an exporter): no span at all, the app runs as without tracing', async (t) => {
  const exporter = new InMemorySpanExporter()
  const tracing = await createTracing({ OTEL_SDK_DISABLED: 'true', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' }, { exporter })
  assert.equal(tracing, NO_TRACING)
  const app = await buildTestApp(t, { overrides: { tracing } })
  await traffic(app)
  assert.equal(exporter.getFinishedSpans().length, 0)
})

test('on: a server span per request under the caller\'s trace, the tool call a child of it, refused calls and unmatched routes too', async (t) => {
  const { app, exporter } = await appWith(t, {})
  await traffic(app)
  const spans = exporter.getFinishedSpans()
  const invoke = spans.filter((s) => s.name === 'POST /invoke')
  assert.equal(invoke.length, 2)
  const traced = invoke.find((s) => s.spanContext().traceId === '4bf92f3577b34da6a3ce929d0e0e4736')
  assert.ok(traced !== undefined)
  assert.equal(traced.parentSpanContext?.spanId, '00f067aa0ba902b7')
  assert.equal(traced.attributes['http.route'], '/invoke')
  const call = spans.find((s) => s.name === 'execute_tool calculate')
  assert.equal(call?.parentSpanContext?.spanId, traced.spanContext().spanId)
  assert.equal(call?.attributes['gateway.tier'], 'function')
  assert.equal(call?.attributes['gateway.outcome'], 'ok')
  const refused = spans.find((s) => s.name === 'execute_tool no_such_tool')
  assert.equal(refused?.attributes['gateway.outcome'], 'GW_TOOL_NOT_FOUND')
  const unmatched = spans.find((s) => s.name === 'GET')
  assert.equal(unmatched?.attributes['http.response.status_code'], 404)
  // Neither the arguments nor the result.
  assert.ok(!JSON.stringify(spans.map((s) => s.attributes)).includes('6 * 7'))
  assert.ok(!JSON.stringify(spans.map((s) => s.attributes)).includes('"result"'))
})

test('on: an /mcp tools/call is a tool-call span under the POST /mcp span of the caller\'s trace', async (t) => {
  const { app, exporter } = await appWith(t, {})
  const url = `${await listenOnLoopback(app)}/mcp?functions=calculate`
  const answer = await postModernMcp(url, 'unused-in-open-mode', { method: 'tools/call', params: { name: 'calculate', arguments: { expression: '2 + 3' } } }, {
    headers: { 'mcp-name': 'calculate', traceparent: TRACEPARENT }
  })
  assert.equal(answer.status, 200, JSON.stringify(answer.json))
  assert.equal(answer.json.result?.isError, false, JSON.stringify(answer.json))
  const spans = exporter.getFinishedSpans()
  const request = spans.find((s) => s.name === 'POST /mcp')
  assert.equal(request?.parentSpanContext?.spanId, '00f067aa0ba902b7')
  const call = spans.find((s) => s.name === 'execute_tool calculate')
  assert.equal(call?.parentSpanContext?.spanId, request?.spanContext().spanId)
  assert.equal(call?.attributes['gateway.via'], 'mcp')
})
