/**
 * POST /invoke and /invoke/batch, multi round-trip (MCP 2026-07-28 `input_required`, REST parity,
 * issue 30): a 2026-07-28-only upstream on the SDK v2 whose tools ask for input before they
 * answer. A caller that declares clientCapabilities gets 200 `status: "input_required"` with the
 * server's inputRequests as they came and the gateway's handle as requestState; its retry with
 * inputResponses and that handle continues the same call (same callId, same upstream, the
 * upstream's own requestState byte for byte). Handles that were altered, expired, or are another
 * tenant's, key's, tool's, arguments' or callId's are 400 GW_INVALID_REQUEST_STATE. An approval
 * given in round 1 holds for the retry; deny policies are checked every round.
 */
import { test } from 'node:test'
import type { TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import type { FastifyInstance } from 'fastify'
import { fromJsonSchema, inputRequired } from '@modelcontextprotocol/server'
import { buildTestApp } from '../../helpers/app.js'
import { postModernMcp } from '../../helpers/mcp-raw.js'
import { startModernUpstream } from '../../helpers/mrtr-upstream.js'
import type { ModernUpstream } from '../../helpers/mrtr-upstream.js'
import { RequestStateSealer } from '../../../src/routing/input-rounds.js'

const ADMIN = 'k-admin-mrtr-0123456789'
const ACME = 'k-acme-mrtr-0123456789'
const ACME_TWO = 'k-acme-two-mrtr-0123456789'
const GLOBEX = 'k-globex-mrtr-0123456789'
const APPROVER = 'k-approve-mrtr-0123456789'
const KEYS = `${ADMIN}:*,${ACME}:acme,${ACME_TWO}:acme,${GLOBEX}:globex,${APPROVER}:approver:acme`
/** The upstream's own states: characters a careless re-encoding would change. */
const STATE_1 = 'st@te/1+=;{"round":1} é\u2028 ~'
const STATE_2 = 'st@te/2 ✓'
const NAME_SCHEMA = { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] }
const ASK_NAME = { method: 'elicitation/create', params: { mode: 'form', message: 'Your name?', requestedSchema: NAME_SCHEMA } }
const ASK_LLM = { method: 'sampling/createMessage', params: { messages: [{ role: 'user', content: { type: 'text', text: 'Pick a hotel' } }], maxTokens: 20 } }
const CAPS = { elicitation: { form: {} }, sampling: {} }
const ACCEPT = { who: { action: 'accept', content: { name: 'Ada' } } }
const ALLOW = { mcp: ['conf'] }

/**
 * `greet` asks for a name (elicitation) with STATE_1, then greets; `trip` asks for a confirmation
 * (elicitation, STATE_1), then for a hotel (sampling, STATE_2), then books; `plain` answers at once.
 */
async function startUpstream (t: TestContext): Promise<ModernUpstream> {
  const anyObject = fromJsonSchema({ type: 'object' } as never)
  return await startModernUpstream(t, (server, record) => {
    server.registerTool('greet', { description: 'asks for a name, then greets', inputSchema: anyObject }, async (_args, ctx) => {
      record('greet', ctx)
      const answer = ctx.mcpReq.inputResponses?.who as { action?: string, content?: { name?: string } } | undefined
      if (ctx.mcpReq.requestState() === STATE_1 && answer?.action === 'accept') {
        return { content: [{ type: 'text', text: `hello ${answer.content?.name ?? '?'}` }] }
      }
      return inputRequired({ inputRequests: { who: ASK_NAME as never }, requestState: STATE_1 })
    })
    server.registerTool('trip', {
      description: 'two rounds of questions, then books',
      inputSchema: fromJsonSchema({ type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } as never)
    }, async (args, ctx) => {
      record('trip', ctx)
      const city = (args as { city: string }).city
      const state = ctx.mcpReq.requestState()
      const responses = ctx.mcpReq.inputResponses
      if (state === STATE_1 && (responses?.confirm as { action?: string } | undefined)?.action === 'accept') {
        return inputRequired({ inputRequests: { hotel: ASK_LLM as never }, requestState: STATE_2 })
      }
      if (state === STATE_2) {
        const hotel = (responses?.hotel as { content?: { text?: string } } | undefined)?.content?.text
        return { content: [{ type: 'text', text: `booked ${city}: ${hotel ?? '?'}` }] }
      }
      return inputRequired({
        inputRequests: {
          confirm: { method: 'elicitation/create', params: { mode: 'form', message: `Go to ${city}?`, requestedSchema: { type: 'object', properties: {} } } } as never
        },
        requestState: STATE_1
      })
    })
    server.registerTool('many', { description: 'asks `count` questions at once', inputSchema: anyObject }, async (args, ctx) => {
      record('many', ctx)
      const count = (args as { count?: number }).count ?? 1
      const inputRequests = Object.fromEntries(Array.from({ length: count }, (_, i) => [`q${i}`, ASK_NAME]))
      return inputRequired({ inputRequests: inputRequests as never, requestState: STATE_1 })
    })
    server.registerTool('plain', { description: 'answers at once', inputSchema: anyObject }, async (_args, ctx) => {
      record('plain', ctx)
      return { content: [{ type: 'text', text: 'plain' }] }
    })
  })
}

interface Answer { status: number, json: any, text: string }

async function call (app: FastifyInstance, key: string, method: 'GET' | 'POST' | 'PUT', url: string, body?: unknown): Promise<Answer> {
  const res = await app.inject({
    method,
    url,
    headers: { authorization: `Bearer ${key}` },
    ...(body !== undefined ? { payload: body as Record<string, unknown> } : {})
  })
  return { status: res.statusCode, json: res.body === '' ? null : res.json(), text: res.body }
}

interface GatewayOptions { env?: Record<string, string>, sealer?: RequestStateSealer }

async function gateway (t: TestContext, upstream: ModernUpstream, opts: GatewayOptions = {}): Promise<FastifyInstance> {
  const app = await buildTestApp(t, {
    env: { API_KEYS: KEYS, EGRESS_ALLOW: '127.0.0.1/32', ...opts.env },
    ...(opts.sealer !== undefined ? { overrides: { mcpRequestState: opts.sealer } } : {})
  })
  const r = await call(app, ADMIN, 'PUT', '/mcp/servers/conf', { type: 'streamable_http', url: upstream.url })
  assert.equal(r.status, 201, r.text)
  return app
}

const invoke = async (app: FastifyInstance, body: Record<string, unknown>, key = ACME): Promise<Answer> =>
  await call(app, key, 'POST', '/invoke', { allow: ALLOW, ...body })

/** The journal entries of one call, oldest first. */
async function journalOf (app: FastifyInstance, callId: string): Promise<any[]> {
  // The journal writes on a later turn of the event loop.
  for (let i = 0; i < 50; i++) {
    const r = await call(app, ACME, 'GET', '/users/acme/invocations?limit=500')
    assert.equal(r.status, 200, r.text)
    const entries = (r.json.invocations as any[]).filter((e) => e.callId === callId).reverse()
    if (entries.length > 0 && i > 2) return entries
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  return []
}

test('over REST, a call that declares clientCapabilities gets input_required with the server\'s questions and a gateway handle; ' +
  'the retry completes the same call', async (t) => {
  const upstream = await startUpstream(t)
  const app = await gateway(t, upstream, { sealer: new RequestStateSealer({ secret: 'rest-secret' }) })

  const first = await invoke(app, { name: 'greet', arguments: {}, clientCapabilities: { elicitation: { form: {} } } })
  assert.equal(first.status, 200, first.text)
  assert.equal(first.json.status, 'input_required')
  assert.deepEqual(first.json.inputRequests, { who: ASK_NAME }, 'the questions exactly as the server sent them')
  assert.equal(typeof first.json.requestState, 'string')
  assert.equal(first.json.isError, false)
  assert.equal(first.json.error, null)
  assert.equal(first.json.truncated, false)
  assert.equal(first.json.route, 'global_mcp')
  assert.match(first.json.output, /asks for input before it answers: who \(elicitation\/create\)/)
  assert.match(first.json.callId, /^call_/)
  assert.ok(!first.text.includes('st@te'), 'the server\'s own requestState never reaches the caller')
  // The server was told what the caller can answer (and only that).
  assert.deepEqual(upstream.calls[0], { tool: 'greet', requestState: undefined, inputResponses: undefined, capabilities: { elicitation: { form: {} } } })

  const form = { elicitation: { form: {} } }
  const done = await invoke(app, { name: 'greet', arguments: {}, clientCapabilities: form, inputResponses: ACCEPT, requestState: first.json.requestState })
  assert.equal(done.status, 200, done.text)
  assert.equal(done.json.output, 'hello Ada')
  assert.equal(done.json.isError, false)
  assert.equal(done.json.callId, first.json.callId, 'the retry is the same call')
  assert.ok(!('status' in done.json) && !('requestState' in done.json) && !('inputRequests' in done.json), 'a result has no status, as before')
  assert.equal(upstream.calls.length, 2)
  assert.equal(upstream.calls[1]?.requestState, STATE_1, 'the upstream got its own requestState byte for byte')
  assert.deepEqual(upstream.calls[1]?.inputResponses, ACCEPT)

  // The journal sees one call in two rounds: the first says input_required, neither ok nor an error.
  const rounds = await journalOf(app, first.json.callId)
  assert.deepEqual(rounds.map((e) => [e.status, e.isError, e.name]), [['input_required', false, 'greet'], [null, false, 'greet']])
  const journal = JSON.stringify(rounds)
  assert.ok(!journal.includes(first.json.requestState) && !journal.includes('st@te'), 'neither the handle nor the server\'s state is journaled')
  // The metrics count the round as input_required.
  const metrics = await app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${ADMIN}` } })
  assert.match(metrics.body, /gateway_invocations_total\{endpoint="\/invoke",route="global_mcp",outcome="input_required"\} 1/)
})

test('a call of several rounds carries one callId; each retry reaches the same server with its latest state; ' +
  'a tool without questions answers as always', async (t) => {
  const upstream = await startUpstream(t)
  const app = await gateway(t, upstream)
  const args = { city: 'Lyon' }
  const r1 = await invoke(app, { name: 'trip', arguments: args, clientCapabilities: CAPS, callId: 'call-trip-1' })
  assert.equal(r1.json.status, 'input_required', r1.text)
  assert.equal(r1.json.callId, 'call-trip-1')
  assert.deepEqual(Object.keys(r1.json.inputRequests), ['confirm'])
  // The arguments as a model's JSON string, keys in another order: the same call.
  const r2 = await invoke(app, {
    name: 'trip',
    arguments: JSON.stringify(args),
    clientCapabilities: CAPS,
    inputResponses: { confirm: { action: 'accept', content: {} } },
    requestState: r1.json.requestState
  })
  assert.equal(r2.json.status, 'input_required', r2.text)
  assert.deepEqual(r2.json.inputRequests, { hotel: ASK_LLM })
  assert.equal(r2.json.callId, 'call-trip-1', 'the callId comes from the handle')
  assert.notEqual(r2.json.requestState, r1.json.requestState)
  const hotel = { role: 'assistant', content: { type: 'text', text: 'Hotel du Parc' }, model: 'm', stopReason: 'endTurn' }
  const r3 = await invoke(app, {
    name: 'trip', arguments: args, clientCapabilities: CAPS, inputResponses: { hotel }, requestState: r2.json.requestState, callId: 'call-trip-1'
  })
  assert.equal(r3.status, 200, r3.text)
  assert.equal(r3.json.output, 'booked Lyon: Hotel du Parc')
  assert.deepEqual(upstream.calls.map((c) => c.requestState), [undefined, STATE_1, STATE_2])
  assert.deepEqual(upstream.calls.map((c) => c.capabilities), [CAPS, CAPS, CAPS])
  assert.deepEqual((await journalOf(app, 'call-trip-1')).map((e) => e.status), ['input_required', 'input_required', null])

  // Handles are not single-use: while it is fresh, the first round's handle leads to round 2 again.
  const confirm = { confirm: { action: 'accept', content: {} } }
  const again = await invoke(app, { name: 'trip', arguments: args, clientCapabilities: CAPS, inputResponses: confirm, requestState: r1.json.requestState })
  assert.equal(again.json.status, 'input_required')
  // A plain tool with clientCapabilities: a plain result.
  const plain = await invoke(app, { name: 'plain', arguments: {}, clientCapabilities: CAPS })
  assert.equal(plain.json.output, 'plain')
  assert.ok(!('status' in plain.json))
})

test('without clientCapabilities the server is told nothing and its question is a tool error that says how to receive it, as before', async (t) => {
  const upstream = await startUpstream(t)
  const app = await gateway(t, upstream)
  const r = await invoke(app, { name: 'greet', arguments: {} })
  assert.equal(r.status, 200, r.text)
  assert.equal(r.json.isError, true)
  assert.equal(r.json.error.code, 'GW_TOOL_ERROR')
  assert.match(r.json.error.message, /asks for input \(elicitation\/sampling\/roots\)/)
  assert.match(r.json.error.message, /declare clientCapabilities/)
  assert.ok(!('status' in r.json) && !('requestState' in r.json))
  assert.deepEqual(upstream.calls[0]?.capabilities, {}, 'no capabilities were declared upstream')
  // Declared capabilities that do not cover the question: the server may not ask, a tool error says so.
  const sampling = await invoke(app, { name: 'greet', arguments: {}, clientCapabilities: { sampling: {} } })
  assert.equal(sampling.json.isError, true, sampling.text)
  assert.match(sampling.json.error.message, /did not declare/)
  // Malformed round fields are 400s that name the field.
  for (const bad of [{ clientCapabilities: 'all' }, { inputResponses: [] }, { requestState: 42 }, { requestState: '' }]) {
    const res = await invoke(app, { name: 'greet', arguments: {}, ...bad })
    assert.equal(res.status, 400, res.text)
    assert.equal(res.json.code, 'GW_BAD_REQUEST')
    assert.match(res.json.message, new RegExp(`body/${Object.keys(bad)[0] as string}`))
  }
})

test('a handle that was altered, expired, or is another tenant\'s, key\'s, tool\'s, arguments\' or callId\'s is 400 GW_INVALID_REQUEST_STATE ' +
  'and never reaches the server', async (t) => {
  const upstream = await startUpstream(t)
  let now = Date.parse('2026-12-05T00:00:00Z')
  const app = await gateway(t, upstream, { sealer: new RequestStateSealer({ secret: 'rest-secret', ttlMs: 60_000, now: () => now }) })
  const first = await invoke(app, { name: 'greet', arguments: { n: 1 }, clientCapabilities: CAPS, callId: 'call-h' })
  const handle = first.json.requestState as string
  const upstreamCalls = upstream.calls.length
  const retry = { name: 'greet', arguments: { n: 1 }, clientCapabilities: CAPS, inputResponses: ACCEPT }
  const refused = async (body: Record<string, unknown>, why: RegExp, key = ACME): Promise<void> => {
    const r = await invoke(app, body, key)
    assert.equal(r.status, 400, r.text)
    assert.equal(r.json.code, 'GW_INVALID_REQUEST_STATE')
    assert.match(r.json.message, /^Invalid or expired requestState \(/)
    assert.match(r.json.message, why)
    assert.ok(!r.text.includes('st@te') && !r.text.includes('call-h'), 'the refusal says why, never what the handle held')
  }
  const [v, payload, mac] = handle.split('.') as [string, string, string]
  const flipped = payload.slice(0, 5) + (payload[5] === 'A' ? 'B' : 'A') + payload.slice(6)
  await refused({ ...retry, requestState: `${v}.${flipped}.${mac}` }, /altered/)
  await refused({ ...retry, requestState: `${handle}-TAMPERED` }, /altered/)
  await refused({ ...retry, requestState: 'not-a-handle' }, /not a handle/)
  await refused({ ...retry, requestState: handle }, /another tenant/, GLOBEX)
  await refused({ ...retry, requestState: handle }, /another API key/, ACME_TWO)
  await refused({ ...retry, name: 'plain', requestState: handle }, /another tool/)
  await refused({ ...retry, arguments: { n: 2 }, requestState: handle }, /other arguments/)
  await refused({ ...retry, callId: 'call-other', requestState: handle }, /another callId/)
  assert.equal(upstream.calls.length, upstreamCalls, 'no refused retry reached the upstream')

  now += 59_000
  const ok = await invoke(app, { ...retry, requestState: handle })
  assert.equal(ok.json.output, 'hello Ada', ok.text)
  now += 2_000
  await refused({ ...retry, requestState: handle }, /expired/)
})

test('/invoke/batch: each entry may be input_required with its own round fields, and continue in a later batch; ' +
  'a bad handle fails only its entry', async (t) => {
  const upstream = await startUpstream(t)
  const app = await gateway(t, upstream)
  const first = await call(app, ACME, 'POST', '/invoke/batch', {
    calls: [
      { name: 'greet', arguments: {}, allow: ALLOW, clientCapabilities: CAPS },
      { name: 'plain', arguments: {}, allow: ALLOW },
      { name: 'greet', arguments: {}, allow: ALLOW }
    ]
  })
  assert.equal(first.status, 200, first.text)
  const [asked, plain, noCaps] = first.json.results
  assert.equal(asked.status, 'input_required')
  assert.deepEqual(asked.inputRequests, { who: ASK_NAME })
  assert.equal(typeof asked.requestState, 'string')
  assert.equal(plain.output, 'plain')
  assert.ok(!('status' in plain))
  assert.equal(noCaps.isError, true)
  assert.equal(noCaps.error.code, 'GW_TOOL_ERROR')

  const retry = { name: 'greet', arguments: {}, allow: ALLOW, clientCapabilities: CAPS, inputResponses: ACCEPT }
  const second = await call(app, ACME, 'POST', '/invoke/batch', {
    calls: [
      { ...retry, requestState: asked.requestState },
      { ...retry, requestState: `${asked.requestState as string}x`, callId: 'call-bad' }
    ]
  })
  assert.equal(second.status, 200, second.text)
  const [doneEntry, badEntry] = second.json.results
  assert.equal(doneEntry.output, 'hello Ada', JSON.stringify(doneEntry))
  assert.equal(doneEntry.callId, asked.callId, 'the entry continues the first batch\'s call')
  assert.equal(badEntry.statusCode, 400)
  assert.equal(badEntry.error.code, 'GW_INVALID_REQUEST_STATE')
  assert.equal(badEntry.callId, 'call-bad')
  assert.match(badEntry.output, /^TOOL_ERROR: /)
})

test('a call approved in round 1 is not held again on its retry (the handle says it passed), with the same arguments only; ' +
  'a deny policy still refuses every round', async (t) => {
  const retry = (n: number, requestState: string): Record<string, unknown> =>
    ({ name: 'greet', arguments: { n }, clientCapabilities: CAPS, inputResponses: ACCEPT, requestState })
  const upstream = await startUpstream(t)
  const app = await gateway(t, upstream)
  assert.equal((await call(app, ADMIN, 'PUT', '/users/acme/policy', { requireApproval: ['greet'] })).status, 201)

  // Round 1 is held; the caller waits inline while the approver approves it.
  const waiting = invoke(app, { name: 'greet', arguments: { n: 1 }, clientCapabilities: CAPS, callId: 'call-apr', waitForApprovalMs: 10_000 })
  let approvalId: string | undefined
  for (let i = 0; i < 100 && approvalId === undefined; i++) {
    const list = await call(app, APPROVER, 'GET', '/approvals?userId=acme')
    approvalId = list.json.approvals[0]?.approvalId
    if (approvalId === undefined) await new Promise((resolve) => setTimeout(resolve, 20))
  }
  assert.ok(approvalId !== undefined, 'the call is held')
  assert.equal(upstream.calls.length, 0, 'a held call has not run')
  const decided = await call(app, APPROVER, 'POST', `/approvals/${approvalId}`, { decision: 'approve' })
  assert.equal(decided.status, 200, decided.text)
  // The approved run asked for input: the decision's result and the waiting caller both say so.
  assert.equal(decided.json.result.status, 'input_required')
  const first = await waiting
  assert.equal(first.status, 200, first.text)
  assert.equal(first.json.status, 'input_required')
  assert.equal(first.json.callId, 'call-apr')
  assert.deepEqual(first.json.inputRequests, { who: ASK_NAME })
  assert.equal(upstream.calls[0]?.capabilities !== undefined, true, 'the approved run declared the caller\'s capabilities')

  // The retry is not held again: it runs at once, under the same approval.
  const done = await invoke(app, retry(1, first.json.requestState))
  assert.equal(done.status, 200, done.text)
  assert.equal(done.json.output, 'hello Ada')
  assert.equal((await call(app, APPROVER, 'GET', '/approvals?userId=acme')).json.approvals.length, 0, 'nothing new is held')
  const rounds = await journalOf(app, 'call-apr')
  assert.deepEqual(rounds.map((e) => [e.status, e.approvalId]), [['input_required', approvalId], [null, approvalId]])

  // The approval was for these arguments: other arguments with its handle are refused, never run unapproved.
  const other = await invoke(app, retry(2, first.json.requestState))
  assert.equal(other.status, 400, other.text)
  assert.equal(other.json.code, 'GW_INVALID_REQUEST_STATE')

  // A deny policy set between the rounds refuses the retry, approval or not.
  assert.equal((await call(app, ADMIN, 'PUT', '/users/acme/policy', { requireApproval: ['greet'], deny: ['greet'] })).status, 200)
  const denied = await invoke(app, retry(1, first.json.requestState))
  assert.equal(denied.status, 403, denied.text)
  assert.equal(denied.json.code, 'GW_POLICY_DENIED')
  assert.equal(upstream.calls.length, 2, 'the denied retry never reached the server')
})

test('two instances sharing SECRETS_KEY: round 1 on one, the retry on the other continues the call; ' +
  'an instance with another key refuses the handle', async (t) => {
  const upstream = await startUpstream(t)
  const shared = randomBytes(32).toString('base64')
  const one = await gateway(t, upstream, { env: { SECRETS_KEY: shared } })
  const two = await gateway(t, upstream, { env: { SECRETS_KEY: shared } })
  const other = await gateway(t, upstream, { env: { SECRETS_KEY: randomBytes(32).toString('base64') } })
  const first = await invoke(one, { name: 'greet', arguments: {}, clientCapabilities: CAPS })
  assert.equal(first.json.status, 'input_required', first.text)
  const retry = { name: 'greet', arguments: {}, clientCapabilities: CAPS, inputResponses: ACCEPT, requestState: first.json.requestState }
  const done = await invoke(two, retry)
  assert.equal(done.json.output, 'hello Ada', done.text)
  assert.equal(done.json.callId, first.json.callId)
  const refused = await invoke(other, retry)
  assert.equal(refused.status, 400)
  assert.equal(refused.json.code, 'GW_INVALID_REQUEST_STATE')
  assert.match(refused.json.message, /altered/)
})

test('/mcp rounds share the REST handles\' rules: one callId across rounds in the journal, and a foreign handle is -32602 invalid_request_state', async (t) => {
  const upstream = await startUpstream(t)
  const app = await gateway(t, upstream)
  await app.listen({ port: 0, host: '127.0.0.1' })
  const address = app.server.address()
  assert.ok(address !== null && typeof address === 'object')
  const url = `http://127.0.0.1:${address.port}/mcp?mcp=conf`
  const mcp = async (params: Record<string, unknown>): Promise<any> =>
    (await postModernMcp(url, ACME, { id: 1, method: 'tools/call', params }, { capabilities: CAPS, headers: { 'mcp-name': String(params.name) } })).json
  const first = await mcp({ name: 'greet', arguments: {} })
  assert.equal(first.result?.resultType, 'input_required', JSON.stringify(first))
  const done = await mcp({ name: 'greet', arguments: {}, inputResponses: ACCEPT, requestState: first.result.requestState })
  assert.deepEqual(done.result?.content, [{ type: 'text', text: 'hello Ada' }], JSON.stringify(done))
  // A REST round's handle is good on /mcp for the same tenant, key, tool and arguments, and the reverse.
  const rest = await invoke(app, { name: 'greet', arguments: {}, clientCapabilities: CAPS })
  const viaMcp = await mcp({ name: 'greet', arguments: {}, inputResponses: ACCEPT, requestState: rest.json.requestState })
  assert.deepEqual(viaMcp.result?.content, [{ type: 'text', text: 'hello Ada' }], JSON.stringify(viaMcp))
  const foreign = await mcp({ name: 'greet', arguments: { n: 9 }, inputResponses: ACCEPT, requestState: first.result.requestState })
  assert.equal(foreign.error?.code, -32602, JSON.stringify(foreign))
  assert.equal(foreign.error.data.reason, 'invalid_request_state')
  assert.equal(foreign.error.data.code, 'GW_INVALID_REQUEST_STATE')

  assert.deepEqual((await journalOf(app, rest.json.callId)).map((e) => e.status), ['input_required', null])
  // Newest first: the oldest entry is the first /mcp round.
  const entries = (await call(app, ACME, 'GET', '/users/acme/invocations?limit=500')).json.invocations as any[]
  assert.equal(entries.filter((e) => e.status === 'input_required').length, 2)
  const mcpCallId = entries.at(-1)?.callId as string
  const mcpRounds = await journalOf(app, mcpCallId)
  assert.deepEqual(mcpRounds.map((e) => e.status), ['input_required', null], 'the /mcp retry is journaled under the first round\'s callId')
})

test('a server asking more than 100 questions at once is refused: its call fails with GW_UPSTREAM_TOO_LARGE, nothing is handed on', async (t) => {
  // Each question is asked of the call's client at once and held while it answers, or handed to a REST caller: a server
  // asking 10,000 filled the instance's questions waiting for /mcp clients (an audit).
  const upstream = await startUpstream(t)
  const app = await gateway(t, upstream)
  const caps = { elicitation: { form: {} } }
  const hundred = await invoke(app, { name: 'many', arguments: { count: 100 }, clientCapabilities: caps })
  assert.equal(hundred.json.status, 'input_required', hundred.text)
  assert.equal(Object.keys(hundred.json.inputRequests).length, 100)
  const more = await invoke(app, { name: 'many', arguments: { count: 101 }, clientCapabilities: caps })
  assert.equal(more.status, 200, more.text)
  assert.equal(more.json.isError, true)
  assert.equal(more.json.error?.code, 'GW_UPSTREAM_TOO_LARGE', more.text)
  assert.match(more.json.output, /asked 101 questions at once/)
  assert.ok(!('inputRequests' in more.json) && !('requestState' in more.json))
})
