import { test } from 'node:test'
import assert from 'node:assert/strict'
import type { FastifyInstance } from 'fastify'
import { buildTestApp } from '../../helpers/app.js'
import { redisForTest, REDIS_URL } from '../../helpers/redis.js'

const ADMIN = 'k-admin-5d1e9a7c3b'
const ACME = 'k-acme-8c2f4e6a1d'
const GLOBEX = 'k-globex-3b7d9f1a2e'
const KEYS = `${ADMIN}:*,${ACME}:acme,${GLOBEX}:globex`

async function call (
  app: FastifyInstance,
  key: string | undefined,
  method: 'GET' | 'PUT' | 'DELETE' | 'POST',
  url: string,
  body?: unknown
): Promise<{ status: number, json: any }> {
  const res = await app.inject({
    method,
    url,
    headers: key === undefined ? {} : { authorization: `Bearer ${key}` },
    ...(body !== undefined ? { payload: body as Record<string, unknown> } : {})
  })
  return { status: res.statusCode, json: res.json() }
}

const FUNCTIONS = '@builtin,calculate,current_time,json_query,text_stats'

async function listed (app: FastifyInstance, key: string | undefined, userId?: string): Promise<string[]> {
  const r = await call(app, key, 'GET', `/tools?functions=${FUNCTIONS}${userId !== undefined ? `&userId=${userId}` : ''}`)
  assert.equal(r.status, 200, JSON.stringify(r.json))
  return r.json.tools.map((t: { function: { name: string } }) => t.function.name).sort()
}

test('a tenant policy: deny patterns hide tools from GET /tools and /invoke answers 403 GW_POLICY_DENIED; DELETE restores them', async (t) => {
  const app = await buildTestApp(t, { env: { API_KEYS: KEYS } })
  let r = await call(app, ADMIN, 'PUT', '/users/acme/policy', { deny: ['write_*', 'bash', 'current_*'] })
  assert.equal(r.status, 201, JSON.stringify(r.json))
  assert.equal(r.json.created, true)
  assert.ok(r.json.version >= 1)

  const acme = await listed(app, ACME)
  assert.deepEqual(acme, ['apply_patch', 'calculate', 'edit', 'glob', 'grep', 'json_query', 'read_file', 'text_stats', 'update_agents_md'])
  // Another tenant is not affected.
  assert.ok((await listed(app, GLOBEX)).includes('write_file'))

  r = await call(app, ACME, 'POST', '/invoke', { name: 'current_time', arguments: {} })
  assert.equal(r.status, 403)
  assert.equal(r.json.code, 'GW_POLICY_DENIED')
  assert.match(r.json.message, /deny 'current_\*'/)
  r = await call(app, ACME, 'POST', '/invoke', { name: 'calculate', arguments: { expression: '2+3' } })
  assert.equal(r.status, 200)
  assert.equal(JSON.parse(r.json.output).result, 5)

  // A batch refuses the denied entry only.
  r = await call(app, ACME, 'POST', '/invoke/batch', {
    calls: [{ name: 'write_file', arguments: { path: 'a', content: 'x' } }, { name: 'calculate', arguments: { expression: '1+1' } }]
  })
  assert.equal(r.status, 200)
  assert.equal(r.json.results[0].statusCode, 403)
  assert.equal(r.json.results[0].error.code, 'GW_POLICY_DENIED')
  assert.match(r.json.results[0].output, /^TOOL_ERROR: .*"errorType":"PolicyDenied"/)
  assert.equal(JSON.parse(r.json.results[1].output).result, 2)

  // The tenant reads its own policy (and the default it also obeys), not another's.
  r = await call(app, ACME, 'GET', '/users/acme/policy')
  assert.equal(r.status, 200)
  assert.deepEqual(r.json.policy, { deny: ['write_*', 'bash', 'current_*'] })
  assert.equal(r.json.defaultPolicy, null)
  r = await call(app, GLOBEX, 'GET', '/users/acme/policy')
  assert.equal(r.status, 403)
  assert.equal(r.json.code, 'GW_TENANT_MISMATCH')

  r = await call(app, ADMIN, 'DELETE', '/users/acme/policy')
  assert.equal(r.status, 200)
  assert.equal(r.json.deleted, true)
  assert.ok((await listed(app, ACME)).includes('write_file'))
  r = await call(app, ADMIN, 'DELETE', '/users/acme/policy')
  assert.equal(r.json.deleted, false)
})

test('a tool the policy hides is reported in diagnostics, and strict=true is a 400 for it', async (t) => {
  const app = await buildTestApp(t, { env: { API_KEYS: KEYS } })
  let r = await call(app, ADMIN, 'PUT', '/users/acme/policy', { deny: ['calculate'] })
  assert.equal(r.status, 201, JSON.stringify(r.json))
  r = await call(app, ACME, 'GET', '/tools?functions=calculate,current_time')
  assert.equal(r.status, 200)
  assert.deepEqual(r.json.tools.map((x: any) => x.function.name), ['current_time'])
  assert.deepEqual(r.json.unresolved, [])
  assert.equal(r.json.diagnostics.length, 1, JSON.stringify(r.json.diagnostics))
  const [hidden] = r.json.diagnostics
  assert.equal(hidden.type, 'denied')
  assert.equal(hidden.name, 'calculate')
  assert.equal(hidden.route, 'function')
  assert.equal(hidden.exposedAs, null)
  assert.match(hidden.message, /denied by the tenant tool policy \(deny 'calculate'\)/)
  // Cached or not, the same answer (the second listing is served from the cache).
  r = await call(app, ACME, 'GET', '/tools?functions=calculate,current_time')
  assert.equal(r.json.diagnostics[0]?.type, 'denied')
  r = await call(app, ACME, 'GET', '/tools?functions=calculate,current_time&strict=true')
  assert.equal(r.status, 400)
  assert.equal(r.json.code, 'GW_UNRESOLVED')
  assert.match(r.json.message, /tool 'calculate' \(.*deny 'calculate'/)
  // A tool nobody asked for is not reported: the allow-list decides what the answer talks about.
  r = await call(app, ACME, 'GET', '/tools?functions=current_time&strict=true')
  assert.equal(r.status, 200)
  assert.deepEqual(r.json.diagnostics, [])
})

test('DELETE /policy removes the default policy (admin only); a second delete says there was none', async (t) => {
  const app = await buildTestApp(t, { env: { API_KEYS: KEYS } })
  let r = await call(app, ADMIN, 'PUT', '/policy', { deny: ['write_file'] })
  assert.equal(r.status, 201, JSON.stringify(r.json))
  assert.ok(!(await listed(app, ACME)).includes('write_file'))
  r = await call(app, ACME, 'DELETE', '/policy')
  assert.equal(r.status, 403)
  assert.equal(r.json.code, 'GW_FORBIDDEN')
  r = await call(app, ADMIN, 'DELETE', '/policy')
  assert.equal(r.status, 200, JSON.stringify(r.json))
  assert.equal(r.json.deleted, true)
  assert.equal(typeof r.json.version, 'number')
  assert.ok((await listed(app, ACME)).includes('write_file'))
  r = await call(app, ADMIN, 'GET', '/policy')
  assert.equal(r.json.policy, null)
  r = await call(app, ADMIN, 'DELETE', '/policy')
  assert.equal(r.status, 200)
  assert.equal(r.json.deleted, false)
})

test('tenant keys cannot write policies, nor read the default', async (t) => {
  const app = await buildTestApp(t, { env: { API_KEYS: KEYS } })
  let r = await call(app, ACME, 'PUT', '/users/acme/policy', { deny: [] })
  assert.equal(r.status, 403)
  assert.equal(r.json.code, 'GW_FORBIDDEN')
  r = await call(app, ACME, 'DELETE', '/users/acme/policy')
  assert.equal(r.status, 403)
  r = await call(app, ACME, 'PUT', '/policy', { readOnly: false })
  assert.equal(r.status, 403)
  r = await call(app, ACME, 'GET', '/policy')
  assert.equal(r.status, 403)
  r = await call(app, ADMIN, 'GET', '/users/acme/policy')
  assert.equal(r.status, 200)
  assert.equal(r.json.policy, null)
  assert.equal(r.json.version, 0)
})

test('invalid policies are 400 GW_INVALID_POLICY naming the entry; nothing is stored', async (t) => {
  const app = await buildTestApp(t, { env: { API_KEYS: KEYS } })
  const cases: Array<[unknown, RegExp]> = [
    [{ deny: ['ok', 'bad.name'] }, /deny\/1 "bad\.name" is not a valid pattern/],
    [{ allowOnly: [''] }, /allowOnly\/0 must have 1 to 128 characters/],
    [{ bash: { denyCommands: ['rm', '(unclosed'] } }, /bash\/denyCommands\/1 "\(unclosed" is not a valid regular expression/],
    [{ denyy: ['x'] }, /denyy is not a policy field/],
    [{ bash: { deny: [] } }, /bash\/deny is not a policy field/],
    [{ limits: { timeoutMs: 0 } }, /limits\/timeoutMs must be a positive integer/],
    [{ limits: { cpu: 1 } }, /limits\/cpu is not a policy field/],
    [{ readOnly: 'yes' }, /readOnly must be a boolean/],
    [{ deny: Array.from({ length: 257 }, (_, i) => `t${i}`) }, /deny must have at most 256 entries/],
    [{ requireApproval: ['x'.repeat(129)] }, /requireApproval\/0 must have 1 to 128 characters/],
    [[], /the body must be a JSON object/]
  ]
  for (const [body, message] of cases) {
    const r = await call(app, ADMIN, 'PUT', '/users/acme/policy', body)
    assert.equal(r.status, 400, JSON.stringify(body))
    assert.equal(r.json.code, 'GW_INVALID_POLICY', JSON.stringify(r.json))
    assert.match(r.json.message, message)
  }
  const r = await call(app, ADMIN, 'GET', '/users/acme/policy')
  assert.equal(r.json.policy, null)
  // A bad userId is still the usual 400.
  const bad = await call(app, ADMIN, 'PUT', '/users/a_b/policy', {})
  assert.equal(bad.status, 400)
  assert.equal(bad.json.code, 'GW_BAD_REQUEST')
})

test('a default policy that denies everything: every listing is empty and every invoke is 403, MCP included', async (t) => {
  const app = await buildTestApp(t, { env: { API_KEYS: KEYS } })
  let r = await call(app, ADMIN, 'PUT', '/policy', { deny: ['*'] })
  assert.equal(r.status, 201, JSON.stringify(r.json))
  assert.deepEqual(await listed(app, ACME), [])
  assert.deepEqual(await listed(app, ADMIN), [])
  for (const name of ['bash', 'read_file', 'calculate', 'current_time', 'text_stats']) {
    r = await call(app, ACME, 'POST', '/invoke', { name, arguments: {} })
    assert.equal(r.status, 403, name)
    assert.equal(r.json.code, 'GW_POLICY_DENIED')
  }
  // allowOnly [] says the same.
  r = await call(app, ADMIN, 'PUT', '/policy', { allowOnly: [] })
  assert.equal(r.status, 200)
  assert.deepEqual(await listed(app, GLOBEX), [])

  // /mcp: tools/list is empty, tools/call is a JSON-RPC error carrying the code.
  const mcp = async (body: unknown): Promise<any> => {
    const res = await app.inject({ method: 'POST', url: `/mcp?functions=${FUNCTIONS}`, headers: { authorization: `Bearer ${ACME}`, accept: 'application/json, text/event-stream', 'content-type': 'application/json' }, payload: JSON.stringify(body) })
    assert.equal(res.statusCode, 200, res.body)
    return res.json()
  }
  const list = await mcp({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} })
  assert.deepEqual(list.result.tools, [])
  const called = await mcp({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'calculate', arguments: { expression: '1+1' } } })
  assert.equal(called.error.data.code, 'GW_POLICY_DENIED', JSON.stringify(called))
})

test('readOnly exposes read_file, glob and grep among built-ins; default and tenant policies combine', async (t) => {
  const app = await buildTestApp(t, { env: { API_KEYS: KEYS } })
  let r = await call(app, ADMIN, 'PUT', '/policy', { deny: ['json_*'] })
  assert.equal(r.status, 201)
  r = await call(app, ADMIN, 'PUT', '/users/acme/policy', { readOnly: true })
  assert.equal(r.status, 201)
  // Functions carry no readOnlyHint annotation: readOnly hides them too.
  assert.deepEqual(await listed(app, ACME), ['glob', 'grep', 'read_file'])
  assert.deepEqual((await listed(app, GLOBEX)).filter((n) => n.startsWith('json')), [])
  r = await call(app, ACME, 'POST', '/invoke', { name: 'edit', arguments: { path: 'a', old_string: 'x', new_string: 'y' } })
  assert.equal(r.json.code, 'GW_POLICY_DENIED')
  assert.match(r.json.message, /readOnly/)

  // allowOnly of both policies must admit a tool.
  await call(app, ADMIN, 'PUT', '/policy', { allowOnly: ['calc*', 'read_file', 'grep'] })
  await call(app, ADMIN, 'PUT', '/users/acme/policy', { allowOnly: ['read_*', 'calculate'] })
  assert.deepEqual(await listed(app, ACME), ['calculate', 'read_file'])
  assert.deepEqual(await listed(app, GLOBEX), ['calculate', 'grep', 'read_file'])
})

test('bash.denyCommands refuses a matching command as a tool error naming the rule; a catastrophic rule cannot stall the gateway', async (t) => {
  const app = await buildTestApp(t, { env: { API_KEYS: KEYS } })
  let r = await call(app, ADMIN, 'PUT', '/users/acme/policy', { bash: { denyCommands: ['\\brm\\s+-rf\\b', '^(a+)+$'] } })
  assert.equal(r.status, 201, JSON.stringify(r.json))
  r = await call(app, ACME, 'POST', '/invoke', { name: 'bash', arguments: { action: 'exec', command: 'echo hi && rm -rf /tmp/x' } })
  assert.equal(r.status, 200)
  assert.equal(r.json.isError, true)
  assert.equal(r.json.error.code, 'GW_POLICY_DENIED')
  assert.match(r.json.error.message, /bash\.denyCommands\/0 "\\\\brm\\\\s\+-rf\\\\b"/)
  assert.match(r.json.output, /^TOOL_ERROR: .*"errorType":"PolicyDenied"/)
  r = await call(app, ACME, 'POST', '/invoke', { name: 'bash', arguments: { action: 'start', command: 'rm -rf .' } })
  assert.equal(r.json.error.code, 'GW_POLICY_DENIED')
  // A command that takes the rule's regex into catastrophic backtracking: refused once the
  // check's budget runs out (fail closed), while the event loop keeps serving.
  const started = Date.now()
  const hostile = call(app, ACME, 'POST', '/invoke', { name: 'bash', arguments: { action: 'exec', command: 'a'.repeat(40) + '!' } })
  const health = await call(app, undefined, 'GET', '/healthz')
  assert.equal(health.status, 200)
  r = await hostile
  assert.equal(r.json.error.code, 'GW_POLICY_DENIED', JSON.stringify(r.json))
  assert.match(r.json.error.message, /did not finish within/)
  assert.ok(Date.now() - started < 60_000)
  // Other actions are not commands: status of a process that does not exist reaches the tool.
  r = await call(app, ACME, 'POST', '/invoke', { name: 'bash', arguments: { action: 'list' } })
  assert.notEqual(r.json.error?.code, 'GW_POLICY_DENIED')
})

test('limits are ceilings: a request cannot raise them, the output cap applies to every tool', async (t) => {
  const app = await buildTestApp(t, { env: { API_KEYS: KEYS } })
  await call(app, ADMIN, 'PUT', '/users/acme/policy', { limits: { outputMaxChars: 40 } })
  const r = await call(app, ACME, 'POST', '/invoke', {
    name: 'json_query',
    arguments: { json: JSON.stringify({ a: 'x'.repeat(500) }), path: 'a' },
    context: { limits: { outputMaxChars: 100000 } }
  })
  assert.equal(r.status, 200, JSON.stringify(r.json))
  assert.ok(r.json.output.length <= 40, r.json.output)
  assert.equal(r.json.truncated, true)
  const other = await call(app, GLOBEX, 'POST', '/invoke', { name: 'json_query', arguments: { json: JSON.stringify({ a: 'x'.repeat(500) }), path: 'a' } })
  assert.equal(other.json.truncated, false)
})

test('two instances on one Redis: a policy written through one is enforced by the other at once', async (t) => {
  const redis = await redisForTest(t)
  if (redis === undefined) return
  const env = { API_KEYS: KEYS, REDIS_URL, REDIS_KEY_PREFIX: redis.prefix, CLUSTER_SECRET: 'policy-test-cluster-secret' }
  const one = await buildTestApp(t, { env })
  const two = await buildTestApp(t, { env })
  // Warm the other instance's listing and policy caches first.
  assert.ok((await listed(two, ACME)).includes('bash'))
  let r = await call(one, ADMIN, 'PUT', '/users/acme/policy', { deny: ['bash'] })
  assert.equal(r.status, 201)
  // The change event may still be on its way over pub/sub: wait for it, without a timing bound.
  for (let i = 0; i < 200 && (await listed(two, ACME)).includes('bash'); i++) await new Promise((resolve) => setTimeout(resolve, 10))
  assert.ok(!(await listed(two, ACME)).includes('bash'))
  r = await call(two, ACME, 'POST', '/invoke', { name: 'bash', arguments: { action: 'list' } })
  assert.equal(r.json.code, 'GW_POLICY_DENIED')
  r = await call(two, ADMIN, 'GET', '/users/acme/policy')
  assert.deepEqual(r.json.policy, { deny: ['bash'] })
  // A delete through the second reaches the first.
  await call(two, ADMIN, 'DELETE', '/users/acme/policy')
  for (let i = 0; i < 200 && !(await listed(one, ACME)).includes('bash'); i++) await new Promise((resolve) => setTimeout(resolve, 10))
  assert.ok((await listed(one, ACME)).includes('bash'))
})
