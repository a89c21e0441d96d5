import { test } from 'node:test'
import type { TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ApprovalFacade, createApprovals } from '../../src/approvals/index.js'
import { createBuiltins } from '../../src/builtin/index.js'
import { loadConfig } from '../../src/config.js'
import { HttpError } from '../../src/errors.js'
import { FunctionSource } from '../../src/functions/source.js'
import type { FunctionTool } from '../../src/functions/define.js'
import { Gateway } from '../../src/gateway.js'
import { listingJson } from '../../src/listing/listings.js'
import { silentLogger } from '../../src/logger.js'
import { PolicyService } from '../../src/policy/service.js'
import { createMemoryRegistryStore } from '../../src/registry/memory-store.js'
import { secretBoxFromEnv } from '../../src/registry/secrets.js'
import { CallObserver } from '../../src/routing/call-events.js'
import type { CallEvent } from '../../src/routing/call-events.js'
import { ToolRouter } from '../../src/routing/router.js'
import type { InvokeOutcome, InvokeResult } from '../../src/routing/router.js'
import type { Caller } from '../../src/routing/types.js'

/**
 * The Gateway (src/gateway.ts) on its own, without Fastify: real built-ins on a temp workspaces
 * directory (no sandbox), real functions, the real policy service and approvals on memory stores.
 * The HTTP tests (test/http/routes/tools*, invoke, approvals) cover the same rules through the routes.
 */

const ADMIN: Caller = { userId: undefined, isAdmin: true }
const ACME: Caller = { userId: 'acme', isAdmin: false, keyId: 'k-acme' }
const signal = new AbortController().signal

interface Rendezvous { arrive: () => Promise<string> }

/** Two calls meet here: each waits for the other to arrive (run one after the other, the first gives up and says so). */
function rendezvous (): Rendezvous {
  let arrived = 0
  let release: () => void = () => {}
  const both = new Promise<void>((resolve) => { release = resolve })
  return {
    arrive: async () => {
      if (++arrived === 2) release()
      const alone = new Promise<string>((resolve) => setTimeout(() => resolve('alone'), 10_000).unref())
      return await Promise.race([both.then(() => 'together'), alone])
    }
  }
}

function fn (name: string, handler: FunctionTool['handler']): { tool: FunctionTool, file: string } {
  return { file: `${name}.ts`, tool: { name, description: `test function ${name}`, parameters: { type: 'object', properties: { n: { type: 'integer' } }, additionalProperties: false }, handler } }
}

async function setup (
  t: TestContext,
  env: Record<string, string> = {}
): Promise<{ gateway: Gateway, approvals: ApprovalFacade, policies: PolicyService, calls: CallEvent[], meet: Rendezvous }> {
  const workspaces = await mkdtemp(join(tmpdir(), 'tg-gw-'))
  t.after(async () => await rm(workspaces, { recursive: true, force: true }))
  const config = loadConfig({
    SANDBOX: 'none',
    LOG_LEVEL: 'silent',
    WORKSPACES_DIR: workspaces,
    WORKSPACE_QUOTA_MODE: 'watchdog',
    BATCH_CONCURRENCY: '4',
    BATCH_MAX_CALLS: '5',
    ...env
  })
  const builtins = await createBuiltins(config, silentLogger)
  t.after(async () => await builtins.close())
  const meet = rendezvous()
  const functions = new FunctionSource([
    fn('double', (args) => String(2 * Number(args.n ?? 0))),
    fn('meet', async () => await meet.arrive()),
    fn('other', () => 'other')
  ], { defaultTimeoutMs: 5000 })
  const router = new ToolRouter({
    sources: { builtin: builtins.source, user_mcp: null, local_mcp: null, function: functions, global_mcp: null },
    outputMaxChars: config.outputMaxChars
  })
  const store = createMemoryRegistryStore()
  t.after(async () => await store.close())
  const policies = new PolicyService(store, silentLogger)
  t.after(async () => await policies.close())
  const box = secretBoxFromEnv({})
  assert.ok(box.ok)
  const held = createApprovals({ keyPrefix: 'tg:', ttlMs: 60_000, box: box.box, logger: silentLogger })
  t.after(async () => await held.close())
  const observer = new CallObserver()
  const calls: CallEvent[] = []
  // Events are read synchronously (the object may be reused): keep copies.
  observer.subscribe((call) => { calls.push({ ...call }) })
  const approvals: ApprovalFacade = new ApprovalFacade({
    approvals: held,
    calls: observer,
    run: async (call) => await gateway.runApproved(call),
    invokeTimeoutMs: config.invokeTimeoutMs
  })
  const gateway: Gateway = new Gateway(config, router, { calls: observer, policies, approvals })
  return { gateway, approvals, policies, calls, meet }
}

function result (outcome: InvokeOutcome): InvokeResult {
  if (!outcome.ok) assert.fail(`expected a result, got ${outcome.error.code}: ${outcome.error.message}`)
  return outcome.result
}

test('listTools: the allow-list selects, unknown names are reported, strict refuses them', async (t) => {
  const { gateway } = await setup(t)
  const listing = await gateway.listTools({ functions: 'double,read_file,nope', format: 'openai' }, ADMIN, signal)
  const names = (listing.tools as Array<{ function: { name: string } }>).map((x) => x.function.name).sort()
  assert.deepEqual(names, ['double', 'read_file'])
  assert.deepEqual(listing.unresolved.map((u) => u.name), ['nope'])
  await assert.rejects(gateway.listTools({ functions: 'double,nope', strict: true }, ADMIN, signal), (err: unknown) => err instanceof HttpError && err.code === 'GW_UNRESOLVED' && /'nope'/.test(err.message))
  // Nothing missing: strict answers the listing.
  assert.equal((await gateway.listTools({ functions: 'double', strict: true }, ADMIN, signal)).tools.length, 1)
})

test('listTools: a tool the policy denies is not listed but reported as denied; strict refuses it; invoking it is refused', async (t) => {
  const { gateway, policies } = await setup(t)
  await policies.write(ADMIN, { kind: 'user', userId: 'acme' }, { deny: ['double'] })
  const listing = await gateway.listTools({ functions: 'double,other' }, ACME, signal)
  assert.deepEqual((listing.tools as Array<{ function: { name: string } }>).map((x) => x.function.name), ['other'])
  assert.deepEqual(listing.diagnostics.map((d) => [d.type, d.name]), [['denied', 'double']])
  await assert.rejects(gateway.listTools({ functions: 'double,other', strict: true }, ACME, signal), (err: unknown) => err instanceof HttpError && err.code === 'GW_UNRESOLVED' && /tool 'double'/.test(err.message))
  const denied = await gateway.invoke({ name: 'double', arguments: { n: 2 } }, ACME, signal)
  assert.equal(denied.ok, false)
  assert.equal(!denied.ok && denied.error.code, 'GW_POLICY_DENIED')
  // Another tenant's policy is its own.
  assert.equal((await gateway.listTools({ functions: 'double,other', userId: 'other-tenant' }, ADMIN, signal)).tools.length, 2)
})

test('listTools: a listing is cached per tenant, allow-list and format, and a policy change is seen at once', async (t) => {
  const { gateway, policies } = await setup(t)
  const first = await gateway.listTools({ functions: 'double,other' }, ACME, signal)
  assert.equal(await gateway.listTools({ functions: 'double,other' }, ACME, signal), first, 'the same listing object: served from the cache')
  assert.equal(listingJson(first), listingJson(first), 'its JSON is made once')
  assert.notEqual(await gateway.listTools({ functions: 'double,other', format: 'anthropic' }, ACME, signal), first)
  assert.notEqual(await gateway.listTools({ functions: 'double' }, ACME, signal), first)
  await policies.write(ADMIN, { kind: 'user', userId: 'acme' }, { deny: ['other'] })
  const after = await gateway.listTools({ functions: 'double,other' }, ACME, signal)
  assert.notEqual(after, first)
  assert.equal(after.tools.length, 1)
})

test('invoke: a result, its trace only when asked, refusals as outcomes; each call published once', async (t) => {
  const { gateway, calls } = await setup(t)
  const r = result(await gateway.invoke({ name: 'double', arguments: { n: 21 }, callId: 'c-1' }, ACME, signal))
  assert.equal(r.output, '42')
  assert.equal(r.route, 'function')
  assert.equal(r.trace, null)
  assert.notEqual(result(await gateway.invoke({ name: 'double', arguments: { n: 1 }, trace: true }, ACME, signal)).trace, null)
  const missing = await gateway.invoke({ name: 'no_such_tool' }, ACME, signal)
  assert.equal(!missing.ok && missing.error.code, 'GW_TOOL_NOT_FOUND')
  // A tenant key never acts for another tenant.
  const foreign = await gateway.invoke({ name: 'double', userId: 'globex' }, ACME, signal)
  assert.equal(!foreign.ok && foreign.error.code, 'GW_TENANT_MISMATCH')
  const approver = await gateway.invoke({ name: 'double' }, { userId: 'acme', isAdmin: false, role: 'approver' }, signal)
  assert.equal(!approver.ok && approver.error.code, 'GW_FORBIDDEN')
  assert.deepEqual(calls.map((c) => [c.via, c.end, c.outcome.ok ? 'ok' : c.outcome.error.code]), [
    ['invoke', 'finished', 'ok'],
    ['invoke', 'finished', 'ok'],
    ['invoke', 'finished', 'GW_TOOL_NOT_FOUND'],
    ['invoke', 'finished', 'GW_TENANT_MISMATCH'],
    ['invoke', 'refused', 'GW_FORBIDDEN']
  ])
  const first = calls[0] as CallEvent
  assert.equal(first.callId, 'c-1')
  assert.equal(first.userId, 'acme')
  assert.equal(first.keyId, 'k-acme')
  assert.deepEqual(first.arguments, { n: 21 })
})

test('invoke: a listener that wants the trace gets it; the caller does not unless it asked', async (t) => {
  const { gateway } = await setup(t)
  const traces: unknown[] = []
  gateway.calls.subscribe((call) => { traces.push(call.outcome.ok ? call.outcome.result.trace : undefined) }, { trace: true })
  const r = result(await gateway.invoke({ name: 'read_file', arguments: { path: 'missing.txt' } }, ACME, signal))
  assert.equal(r.trace, null)
  assert.equal(traces.length, 1)
  assert.notEqual(traces[0], null)
})

test('invokeBatch: results in order; one workspace\'s calls run in list order, other calls concurrently; bad entries stand alone', async (t) => {
  const { gateway, calls } = await setup(t)
  const { results } = await gateway.invokeBatch([
    // Same workspace: the read waits for the slow write before it, even with 4 calls at once.
    { name: 'bash', arguments: { action: 'exec', command: 'sleep 0.3; echo written > lane.txt' } },
    { name: 'read_file', arguments: { path: 'lane.txt' } },
    // Two functions meet: they only both see "together" when they run at the same time.
    { name: 'meet' },
    { name: 7 },
    { name: 'meet' }
  ], ACME, signal)
  assert.equal(results.length, 5)
  const [write, read, meetA, bad, meetB] = results as Array<Record<string, any>>
  assert.equal(write?.isError, false, write?.output)
  assert.equal(read?.isError, false, read?.output)
  assert.match(String(read?.output), /written/)
  assert.equal(meetA?.output, 'together')
  assert.equal(meetB?.output, 'together')
  assert.equal(bad?.statusCode, 400)
  assert.equal(bad?.error.code, 'GW_BAD_REQUEST')
  assert.match(bad?.error.message, /^body\/calls\/3\/name /)
  assert.match(String(bad?.output), /^TOOL_ERROR: /)
  assert.equal(calls.filter((c) => c.via === 'batch').length, 5)
  assert.deepEqual(calls.filter((c) => c.end === 'refused').map((c) => c.via), ['batch'])
  // More entries than BATCH_MAX_CALLS: the whole batch is refused.
  await assert.rejects(
    gateway.invokeBatch(new Array(6).fill({ name: 'double' }), ACME, signal),
    (err: unknown) => err instanceof HttpError && err.code === 'GW_BAD_REQUEST'
  )
})

test('a held call: pending and published as held; approved through ApprovalFacade it runs once, published via approval; ' +
  'an inline wait gets the decision', async (t) => {
  const { gateway, approvals, policies, calls } = await setup(t)
  await policies.write(ADMIN, { kind: 'user', userId: 'acme' }, { requireApproval: ['double'] })
  const held = await gateway.invoke({ name: 'double', arguments: { n: 4 }, callId: 'c-held' }, ACME, signal)
  assert.ok(held.ok && held.pending !== undefined)
  assert.equal(held.result.error?.code, 'GW_APPROVAL_PENDING')
  assert.deepEqual(calls.map((c) => [c.via, c.end]), [['invoke', 'held']])
  const approvalId = held.pending.approvalId
  assert.deepEqual((await approvals.list(undefined, ACME)).approvals.map((a) => a.approvalId), [approvalId])

  const decided = await approvals.decide(approvalId, { decision: 'approve' }, ADMIN)
  assert.equal(decided.status, 'approved')
  assert.equal((decided.result as InvokeResult).output, '8')
  const run = calls.at(-1) as CallEvent
  assert.deepEqual([run.via, run.end, run.approvalId, run.callId, run.userId, run.keyId], ['approval', 'finished', approvalId, 'c-held', 'acme', 'k-acme'])

  // A caller that waits inline is answered with the decision (a denial here), published as decided.
  const waiting = gateway.invoke({ name: 'double', arguments: { n: 5 }, waitForApprovalMs: 30_000 }, ACME, signal)
  let pending: string | undefined
  while (pending === undefined) {
    pending = (await approvals.list(undefined, ACME)).approvals[0]?.approvalId
    if (pending === undefined) await new Promise((resolve) => setTimeout(resolve, 10))
  }
  await approvals.decide(pending, { decision: 'deny', reason: 'not today' }, ADMIN)
  const answer = result(await waiting)
  assert.equal(answer.error?.code, 'APPROVAL_DENIED')
  assert.deepEqual(calls.slice(-2).map((c) => [c.via, c.end]), [['approval', 'finished'], ['invoke', 'decided']])
})
