import { test } from 'node:test'
import type { TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { createHmac } from 'node:crypto'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import type { FastifyInstance } from 'fastify'
import { buildTestApp } from '../../helpers/app.js'
import { redisForTest, REDIS_URL } from '../../helpers/redis.js'

const ADMIN = 'k-admin-5d1e9a7c3b'
const ACME = 'k-acme-8c2f4e6a1d'
const GLOBEX = 'k-globex-3b7d9f1a2e'
const APPROVER = 'k-approve-7f3a9c2e41'
const GLOBEX_APPROVER = 'k-approve-globex-9d8c7b6a'
const KEYS = `${ADMIN}:*,${ACME}:acme,${GLOBEX}:globex,${APPROVER}:approver:acme,${GLOBEX_APPROVER}:approver:globex`

async function call (
  app: FastifyInstance,
  key: string | undefined,
  method: 'GET' | 'PUT' | 'POST',
  url: string,
  body?: unknown
): Promise<{ status: number, json: any }> {
  const res = await app.inject({
    method,
    url,
    headers: key === undefined ? {} : { authorization: `Bearer ${key}` },
    ...(body !== undefined ? { payload: body as Record<string, unknown> } : {})
  })
  return { status: res.statusCode, json: res.body === '' ? null : res.json() }
}

/** Gateway instances on one Redis (one prefix): what one holds, any decides. */
async function instances (t: TestContext, n: number, env: Record<string, string> = {}): Promise<FastifyInstance[] | undefined> {
  const redis = await redisForTest(t)
  if (redis === undefined) return undefined
  const apps: FastifyInstance[] = []
  for (let i = 0; i < n; i++) {
    apps.push(await buildTestApp(t, {
      env: {
        API_KEYS: KEYS,
        REDIS_URL,
        REDIS_KEY_PREFIX: redis.prefix,
        CLUSTER_SECRET: 'approvals-test-cluster-secret',
        FUNCTIONS_DIR: 'test/fixtures/functions/approvals',
        ...env
      }
    }))
  }
  const r = await call(apps[0] as FastifyInstance, ADMIN, 'PUT', '/users/acme/policy', { requireApproval: ['count_*'] })
  assert.equal(r.status, 201, JSON.stringify(r.json))
  return apps
}

async function counterFile (t: TestContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'tg-approvals-'))
  t.after(async () => await rm(dir, { recursive: true, force: true }))
  return join(dir, 'runs.txt')
}

async function runs (path: string): Promise<number> {
  try {
    return (await readFile(path, 'utf8')).split('\n').filter((l) => l !== '').length
  } catch {
    return 0
  }
}

async function hold (app: FastifyInstance, path: string, extra: Record<string, unknown> = {}): Promise<{ callId: string, approvalId: string }> {
  const r = await call(app, ACME, 'POST', '/invoke', { name: 'count_run', arguments: { path, token: 'tok-secret-123' }, ...extra })
  assert.equal(r.status, 202, JSON.stringify(r.json))
  assert.equal(r.json.status, 'pending')
  assert.match(r.json.approvalId, /^apr_/)
  return r.json
}

test('a held call: 202, listed, approved by the tenant\'s approver, runs once; the journal and GET /approvals/{id} show it decided', async (t) => {
  const apps = await instances(t, 1)
  if (apps === undefined) return
  const app = apps[0] as FastifyInstance
  const path = await counterFile(t)
  const held = await hold(app, path, { callId: 'call-approve-1' })
  assert.equal(held.callId, 'call-approve-1')
  assert.equal(await runs(path), 0, 'a held call does not run')

  let r = await call(app, ACME, 'GET', '/approvals')
  assert.equal(r.status, 200)
  assert.deepEqual(r.json.approvals.map((a: any) => a.approvalId), [held.approvalId])
  const listed = r.json.approvals[0]
  assert.equal(listed.status, 'pending')
  assert.equal(listed.rule, 'count_*')
  assert.equal(listed.userId, 'acme')
  assert.equal(listed.arguments.path, path)
  assert.equal(listed.arguments.token, '****', 'secret-looking argument keys are masked as in the journal')
  r = await call(app, APPROVER, 'GET', '/approvals?userId=acme')
  assert.equal(r.json.approvals.length, 1)

  // Who may decide: a tenant key never, another tenant's approver never.
  r = await call(app, ACME, 'POST', `/approvals/${held.approvalId}`, { decision: 'approve' })
  assert.equal(r.status, 403)
  assert.equal(r.json.code, 'GW_FORBIDDEN')
  r = await call(app, GLOBEX_APPROVER, 'POST', `/approvals/${held.approvalId}`, { decision: 'approve' })
  assert.equal(r.status, 403)
  assert.equal(r.json.code, 'GW_TENANT_MISMATCH')
  r = await call(app, GLOBEX_APPROVER, 'GET', `/approvals/${held.approvalId}`)
  assert.equal(r.status, 403)
  r = await call(app, GLOBEX, 'GET', '/approvals?userId=acme')
  assert.equal(r.status, 403)
  assert.equal(await runs(path), 0)

  r = await call(app, APPROVER, 'POST', `/approvals/${held.approvalId}`, { decision: 'approve', reason: 'looks fine' })
  assert.equal(r.status, 200, JSON.stringify(r.json))
  assert.equal(r.json.status, 'approved')
  assert.equal(r.json.result.isError, false)
  assert.deepEqual(JSON.parse(r.json.result.output), { runs: 1 })
  assert.equal(r.json.result.callId, 'call-approve-1')
  assert.equal(await runs(path), 1)

  r = await call(app, APPROVER, 'POST', `/approvals/${held.approvalId}`, { decision: 'approve' })
  assert.equal(r.status, 409)
  assert.equal(r.json.code, 'GW_APPROVAL_DECIDED')
  r = await call(app, ADMIN, 'POST', `/approvals/${held.approvalId}`, { decision: 'deny' })
  assert.equal(r.status, 409)
  assert.equal(await runs(path), 1)

  r = await call(app, ACME, 'GET', `/approvals/${held.approvalId}`)
  assert.equal(r.status, 200)
  assert.equal(r.json.status, 'approved')
  assert.equal(r.json.reason, 'looks fine')
  assert.deepEqual(JSON.parse(r.json.result.output), { runs: 1 })
  r = await call(app, ACME, 'GET', '/approvals')
  assert.deepEqual(r.json.approvals, [], 'a decided call is no longer pending')

  // The journal is written off the request path: poll for the entry.
  let entry: any
  for (let i = 0; i < 200 && entry === undefined; i++) {
    const j = await call(app, APPROVER, 'GET', '/users/acme/invocations/call-approve-1')
    if (j.status === 200) entry = j.json
    else await new Promise((resolve) => setTimeout(resolve, 25))
  }
  assert.ok(entry, 'the approved call is in the journal')
  assert.equal(entry.approvalId, held.approvalId)
  assert.equal(entry.isError, false)
  assert.deepEqual(JSON.parse(entry.output), { runs: 1 })
})

test('an approver key reads and decides but cannot invoke, list tools or reach workspaces; unknown approvals are 404', async (t) => {
  const apps = await instances(t, 1)
  if (apps === undefined) return
  const app = apps[0] as FastifyInstance
  let r = await call(app, APPROVER, 'POST', '/invoke', { name: 'calculate', arguments: { expression: '1+1' } })
  assert.equal(r.status, 403)
  assert.equal(r.json.code, 'GW_FORBIDDEN')
  r = await call(app, APPROVER, 'POST', '/invoke/batch', { calls: [{ name: 'calculate', arguments: { expression: '1+1' } }] })
  assert.equal(r.status, 403)
  r = await call(app, APPROVER, 'GET', '/tools?functions=calculate')
  assert.equal(r.status, 403)
  r = await call(app, APPROVER, 'GET', '/users/acme/invocations')
  assert.equal(r.status, 200)
  r = await call(app, APPROVER, 'GET', '/approvals/apr_doesnotexist')
  assert.equal(r.status, 404)
  assert.equal(r.json.code, 'GW_APPROVAL_NOT_FOUND')
  r = await call(app, APPROVER, 'POST', '/approvals/apr_doesnotexist', { decision: 'approve' })
  assert.equal(r.status, 404)
  assert.equal(r.json.code, 'GW_APPROVAL_NOT_FOUND')
  r = await call(app, APPROVER, 'POST', '/approvals/apr_x', { decision: 'maybe' })
  assert.equal(r.status, 400)
  assert.equal(r.json.code, 'GW_BAD_REQUEST')
})

/** Polls until the tenant has a pending approval for callId. */
async function pendingOf (app: FastifyInstance, callId: string): Promise<string> {
  for (;;) {
    const r = await call(app, APPROVER, 'GET', '/approvals')
    const found = r.json.approvals.find((a: any) => a.callId === callId)
    if (found !== undefined) return found.approvalId
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

test('waitForApprovalMs: the invoke waits and answers 200 with the result of the approved call; a denied one answers APPROVAL_DENIED', async (t) => {
  const apps = await instances(t, 2)
  if (apps === undefined) return
  const [a, b] = apps as [FastifyInstance, FastifyInstance]
  const path = await counterFile(t)
  // Held on one instance, decided on the other: the waiting request learns it from the store.
  const waiting = call(a, ACME, 'POST', '/invoke', { name: 'count_run', arguments: { path }, callId: 'call-wait-1', waitForApprovalMs: 120_000 })
  const approvalId = await pendingOf(b, 'call-wait-1')
  const decided = await call(b, APPROVER, 'POST', `/approvals/${approvalId}`, { decision: 'approve' })
  assert.equal(decided.status, 200)
  const r = await waiting
  assert.equal(r.status, 200, JSON.stringify(r.json))
  assert.equal(r.json.callId, 'call-wait-1')
  assert.equal(r.json.isError, false)
  assert.deepEqual(JSON.parse(r.json.output), { runs: 1 })

  const denied = call(a, ACME, 'POST', '/invoke', { name: 'count_run', arguments: { path }, callId: 'call-wait-2', waitForApprovalMs: 120_000 })
  const id2 = await pendingOf(b, 'call-wait-2')
  const d = await call(b, APPROVER, 'POST', `/approvals/${id2}`, { decision: 'deny', reason: 'not on a Friday' })
  assert.equal(d.status, 200)
  assert.equal(d.json.status, 'denied')
  const dr = await denied
  assert.equal(dr.status, 200)
  assert.equal(dr.json.isError, true)
  assert.equal(dr.json.error.code, 'APPROVAL_DENIED')
  assert.match(dr.json.error.message, /not on a Friday/)
  assert.match(dr.json.output, /^TOOL_ERROR: .*"errorType":"APPROVAL_DENIED"/)
  assert.equal(await runs(path), 1, 'the denied call never ran')
  const g = await call(a, ACME, 'GET', `/approvals/${id2}`)
  assert.equal(g.json.result.error.code, 'APPROVAL_DENIED')
})

test('two approvers racing on two instances: one decision wins, the call runs once; a dead holding instance does not matter', async (t) => {
  const apps = await instances(t, 2)
  if (apps === undefined) return
  const [a, b] = apps as [FastifyInstance, FastifyInstance]
  const path = await counterFile(t)
  let approved = 0
  for (let round = 0; round < 5; round++) {
    const held = await hold(a, path)
    const answers = await Promise.all([
      call(a, APPROVER, 'POST', `/approvals/${held.approvalId}`, { decision: 'approve' }),
      call(b, ADMIN, 'POST', `/approvals/${held.approvalId}`, { decision: 'approve' }),
      call(b, APPROVER, 'POST', `/approvals/${held.approvalId}`, { decision: 'deny' })
    ])
    const statuses = answers.map((x) => x.status).sort()
    assert.deepEqual(statuses, [200, 409, 409], JSON.stringify(answers.map((x) => x.json)))
    const winner = answers.find((x) => x.status === 200)
    if (winner?.json.status === 'approved') approved++
    // Each round's call ran exactly when an approval won.
    assert.equal(await runs(path), approved)
  }
  const ran = await runs(path)

  // The instance that held the call goes away; the other decides and runs it.
  const held = await hold(a, path)
  await a.close()
  const r = await call(b, APPROVER, 'POST', `/approvals/${held.approvalId}`, { decision: 'approve' })
  assert.equal(r.status, 200, JSON.stringify(r.json))
  assert.equal(r.json.result.isError, false)
  assert.equal(await runs(path), ran + 1)
})

test('unanswered past APPROVAL_TTL: the approval shows expired with APPROVAL_EXPIRED, deciding it is 410', async (t) => {
  const apps = await instances(t, 1, { APPROVAL_TTL: '300ms' })
  if (apps === undefined) return
  const app = apps[0] as FastifyInstance
  const path = await counterFile(t)
  const held = await hold(app, path)
  let r = await call(app, ACME, 'GET', `/approvals/${held.approvalId}`)
  while (r.json.status === 'pending') {
    await new Promise((resolve) => setTimeout(resolve, 50))
    r = await call(app, ACME, 'GET', `/approvals/${held.approvalId}`)
  }
  assert.equal(r.json.status, 'expired')
  assert.equal(r.json.result.isError, true)
  assert.equal(r.json.result.error.code, 'APPROVAL_EXPIRED')
  assert.match(r.json.result.output, /"errorType":"APPROVAL_EXPIRED"/)
  r = await call(app, APPROVER, 'POST', `/approvals/${held.approvalId}`, { decision: 'approve' })
  assert.equal(r.status, 410)
  assert.equal(r.json.code, 'APPROVAL_EXPIRED')
  r = await call(app, ACME, 'GET', '/approvals')
  assert.deepEqual(r.json.approvals, [])
  assert.equal(await runs(path), 0)
})

test('a batch entry held for approval has the pending shape; /mcp tells the model the call awaits approval', async (t) => {
  const apps = await instances(t, 1)
  if (apps === undefined) return
  const app = apps[0] as FastifyInstance
  const path = await counterFile(t)
  let r = await call(app, ACME, 'POST', '/invoke/batch', {
    calls: [{ name: 'count_run', arguments: { path }, callId: 'b1' }, { name: 'calculate', arguments: { expression: '2+2' } }]
  })
  assert.equal(r.status, 200)
  const [pending, done] = r.json.results
  assert.equal(pending.callId, 'b1')
  assert.equal(pending.status, 'pending')
  assert.match(pending.approvalId, /^apr_/)
  assert.equal(pending.statusCode, 202)
  assert.equal(pending.isError, true)
  assert.match(pending.output, /awaits a human's approval/)
  assert.equal(JSON.parse(done.output).result, 4)

  const res = await app.inject({
    method: 'POST',
    url: '/mcp?functions=count_run',
    headers: { authorization: `Bearer ${ACME}`, accept: 'application/json, text/event-stream', 'content-type': 'application/json' },
    payload: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'count_run', arguments: { path } } }
  })
  assert.equal(res.statusCode, 200, res.body)
  const result = res.json().result
  assert.equal(result.isError, true)
  const text: string = result.content[0].text
  assert.match(text, /awaits a human's approval \(approvalId apr_[0-9a-f]+/)
  const approvalId = /approvalId (apr_[0-9a-f]+)/.exec(text)?.[1]
  r = await call(app, ACME, 'GET', `/approvals/${approvalId ?? ''}`)
  assert.equal(r.json.status, 'pending')
  assert.equal(await runs(path), 0)
})

test('the webhook receives a signed POST per held call (no arguments); a down webhook does not block approving by API', async (t) => {
  const secret = 'whsec-0123456789abcdef'
  const received: Array<{ body: string, signature: string | undefined }> = []
  const server = createServer((req, res) => {
    let body = ''
    req.on('data', (c: Buffer) => { body += c.toString('utf8') })
    req.on('end', () => {
      received.push({ body, signature: req.headers['x-gateway-signature'] as string | undefined })
      res.end('ok')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => server.close())
  const port = (server.address() as AddressInfo).port
  const apps = await instances(t, 1, { APPROVAL_WEBHOOK_URL: `http://127.0.0.1:${port}/hook`, APPROVAL_WEBHOOK_SECRET: secret })
  if (apps === undefined) return
  const path = await counterFile(t)
  const held = await hold(apps[0] as FastifyInstance, path, { callId: 'call-hook' })
  while (received.length === 0) await new Promise((resolve) => setTimeout(resolve, 20))
  const { body, signature } = received[0] as { body: string, signature: string }
  assert.equal(signature, 'sha256=' + createHmac('sha256', secret).update(body).digest('hex'))
  const notice = JSON.parse(body)
  assert.deepEqual(Object.keys(notice).sort(), ['approvalId', 'callId', 'createdAt', 'expiresAt', 'name', 'userId'])
  assert.equal(notice.approvalId, held.approvalId)
  assert.equal(notice.userId, 'acme')
  assert.equal(notice.callId, 'call-hook')
  assert.ok(!body.includes(path), 'the arguments are never sent')

  // A webhook target that refuses connections: holding and deciding go on.
  const down = createServer()
  await new Promise<void>((resolve) => down.listen(0, '127.0.0.1', resolve))
  const downPort = (down.address() as AddressInfo).port
  await new Promise<void>((resolve) => down.close(() => resolve()))
  const others = await instances(t, 1, { APPROVAL_WEBHOOK_URL: `http://127.0.0.1:${downPort}/hook`, APPROVAL_WEBHOOK_SECRET: secret })
  if (others === undefined) return
  const app = others[0] as FastifyInstance
  const held2 = await hold(app, path)
  const r = await call(app, APPROVER, 'POST', `/approvals/${held2.approvalId}`, { decision: 'approve' })
  assert.equal(r.status, 200)
  assert.deepEqual(JSON.parse(r.json.result.output), { runs: 1 })
})

test('without Redis, held calls live in memory: hold, list, approve, 409 on a second decision', async (t) => {
  const app = await buildTestApp(t, { env: { API_KEYS: KEYS, FUNCTIONS_DIR: 'test/fixtures/functions/approvals' } })
  assert.equal((await call(app, ADMIN, 'PUT', '/users/acme/policy', { requireApproval: ['count_run'] })).status, 201)
  const path = await counterFile(t)
  const held = await hold(app, path)
  assert.equal((await call(app, ACME, 'GET', '/approvals')).json.approvals.length, 1)
  // The 202 is counted as held, not as ok: nothing ran.
  const metrics = (await app.inject({ method: 'GET', url: '/metrics' })).body
  assert.match(metrics, /^gateway_invocations_total\{endpoint="\/invoke",route="none",outcome="GW_APPROVAL_PENDING"\} 1$/m)
  assert.doesNotMatch(metrics, /^gateway_invocations_total\{endpoint="\/invoke",route="[a-z_]+",outcome="ok"\}/m)
  const r = await call(app, ADMIN, 'POST', `/approvals/${held.approvalId}`, { decision: 'approve' })
  assert.equal(r.status, 200)
  assert.deepEqual(JSON.parse(r.json.result.output), { runs: 1 })
  assert.equal((await call(app, ADMIN, 'POST', `/approvals/${held.approvalId}`, { decision: 'approve' })).status, 409)
  assert.equal(await runs(path), 1)
})

/**
 * The attack: under a policy that holds a tool (a default `requireApproval` on destructive tools is
 * the usual case), a tenant holds calls in a loop. Each kept its whole request (arguments up to
 * BODY_LIMIT_BYTES) for APPROVAL_TTL plus a day, without bound per tenant; without Redis the
 * instance's 10,000 records were shared, so one tenant filling them refused every other tenant's.
 */
async function heldPastTheBound (t: TestContext, apps: FastifyInstance[]): Promise<void> {
  const path = await counterFile(t)
  const bulky = 'x'.repeat(100_000)
  // 16 at once, spread over the instances: exactly 3 are held.
  const answers = await Promise.all(Array.from({ length: 16 }, async (_v, i) =>
    await call(apps[i % apps.length] as FastifyInstance, ACME, 'POST', '/invoke', { name: 'count_run', arguments: { path, token: bulky } })))
  const held = answers.filter((a) => a.status === 202)
  assert.equal(held.length, 3, JSON.stringify(answers.map((a) => a.status)))
  for (const a of answers.filter((x) => x.status !== 202)) {
    assert.equal(a.status, 403, JSON.stringify(a.json))
    assert.equal(a.json.code, 'GW_TENANT_QUOTA_EXCEEDED')
    assert.match(a.json.message, /TENANT_MAX_PENDING_APPROVALS/)
  }
  const app = apps[0] as FastifyInstance
  assert.equal((await call(app, ACME, 'GET', '/approvals')).json.approvals.length, 3)
  // Another tenant is not held by acme's bound.
  assert.equal((await call(app, ADMIN, 'PUT', '/users/globex/policy', { requireApproval: ['count_*'] })).status, 201)
  assert.equal((await call(app, GLOBEX, 'POST', '/invoke', { name: 'count_run', arguments: { path } })).status, 202)
  // A decision makes room for one more.
  assert.equal((await call(app, APPROVER, 'POST', `/approvals/${held[0]?.json.approvalId as string}`, { decision: 'deny' })).status, 200)
  assert.equal((await call(apps[apps.length - 1] as FastifyInstance, ACME, 'POST', '/invoke', { name: 'count_run', arguments: { path } })).status, 202)
  assert.equal((await call(app, ACME, 'POST', '/invoke', { name: 'count_run', arguments: { path } })).json.code, 'GW_TENANT_QUOTA_EXCEEDED')
  assert.equal(await runs(path), 0, 'nothing ran')
}

test('a tenant holds at most TENANT_MAX_PENDING_APPROVALS calls, in memory', async (t) => {
  const app = await buildTestApp(t, { env: { API_KEYS: KEYS, FUNCTIONS_DIR: 'test/fixtures/functions/approvals', TENANT_MAX_PENDING_APPROVALS: '3' } })
  assert.equal((await call(app, ADMIN, 'PUT', '/users/acme/policy', { requireApproval: ['count_*'] })).status, 201)
  await heldPastTheBound(t, [app])
})

test('a tenant holds at most TENANT_MAX_PENDING_APPROVALS calls, with Redis, racing on two instances', async (t) => {
  const apps = await instances(t, 2, { TENANT_MAX_PENDING_APPROVALS: '3' })
  if (apps === undefined) return
  await heldPastTheBound(t, apps)
})

/**
 * Held calls that expired undecided keep their outcome, not their request: each kept the whole
 * request (arguments up to BODY_LIMIT_BYTES) for a day past its expiry, so a tenant holding its
 * TENANT_MAX_PENDING_APPROVALS every APPROVAL_TTL and letting them expire stored 25 x that.
 * `stored` reads the request field as the store keeps it (null: not stored).
 */
async function expiredDropTheirRequests (t: TestContext, app: FastifyInstance, stored?: (approvalId: string) => Promise<string | null>): Promise<void> {
  const path = await counterFile(t)
  const first = [await hold(app, path, { arguments: { path, token: 'x'.repeat(50_000) } }), await hold(app, path)]
  for (const h of first) {
    assert.notEqual((await call(app, ACME, 'GET', `/approvals/${h.approvalId}`)).json.arguments, null)
    if (stored !== undefined) assert.notEqual(await stored(h.approvalId), null)
  }
  await new Promise((resolve) => setTimeout(resolve, 400))
  // The tenant's next hold sweeps them.
  await hold(app, path)
  for (const h of first) {
    if (stored !== undefined) assert.equal(await stored(h.approvalId), null, 'the expired request is no longer stored')
    const r = await call(app, ACME, 'GET', `/approvals/${h.approvalId}`)
    assert.equal(r.json.status, 'expired')
    assert.equal(r.json.arguments, null)
    assert.equal(r.json.result.error.code, 'APPROVAL_EXPIRED')
    assert.equal(r.json.result.route, 'function', 'the outcome keeps the tier it would have run in')
  }
}

test('held calls that expired undecided keep their outcome, not their request (memory)', async (t) => {
  const app = await buildTestApp(t, { env: { API_KEYS: KEYS, FUNCTIONS_DIR: 'test/fixtures/functions/approvals', APPROVAL_TTL: '300ms' } })
  assert.equal((await call(app, ADMIN, 'PUT', '/users/acme/policy', { requireApproval: ['count_*'] })).status, 201)
  await expiredDropTheirRequests(t, app)
})

test('held calls that expired undecided keep their outcome, not their request (Redis)', async (t) => {
  const apps = await instances(t, 1, { APPROVAL_TTL: '300ms' })
  if (apps === undefined) return
  const redis = new Redis(REDIS_URL)
  t.after(() => { redis.disconnect() })
  await expiredDropTheirRequests(t, apps[0] as FastifyInstance, async (id) => {
    const [key] = await redis.keys(`*{approval:${id}}:rec`)
    return key === undefined ? null : await redis.hget(key, 'request')
  })
})
