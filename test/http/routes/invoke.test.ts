import { test } from 'node:test'
import assert from 'node:assert/strict'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import type { TestContext } from 'node:test'
import { buildTestApp } from '../../helpers/app.js'

async function app (t: TestContext, env: Record<string, string> = {}): Promise<FastifyInstance> {
  return await buildTestApp(t, { env: { FUNCTIONS_DIR: 'test/fixtures/functions/behaviours', ...env } })
}

function assertErrorShape (res: LightMyRequestResponse, status: number, code: string): Record<string, unknown> {
  assert.equal(res.statusCode, status, res.body)
  const body = res.json()
  assert.deepEqual(Object.keys(body).sort(), ['code', 'error', 'message', 'statusCode'])
  assert.equal(body.statusCode, status)
  assert.equal(body.code, code)
  assert.doesNotMatch(res.body, /\/work\/|node_modules|at .*\.ts:\d+/, 'no host paths or stack traces')
  return body
}

test('a successful call: the 200 result shape', async (t) => {
  const a = await app(t)
  const res = await a.inject({ method: 'POST', url: '/invoke', payload: { name: 'calculate', arguments: { expression: '2^10 - 24' }, callId: 'call_1' } })
  assert.equal(res.statusCode, 200)
  const body = res.json()
  assert.deepEqual(Object.keys(body).sort(), ['callId', 'durationMs', 'error', 'isError', 'name', 'output', 'route', 'trace', 'truncated'])
  assert.equal(body.callId, 'call_1')
  assert.equal(body.route, 'function')
  assert.equal(body.isError, false)
  assert.equal(body.error, null)
  assert.equal(body.trace, null)
  assert.deepEqual(JSON.parse(body.output), { expression: '2^10 - 24', result: 1000 })
  assert.match(String(res.headers['x-gateway-overhead-ms']), /^\d+\.\d{3}$/)
  assert.ok(typeof res.headers['x-request-id'] === 'undefined' || typeof res.headers['x-request-id'] === 'string')
})

test('arguments as a JSON string (what models emit), and empty string as no arguments', async (t) => {
  const a = await app(t)
  let res = await a.inject({ method: 'POST', url: '/invoke', payload: { name: 'calculate', arguments: '{"expression":"6*7"}' } })
  assert.equal(JSON.parse(res.json().output).result, 42)
  res = await a.inject({ method: 'POST', url: '/invoke', payload: { name: 'echo_ctx', arguments: '' } })
  assert.deepEqual(JSON.parse(res.json().output).args, {})
  res = await a.inject({ method: 'POST', url: '/invoke', payload: { name: 'returns_string' } })
  assert.equal(res.json().output, 'plain text')
})

test('malformed JSON body, wrong content type, unknown fields: 400 naming the problem', async (t) => {
  const a = await app(t)
  let res = await a.inject({ method: 'POST', url: '/invoke', payload: '{"name": "calculate",', headers: { 'content-type': 'application/json' } })
  assertErrorShape(res, 400, 'GW_MALFORMED_JSON')
  res = await a.inject({ method: 'POST', url: '/invoke', payload: { name: 'calculate', arguments: {}, bogus: true } })
  assert.match(String(assertErrorShape(res, 400, 'GW_BAD_REQUEST').message), /unknown property 'bogus'/)
  res = await a.inject({ method: 'POST', url: '/invoke', payload: { arguments: {} } })
  assert.match(String(assertErrorShape(res, 400, 'GW_BAD_REQUEST').message), /name/)
  res = await a.inject({ method: 'POST', url: '/invoke', payload: 'name=calculate', headers: { 'content-type': 'application/x-www-form-urlencoded' } })
  assertErrorShape(res, 415, 'GW_UNSUPPORTED_MEDIA_TYPE')
  res = await a.inject({ method: 'POST', url: '/invoke', payload: { name: 'calculate', context: { workspaceId: '../x' } } })
  assert.match(String(assertErrorShape(res, 400, 'GW_BAD_REQUEST').message), /workspaceId/)
})

test('arguments as a number, array, boolean or null: 400', async (t) => {
  const a = await app(t)
  for (const args of [5, [1, 2], true, null]) {
    const res = await a.inject({ method: 'POST', url: '/invoke', payload: { name: 'calculate', arguments: args } })
    const body = assertErrorShape(res, 400, 'GW_BAD_REQUEST')
    assert.match(String(body.message), /body\/arguments must be an object or a JSON string/, JSON.stringify(args))
  }
})

test('a JSON string that does not parse, or is not an object: tool-level error the model can act on', async (t) => {
  const a = await app(t)
  for (const args of ['{"expression": ', '[1,2]', '42']) {
    const res = await a.inject({ method: 'POST', url: '/invoke', payload: { name: 'calculate', arguments: args, callId: 'c9' } })
    assert.equal(res.statusCode, 200)
    const body = res.json()
    assert.equal(body.isError, true)
    assert.equal(body.error.code, 'GW_INVALID_ARGUMENTS')
    assert.ok(body.output.startsWith('TOOL_ERROR: '))
    const payload = JSON.parse(body.output.slice('TOOL_ERROR: '.length))
    assert.deepEqual(Object.keys(payload).sort(), ['callId', 'error', 'errorType', 'tool'])
    assert.equal(payload.tool, 'calculate')
    assert.equal(payload.callId, 'c9')
    assert.equal(payload.errorType, 'InvalidArguments')
  }
})

test('schema-invalid arguments are a tool-level error naming the field', async (t) => {
  const a = await app(t)
  let res = await a.inject({ method: 'POST', url: '/invoke', payload: { name: 'calculate', arguments: { expr: '1' } } })
  let body = res.json()
  assert.equal(body.isError, true)
  assert.equal(body.error.code, 'GW_INVALID_ARGUMENTS')
  assert.match(body.error.message, /missing required property 'expression'/)
  res = await a.inject({ method: 'POST', url: '/invoke', payload: { name: 'big', arguments: { n: -1 } } })
  body = res.json()
  assert.match(body.error.message, /arguments\.n must be >= 0/)
})

test('huge bodies: 413', async (t) => {
  const a = await app(t, { BODY_LIMIT_BYTES: '4096' })
  const res = await a.inject({ method: 'POST', url: '/invoke', payload: { name: 'calculate', arguments: { expression: '1+'.repeat(5000) + '1' } } })
  assertErrorShape(res, 413, 'GW_PAYLOAD_TOO_LARGE')
})

test('names with spaces, unicode, 64+ chars or 513+ chars: a clean 404 or 400, never a 500', async (t) => {
  const a = await app(t)
  for (const name of ['has space', 'ünïcødé', 'ツール', 'a'.repeat(64), 'b'.repeat(300), 'x\u0000y', '../../etc/passwd']) {
    const res = await a.inject({ method: 'POST', url: '/invoke', payload: { name, arguments: {} } })
    assertErrorShape(res, 404, 'GW_TOOL_NOT_FOUND')
  }
  const res = await a.inject({ method: 'POST', url: '/invoke', payload: { name: 'c'.repeat(513) } })
  assertErrorShape(res, 400, 'GW_BAD_REQUEST')
})

test('userId with underscores or 65 chars: 400', async (t) => {
  const a = await app(t)
  for (const userId of ['a_b', 'u'.repeat(65), '-x', '']) {
    let res = await a.inject({ method: 'POST', url: '/invoke', payload: { name: 'calculate', userId, arguments: { expression: '1' } } })
    assert.match(String(assertErrorShape(res, 400, 'GW_BAD_REQUEST').message), /userId/)
    res = await a.inject({ method: 'GET', url: `/tools?functions=calculate&userId=${encodeURIComponent(userId)}` })
    assertErrorShape(res, 400, 'GW_BAD_REQUEST')
  }
})

test('an encoded name for another userId: 403', async (t) => {
  const a = await app(t)
  const res = await a.inject({ method: 'POST', url: '/invoke', payload: { name: 'user_bob_tool_x', userId: 'alice' } })
  assertErrorShape(res, 403, 'GW_TENANT_MISMATCH')
})

test('handlers that throw, return undefined, circular or BigInt values, or hang: tool-level errors, and the server keeps serving', async (t) => {
  const a = await app(t)
  const cases: Array<[string, string, RegExp]> = [
    ['throws', 'GW_TOOL_ERROR', /handler exploded/],
    ['returns_undefined', 'GW_TOOL_ERROR', /no result/],
    ['returns_circular', 'GW_TOOL_ERROR', /cannot be serialised/],
    ['returns_bigint', 'GW_TOOL_ERROR', /cannot be serialised/],
    ['hangs', 'GW_TOOL_TIMEOUT', /within 200 ms/],
    ['rejects_late', 'GW_TOOL_TIMEOUT', /within 100 ms/]
  ]
  for (const [name, code, message] of cases) {
    const res = await a.inject({ method: 'POST', url: '/invoke', payload: { name, arguments: {} } })
    assert.equal(res.statusCode, 200, name)
    const body = res.json()
    assert.equal(body.isError, true, name)
    assert.equal(body.error.code, code, name)
    assert.match(body.error.message, message, name)
    assert.ok(body.output.startsWith('TOOL_ERROR: '), name)
  }
  // a late rejection after its timeout does not crash the process
  await new Promise((resolve) => setTimeout(resolve, 400))
  const res = await a.inject({ method: 'POST', url: '/invoke', payload: { name: 'calculate', arguments: { expression: '1+1' } } })
  assert.equal(JSON.parse(res.json().output).result, 2)
})

test('output is capped with head and tail kept and truncated set', async (t) => {
  const a = await app(t, { OUTPUT_MAX_CHARS: '1000' })
  const res = await a.inject({ method: 'POST', url: '/invoke', payload: { name: 'big', arguments: { n: 5000 } } })
  const body = res.json()
  assert.equal(body.truncated, true)
  assert.equal(body.isError, false)
  assert.ok(body.output.length <= 1000)
  assert.match(body.output, /\[\.\.\. truncated 4000 chars \.\.\.\]/)
  assert.ok(body.output.startsWith('xxx') && body.output.endsWith('xxx'))
})

test('unknown routes: 404; a method a known path does not take: 405 with Allow; both in the same JSON shape', async (t) => {
  const a = await app(t)
  assertErrorShape(await a.inject({ method: 'GET', url: '/nope' }), 404, 'GW_NOT_FOUND')
  assertErrorShape(await a.inject({ method: 'DELETE', url: '/nope/invoke' }), 404, 'GW_NOT_FOUND')
  let res = await a.inject({ method: 'DELETE', url: '/invoke' })
  assert.match(String(assertErrorShape(res, 405, 'GW_METHOD_NOT_ALLOWED').message), /DELETE is not allowed on \/invoke: it takes POST/)
  assert.equal(res.headers.allow, 'POST')
  // A path with parameters, and a query string: the methods of the route the path matches.
  res = await a.inject({ method: 'PATCH', url: '/users/acme/policy?x=1' })
  assertErrorShape(res, 405, 'GW_METHOD_NOT_ALLOWED')
  assert.equal(res.headers.allow, 'DELETE, GET, HEAD, PUT')
  res = await a.inject({ method: 'POST', url: '/tools' })
  assertErrorShape(res, 405, 'GW_METHOD_NOT_ALLOWED')
  assert.equal(res.headers.allow, 'GET, HEAD')
  // A route that takes the method and finds nothing there (a console asset that is not built) stays a 404.
  assertErrorShape(await a.inject({ method: 'GET', url: '/console/assets/none.js' }), 404, 'GW_NOT_FOUND')
  // HEAD of a GET route is served (Fastify's exposeHeadRoutes), not refused.
  assert.equal((await a.inject({ method: 'HEAD', url: '/healthz' })).statusCode, 200)
})

test('trace is per call and only when asked for', async (t) => {
  const a = await app(t)
  let res = await a.inject({ method: 'POST', url: '/invoke', payload: { name: 'text_stats', arguments: { text: 'a b' } } })
  assert.equal(res.json().trace, null)
  res = await a.inject({ method: 'POST', url: '/invoke', payload: { name: 'text_stats', arguments: { text: 'a b' }, trace: true } })
  const trace = res.json().trace
  assert.ok(Array.isArray(trace.content))
  assert.deepEqual(trace.structuredContent, { characters: 3, words: 2, lines: 1, sentences: 0 })
})

test('trace: true gives built-in and function calls a trace of what they did, never the content they read or wrote', async (t) => {
  const a = await app(t)
  const invoke = async (payload: Record<string, unknown>): Promise<any> => (await a.inject({
    method: 'POST',
    url: '/invoke',
    payload: { userId: 'alice', trace: true, ...payload }
  })).json()
  const secret = 'hunter2-the-file-content'
  let r = await invoke({ name: 'write_file', arguments: { path: 'docs/a.txt', content: `${secret}\n` } })
  assert.equal(r.isError, false, r.output)
  assert.equal(r.trace.tool, 'write_file')
  assert.equal(r.trace.workspaceId, 'default')
  assert.equal(typeof r.trace.toolMs, 'number')
  assert.equal(typeof r.trace.lockWaitMs, 'number', 'a mutating call says how long it waited for the workspace lock')
  assert.equal(r.trace.result.path, 'docs/a.txt')
  r = await invoke({ name: 'read_file', arguments: { path: 'docs/a.txt' }, context: { workspaceId: 'default' } })
  assert.equal(r.trace.tool, 'read_file')
  assert.equal(r.trace.lockWaitMs, undefined)
  assert.deepEqual(r.trace.result.content, { chars: secret.length })
  assert.doesNotMatch(JSON.stringify(r.trace), /hunter2/)
  r = await invoke({ name: 'read_file', arguments: { path: 'nope.txt' } })
  assert.equal(r.isError, true)
  assert.equal(r.trace.failure, 'tool-error')
  r = await invoke({ name: 'calculate', arguments: { expression: '6*7' } })
  assert.equal(r.trace.function, 'calculate')
  assert.equal(r.trace.resultType, 'object')
  assert.equal(typeof r.trace.handlerMs, 'number')
  assert.equal(typeof r.trace.async, 'boolean')
  r = await invoke({ name: 'calculate', arguments: { expression: '1/0' } })
  assert.equal(r.isError, true)
  assert.equal(r.trace.function, 'calculate')
  // Without trace: true, still null.
  const plain = (await a.inject({ method: 'POST', url: '/invoke', payload: { name: 'calculate', arguments: { expression: '1+1' } } })).json()
  assert.equal(plain.trace, null)
})

test('POST /invoke/batch: in order, concurrent, one bad call never fails the batch', async (t) => {
  const a = await app(t)
  const res = await a.inject({
    method: 'POST',
    url: '/invoke/batch',
    payload: {
      calls: [
        { name: 'calculate', arguments: { expression: '1+1' }, callId: 'a' },
        { name: 'nope', callId: 'b' },
        { name: 'calculate', arguments: 5, callId: 'c' },
        'not an object',
        { name: 'user_x_tool_y', userId: 'z', callId: 'e' },
        { name: 'throws', callId: 'f' },
        { name: 'calculate', arguments: '{"expression":"3*3"}', callId: 'g' }
      ]
    }
  })
  assert.equal(res.statusCode, 200)
  const { results } = res.json()
  assert.equal(results.length, 7)
  assert.equal(JSON.parse(results[0].output).result, 2)
  assert.deepEqual(results[1], {
    callId: 'b',
    name: 'nope',
    output: 'TOOL_ERROR: ' + JSON.stringify({ errorType: 'ToolNotFound', error: "No tool named 'nope'", tool: 'nope', callId: 'b' }),
    isError: true,
    statusCode: 404,
    error: { code: 'GW_TOOL_NOT_FOUND', message: "No tool named 'nope'" }
  })
  assert.equal(results[2].statusCode, 400)
  assert.match(results[2].error.message, /calls\/2\/arguments/)
  assert.equal(results[3].statusCode, 400)
  // A bad entry still gets an id, and the tool message names no tool.
  assert.match(results[3].callId, /^call_[0-9a-f]{32}$/)
  assert.deepEqual(JSON.parse(results[3].output.replace(/^TOOL_ERROR: /, '')), { errorType: 'BadRequest', error: results[3].error.message, tool: '', callId: results[3].callId })
  assert.equal(results[4].statusCode, 403)
  assert.match(results[4].output, /^TOOL_ERROR: \{"errorType":"TenantMismatch",/)
  assert.equal(results[5].error.code, 'GW_TOOL_ERROR')
  assert.equal(JSON.parse(results[6].output).result, 9)
  const empty = await a.inject({ method: 'POST', url: '/invoke/batch', payload: { calls: [] } })
  assertErrorShape(empty, 400, 'GW_BAD_REQUEST')
})

test('POST /invoke/batch: without callIds, refused entries get generated ids like the others, and an output like a tool failure', async (t) => {
  const a = await app(t)
  const res = await a.inject({
    method: 'POST',
    url: '/invoke/batch',
    payload: {
      calls: [
        { name: 'calculate', arguments: { expression: '1+1' } },
        { name: 'nope' },
        { name: 'calculate', arguments: { expression: '1' }, allow: { functions: ['word_count'] } },
        { name: 'throws' }
      ]
    }
  })
  assert.equal(res.statusCode, 200)
  const { results } = res.json()
  for (const r of results) assert.match(r.callId, /^call_[0-9a-f]{32}$/, JSON.stringify(r))
  assert.equal(new Set(results.map((r: { callId: string }) => r.callId)).size, 4)
  const payload = (r: { output: string }): Record<string, unknown> => {
    assert.match(r.output, /^TOOL_ERROR: \{/)
    return JSON.parse(r.output.slice('TOOL_ERROR: '.length))
  }
  assert.deepEqual(payload(results[1]), { errorType: 'ToolNotFound', error: "No tool named 'nope'", tool: 'nope', callId: results[1].callId })
  assert.equal(results[1].statusCode, 404)
  assert.equal(results[2].statusCode, 403)
  assert.equal(results[2].error.code, 'GW_NOT_ALLOWED')
  assert.deepEqual(payload(results[2]), { errorType: 'NotAllowed', error: results[2].error.message, tool: 'calculate', callId: results[2].callId })
  // A tool failure has the same form, so the orchestrator handles both alike.
  assert.deepEqual(Object.keys(payload(results[3])), ['errorType', 'error', 'tool', 'callId'])
  assert.equal(payload(results[3]).callId, results[3].callId)
})

test('50 concurrent requests of every bad kind: no 500, and the server still answers', async (t) => {
  const a = await app(t)
  const bodies: unknown[] = [
    '{', '[]', 'null', '"x"', '{"name":1}', '{"name":"calculate","arguments":[]}', '{"name":"hangs"}',
    '{"name":"calculate","allow":{"functions":"x"}}', '{"name":"calculate","context":{"limits":{"readMaxChars":-1}}}'
  ]
  const all = await Promise.all(Array.from({ length: 50 }, async (_, i) => await a.inject({
    method: 'POST', url: '/invoke', payload: bodies[i % bodies.length] as string, headers: { 'content-type': 'application/json' }
  })))
  for (const res of all) assert.ok(res.statusCode < 500, `${res.statusCode} ${res.body}`)
  const ok = await a.inject({ method: 'GET', url: '/healthz' })
  assert.deepEqual(ok.json(), { status: 'ok' })
})
