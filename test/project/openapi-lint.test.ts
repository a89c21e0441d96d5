import { test } from 'node:test'
import type { TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { lookup } from 'node:dns/promises'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { Validator } from '@seriousme/openapi-schema-validator'
import type { FastifyInstance } from 'fastify'
import { stringify } from 'yaml'
import { OPERATION_EXAMPLES } from '../../src/api/examples.js'
import { renderOpenApiYaml } from '../../src/openapi.js'
import { startGateway } from '../../scripts/lib/gateway-process.js'
import { buildTestApp } from '../helpers/app.js'

const run = promisify(execFile)

const ADMIN = 'admin-key-openapi-lint-0123456789'
const TENANT = 'tenant-key-openapi-lint-0123456789'
const KEYS = `${ADMIN}:*,${TENANT}:alice`

type Schema = Record<string, any>
interface Operation {
  method: string
  path: string
  operationId?: string
  tags?: string[]
  security?: Array<Record<string, string[]>>
  parameters?: Array<{ name: string, in: string, example?: unknown, required?: boolean }>
  requestBody?: { content: Record<string, { schema?: Schema, examples?: Record<string, { summary?: string, value: unknown }> }> }
  responses: Record<string, unknown>
}

function operations (doc: any): Operation[] {
  const ops: Operation[] = []
  for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, Operation>>)) {
    for (const [method, op] of Object.entries(item)) ops.push({ ...op, method: method.toUpperCase(), path })
  }
  return ops
}

const keyOf = (op: Operation): string => `${op.method} ${op.path}`

/**
 * The warnings of the recommended ruleset that stay, each for a reason: liveness and readiness
 * answer no 4xx (public, never rate limited, no input), and DELETE /mcp exists only to answer 405
 * to MCP clients that try to end a session the stateless endpoint never opened.
 */
const ACCEPTED_WARNINGS = new Set([
  'operation-4xx-response #/paths/~1healthz/get/responses',
  'operation-4xx-response #/paths/~1readyz/get/responses',
  'operation-2xx-response #/paths/~1mcp/delete/responses'
])

async function keyedApp (t: TestContext, env: Record<string, string> = {}): Promise<FastifyInstance> {
  const app = await buildTestApp(t, { env: { API_KEYS: KEYS, ...env } })
  await app.ready()
  return app
}

interface LintReport {
  totals: { errors: number, warnings: number }
  problems: Array<{ ruleId: string, severity: 'error' | 'warn', message: string, location: Array<{ pointer: string }> }>
}

/** `redocly lint` with the recommended ruleset, as a user runs it, on a document written to disk. */
async function redoclyLint (t: TestContext, document: string): Promise<LintReport> {
  const dir = await mkdtemp(join(tmpdir(), 'tg-openapi-'))
  t.after(async () => await rm(dir, { recursive: true, force: true }))
  const file = join(dir, 'openapi.yaml')
  await writeFile(file, document)
  // Exit status 1 means errors were found: the report on stdout says which.
  const out = await run('node_modules/.bin/redocly', ['lint', file, '--extends=recommended', '--format=json'], {
    env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
    timeout: 120_000,
    maxBuffer: 16 * 1024 * 1024
  }).catch((err: { stdout?: string, stderr?: string }) => {
    if (err.stdout === undefined || err.stdout === '') throw new Error(`redocly lint failed: ${err.stderr ?? String(err)}`)
    return { stdout: err.stdout }
  })
  return JSON.parse(out.stdout) as LintReport
}

const describeProblems = (report: LintReport, severity: 'error' | 'warn'): string[] =>
  report.problems.filter((p) => p.severity === severity).map((p) => `${p.ruleId} ${p.location[0]?.pointer ?? ''}`)

test('redocly lint (recommended ruleset) finds no error in the generated document, and only the accepted warnings', async (t) => {
  const generated = await renderOpenApiYaml()
  const report = await redoclyLint(t, generated)
  assert.deepEqual(describeProblems(report, 'error'), [])
  assert.deepEqual(describeProblems(report, 'warn').filter((w) => !ACCEPTED_WARNINGS.has(w)), [])
  // The linter is not a rubber stamp: an operation without security, operationId or servers is reported.
  const broken = (await keyedApp(t)).swagger() as any
  const copy = structuredClone(broken)
  delete copy.servers
  delete copy.paths['/tools'].get.security
  delete copy.paths['/tools'].get.operationId
  const worse = await redoclyLint(t, stringify(copy))
  const rules = new Set(worse.problems.map((p) => p.ruleId))
  for (const rule of ['no-empty-servers', 'security-defined', 'operation-operationId']) assert.ok(rules.has(rule), `${rule} not reported: ${[...rules].join(', ')}`)
  assert.ok(worse.totals.errors > 0)
})

test('the served document (keys configured) is valid OpenAPI 3.1 for the schema validator', async (t) => {
  const app = await keyedApp(t)
  const validator = new Validator()
  const result = await validator.validate(structuredClone(app.swagger()) as Record<string, unknown>)
  assert.equal(result.valid, true, JSON.stringify(result.errors, null, 2))
  assert.equal(validator.version, '3.1')
})

test('every operation has a unique camelCase operationId, exactly one described tag, and the document a relative server', async (t) => {
  const doc = (await keyedApp(t)).swagger() as any
  const ops = operations(doc)
  const ids = ops.map((op) => op.operationId)
  for (const op of ops) assert.match(op.operationId ?? '', /^[a-z][a-zA-Z0-9]*$/, `${keyOf(op)} has no camelCase operationId`)
  assert.equal(new Set(ids).size, ids.length, `duplicate operationIds: ${ids.join(', ')}`)
  // One tag each: Swagger UI lists an operation under every tag it has, which shows it twice.
  const described = new Map((doc.tags as Array<{ name: string, description?: string }>).map((tag) => [tag.name, tag.description]))
  for (const op of ops) {
    assert.equal(op.tags?.length, 1, `${keyOf(op)} has tags ${JSON.stringify(op.tags)}`)
    assert.ok(described.get(op.tags[0] as string), `${keyOf(op)}: tag ${op.tags[0]} is not declared with a description`)
  }
  const used = new Set(ops.flatMap((op) => op.tags ?? []))
  assert.deepEqual([...described.keys()].filter((name) => !used.has(name)), [], 'declared tags no operation uses')
  // Relative, so Swagger UI's "Try it out" calls whichever gateway served the page.
  assert.deepEqual(doc.servers.map((s: { url: string }) => s.url), ['/'])
  // Every example names an operation that exists.
  assert.deepEqual(Object.keys(OPERATION_EXAMPLES).filter((id) => !ids.includes(id)), [])
})

test("each operation's security is what the auth plugin enforces for its route: without a key, secured is 401 and public is not", async (t) => {
  for (const env of [{}, { METRICS_REQUIRE_KEY: 'true' }] as Array<Record<string, string>>) {
    const app = await keyedApp(t, env)
    const doc = app.swagger() as any
    assert.deepEqual(doc.components.securitySchemes.apiKey, { ...doc.components.securitySchemes.apiKey, type: 'http', scheme: 'bearer' })
    const ops = operations(doc)
    const publicOps: string[] = []
    for (const op of ops) {
      assert.ok(Array.isArray(op.security), `${keyOf(op)} has no security`)
      const secured = op.security.length > 0
      if (secured) assert.deepEqual(op.security, [{ apiKey: [] }], keyOf(op))
      else publicOps.push(keyOf(op))
      const url = op.path.replace(/\{(\w+)\}/g, (_m, name: string) => name === 'checkpointId' ? 'cp1' : name === 'path' ? 'notes.md' : 'alice')
      const res = await app.inject({ method: op.method as 'GET', url, headers: { accept: 'application/json, text/event-stream' } })
      if (secured) assert.equal(res.statusCode, 401, `${keyOf(op)} is documented as secured but answered ${res.statusCode} without a key`)
      else assert.notEqual(res.statusCode, 401, `${keyOf(op)} is documented as public but answered 401 without a key`)
    }
    // Public: the OAuth callback and client metadata (the gateway as a client), and the protected resource
    // metadata, which a client reads before it has a token (404 here, no OAUTH_ISSUER).
    const oauth = [
      'GET /oauth/callback', 'GET /oauth/client-metadata.json', 'GET /.well-known/oauth-protected-resource', 'GET /.well-known/oauth-protected-resource/mcp'
    ]
    const expected = env.METRICS_REQUIRE_KEY === 'true' ? ['GET /healthz', 'GET /readyz', ...oauth] : ['GET /metrics', 'GET /healthz', 'GET /readyz', ...oauth]
    assert.deepEqual(publicOps.sort(), expected.sort())
  }
})

/** The host of a server registration's URL. */
function unresolvable (value: unknown): string | undefined {
  const url = (value as { url?: unknown } | null)?.url
  return typeof url === 'string' ? new URL(url).hostname : undefined
}

async function cannotResolve (host: string): Promise<boolean> {
  return await lookup(host).then(() => false, () => true)
}

/** Holds a call (a policy requiring approval for one tenant's calculate) and answers its approvalId. */
async function heldCall (base: string): Promise<string> {
  const headers = { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' }
  const policy = await fetch(`${base}/users/approval-examples/policy`, { method: 'PUT', headers, body: JSON.stringify({ requireApproval: ['calculate'] }) })
  assert.ok(policy.status === 200 || policy.status === 201, await policy.text())
  const res = await fetch(`${base}/invoke`, { method: 'POST', headers, body: JSON.stringify({ name: 'calculate', userId: 'approval-examples', arguments: { expression: '1+1' } }) })
  const text = await res.text()
  assert.equal(res.status, 202, text)
  return JSON.parse(text).approvalId
}

test('every request body example works against a gateway started like npm start', async (t) => {
  const workspaces = await mkdtemp(join(tmpdir(), 'tg-openapi-examples-'))
  t.after(async () => await rm(workspaces, { recursive: true, force: true }))
  const gateway = await startGateway(t, { API_KEYS: KEYS, WORKSPACES_DIR: workspaces })
  t.after(async () => { await gateway.stop() })
  const doc = await (await fetch(`${gateway.url}/openapi.json`)).json()
  const ops = operations(doc)
  let checkpointId: string | undefined
  let tried = 0
  for (const op of ops) {
    const media = op.requestBody?.content['application/json']
    // Workspace uploads take a tar archive, which a JSON example cannot show.
    if (op.requestBody !== undefined && media === undefined) continue
    if (media === undefined) continue
    // An authorization needs an OAuth-protected server and PUBLIC_URL: test/http/routes/oauth.test.ts runs it against a real one.
    // Accepting pins needs a registered server whose tools were read: test/http/routes/pins.test.ts runs it against a real one.
    if ((op.operationId?.endsWith('OAuth') === true && op.path.endsWith('/authorize')) || op.operationId?.endsWith('ServerPins') === true) {
      assert.ok(media.examples !== undefined, `${keyOf(op)} has no request example`)
      continue
    }
    assert.ok(media.examples !== undefined && Object.keys(media.examples).length > 0, `${keyOf(op)} has no request example`)
    const query = (op.parameters ?? []).filter((p) => p.in === 'query' && p.example !== undefined)
      .map((p) => `${p.name}=${encodeURIComponent(String(p.example))}`).join('&')
    const path = op.path.replace(/\{(\w+)\}/g, (_m, name: string) => {
      if (name === 'checkpointId') {
        assert.ok(checkpointId, `${keyOf(op)} needs a checkpoint taken by an earlier example`)
        return checkpointId
      }
      const param = op.parameters?.find((p) => p.in === 'path' && p.name === name)
      assert.ok(param?.example !== undefined, `${keyOf(op)}: path parameter ${name} has no example`)
      return encodeURIComponent(String(param.example))
    })
    for (const [name, example] of Object.entries(media.examples)) {
      const what = `${keyOf(op)} example ${name}`
      // A decision needs a call held for it: each example decides one of its own.
      const target = op.operationId === 'decideApproval' ? path.replace(/[^/]+$/, await heldCall(gateway.url)) : path
      const res = await fetch(`${gateway.url}${target}${query === '' ? '' : `?${query}`}`, {
        method: op.method,
        headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify(example.value)
      })
      const text = await res.text()
      // A tenant server's URL is resolved when it is registered (the egress rule); a machine
      // without DNS cannot, which says nothing about the example.
      const host = unresolvable(example.value)
      if (res.status === 403 && host !== undefined && await cannotResolve(host)) {
        assert.match(text, /GW_EGRESS_BLOCKED.*cannot resolve/, `${what}: ${text}`)
        t.diagnostic(`${what}: not tried, ${host} does not resolve here`)
        continue
      }
      assert.ok(res.status >= 200 && res.status < 300, `${what}: ${res.status} ${text}`)
      const body = JSON.parse(text)
      if (op.operationId === 'invokeTool') {
        assert.equal(body.isError, false, `${what}: ${text}`)
        if (typeof body.checkpointId === 'string') checkpointId = body.checkpointId
      }
      if (op.operationId === 'invokeBatch') for (const r of body.results) assert.equal(r.isError, false, `${what}: ${text}`)
      if (op.operationId === 'createCheckpoint') checkpointId = body.checkpointId
      if (op.operationId === 'mcpPost') {
        assert.equal(body.error, undefined, `${what}: ${text}`)
        assert.notEqual(body.result?.isError, true, `${what}: ${text}`)
      }
      tried++
    }
  }
  assert.ok(tried >= 12, `only ${tried} examples tried`)
})

test('`redocly lint openapi.yaml` in the repository, as a user runs it, is clean: the accepted warnings are the ignore file\'s', async () => {
  const out = await run('node_modules/.bin/redocly', ['lint', 'openapi.yaml', '--extends=recommended', '--format=json'], {
    env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
    timeout: 120_000,
    maxBuffer: 16 * 1024 * 1024
  }).catch((err: { stdout?: string, stderr?: string }) => ({ stdout: err.stdout ?? `{"failed":${JSON.stringify(err.stderr)}}` }))
  const report = JSON.parse(out.stdout) as LintReport & { totals: { ignored: number } }
  assert.deepEqual(report.totals, { errors: 0, warnings: 0, ignored: ACCEPTED_WARNINGS.size })
})
