import { createServer } from 'node:http'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { randomBytes } from 'node:crypto'
import { isDeepStrictEqual } from 'node:util'
import type { AddressInfo } from 'node:net'
import type { CleanupScope } from '../../scripts/lib/gateway-process.js'

/**
 * A scripted model on loopback that speaks enough of OpenAI's `POST /v1/chat/completions` and
 * Anthropic's `POST /v1/messages` (non-streaming JSON) for the official SDKs to drive a tool loop
 * against it. No real model can run here (no network, no weights), so this stands in for one; what
 * it checks is what the real APIs refuse, with their error shapes: a conversation whose tool calls
 * are not each answered by a tool result in the provider's shape right after them, a tool call
 * that was not echoed as the model sent it, malformed tool definitions, a missing key.
 *
 * Which turn a request is comes from the conversation itself (the number of assistant messages
 * in it), the way a real model sees only what it is sent.
 */

export interface SeenToolResult { id: string, name: string, content: string, isError: boolean }
export interface ScriptedTurn { text?: string, toolCalls?: Array<{ name: string, input: Record<string, unknown> }> }
/** Turn `turn` (0 for the first answer) given every tool result in the request's conversation. */
export type Script = (turn: number, results: SeenToolResult[], body: any) => ScriptedTurn

export interface RecordedRequest {
  provider: 'openai' | 'anthropic'
  headers: IncomingMessage['headers']
  body: any
  /** The tool results found in the conversation, in order (parsed from the provider's shape). */
  results: SeenToolResult[]
  /** Set when the request was refused (400/401): the message a real API would have sent. */
  refused?: string
}

export interface FakeModel { url: string, requests: RecordedRequest[] }

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'
const randomId = (n: number): string => [...randomBytes(n)].map((b) => ALNUM[b % ALNUM.length]).join('')
const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/
const approxTokens = (v: unknown): number => Math.max(1, Math.ceil(JSON.stringify(v ?? '').length / 4))

class Refusal extends Error {
  constructor (readonly status: number, message: string) { super(message) }
}

export async function startFakeModel (t: CleanupScope, script: Script): Promise<FakeModel> {
  const requests: RecordedRequest[] = []
  // Every tool call this model made, by id: a conversation must echo them unchanged.
  const issued = new Map<string, { name: string, input: Record<string, unknown> }>()

  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const provider = req.url === '/v1/chat/completions' ? 'openai' : req.url === '/v1/messages' ? 'anthropic' : null
      if (req.method !== 'POST' || provider === null) return send(res, 404, { error: { type: 'not_found_error', message: `no route ${req.method} ${req.url}` } })
      let body: any
      try { body = JSON.parse(Buffer.concat(chunks).toString('utf8')) } catch { body = undefined }
      const record: RecordedRequest = { provider, headers: req.headers, body, results: [] }
      requests.push(record)
      try {
        const answer = provider === 'openai' ? openai(req, body, record) : anthropic(req, body, record)
        send(res, 200, answer, provider === 'openai' ? { 'x-request-id': `req_${randomId(24)}` } : { 'request-id': `req_01${randomId(22)}` })
      } catch (caught) {
        // A script that throws (it did not find the tool result it expected) is refused like a bad
        // request: a 400, which the SDKs do not retry, so the loop fails with the reason.
        const err = caught instanceof Refusal ? caught : new Refusal(400, `script: ${(caught as Error).message}`)
        record.refused = err.message
        send(res, err.status, provider === 'openai'
          ? { error: { message: err.message, type: 'invalid_request_error', param: null, code: null } }
          : { type: 'error', error: { type: err.status === 401 ? 'authentication_error' : 'invalid_request_error', message: err.message }, request_id: `req_01${randomId(22)}` })
      }
    })
  })

  function openai (req: IncomingMessage, body: any, record: RecordedRequest): unknown {
    if (!/^Bearer \S+/.test(req.headers.authorization ?? '')) throw new Refusal(401, "You didn't provide an API key.")
    if (typeof body?.model !== 'string' || !Array.isArray(body.messages) || body.messages.length === 0) {
      throw new Refusal(400, "Missing required parameter: 'messages'.")
    }
    if (body.stream) throw new Refusal(400, 'this fake model answers non-streaming requests only')
    for (const [i, tool] of (body.tools ?? []).entries()) {
      if (tool?.type !== 'function' || !TOOL_NAME.test(tool.function?.name ?? '')) throw new Refusal(400, `Invalid 'tools[${i}]': expected a function tool with a valid name.`)
      if (tool.function.parameters?.type !== 'object') throw new Refusal(400, `Invalid schema for function '${tool.function.name}': schema must be a JSON Schema of 'type: "object"'.`)
    }
    let pending: string[] = []
    let turn = 0
    for (const [i, m] of body.messages.entries()) {
      if (m.role === 'tool') {
        if (!pending.includes(m.tool_call_id)) throw new Refusal(400, `Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'. (messages[${i}])`)
        pending = pending.filter((id) => id !== m.tool_call_id)
        const content = typeof m.content === 'string' ? m.content : Array.isArray(m.content) ? m.content.map((p: any) => p?.text ?? '').join('') : null
        if (content === null) throw new Refusal(400, `Invalid type for 'messages[${i}].content': expected a string or an array of text parts.`)
        record.results.push({ id: m.tool_call_id, name: issued.get(m.tool_call_id)?.name ?? '', content, isError: false })
        continue
      }
      if (pending.length > 0) throw new Refusal(400, `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${pending.join(', ')}`)
      if (m.role !== 'assistant') continue
      turn++
      for (const call of m.tool_calls ?? []) {
        const original = issued.get(call.id)
        let args: unknown
        try { args = JSON.parse(call.function?.arguments) } catch { args = undefined }
        if (!original || call.type !== 'function' || call.function.name !== original.name || !isDeepStrictEqual(args, original.input)) {
          throw new Refusal(400, `Invalid 'messages[${i}].tool_calls': ${call.id} is not the tool call the model made.`)
        }
        pending.push(call.id)
      }
    }
    if (pending.length > 0) throw new Refusal(400, `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${pending.join(', ')}`)

    const next = script(turn, record.results, body)
    const toolCalls = (next.toolCalls ?? []).map((c) => {
      const id = `call_${randomId(24)}`
      issued.set(id, c)
      return { id, type: 'function', function: { name: c.name, arguments: JSON.stringify(c.input) } }
    })
    const promptTokens = approxTokens(body.messages) + approxTokens(body.tools)
    const completionTokens = approxTokens(next)
    return {
      id: `chatcmpl-${randomId(29)}`,
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: body.model,
      choices: [{
        index: 0,
        message: {
          role: 'assistant',
          content: toolCalls.length > 0 ? null : (next.text ?? ''),
          refusal: null,
          annotations: [],
          ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {})
        },
        logprobs: null,
        finish_reason: toolCalls.length > 0 ? 'tool_calls' : 'stop'
      }],
      usage: {
        prompt_tokens: promptTokens,
        completion_tokens: completionTokens,
        total_tokens: promptTokens + completionTokens,
        prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 },
        completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 }
      },
      service_tier: 'default',
      system_fingerprint: null
    }
  }

  function anthropic (req: IncomingMessage, body: any, record: RecordedRequest): unknown {
    // The key comes as x-api-key (older SDKs, curl) or as a bearer token (the current SDK).
    if (!req.headers['x-api-key'] && !/^Bearer \S+/.test(req.headers.authorization ?? '')) throw new Refusal(401, 'x-api-key header is required')
    if (!req.headers['anthropic-version']) throw new Refusal(400, 'anthropic-version: header is required')
    if (typeof body?.model !== 'string') throw new Refusal(400, 'model: Field required')
    if (!Number.isInteger(body.max_tokens)) throw new Refusal(400, 'max_tokens: Field required')
    if (!Array.isArray(body.messages) || body.messages[0]?.role !== 'user') throw new Refusal(400, 'messages: the first message must use the "user" role')
    if (body.stream) throw new Refusal(400, 'this fake model answers non-streaming requests only')
    for (const [i, tool] of (body.tools ?? []).entries()) {
      if (!TOOL_NAME.test(tool?.name ?? '')) throw new Refusal(400, `tools.${i}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'`)
      if (tool.input_schema?.type !== 'object') throw new Refusal(400, `tools.${i}.custom.input_schema.type: Field required`)
    }
    let pending: string[] = []
    let turn = 0
    for (const [i, m] of body.messages.entries()) {
      const blocks: any[] = typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : Array.isArray(m.content) ? m.content : []
      const results = blocks.filter((b) => b?.type === 'tool_result')
      const answered = new Set(results.map((b) => b.tool_use_id))
      const missing = pending.filter((id) => !answered.has(id))
      if (missing.length > 0) throw new Refusal(400, `messages.${i}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${missing.join(', ')}. Each \`tool_use\` block must have a corresponding \`tool_result\` block in the next message.`)
      const unexpected = [...answered].filter((id) => !pending.includes(id))
      if (unexpected.length > 0) throw new Refusal(400, `messages.${i}.content: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${unexpected.join(', ')}. Each \`tool_result\` block must have a corresponding \`tool_use\` block in the previous message.`)
      if (results.length > 0 && m.role !== 'user') throw new Refusal(400, `messages.${i}: \`tool_result\` blocks belong in a "user" message`)
      for (const b of results) {
        const content = typeof b.content === 'string' ? b.content : Array.isArray(b.content) ? b.content.map((p: any) => p?.text ?? '').join('') : ''
        record.results.push({ id: b.tool_use_id, name: issued.get(b.tool_use_id)?.name ?? '', content, isError: b.is_error === true })
      }
      pending = []
      if (m.role !== 'assistant') continue
      turn++
      for (const b of blocks.filter((x) => x?.type === 'tool_use')) {
        const original = issued.get(b.id)
        if (!original || b.name !== original.name || !isDeepStrictEqual(b.input, original.input)) {
          throw new Refusal(400, `messages.${i}.content: tool_use ${b.id} is not the tool call the model made`)
        }
        pending.push(b.id)
      }
    }
    if (pending.length > 0) throw new Refusal(400, `messages: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${pending.join(', ')}.`)

    const next = script(turn, record.results, body)
    const content: unknown[] = next.text ? [{ type: 'text', text: next.text, citations: null }] : []
    for (const c of next.toolCalls ?? []) {
      const id = `toolu_01${randomId(22)}`
      issued.set(id, c)
      content.push({ type: 'tool_use', id, name: c.name, input: c.input, caller: { type: 'direct' } })
    }
    return {
      id: `msg_01${randomId(22)}`,
      type: 'message',
      role: 'assistant',
      model: body.model,
      content,
      stop_reason: next.toolCalls?.length ? 'tool_use' : 'end_turn',
      stop_sequence: null,
      stop_details: null,
      container: null,
      usage: {
        input_tokens: approxTokens(body.messages) + approxTokens(body.tools),
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: 0,
        cache_creation: { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 0 },
        output_tokens: approxTokens(content),
        server_tool_use: null,
        service_tier: 'standard'
      }
    }
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()) }))
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, requests }
}

function send (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body)
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers })
  res.end(text)
}
