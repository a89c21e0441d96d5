import { test } from 'node:test'
import type { TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { readFile } from 'node:fs/promises'
import { Validator } from '@seriousme/openapi-schema-validator'
import { Ajv } from 'ajv'
import type { FastifyInstance, InjectOptions } from 'fastify'
import { parse as parseYaml } from 'yaml'
import { Header } from 'tar'
import { createMemoryRegistryStore } from '../../src/registry/memory-store.js'
import { buildTestApp } from '../helpers/app.js'

const ADMIN = 'admin-key-openapi-0123456789'
const TENANT = 'tenant-key-openapi-0123456789'
const KEYS = `${ADMIN}:*,${TENANT}:alice`
const admin = { authorization: `Bearer ${ADMIN}` }
const tenant = { authorization: `Bearer ${TENANT}` }

type Schema = Record<string, any>
interface Operation {
  method: string
  path: string
  parameters?: Array<{ name: string, in: 'path' | 'query', schema: Schema, required?: boolean }>
  requestBody?: { content: Record<string, { schema: Schema }> }
  responses: Record<string, { description?: string, content?: Record<string, { schema?: Schema }> }>
}

function operations (doc: any): Operation[] {
  const ops: Operation[] = []
  for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, Operation>>)) {
    for (const [method, op] of Object.entries(item)) ops.push({ ...op, method: method.toUpperCase(), path })
  }
  return ops
}

const keyOf = (op: Operation): string => `${op.method} ${op.path}`

/** Operations whose success is a long-lived event stream: only their refusals are exercised. */
const STREAMING = new Set(['GET /mcp'])
/** Statuses that carry no body, so no response schema either. */
const BODYLESS = new Set(['202', '204'])

/** A valid value of every required query parameter; the test fails for a new one missing here. */
const REQUIRED_QUERY: Record<string, string> = { q: 'calculate' }

/**
 * Path parameters filled with valid values (`alice`, `srv1`) unless overridden; `query` as given,
 * then each required query parameter it does not name, with a valid value.
 */
function url (op: Operation, params: Record<string, string> = {}, query = ''): string {
  const given = new URLSearchParams(query)
  const required = (op.parameters ?? []).filter((p) => p.in === 'query' && p.required === true && !given.has(p.name)).map((p) => {
    const value = REQUIRED_QUERY[p.name]
    assert.ok(value !== undefined, `${keyOf(op)}: add a valid value of the required query parameter '${p.name}' to REQUIRED_QUERY`)
    return `${p.name}=${encodeURIComponent(value)}`
  })
  const tail = [query.replace(/^\?/, ''), ...required].filter((s) => s !== '').join('&')
  return op.path.replace(/\{(\w+)\}/g, (_m, name: string) => params[name] ?? (name === 'userId' ? 'alice' : 'srv1')) + (tail === '' ? '' : `?${tail}`)
}

/** A one-file tar (node-tar's Header), the body of a workspace upload. */
function tarOf (name: string, content: string): Buffer {
  const body = Buffer.from(content)
  const h = new Header({ path: name, type: 'File', size: body.length, mode: 0o644, mtime: new Date(0), uid: 0, gid: 0 })
  h.encode()
  return Buffer.concat([h.block as Buffer, body, Buffer.alloc((512 - (body.length % 512)) % 512), Buffer.alloc(1024)])
}

/** A valid body for every operation that takes one; the test fails for a new body route missing here. */
const VALID_BODIES: Record<string, Record<string, unknown> | Buffer> = {
  'PUT /users/{userId}/workspaces/{workspaceId}': tarOf('hello.txt', 'hello\n'),
  'POST /users/{userId}/workspaces/{workspaceId}/checkpoints': { label: 'before' },
  'POST /users/{userId}/workspaces/{workspaceId}/checkpoints/{checkpointId}/restore': {},
  'POST /invoke': { name: 'calculate', arguments: { expression: '1+1' }, userId: 'alice' },
  'POST /invoke/batch': { calls: [{ name: 'calculate', arguments: { expression: '1+1' } }] },
  'PUT /mcp/servers/{serverId}': { type: 'streamable_http', url: 'https://mcp.example.com/mcp' },
  'PUT /users/{userId}/mcp/servers/{serverId}': { type: 'streamable_http', url: 'https://mcp.example.com/mcp' },
  'POST /mcp': { jsonrpc: '2.0', id: 1, method: 'tools/list' },
  'PUT /policy': { deny: ['nomatch_*'] },
  'PUT /users/{userId}/policy': { deny: ['nomatch_*'] },
  'POST /approvals/{approvalId}': { decision: 'approve' },
  'POST /users/{userId}/mcp/servers/{serverId}/oauth/authorize': {},
  'POST /mcp/servers/{serverId}/oauth/authorize': {},
  'POST /users/{userId}/mcp/servers/{serverId}/pins': {},
  'POST /mcp/servers/{serverId}/pins': {}
}

function bodyOf (op: Operation): Record<string, unknown> | Buffer | undefined {
  if (op.requestBody === undefined) return undefined
  const body = VALID_BODIES[keyOf(op)]
  assert.ok(body, `no valid example body for ${keyOf(op)} in VALID_BODIES`)
  return body
}

function request (op: Operation, over: Partial<InjectOptions> = {}): InjectOptions {
  const body = bodyOf(op)
  return {
    method: op.method as InjectOptions['method'],
    url: url(op),
    // A binary body (a workspace archive) says what it is; JSON bodies get their type from inject.
    headers: { ...admin, accept: 'application/json, text/event-stream', ...(Buffer.isBuffer(body) ? { 'content-type': 'application/x-tar' } : {}) },
    ...(body !== undefined ? { payload: body } : {}),
    ...over
  }
}

/** A value of the wrong type (or out of range) for a schema, or undefined when anything goes. */
function wrongValue (schema: Schema): unknown {
  if (schema.enum !== undefined || schema.const !== undefined) return 'not-one-of-them'
  if (schema.anyOf !== undefined) {
    const all = schema.anyOf as Schema[]
    if (all.every((s) => s.const !== undefined)) return 'not-one-of-them'
    return all.some((s) => s.type === 'boolean') ? 12345 : true
  }
  switch (schema.type) {
    case 'string': return schema.pattern !== undefined ? 'bad_id!' : 12345
    case 'integer':
    case 'number': return 'not-a-number'
    case 'boolean': return 'maybe'
    case 'array': return 'not-an-array'
    case 'object': return 'not-an-object'
    default: return undefined
  }
}

/** The same for a query string, where every value is text (numbers and booleans are coerced). */
function wrongQueryValue (schema: Schema): string {
  if (schema.type === 'string' && schema.pattern === undefined && schema.maxLength !== undefined) return 'a'.repeat(schema.maxLength + 1)
  const v = wrongValue(schema)
  return typeof v === 'string' ? v : 'bad_id!'
}

async function keyedApp (t: TestContext, env: Record<string, string> = {}, overrides = {}): Promise<FastifyInstance> {
  const app = await buildTestApp(t, { env: { API_KEYS: KEYS, BODY_LIMIT_BYTES: '4096', ...env }, overrides })
  await app.ready()
  return app
}

test('the generated document is a valid OpenAPI 3.1 document, and so is the committed openapi.yaml', async (t) => {
  const app = await keyedApp(t)
  const validator = new Validator()
  const result = await validator.validate(app.swagger() as unknown as Record<string, unknown>)
  assert.equal(result.valid, true, JSON.stringify(result.errors, null, 2))
  assert.equal(validator.version, '3.1')
  const committed = parseYaml(await readFile(new URL('../../openapi.yaml', import.meta.url), 'utf8')) as Record<string, unknown>
  const again = await new Validator().validate(committed)
  assert.equal(again.valid, true, JSON.stringify(again.errors, null, 2))
  // The validator is not a rubber stamp: a document with a broken response is refused.
  const broken = structuredClone(committed) as any
  broken.paths['/healthz'].get.responses = { 200: { content: {} } }
  assert.equal((await new Validator().validate(broken)).valid, false)
})

test('every route declares its inputs and a described response schema for each status', async (t) => {
  const app = await keyedApp(t)
  const ops = operations(app.swagger())
  assert.ok(ops.length >= 15, `only ${ops.length} operations documented`)
  for (const op of ops) {
    for (const [status, response] of Object.entries(op.responses)) {
      const content = Object.values(response.content ?? {})
      // Swagger UI shows a response without a description as "Default Response".
      assert.ok(typeof response.description === 'string' && response.description !== '' && response.description !== 'Default Response', `${keyOf(op)} ${status} has no description`)
      if (BODYLESS.has(status)) continue
      assert.ok(content.length > 0 && content.every((c) => c.schema !== undefined), `${keyOf(op)} ${status} has no response schema`)
    }
    const pathParams = [...op.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1])
    assert.deepEqual((op.parameters ?? []).filter((p) => p.in === 'path').map((p) => p.name).sort(), pathParams.sort(), `${keyOf(op)} path parameters`)
    if (op.method === 'PUT' || op.method === 'POST') assert.ok(op.requestBody, `${keyOf(op)} declares no body`)
  }
})

test('a malformed request on every route is a 400 that names the field', async (t) => {
  const app = await keyedApp(t)
  let checked = 0
  for (const op of operations(app.swagger())) {
    const cases: Array<{ what: string, field: string, req: InjectOptions }> = []
    for (const p of op.parameters ?? []) {
      if (p.in === 'path') {
        // A file path (files/{path}) has no wrong spelling: any segments name a file (or a 404).
        if (p.schema.pattern === undefined) continue
        cases.push({ what: `path ${p.name}`, field: `params/${p.name}`, req: request(op, { url: url(op, { [p.name]: 'bad_id%21' }) }) })
      } else {
        const value = wrongQueryValue(p.schema)
        cases.push({ what: `query ${p.name}`, field: `querystring/${p.name}`, req: request(op, { url: url(op, {}, `?${p.name}=${encodeURIComponent(value)}`) }) })
      }
    }
    const bodySchema = op.requestBody?.content['application/json']?.schema
    if (bodySchema !== undefined) {
      const valid = (bodyOf(op) ?? {}) as Record<string, unknown>
      for (const [name, schema] of Object.entries((bodySchema.properties ?? {}) as Record<string, Schema>)) {
        const wrong = wrongValue(schema)
        if (wrong === undefined) continue
        cases.push({ what: `body ${name}`, field: `body/${name}`, req: request(op, { payload: { ...valid, [name]: wrong } }) })
      }
      if (bodySchema.additionalProperties === false) {
        cases.push({ what: 'unknown body property', field: 'zzz_unknown', req: request(op, { payload: { ...valid, zzz_unknown: 1 } }) })
      }
      cases.push({
        what: 'malformed JSON',
        field: 'JSON',
        req: request(op, { payload: '{"name": ', headers: { ...admin, 'content-type': 'application/json' } })
      })
    }
    for (const c of cases) {
      const res = await bounded(app.inject(c.req), keyOf(op))
      assert.equal(res.statusCode, 400, `${keyOf(op)} with a bad ${c.what}: ${res.statusCode} ${res.body}`)
      // A policy body is checked in the domain, which names the entry with its own code.
      assert.match(res.body, op.path.endsWith('/policy') && (c.field.startsWith('body/') || c.field === 'zzz_unknown') ? /GW_INVALID_POLICY/ : /GW_(BAD_REQUEST|MALFORMED_JSON)/)
      assert.ok(res.body.includes(c.field), `${keyOf(op)} with a bad ${c.what}: ${res.body} does not name ${c.field}`)
      assert.ok(op.responses['400'], `${keyOf(op)} returns 400 but does not declare it`)
      checked++
    }
  }
  assert.ok(checked > 40, `only ${checked} malformed requests tried`)
})

/** No inject may hang the suite (a route that streams by mistake). */
async function bounded<T> (work: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_resolve, reject) => { timer = setTimeout(() => reject(new Error(`${what} did not answer`)), 15_000) })
  try {
    return await Promise.race([work, timeout])
  } finally {
    clearTimeout(timer)
  }
}

/**
 * Records every status each operation answered across the scenarios below, and checks each
 * JSON answer against the schema the document declares for that status.
 */
class Observed {
  readonly seen = new Map<string, Set<number>>()
  readonly #ajv = new Ajv({ strict: false, validateFormats: false })
  async send (app: FastifyInstance, op: Operation, req: InjectOptions): Promise<number> {
    const res = await bounded(app.inject(req), keyOf(op))
    const statuses = this.seen.get(keyOf(op)) ?? new Set<number>()
    statuses.add(res.statusCode)
    this.seen.set(keyOf(op), statuses)
    const schema = op.responses[String(res.statusCode)]?.content?.['application/json']?.schema
    if (schema !== undefined && /^application\/json/.test(String(res.headers['content-type']))) {
      const validate = this.#ajv.compile(schema)
      assert.ok(validate(res.json()), `${keyOf(op)} ${res.statusCode} does not match its declared schema: ${this.#ajv.errorsText(validate.errors)}\n${res.body.slice(0, 500)}`)
    }
    return res.statusCode
  }
}

test('every status a route answers under auth, tenancy, size, media type, not-found, rate-limit and outage conditions is declared', async (t) => {
  const observed = new Observed()
  // Two wrong-key requests per operation: more operations than the failed-authentication throttle allows.
  const app = await keyedApp(t, { AUTH_FAILURES_PER_MINUTE: '0' })
  const ops = operations(app.swagger())
  const isPublic = (op: Operation): boolean =>
    ['/healthz', '/readyz', '/metrics', '/oauth/callback', '/oauth/client-metadata.json'].includes(op.path) || op.path.startsWith('/.well-known/')

  for (const op of ops) {
    const streaming = STREAMING.has(keyOf(op))
    // The happy path first (also creates srv1 for the routes that need it).
    if (!streaming) await observed.send(app, op, request(op))
    // No key, a wrong key.
    if (!isPublic(op)) {
      assert.equal(await observed.send(app, op, request(op, { headers: {} })), 401, keyOf(op))
      assert.equal(await observed.send(app, op, request(op, { headers: { authorization: 'Bearer nope-nope-nope-nope' } })), 401, keyOf(op))
    }
    // A tenant key: for another tenant, and on admin routes.
    if (!streaming) await observed.send(app, op, request(op, { headers: { ...tenant, accept: 'application/json, text/event-stream' } }))
    if (op.path.includes('{userId}')) {
      assert.equal(await observed.send(app, op, request(op, { headers: tenant, url: url(op, { userId: 'mallory' }) })), 403, keyOf(op))
    }
    if (op.parameters?.some((p) => p.in === 'query' && p.name === 'userId')) {
      assert.equal(await observed.send(app, op, request(op, { headers: tenant, url: url(op, {}, '?userId=mallory') })), 403, keyOf(op))
    }
    // Unknown ids.
    if (op.path.includes('{serverId}') && !streaming) await observed.send(app, op, request(op, { url: url(op, { serverId: 'nosuchserver' }) }))
    if (op.requestBody !== undefined) {
      // A workspace upload takes any body as a stream, not bound by BODY_LIMIT_BYTES: JSON is not a tar.
      const oversized = keyOf(op) === 'PUT /users/{userId}/workspaces/{workspaceId}' ? 415 : 413
      assert.equal(await observed.send(app, op, request(op, {
        payload: JSON.stringify({ ...bodyOf(op), description: 'x'.repeat(5000) }),
        headers: { ...admin, 'content-type': 'application/json' }
      })), oversized, keyOf(op))
      assert.equal(await observed.send(app, op, request(op, {
        payload: 'name=calculate',
        headers: { ...admin, 'content-type': 'application/x-www-form-urlencoded' }
      })), 415, keyOf(op))
    }
  }
  const invoke = ops.find((op) => op.path === '/invoke') as Operation
  assert.equal(await observed.send(app, invoke, request(invoke, { payload: { name: 'no_such_tool' } })), 404)
  assert.equal(await observed.send(app, invoke, request(invoke, { payload: { name: 'calculate', userId: 'mallory' }, headers: tenant })), 403)

  // Rate limited: a budget of 2 a minute for the admin key and for tenant alice (the routes
  // that name her), spent, then every non-public route once more.
  const limited = await keyedApp(t, { RATE_LIMIT_PER_MINUTE: '2' })
  for (let i = 0; i < 2; i++) {
    await limited.inject({ method: 'GET', url: '/status', headers: admin })
    await limited.inject({ method: 'GET', url: '/users/alice/mcp/servers', headers: admin })
  }
  for (const op of ops.filter((o) => !isPublic(o))) {
    assert.equal(await observed.send(limited, op, request(op)), 429, keyOf(op))
  }

  // The registry is down: every route, with a valid admin request.
  const store = createMemoryRegistryStore()
  await store.close()
  const down = await keyedApp(t, {}, { store })
  for (const op of ops.filter((o) => !STREAMING.has(keyOf(o)))) {
    await observed.send(down, op, request(op, op.path === '/tools' ? { url: '/tools?mcp=srv1' } : {}))
  }

  const undeclared: string[] = []
  for (const op of ops) {
    for (const status of observed.seen.get(keyOf(op)) ?? []) {
      if (op.responses[String(status)] === undefined) undeclared.push(`${keyOf(op)} answered ${status}`)
    }
  }
  assert.deepEqual(undeclared, [])
  // Every scenario family was actually reached somewhere.
  const all = new Set([...observed.seen.values()].flatMap((s) => [...s]))
  for (const status of [200, 201, 401, 403, 404, 413, 415, 429, 503]) assert.ok(all.has(status), `no route answered ${status}`)
})

test('response schemas keep every field the domain returns (nothing is stripped by serialization)', async (t) => {
  const app = await keyedApp(t)
  const res = await app.inject({
    method: 'POST',
    url: '/invoke',
    headers: admin,
    payload: { name: 'calculate', arguments: { expression: '6*7' }, trace: true }
  })
  const outcome = await app.services.gateway.invoke(
    { name: 'calculate', arguments: { expression: '6*7' }, trace: true },
    { userId: undefined, isAdmin: true },
    new AbortController().signal
  )
  assert.ok(outcome.ok)
  const { toolMs: _toolMs, ...direct } = outcome.result
  assert.deepEqual(Object.keys(res.json()).sort(), Object.keys(direct).sort())
  // The two calls' traces differ only in their timings.
  const untimed = (trace: Record<string, unknown>): Record<string, unknown> => ({ ...trace, handlerMs: typeof trace.handlerMs })
  assert.deepEqual(untimed(res.json().trace), untimed(JSON.parse(JSON.stringify(direct.trace))))

  const tools = await app.inject({ method: 'GET', url: '/tools?functions=@builtin,calculate&format=anthropic', headers: admin })
  const listed = await app.services.gateway.listTools(
    { functions: '@builtin,calculate', format: 'anthropic' },
    { userId: undefined, isAdmin: true },
    new AbortController().signal
  )
  assert.deepEqual(tools.json(), JSON.parse(JSON.stringify(listed)))

  const status = await app.inject({ method: 'GET', url: '/status', headers: admin })
  assert.deepEqual(status.json(), JSON.parse(JSON.stringify(app.services.status())))
  const ready = await app.inject({ method: 'GET', url: '/readyz' })
  assert.deepEqual(ready.json(), JSON.parse(JSON.stringify(await app.services.readiness())))
})
