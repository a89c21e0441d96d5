import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import Anthropic from '@anthropic-ai/sdk'
import { startGateway } from '../../scripts/lib/gateway-process.js'
import type { GatewayProcess } from '../../scripts/lib/gateway-process.js'
import { startFakeModel } from '../helpers/fake-model.js'
import type { FakeModel, Script } from '../helpers/fake-model.js'
import OpenAI from 'openai'
import { runAnthropicLoop } from '../../examples/orchestrator/anthropic.js'
import { runOpenAILoop } from '../../examples/orchestrator/openai.js'
import { startAskingFixture } from '../../scripts/lib/mcp-fixtures/asking-server.js'

// The example orchestrators (examples/orchestrator/) run end to end, as the README shows them,
// against the real gateway process and a scripted model that speaks the providers' wire formats
// (no real model can be reached from here). The scripted model refuses a conversation whose tool
// results are missing or misshapen, as the real APIs do.

const run = promisify(execFile)
const KEY = 'k-orchestrator-alice-7d41'
const ALLOW = ['write_file', 'read_file', 'calculate']
const NOTE = 'ship the orchestrator\n'

/** Two parallel calls, then a read of what was written plus a tool outside the allow-list, then an answer built from the results. */
const script: Script = (turn, results) => {
  if (turn === 0) {
    return {
      text: 'I will write the note and compute the product.',
      toolCalls: [
        { name: 'write_file', input: { path: 'notes/plan.md', content: NOTE } },
        { name: 'calculate', input: { expression: '6 * 7' } }
      ]
    }
  }
  if (turn === 1) return { toolCalls: [{ name: 'read_file', input: { path: 'notes/plan.md' } }, { name: 'bash', input: { action: 'exec', command: 'id' } }] }
  const read = results.find((r) => r.name === 'read_file')
  const calc = results.find((r) => r.name === 'calculate')
  if (!read || !calc) throw new Error(`tool results missing: ${JSON.stringify(results)}`)
  return { text: `notes/plan.md says "${String(JSON.parse(read.content).content).trim()}" and 6 * 7 = ${JSON.parse(calc.content).result}.` }
}
const FINAL = 'notes/plan.md says "ship the orchestrator" and 6 * 7 = 42.'

async function setup (t: { after: (fn: () => unknown) => void }): Promise<{ gw: GatewayProcess, model: FakeModel }> {
  const workspaces = await mkdtemp(join(tmpdir(), 'tg-orchestrator-'))
  t.after(async () => await rm(workspaces, { recursive: true, force: true }))
  const gw = await startGateway(t, { WORKSPACES_DIR: workspaces, API_KEYS: `${KEY}:alice` })
  t.after(async () => await gw.stop(5000))
  return { gw, model: await startFakeModel(t, script) }
}

async function gateway (gw: GatewayProcess, path: string, body?: unknown): Promise<{ status: number, text: string }> {
  const res = await fetch(`${gw.url}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { authorization: `Bearer ${KEY}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body)
  })
  return { status: res.status, text: await res.text() }
}

/** What the gateway answers for a call, made directly: the loop must have handed the model this very string. */
async function directOutput (gw: GatewayProcess, workspaceId: string, name: string, args: unknown): Promise<string> {
  const res = await gateway(gw, '/invoke', { name, arguments: args, userId: 'alice', context: { workspaceId } })
  assert.equal(res.status, 200, res.text)
  return JSON.parse(res.text).output
}

function gatewayEnv (gw: GatewayProcess, workspaceId: string): Record<string, string> {
  return {
    GATEWAY_URL: gw.url,
    GATEWAY_API_KEY: KEY,
    GATEWAY_FUNCTIONS: ALLOW.join(','),
    GATEWAY_MCP: '',
    GATEWAY_USER_ID: 'alice',
    GATEWAY_WORKSPACE: workspaceId
  }
}

/** The checks both providers share, on the gateway's side. */
async function assertGatewaySide (gw: GatewayProcess, model: FakeModel, workspaceId: string, format: string): Promise<void> {
  assert.deepEqual(model.requests.map((r) => r.refused), [undefined, undefined, undefined], 'the model refused a request')
  const listing = await gateway(gw, `/tools?format=${format}&functions=${ALLOW.join(',')}&userId=alice`)
  assert.equal(listing.status, 200, listing.text)
  const tools = JSON.parse(listing.text).tools
  assert.equal(tools.length, 3)
  for (const r of model.requests) assert.deepEqual(r.body.tools, tools, 'the model was shown the gateway listing as it is')

  const file = await gateway(gw, `/users/alice/workspaces/${workspaceId}/files/notes/plan.md`)
  assert.equal(file.status, 200, file.text)
  assert.equal(file.text, NOTE, 'write_file ran in the configured workspace')

  const results = model.requests[2]!.results
  assert.deepEqual(results.map((r) => r.name), ['write_file', 'calculate', 'read_file', 'bash'])
  const [write, calc, read, bash] = results
  assert.deepEqual(JSON.parse(write!.content), { path: 'notes/plan.md', mode: 'overwrite', created: true, appended: false, bytesWritten: NOTE.length })
  assert.equal(calc!.content, await directOutput(gw, workspaceId, 'calculate', { expression: '6 * 7' }))
  assert.equal(read!.content, await directOutput(gw, workspaceId, 'read_file', { path: 'notes/plan.md' }))
  // The loop sends its allow-list with every call: bash is refused although the key could run it.
  assert.match(bash!.content, /^TOOL_ERROR: .*'bash' is not in the request's allow-list/)
}

test('OpenAI Chat Completions loop: tools from the gateway, calls through it, tool messages back to the model', async (t) => {
  const { gw, model } = await setup(t)
  const { stdout } = await run(process.execPath, ['--import', 'tsx', 'examples/orchestrator/openai.ts', 'Note the plan and compute 6 * 7'], {
    env: { ...process.env, ...gatewayEnv(gw, 'ws-openai'), OPENAI_BASE_URL: `${model.url}/v1`, OPENAI_API_KEY: 'sk-test-orchestrator', OPENAI_MODEL: 'gpt-test-1', MAX_STEPS: '5' },
    timeout: 60_000
  })
  assert.equal(stdout.trim(), FINAL)
  assert.equal(model.requests.length, 3)
  await assertGatewaySide(gw, model, 'ws-openai', 'openai')

  const first = model.requests[0]!
  assert.equal(first.provider, 'openai')
  assert.equal(first.headers.authorization, 'Bearer sk-test-orchestrator')
  assert.equal(first.body.model, 'gpt-test-1')
  assert.deepEqual(first.body.messages, [{ role: 'user', content: 'Note the plan and compute 6 * 7' }])
  // Turn 2 was sent: the assistant turn as the model made it, then one `tool` message per call,
  // matched by tool_call_id, whose content is the gateway's output string.
  const second = model.requests[1]!.body.messages
  assert.equal(second.length, 4)
  assert.equal(second[1].role, 'assistant')
  const ids = second[1].tool_calls.map((c: any) => c.id)
  assert.deepEqual(
    second.slice(2).map((m: any) => ({ role: m.role, tool_call_id: m.tool_call_id, type: typeof m.content })),
    ids.map((id: string) => ({ role: 'tool', tool_call_id: id, type: 'string' }))
  )
  assert.equal(model.requests[2]!.body.messages.length, 7)
})

test('Anthropic Messages loop: tools from the gateway, calls through it, tool_result blocks back to the model', async (t) => {
  const { gw, model } = await setup(t)
  const { stdout } = await run(process.execPath, ['--import', 'tsx', 'examples/orchestrator/anthropic.ts', 'Note the plan and compute 6 * 7'], {
    env: {
      ...process.env,
      ...gatewayEnv(gw, 'ws-anthropic'),
      ANTHROPIC_BASE_URL: model.url,
      ANTHROPIC_API_KEY: 'sk-ant-test-orchestrator',
      ANTHROPIC_MODEL: 'claude-test-1',
      MAX_STEPS: '5'
    },
    timeout: 60_000
  })
  assert.equal(stdout.trim(), FINAL)
  assert.equal(model.requests.length, 3)
  await assertGatewaySide(gw, model, 'ws-anthropic', 'anthropic')

  const first = model.requests[0]!
  assert.equal(first.provider, 'anthropic')
  assert.equal(first.headers['x-api-key'] ?? first.headers.authorization?.replace(/^Bearer /, ''), 'sk-ant-test-orchestrator')
  assert.equal(first.body.model, 'claude-test-1')
  // Turn 2: the assistant turn (text and tool_use blocks), then one user message holding one
  // tool_result block per tool_use id, content the gateway's output string.
  const second = model.requests[1]!.body.messages
  assert.equal(second.length, 3)
  assert.deepEqual(second[1].content.map((b: any) => b.type), ['text', 'tool_use', 'tool_use'])
  const ids = second[1].content.filter((b: any) => b.type === 'tool_use').map((b: any) => b.id)
  assert.equal(second[2].role, 'user')
  assert.deepEqual(second[2].content.map((b: any) => ({ type: b.type, tool_use_id: b.tool_use_id, content: typeof b.content, is_error: b.is_error })),
    ids.map((id: string) => ({ type: 'tool_result', tool_use_id: id, content: 'string', is_error: undefined })))
  // The refused call is flagged to the model as an error, not only worded as one.
  const third = model.requests[2]!.body.messages
  assert.deepEqual(third[4].content.map((b: any) => b.is_error === true), [false, true])
})

test('a loop stops at its step bound when the model never stops calling tools', async (t) => {
  const workspaces = await mkdtemp(join(tmpdir(), 'tg-orchestrator-'))
  t.after(async () => await rm(workspaces, { recursive: true, force: true }))
  const gw = await startGateway(t, { WORKSPACES_DIR: workspaces, API_KEYS: `${KEY}:alice` })
  t.after(async () => await gw.stop(5000))
  const model = await startFakeModel(t, () => ({ toolCalls: [{ name: 'calculate', input: { expression: '1 + 1' } }] }))
  const client = new Anthropic({ baseURL: model.url, apiKey: 'sk-ant-test-orchestrator', maxRetries: 0 })
  const gateway = { url: gw.url, apiKey: KEY, functions: ['calculate'], mcp: [], userId: 'alice' }
  await assert.rejects(runAnthropicLoop('loop forever', { gateway, client, maxSteps: 2 }), /no final answer after 2 steps/)
  assert.equal(model.requests.length, 2)
  assert.deepEqual(model.requests[1]!.results.map((r) => JSON.parse(r.content).result), [2])
})

test('a tool\'s MCP server asks mid-call: each loop\'s "user" fills the form, its own model answers the sampling request', async (t) => {
  const workspaces = await mkdtemp(join(tmpdir(), 'tg-orchestrator-'))
  t.after(async () => await rm(workspaces, { recursive: true, force: true }))
  const upstream = await startAskingFixture()
  t.after(async () => await upstream.close())
  const gw = await startGateway(t, { WORKSPACES_DIR: workspaces, API_KEYS: `admin-key-orchestrator-01:*,${KEY}:alice`, EGRESS_ALLOW: '127.0.0.1/32' })
  t.after(async () => await gw.stop(5000))
  const put = await fetch(`${gw.url}/users/alice/mcp/servers/asker`, {
    method: 'PUT',
    headers: { authorization: 'Bearer admin-key-orchestrator-01', 'content-type': 'application/json' },
    body: JSON.stringify({ type: 'streamable_http', url: upstream.url })
  })
  assert.equal(put.status, 201, await put.text())
  const model = await startFakeModel(t, (turn, results, body) => {
    // The sampling request the loop makes for the server: no tools, the server's own prompt.
    if (body.tools === undefined) return { text: `sampled: ${String(body.messages?.at(-1)?.content)}` }
    const sample = { name: 'user_alice_tool_sample', input: { prompt: 'the answer?' } }
    if (turn === 0) return { toolCalls: [{ name: 'user_alice_tool_ask_name', input: {} }, sample] }
    return { text: results.map((r) => r.content).join(' | ') }
  })
  const gateway = { url: gw.url, apiKey: KEY, functions: [], mcp: ['asker'], userId: 'alice' }
  for (const provider of ['anthropic', 'openai'] as const) {
    const asked: string[] = []
    const askUser = async (message: string): Promise<Record<string, unknown>> => {
      asked.push(message)
      return { name: 'Ada' }
    }
    const result = provider === 'anthropic'
      ? await runAnthropicLoop('greet me', { gateway, client: new Anthropic({ baseURL: model.url, apiKey: 'sk-ant-t', maxRetries: 0 }), maxSteps: 3, askUser })
      : await runOpenAILoop('greet me', { gateway, client: new OpenAI({ baseURL: `${model.url}/v1`, apiKey: 'sk-t', maxRetries: 0 }), maxSteps: 3, askUser })
    assert.equal(result.text, 'hello Ada | model said: sampled: the answer?', provider)
    assert.deepEqual(asked, ['Your name?'])
  }
  assert.deepEqual(model.requests.map((r) => r.refused), Array(6).fill(undefined))
})

test('search mode: each loop shows the model tool_search and the pinned tool, then adds what its search found, which it then calls', async (t) => {
  const workspaces = await mkdtemp(join(tmpdir(), 'tg-orchestrator-'))
  t.after(async () => await rm(workspaces, { recursive: true, force: true }))
  const gw = await startGateway(t, { WORKSPACES_DIR: workspaces, API_KEYS: `${KEY}:alice` })
  t.after(async () => await gw.stop(5000))
  const names = (body: any): string[] => (body.tools ?? []).map((x: any) => x.function?.name ?? x.name)
  const model = await startFakeModel(t, (turn, results, body) => {
    if (turn === 0) return { toolCalls: [{ name: 'tool_search', input: { query: 'evaluate an arithmetic expression', limit: 1 } }] }
    if (turn === 1) {
      if (!names(body).includes('calculate')) throw new Error(`calculate was not added: ${names(body).join(',')}`)
      return { toolCalls: [{ name: 'calculate', input: { expression: '6 * 7' } }] }
    }
    return { text: `found by search, ${JSON.parse(results.at(-1)?.content ?? '{}').result}` }
  })
  const functions = ['@builtin', 'calculate', 'current_time']
  const gateway = { url: gw.url, apiKey: KEY, functions, mcp: [], userId: 'alice', mode: 'search' as const, pinned: ['read_file'] }
  for (const provider of ['openai', 'anthropic'] as const) {
    const before = model.requests.length
    const result = provider === 'anthropic'
      ? await runAnthropicLoop('what is 6 * 7?', { gateway, client: new Anthropic({ baseURL: model.url, apiKey: 'sk-ant-t', maxRetries: 0 }), maxSteps: 4 })
      : await runOpenAILoop('what is 6 * 7?', { gateway, client: new OpenAI({ baseURL: `${model.url}/v1`, apiKey: 'sk-t', maxRetries: 0 }), maxSteps: 4 })
    assert.equal(result.text, 'found by search, 42', provider)
    const seen = model.requests.slice(before).map((r) => names(r.body))
    assert.deepEqual(seen, [['tool_search', 'read_file'], ['tool_search', 'read_file', 'calculate'], ['tool_search', 'read_file', 'calculate']], provider)
    assert.match(model.requests[before + 1]!.results[0]!.content, /^1 of 10 tools match "evaluate an arithmetic expression"[^]*## calculate/, provider)
  }
  assert.deepEqual(model.requests.map((r) => r.refused), Array(6).fill(undefined))
})
