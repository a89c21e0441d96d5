import { test } from 'node:test'
import assert from 'node:assert/strict'
import fc from 'fast-check'
import type { FastifyInstance } from 'fastify'
import { buildTestApp } from '../helpers/app.js'

// Every route the gateway serves (its own OpenAPI document) with hostile path parameters, query strings, bodies and
// content types: never a 500, and every error in one of the gateway's two shapes (`{ statusCode, code: GW_..., error,
// message }`, or a JSON-RPC error on /mcp). fuzz-http.test.ts goes deeper on /invoke and /tools; this one goes wide.

const METHODS = ['get', 'post', 'put', 'delete'] as const
type Method = typeof METHODS[number]

const ODD_SEGMENTS = [
  '', ' ', '..', '%2e%2e', 'a'.repeat(300), '%00', '%F0%9F%98%80', '_global', '-', 'a%2Fb', '1-2', 'user_1', '%25', 'null',
  '__proto__', 'constructor', 'toString', '1', 'x.y', '%C0%AE', '%zz', '%'
]
const ODD_QUERIES = [
  '', '?functions=toString', '?userId=__proto__', '?limit=-1&since=abc', '?limit=1e400', '?format=xyz&mcp=a,,b', `?q=${'a'.repeat(3000)}`,
  '?functions=a&functions=b', '?cursor=%00', '?until=2026-13-45', '?since=9999999999999999999', '?isError=maybe', '?tool=%FF',
  '?mode=search&pinned=__proto__', '?defer=true&format=anthropic', '?%zz=1'
]
const ODD_BODIES: ReadonlyArray<string | undefined> = [
  undefined, '', 'null', '[]', '{}', '"x"', '1', 'true', '{"a":', '{"__proto__":{"x":1}}', '{"constructor":{"prototype":{"x":1}}}',
  '{"name":"calculate","arguments":"not json"}', '{"name":5}', '{"calls":[{},null,1]}', '{"calls":"x"}',
  '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":null}', '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":null}}',
  '[{"jsonrpc":"2.0","id":1,"method":"ping"}]', '[null]', '{"url":"file:///etc/passwd"}', '{"url":123,"headers":[1]}', '{"decision":null}',
  '{"rules":5}', '{"path":"../../etc/passwd"}', '\u00ff\u00fe\u0000', '{"a": 1e400}', '{"accept":["__proto__"]}', '{"guardrails":[{"check":"nope"}]}'
]
const CONTENT_TYPES: ReadonlyArray<string | undefined> = [
  'application/json', 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/json; charset=latin1', undefined
]

interface Route { method: Method, path: string }

async function routesOf (app: FastifyInstance): Promise<Route[]> {
  const doc = (await app.inject({ method: 'GET', url: '/openapi.json' })).json<{ paths: Record<string, Record<string, unknown>> }>()
  const routes: Route[] = []
  for (const [path, ops] of Object.entries(doc.paths)) {
    for (const method of METHODS) if (ops[method] !== undefined) routes.push({ method, path })
  }
  return routes
}

/** The route's path with every `{param}` replaced by `segment` (raw: it may be a malformed escape on purpose). */
function fill (path: string, segment: string): string {
  return path.replace(/\{[A-Za-z]+\}/g, segment === '' ? 'x' : segment)
}

/** One request; the assertion names it, so a failure can be replayed with curl. */
async function checkOne (app: FastifyInstance, method: Method, url: string, body: string | undefined, contentType: string | undefined): Promise<void> {
  const mcp = url === '/mcp' || url.startsWith('/mcp?')
  // GET /mcp is a notification stream that stays open: asked for JSON only, it is refused at once (406).
  const headers: Record<string, string> = { accept: mcp && method !== 'get' ? 'application/json, text/event-stream' : 'application/json' }
  if (contentType !== undefined && body !== undefined) headers['content-type'] = contentType
  const payload = body !== undefined && method !== 'get' ? { payload: body } : {}
  const res = await app.inject({ method: method.toUpperCase() as 'GET', url, headers, ...payload })
  const what = `${method.toUpperCase()} ${url.slice(0, 200)} body=${JSON.stringify(body)?.slice(0, 80)} content-type=${contentType}: ${res.statusCode} ${res.body.slice(0, 300)}`
  assert.ok(res.statusCode < 500, what)
  if (res.statusCode < 400) return
  const json = JSON.parse(res.body) as { code?: unknown, statusCode?: unknown, error?: { code?: unknown } }
  if (json.error !== undefined && typeof json.error === 'object') {
    assert.equal(typeof json.error.code, 'number', `a JSON-RPC error: ${what}`)
  } else {
    assert.match(String(json.code), /^GW_[A-Z_]+$/, `a GW_ code: ${what}`)
    assert.equal(json.statusCode, res.statusCode, what)
  }
}

test('every route, hostile input: never a 500, every error in the gateway\'s shape', async (t) => {
  const app = await buildTestApp(t)
  const routes = await routesOf(app)
  assert.ok(routes.length > 40, `the OpenAPI document lists the routes (${routes.length})`)
  // Each route once with each odd path segment (a query, body and content type drawn with it).
  await fc.assert(fc.asyncProperty(
    fc.constantFrom(...routes),
    fc.constantFrom(...ODD_SEGMENTS),
    fc.constantFrom(...ODD_QUERIES),
    fc.constantFrom(...ODD_BODIES),
    fc.constantFrom(...CONTENT_TYPES),
    async (route, segment, query, body, contentType) => { await checkOne(app, route.method, fill(route.path, segment) + query, body, contentType) }
  ), { numRuns: 600, seed: 20261207 })
  // Each route that takes a body, with every odd body under a JSON content type and without one.
  for (const route of routes.filter((r) => r.method !== 'get')) {
    for (const body of ODD_BODIES) {
      for (const contentType of ['application/json', undefined]) await checkOne(app, route.method, fill(route.path, '1'), body, contentType)
    }
  }
  assert.equal((await app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200)
})

test('POST /mcp without a body, or with one that is no JSON-RPC object, is a JSON-RPC 4xx, not a 500', async (t) => {
  const app = await buildTestApp(t)
  const cases: Array<{ payload?: string, headers: Record<string, string> }> = [
    // `curl -X POST .../mcp`: no body, no content type (was a 500: the header check read `.method` of undefined).
    { headers: {} },
    { payload: 'null', headers: { 'content-type': 'application/json' } },
    { payload: 'null', headers: { 'content-type': 'application/json', 'mcp-protocol-version': '2026-07-28' } },
    { payload: '[]', headers: { 'content-type': 'application/json', 'mcp-protocol-version': '2026-07-28' } },
    { payload: '7', headers: { 'content-type': 'application/json', 'mcp-protocol-version': '2026-07-28' } }
  ]
  for (const c of cases) {
    const headers = { accept: 'application/json, text/event-stream', ...c.headers }
    const res = await app.inject({ method: 'POST', url: '/mcp', headers, ...(c.payload !== undefined ? { payload: c.payload } : {}) })
    const what = `${JSON.stringify(c)}: ${res.statusCode} ${res.body}`
    assert.ok(res.statusCode >= 400 && res.statusCode < 500, what)
    const body = res.json<{ jsonrpc: string, error: { code: number } }>()
    assert.equal(body.jsonrpc, '2.0', what)
    assert.equal(typeof body.error.code, 'number', what)
  }
})

test('a path that is not valid percent-encoding, or a parameter over the router\'s limit, is refused in the gateway\'s shape', async (t) => {
  const app = await buildTestApp(t)
  for (const url of ['/users/%C0%AE/policy', '/users/%zz/workspaces', '/tools/%', '/users/acme/workspaces/w/files/%E0%A4%A']) {
    const res = await app.inject({ method: 'GET', url })
    assert.equal(res.statusCode, 400, `${url}: ${res.body}`)
    const body = res.json<{ statusCode: number, code: string, error: string, message: string }>()
    const shape = { statusCode: body.statusCode, code: body.code, error: body.error }
    assert.deepEqual(shape, { statusCode: 400, code: 'GW_BAD_REQUEST', error: 'Bad Request' }, url)
    assert.match(body.message, /percent-encoding/)
  }
  const long = 'a'.repeat(3000)
  const res = await app.inject({ method: 'GET', url: `/users/${long}/policy` })
  assert.equal(res.statusCode, 414, res.body)
  const body = res.json<{ code: string, message: string }>()
  assert.equal(body.code, 'GW_BAD_REQUEST')
  // The answer does not echo the 3,000 characters back (Fastify's own did, up to the header size).
  assert.ok(!body.message.includes(long.slice(0, 100)), body.message)
})
