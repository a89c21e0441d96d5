/**
 * POST /mcp, multi round-trip beyond tools (MCP 2026-07-28): a server's prompts/get and
 * resources/read that answer `input_required` reach a 2026-07-28 client as the server sent them,
 * with the gateway's handle as requestState; the retry reaches the server with the client's
 * answers and the server's own requestState. The client's declared capabilities go upstream (a
 * client that declared none gets the server's -32021, HTTP 400). A handle minted for one prompt
 * does not open another's.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import type { TestContext } from 'node:test'
import { inputRequired } from '@modelcontextprotocol/server'
import { startModernFixture } from '../../../scripts/lib/mcp-fixtures/modern-server.js'
import { buildTestApp } from '../../helpers/app.js'
import { postModernMcp } from '../../helpers/mcp-raw.js'

const ADMIN = 'admin-key-0123456789'
const ACME = 'acme-key-0123456789'
const ELICIT = { elicitation: { form: {} } }
const CONTEXT_SCHEMA = { type: 'object' as const, properties: { topic: { type: 'string' as const } }, required: ['topic'] }

async function setup (t: TestContext): Promise<string> {
  const upstream = await startModernFixture({
    register: (server) => {
      for (const name of ['briefing', 'other']) {
        server.registerPrompt(name, { description: 'asks for a topic first' }, async (ctx) => {
          const answer = ctx.mcpReq.inputResponses?.topic as { action?: string, content?: { topic?: string } } | undefined
          if (answer?.action === 'accept' && ctx.mcpReq.requestState() === `${name}-state`) {
            return { messages: [{ role: 'user', content: { type: 'text', text: `${name} about ${answer.content?.topic ?? '?'}` } }] }
          }
          return inputRequired({
            inputRequests: { topic: inputRequired.elicit({ message: 'Which topic?', requestedSchema: CONTEXT_SCHEMA }) },
            requestState: `${name}-state`
          })
        })
      }
      server.registerResource('asking', 'test://asking', { mimeType: 'text/plain' }, async (uri, ctx) => {
        const answer = ctx.mcpReq.inputResponses?.ok as { action?: string } | undefined
        if (answer?.action === 'accept') return { contents: [{ uri: uri.href, mimeType: 'text/plain', text: 'unlocked' }] }
        return inputRequired({ inputRequests: { ok: inputRequired.elicit({ message: 'Unlock?', requestedSchema: { type: 'object', properties: {} } }) } })
      })
    }
  })
  t.after(async () => await upstream.close())
  const app = await buildTestApp(t, { env: { EGRESS_ALLOW: '127.0.0.1/32', API_KEYS: `${ADMIN}:*,${ACME}:acme`, SECRETS_KEY: 'BA/ErvdyIrvsWwlcRehqPyJkHzenL9/UL7WTyv+vyl8=' } })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const address = app.server.address()
  assert.ok(address !== null && typeof address === 'object')
  const base = `http://127.0.0.1:${address.port}`
  const put = await fetch(`${base}/mcp/servers/ask`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ type: 'streamable_http', url: upstream.url })
  })
  assert.equal(put.status, 201, await put.text())
  return `${base}/mcp?mcp=ask`
}

test('prompts/get: the server\'s input_required reaches a 2026-07-28 client; its retry gets the prompt; the handle opens no other prompt', async (t) => {
  const url = await setup(t)
  const get = { method: 'prompts/get', params: { name: 'briefing' } }
  const first = await postModernMcp(url, ACME, get, { capabilities: ELICIT, headers: { 'mcp-name': 'briefing' } })
  assert.equal(first.status, 200, JSON.stringify(first.json))
  const asked = first.json.result
  assert.equal(asked.resultType, 'input_required')
  assert.equal(asked.inputRequests.topic.method, 'elicitation/create')
  assert.equal(typeof asked.requestState, 'string')
  assert.ok(!asked.requestState.includes('briefing-state'), 'the server\'s own state stays inside the handle')

  const answers = { topic: { action: 'accept', content: { topic: 'tides' } } }
  const done = await postModernMcp(url, ACME, {
    method: 'prompts/get',
    params: { name: 'briefing', inputResponses: answers, requestState: asked.requestState }
  }, { capabilities: ELICIT, headers: { 'mcp-name': 'briefing' } })
  assert.deepEqual(done.json.result?.messages?.[0]?.content, { type: 'text', text: 'briefing about tides' }, JSON.stringify(done.json))

  const crossed = await postModernMcp(url, ACME, {
    method: 'prompts/get',
    params: { name: 'other', inputResponses: answers, requestState: asked.requestState }
  }, { capabilities: ELICIT, headers: { 'mcp-name': 'other' } })
  assert.equal(crossed.json.error?.code, -32602, JSON.stringify(crossed.json))
  assert.equal(crossed.json.error?.data?.reason, 'invalid_request_state')
})

test('resources/read: input_required and its retry; a client that declared nothing gets the server\'s -32021 over HTTP 400', async (t) => {
  const url = await setup(t)
  const read = { method: 'resources/read', params: { uri: 'test://asking' } }
  const first = await postModernMcp(url, ACME, read, { capabilities: ELICIT, headers: { 'mcp-name': 'test://asking' } })
  assert.equal(first.json.result?.resultType, 'input_required', JSON.stringify(first.json))
  const done = await postModernMcp(url, ACME, {
    method: 'resources/read',
    params: { uri: 'test://asking', inputResponses: { ok: { action: 'accept', content: {} } }, requestState: first.json.result.requestState }
  }, { capabilities: ELICIT, headers: { 'mcp-name': 'test://asking' } })
  assert.equal(done.json.result?.contents?.[0]?.text, 'unlocked', JSON.stringify(done.json))

  const bare = await postModernMcp(url, ACME, { method: 'prompts/get', params: { name: 'briefing' } }, { headers: { 'mcp-name': 'briefing' } })
  assert.equal(bare.status, 400, JSON.stringify(bare.json))
  assert.equal(bare.json.error?.code, -32021)
})
