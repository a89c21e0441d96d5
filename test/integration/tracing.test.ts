// OpenTelemetry tracing end to end (SPEC 18): the real gateway process with an OTLP endpoint set,
// a real OTLP/HTTP receiver on loopback, and a real streamable-HTTP MCP server. A caller's
// traceparent on POST /invoke must reach the request, tool-call and upstream spans, and the MCP
// server (in its HTTP headers and in the tools/call `_meta`); no span may carry the arguments or a secret.
import { test } from 'node:test'
import type { TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { createServer } from 'node:http'
import type { IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import * as z from 'zod'
import { startGateway } from '../../scripts/lib/gateway-process.js'
import { startStreamableHttpFixture } from '../../scripts/lib/mcp-fixtures/index.js'

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736'
const CALLER_SPAN = '00f067aa0ba902b7'
const ARGUMENT_SECRET = 'sk-live-argument-5f1c2d9e8a7b6c4d'
const HEADER_SECRET = 'server-header-secret-91e0c3a7d2'

interface Received { contentType: string, body: Buffer }

/** An OTLP/HTTP receiver: POST /v1/traces, each export kept as it came. */
async function startReceiver (t: TestContext): Promise<{ url: string, exports: Received[] }> {
  const exports: Received[] = []
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      if (req.method === 'POST' && req.url === '/v1/traces') exports.push({ contentType: req.headers['content-type'] ?? '', body: Buffer.concat(chunks) })
      const json = (req.headers['content-type'] ?? '').includes('json')
      res.writeHead(200, { 'content-type': json ? 'application/json' : 'application/x-protobuf' })
      res.end(json ? '{}' : undefined)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(async () => { server.closeAllConnections(); await new Promise((resolve) => server.close(resolve)) })
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, exports }
}

interface SeenCall { headers: IncomingHttpHeaders | undefined, meta: Record<string, unknown> | undefined }

/** A streamable-HTTP MCP server whose one tool records the HTTP headers and `_meta` its call came with. */
async function startProbeServer (t: TestContext): Promise<{ url: string, seen: SeenCall[] }> {
  const seen: SeenCall[] = []
  const fixture = await startStreamableHttpFixture({
    factory: () => {
      const server = new McpServer({ name: 'trace-probe', version: '1.0.0' })
      server.registerTool('probe', { description: 'Records how it was called.', inputSchema: { text: z.string() } }, async ({ text }, extra) => {
        seen.push({ headers: extra.requestInfo?.headers, meta: extra._meta as Record<string, unknown> | undefined })
        return { content: [{ type: 'text' as const, text: `probed ${text.length}` }] }
      })
      return server
    }
  })
  t.after(async () => await fixture.close())
  return { url: fixture.url, seen }
}

interface OtlpSpan {
  traceId: string
  spanId: string
  parentSpanId?: string
  name: string
  kind: number
  attributes?: Array<{ key: string, value: Record<string, unknown> }>
}

function spansOf (exports: Received[]): OtlpSpan[] {
  const spans: OtlpSpan[] = []
  for (const e of exports) {
    const doc = JSON.parse(e.body.toString('utf8')) as { resourceSpans?: Array<{ scopeSpans?: Array<{ spans?: OtlpSpan[] }> }> }
    for (const rs of doc.resourceSpans ?? []) for (const ss of rs.scopeSpans ?? []) spans.push(...(ss.spans ?? []))
  }
  return spans
}

function attr (span: OtlpSpan, key: string): unknown {
  const value = span.attributes?.find((a) => a.key === key)?.value
  return value === undefined ? undefined : Object.values(value)[0]
}

async function until<T> (what: string, fn: () => T | undefined, ms = 15_000): Promise<T> {
  const end = Date.now() + ms
  for (;;) {
    const v = fn()
    if (v !== undefined) return v
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await delay(50)
  }
}

async function setUp (t: TestContext, env: Record<string, string>): Promise<{ invoke: () => Promise<Response>, exports: Received[], seen: SeenCall[] }> {
  const receiver = await startReceiver(t)
  const probe = await startProbeServer(t)
  const dir = await mkdtemp(join(tmpdir(), 'tg-tracing-'))
  t.after(async () => await rm(dir, { recursive: true, force: true }))
  const serversFile = join(dir, 'servers.json')
  const traced = { type: 'streamable-http', url: probe.url, headers: { 'x-upstream-key': HEADER_SECRET } }
  await writeFile(serversFile, JSON.stringify({ mcpServers: { traced } }))
  const gw = await startGateway(t, {
    SANDBOX: 'none',
    WORKSPACES_DIR: join(dir, 'workspaces'),
    MCP_SERVERS_FILE: serversFile,
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_BSP_SCHEDULE_DELAY: '50',
    OTEL_SERVICE_NAME: 'gateway-under-test',
    ...env
  })
  t.after(async () => { await gw.stop() })
  const invoke = async (): Promise<Response> => await fetch(`${gw.url}/invoke`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', traceparent: `00-${TRACE_ID}-${CALLER_SPAN}-01`, tracestate: 'caller=t61rcWkgMzE' },
    body: JSON.stringify({ name: 'traced__probe', arguments: { text: ARGUMENT_SECRET } })
  })
  return { invoke, exports: receiver.exports, seen: probe.seen }
}

for (const transport of ['lean', 'sdk'] as const) {
  test(`http/json, ${transport} transport: the caller's trace reaches the request, tool-call and upstream spans, and the MCP server in headers and _meta`, async (t) => {
    const { invoke, exports, seen } = await setUp(t, { OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', MCP_HTTP_TRANSPORT: transport })
    const res = await invoke()
    const result = await res.json() as { isError: boolean, output: string }
    assert.equal(res.status, 200, JSON.stringify(result))
    assert.equal(result.isError, false, result.output)

    const ofTrace = (): OtlpSpan[] => spansOf(exports).filter((s) => s.traceId.toLowerCase() === TRACE_ID)
    const request = await until('the request span', () => ofTrace().find((s) => s.name === 'POST /invoke'))
    const call = await until('the tool-call span', () => ofTrace().find((s) => s.name === 'execute_tool traced__probe'))
    const upstream = await until('the upstream span', () => ofTrace().find((s) => s.name === 'tools/call probe'))

    // One chain: the caller's span, the request (server), the call (internal), the upstream request (client).
    assert.equal(request.parentSpanId, CALLER_SPAN)
    assert.equal(request.kind, 2)
    assert.equal(attr(request, 'http.route'), '/invoke')
    assert.equal(attr(request, 'http.response.status_code'), 200)
    assert.equal(call.parentSpanId, request.spanId)
    assert.equal(attr(call, 'gateway.tool.name'), 'traced__probe')
    assert.equal(attr(call, 'gateway.tier'), 'global_mcp')
    assert.equal(attr(call, 'gateway.outcome'), 'ok')
    assert.equal(typeof attr(call, 'gateway.call_id'), 'string')
    assert.equal(upstream.parentSpanId, call.spanId)
    assert.equal(upstream.kind, 3)
    assert.equal(attr(upstream, 'gateway.server_id'), 'traced')
    assert.equal(attr(upstream, 'mcp.method.name'), 'tools/call')

    // The MCP server saw the upstream span's context, in its HTTP headers and in the call's _meta.
    assert.equal(seen.length, 1)
    const upstreamParent = `00-${TRACE_ID}-${upstream.spanId}-01`
    assert.equal(seen[0]?.headers?.traceparent, upstreamParent)
    assert.equal(seen[0]?.meta?.traceparent, upstreamParent)
    assert.equal(seen[0]?.headers?.tracestate, 'caller=t61rcWkgMzE')
    assert.equal(seen[0]?.meta?.tracestate, 'caller=t61rcWkgMzE')

    // The connect and the listing were upstream requests too: a client span each, naming the server.
    for (const method of ['initialize', 'tools/list']) {
      const span = await until(`the upstream ${method} span`, () => spansOf(exports).find((s) => s.name === method))
      assert.equal(span.kind, 3, method)
      assert.equal(attr(span, 'gateway.server_id'), 'traced', method)
      assert.equal(attr(span, 'mcp.method.name'), method)
    }

    // Nothing of the arguments, the result or the server's secret header in any export.
    const everything = exports.map((e) => e.body.toString('utf8')).join('\n')
    assert.ok(everything.includes('gateway-under-test'), 'OTEL_SERVICE_NAME names the service')
    assert.ok(!everything.includes(ARGUMENT_SECRET), 'an argument value is in a span')
    assert.ok(!everything.includes(HEADER_SECRET), 'a server header value is in a span')
    assert.ok(!everything.includes('probed '), 'the result is in a span')
  })
}

test('http/protobuf (the default): the export is protobuf and carries the caller\'s trace id and the three spans', async (t) => {
  const { invoke, exports } = await setUp(t, {})
  const res = await invoke()
  assert.equal(res.status, 200)
  // The exporter's transformer packages only encode requests (no decoder is public), so the body is
  // checked for what protobuf carries verbatim: the 16 trace id bytes and the span names as UTF-8.
  const traceBytes = Buffer.from(TRACE_ID, 'hex')
  const all = (): Buffer => Buffer.concat(exports.map((e) => e.body))
  await until('the three spans', () => ['POST /invoke', 'execute_tool traced__probe', 'tools/call probe'].every((n) => all().includes(n)) ? true : undefined)
  assert.ok(exports.every((e) => e.contentType === 'application/x-protobuf'), exports.map((e) => e.contentType).join())
  assert.ok(all().includes(traceBytes), 'the caller\'s trace id')
  assert.ok(!all().includes(ARGUMENT_SECRET) && !all().includes(HEADER_SECRET), 'no argument or secret')
})
