/**
 * Code mode (SPEC 19, README "Code mode") over REST: `run_tools_script` lists with the typed API
 * of its allow-list, runs JavaScript and Python in the tenant's real sandbox (bwrap, a uid per
 * tenant), and every inner call goes through the gateway as the script's call: a chain across
 * tiers (built-ins, a function, the tenant's remote MCP server: an SDK fixture on loopback), and
 * the refusals a script meets as exceptions: outside the allow-list, denied, held for approval,
 * another tenant's tool, past CODE_MODE_MAX_CALLS. The journal keeps the script and its calls as one tree.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import type { TestContext } from 'node:test'
import type { FastifyInstance } from 'fastify'
import { buildTestApp } from '../../helpers/app.js'
import { GLOBEX_TOOLS, toolServer, TRACKER } from '../../helpers/search-tools.js'
import { startStreamableHttpFixture } from '../../../scripts/lib/mcp-fixtures/index.js'

const ADMIN = 'k-admin-code-0123'
const ACME = 'k-acme-code-0123'
const GLOBEX = 'k-globex-code-0123'
const KEYS = `${ADMIN}:*,${ACME}:acme,${GLOBEX}:globex`
const skip = process.getuid?.() !== 0 && 'needs root (the sandbox runs each tenant as its own uid)'

type Method = 'GET' | 'PUT' | 'POST' | 'DELETE'

async function call (app: FastifyInstance, key: string, method: Method, url: string, body?: unknown): Promise<{ status: number, json: any }> {
  const res = await app.inject({ method, url, headers: { authorization: `Bearer ${key}` }, ...(body !== undefined ? { payload: body as object } : {}) })
  return { status: res.statusCode, json: res.body === '' ? undefined : res.json() }
}

/** acme has a `tracker` server (any call answers `ran <name> <args>`); globex has its own. */
async function setup (t: TestContext, env: Record<string, string> = {}): Promise<FastifyInstance> {
  const app = await buildTestApp(t, { env: { API_KEYS: KEYS, EGRESS_ALLOW: '127.0.0.1/32', SANDBOX: 'bwrap', ...env } })
  for (const [key, path, tools] of [[ACME, '/users/acme/mcp/servers/tracker', TRACKER], [GLOBEX, '/users/globex/mcp/servers/tracker', GLOBEX_TOOLS]] as const) {
    const server = await startStreamableHttpFixture({ factory: toolServer([...tools]) })
    t.after(async () => await server.close())
    const r = await call(app, key, 'PUT', path, { type: 'streamable_http', url: server.url })
    assert.equal(r.status, 201, JSON.stringify(r.json))
  }
  return app
}

const ALLOW = { functions: ['@code', 'read_file', 'write_file', 'calculate'], mcp: ['tracker'] }

async function script (app: FastifyInstance, language: 'javascript' | 'python', code: string, extra: Record<string, unknown> = {}): Promise<any> {
  const r = await call(app, ACME, 'POST', '/invoke', {
    name: 'run_tools_script', userId: 'acme', arguments: { language, code }, allow: ALLOW, trace: true, context: { workspaceId: 'code' }, ...extra
  })
  assert.equal(r.status, 200, JSON.stringify(r.json))
  return r.json
}

const CHAIN_JS = `
await tools.write_file({ path: 'n.txt', content: '6 * 7' })
const file = await tools.read_file({ path: 'n.txt' })
const sum = await tools.calculate({ expression: file.content.trim() })
const issue = await tools.create_issue({ owner: 'o', repo: 'r', title: 'answer ' + sum.result })
const found = await tools.search_issues({ q: 'answer' })
console.log('made', issue)
return { answer: sum.result, issue, found }
`

const CHAIN_PY = `
assert 'def calculate(*, expression: str) -> Any' in repr(tools), 'print(tools) shows the API as Python stubs'
tools.write_file(path='n.txt', content='6 * 7')
text = tools.read_file(path='n.txt')['content'].strip()
total = tools.calculate(expression=text)['result']
issue = tools.create_issue(owner='o', repo='r', title='answer %d' % total)
found = tools.call('search_issues', {'q': 'answer'})
print('made', issue)
result = {'answer': total, 'issue': issue, 'found': found}
`

test('a script chains five tools across three tiers (built-ins, a function, the tenant\'s MCP server), in JavaScript and in Python; ' +
  'the trace lists the inner calls and the journal keeps them under the script\'s callId', { skip, timeout: 120_000 }, async (t) => {
  const app = await setup(t)
  for (const [language, code] of [['javascript', CHAIN_JS], ['python', CHAIN_PY]] as const) {
    const r = await script(app, language, code)
    assert.equal(r.isError, false, r.output)
    const [printed, value] = r.output.split('\nResult: ')
    assert.equal(printed, 'made ran create_issue {"owner":"o","repo":"r","title":"answer 42"}')
    assert.deepEqual(JSON.parse(value), {
      answer: 42,
      issue: 'ran create_issue {"owner":"o","repo":"r","title":"answer 42"}',
      found: 'ran search_issues {"q":"answer"}'
    })
    assert.deepEqual(r.trace.calls.map((c: any) => [c.name, c.isError]), [
      ['write_file', false], ['read_file', false], ['calculate', false], ['create_issue', false], ['search_issues', false]
    ])
    // The journal writes after the response: wait for the script's own entry.
    let journal = await call(app, ACME, 'GET', '/users/acme/invocations?limit=50')
    for (let i = 0; i < 100 && !journal.json.invocations.some((e: any) => e.callId === r.callId); i++) {
      await new Promise((resolve) => setTimeout(resolve, 20))
      journal = await call(app, ACME, 'GET', '/users/acme/invocations?limit=50')
    }
    const children = journal.json.invocations.filter((e: any) => e.parentCallId === r.callId)
    // Journaled under their listed names (the script may call a tool by its own name when it is unique).
    assert.deepEqual(children.map((e: any) => e.name).sort(),
      ['calculate', 'read_file', 'user_acme_tool_create_issue', 'user_acme_tool_search_issues', 'write_file'])
    assert.deepEqual(new Set(children.map((e: any) => e.route)), new Set(['builtin', 'function', 'user_mcp']))
    assert.deepEqual(children.map((e: any) => e.callId).sort(), r.trace.calls.map((c: any) => c.callId).sort())
    const parent = journal.json.invocations.find((e: any) => e.callId === r.callId)
    assert.equal(parent.name, 'run_tools_script')
    assert.equal(parent.parentCallId, null)
  }
})

test('a script meets every refusal as an exception with its code: outside the allow-list, denied by policy, held for approval, ' +
  'another tenant\'s tool, past CODE_MODE_MAX_CALLS; nothing refused ran', { skip, timeout: 120_000 }, async (t) => {
  const app = await setup(t, { CODE_MODE_MAX_CALLS: '6' })
  assert.equal((await call(app, ADMIN, 'PUT', '/users/acme/policy', { deny: ['*merge_pull_request'], requireApproval: ['*add_issue_comment'] })).status, 201)
  const r = await script(app, 'javascript', `
const codes = {}
const attempt = async (label, name, args) => {
  try { await tools[name](args); codes[label] = 'ran' } catch (err) { codes[label] = err.code + (err instanceof ToolError ? '' : ' (not a ToolError)') }
}
await attempt('outside', 'bash', { command: 'id' })
await attempt('denied', 'user_acme_tool_merge_pull_request', { pull_number: 1 })
await attempt('held', 'add_issue_comment', { issue_number: 1, body: 'hi' })
await attempt('tenant', 'user_globex_tool_create_issue_report', { title: 'x' })
await attempt('ok', 'calculate', { expression: '1+1' })
await attempt('sixth', 'calculate', { expression: '2+2' })
await attempt('seventh', 'calculate', { expression: '3+3' })
return codes
`)
  assert.equal(r.isError, false, r.output)
  assert.deepEqual(JSON.parse(r.output), {
    outside: 'GW_NOT_ALLOWED',
    denied: 'GW_POLICY_DENIED',
    held: 'GW_APPROVAL_PENDING',
    tenant: 'GW_TENANT_MISMATCH',
    ok: 'ran',
    sixth: 'ran',
    seventh: 'GW_SCRIPT_LIMIT'
  })
  // The held call waits for a human, as any held call; it did not run.
  const pending = await call(app, ADMIN, 'GET', '/approvals?userId=acme')
  assert.deepEqual(pending.json.approvals.map((a: any) => a.name), ['user_acme_tool_add_issue_comment'])
})

test('a script that fails at its first refusal while another call is still pending answers its exception, not a bare exit status',
  { skip, timeout: 120_000 }, async (t) => {
    const app = await setup(t)
    // b's rejection arrives after the script already failed on a: unhandled, it made the runner answer (and end its socket) twice.
    for (let i = 0; i < 3; i++) {
      const r = await script(app, 'javascript', `
const a = tools.bash({ command: 'id' })
const b = tools.user_globex_tool_create_issue_report({ title: 'x' })
await a
return 'unreachable'
`)
      assert.equal(r.isError, true)
      // Either refusal may come first: b's, unawaited, then ends the script as an unhandled rejection. Its exception either
      // way, by its code or by its message (an unhandled ToolError prints its message, which names no code).
      assert.match(r.output, /GW_NOT_ALLOWED|GW_TENANT_MISMATCH|not in the request's allow-list|belongs to another tenant/, r.output)
      assert.doesNotMatch(r.output, /exited with status/, r.output)
    }
  })

test('code mode\'s listing: functions=@code lists run_tools_script beside the tools, its description the typed API of the others; ' +
  'mode=code lists it alone (plus pinned); without `allow` a script is refused', { skip, timeout: 60_000 }, async (t) => {
  const app = await setup(t)
  let r = await call(app, ACME, 'GET', '/tools?functions=@code,calculate&mcp=tracker&userId=acme&format=mcp')
  assert.equal(r.status, 200, JSON.stringify(r.json))
  const names = r.json.tools.map((x: any) => x.name)
  assert.deepEqual(names, ['run_tools_script', 'calculate', 'user_acme_tool_create_issue', 'user_acme_tool_search_issues',
    'user_acme_tool_add_issue_comment', 'user_acme_tool_merge_pull_request'])
  const description: string = r.json.tools[0].description
  assert.match(description, /calculate\(args: \{ expression: string \}\): Promise<any>/)
  assert.match(description, /user_acme_tool_create_issue\(args: \{ owner: string/)
  assert.doesNotMatch(description, /run_tools_script\(/, 'not itself')

  r = await call(app, ACME, 'GET', '/tools?functions=calculate&mcp=tracker&userId=acme&format=mcp&mode=code&pinned=calculate')
  assert.deepEqual(r.json.tools.map((x: any) => x.name), ['run_tools_script', 'calculate'])
  assert.match(r.json.tools[0].description, /user_acme_tool_merge_pull_request\(args/)

  r = await call(app, ACME, 'POST', '/invoke', { name: 'run_tools_script', userId: 'acme', arguments: { language: 'javascript', code: 'return 1' } })
  assert.equal(r.json.isError, true)
  assert.match(r.json.error.message, /allow-list: call it with `allow`/)

  // A script that floods its socket (100 calls at once, past CODE_MODE_MAX_CALLS and its slack) is cut off: GW_SCRIPT_LIMIT.
  // (allSettled: the script goes on writing until the gateway cuts it off, rather than stopping at the first refusal.)
  const flood = await script(app, 'javascript', 'await Promise.allSettled(Array.from({ length: 100 }, () => tools.calculate({ expression: "1+1" })))')
  assert.equal(flood.isError, true)
  assert.equal(flood.error.code, 'GW_SCRIPT_LIMIT', flood.output)
  assert.match(flood.error.message, /the gateway closed its socket: more than 66 messages: a flood/)

  // A workspace the caller may not use is the built-ins' refusal, as for bash (nothing runs).
  r = await call(app, ACME, 'POST', '/invoke', {
    name: 'run_tools_script', userId: 'acme', arguments: { language: 'javascript', code: 'return 1' }, allow: ALLOW, context: { workspaceRoot: '/tmp' }
  })
  assert.equal(r.json.isError, true)
  assert.equal(r.json.error.code, 'GW_PATH_FORBIDDEN', JSON.stringify(r.json))
  assert.match(r.json.error.message, /workspaceRoot is accepted only for admin callers/)
})
