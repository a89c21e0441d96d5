/**
 * A call's questions, relayed to the client that caused it (src/routing/client-relay.ts), upstream
 * side. Two shapes, one per era of the server:
 *
 * - a 2026-07-28 server answers `input_required`: each of its inputRequests is asked of the client
 *   (at once, in parallel), and the call is retried with the answers and the server's own
 *   requestState, until it answers (at most MAX_ROUNDS rounds);
 * - a legacy server sends `elicitation/create`, `sampling/createMessage` or `roots/list` while it
 *   serves the call, on the call's own response stream: the lean transport hands such a message
 *   to the connection (LeanHttpTransport.onrelated) with the stream's tag, the call's
 *   progressToken, and the call registered under that tag answers it. Its `notifications/message`
 *   on that stream are the call's log, passed on the same way.
 *
 * A legacy server only asks a client that declared the capability in `initialize`, and a
 * connection is shared by its key's callers: a call that can answer uses a connection of its own
 * key (RELAY_KEY_SUFFIX) whose Client declares what a relay can carry; each request is then checked
 * against what its own client declared, so no client is asked what it cannot answer.
 */
import type { JSONRPCMessage, Transport } from '@modelcontextprotocol/client'
import { JsonRpcError, METHOD_NOT_FOUND, capabilityFor, declares } from '../routing/client-relay.js'
import type { ClientRelay, ClientRequest } from '../routing/client-relay.js'
import type { InputRound } from '../routing/types.js'
import { UpstreamError } from './errors.js'
import { MAX_STREAM_REQUESTS } from './stream-bounds.js'

/** A URL-mode elicitation's completion (2025-11-25): a notification for the client that answered it. */
const ELICITATION_COMPLETE = 'notifications/elicitation/complete'

/** Rounds of a 2026-07-28 server's `input_required` one call answers before it gives up (the SDK's default). */
export const MAX_ROUNDS = 8

/**
 * Questions one `input_required` may ask: as many as a call's stream may carry requests (stream-bounds.ts). Each is
 * asked of the call's client at once (and held while it answers) or handed to a REST caller; a server asking 10,000
 * filled the instance's questions waiting for /mcp clients alone.
 */
const MAX_INPUT_REQUESTS = MAX_STREAM_REQUESTS

/** `result` when it is not an `input_required` asking more than MAX_INPUT_REQUESTS questions (GW_UPSTREAM_TOO_LARGE: not asked, not handed on). */
export function boundedInputRequests<T> (result: T): T {
  const asked = result as { resultType?: unknown, inputRequests?: unknown } | null
  if (asked?.resultType !== 'input_required' || asked.inputRequests === null || typeof asked.inputRequests !== 'object') return result
  const count = Object.keys(asked.inputRequests).length
  if (count <= MAX_INPUT_REQUESTS) return result
  throw new UpstreamError('GW_UPSTREAM_TOO_LARGE', `The MCP server asked ${count} questions at once (input_required); at most ${MAX_INPUT_REQUESTS} are asked`)
}

/** The pool key of the connections of calls that can answer (see above): the caller key plus this. */
export const RELAY_KEY_SUFFIX = '~relay'

/** The caller key a pool key belongs to: a relay connection's is its caller's (it shares the caller's budgets). */
export function callerKeyOf (key: string): string {
  return key.endsWith(RELAY_KEY_SUFFIX) ? key.slice(0, -RELAY_KEY_SUFFIX.length) : key
}

/** What a relay connection's Client declares in `initialize` (legacy servers): everything a relay can carry. */
export const RELAY_CAPABILITIES = { elicitation: { form: {}, url: {} }, sampling: { tools: {} }, roots: {} } as const

/** A call registered on its connection while it runs: its questions go to its relay. */
export interface RelayedCall {
  input: InputRound & { relay: ClientRelay }
  signal: AbortSignal
}

/** The calls of one connection that can answer, by their tag (the progressToken of the call). */
export type RelayedCalls = Map<string | number, RelayedCall>

/** Sends a JSON-RPC message to the server (the connection's transport). */
type Send = (message: JSONRPCMessage) => Promise<void>

/**
 * A message the transport read on a response stream tagged `tag` (undefined: the standalone GET
 * stream): true when it was a relayed call's (a request it answers, or its log), false for the
 * SDK Client to handle as usual. A request on the GET stream belongs to no call; it is relayed
 * only while exactly one call that can answer runs on the connection (a server that asks outside
 * the call's stream, as many legacy servers do), else the Client answers it (Method not found).
 */
export function relayServerMessage (calls: RelayedCalls, message: JSONRPCMessage, tag: string | number | undefined, send: Send): boolean {
  if (calls.size === 0 || !('method' in message)) return false
  const isRequest = 'id' in message && message.id !== undefined
  if (!isRequest && message.method !== 'notifications/message' && message.method !== ELICITATION_COMPLETE) return false
  let call = tag !== undefined ? calls.get(tag) : undefined
  if (call === undefined && tag === undefined && calls.size === 1) call = calls.values().next().value
  if (call === undefined) return false
  const params = (message as { params?: Record<string, unknown> }).params
  if (!isRequest) {
    if (message.method === ELICITATION_COMPLETE) {
      // Only a client that can be told it (a legacy one); nobody else hears of it.
      if (call.input.relay.notify === undefined) return false
      call.input.relay.notify(message.method, params)
    } else if (params !== undefined) {
      call.input.relay.log?.(params)
    }
    return true
  }
  const request: ClientRequest = { method: message.method, params }
  const ask = call.input.relay.ask
  if (capabilityFor(request) === undefined || ask === undefined) return false
  const id = (message as { id: string | number }).id
  const reply = (body: { result: unknown } | { error: { code: number, message: string, data?: unknown } }): void => {
    send({ jsonrpc: '2.0', id, ...body } as JSONRPCMessage).catch(() => {})
  }
  if (!declares(call.input.capabilities, request)) {
    reply({ error: { code: METHOD_NOT_FOUND, message: `The client of this call did not declare the capability ${request.method} needs` } })
    return true
  }
  ask(request, call.signal).then(
    (result) => { reply({ result: withDefaults(call.input.capabilities, request, result) }) },
    (err: unknown) => { reply({ error: answerError(err) }) }
  )
  return true
}

/**
 * The same for a transport that cannot tell which call a message belongs to (stdio, SSE, the SDK's
 * HTTP transport): its server's requests and log messages go to the relayed call only while it is
 * the connection's only one (relayServerMessage's rule for an untagged message); otherwise the
 * Client answers as before.
 */
export function relayUntagged (transport: Transport, calls: () => RelayedCalls | undefined): void {
  const inner = transport.onmessage
  if (inner === undefined) return
  transport.onmessage = ((message: JSONRPCMessage, extra?: unknown) => {
    const relayed = calls()
    if (relayed !== undefined && relayServerMessage(relayed, message, undefined, async (m) => { await transport.send(m) })) return
    (inner as (m: JSONRPCMessage, e?: unknown) => void).call(transport, message, extra)
  }) as Transport['onmessage']
}

/**
 * Answers a 2026-07-28 server's inputRequests through the relay: each asked of the client at once
 * (they are independent), keyed as the server keyed them. Throws JsonRpcError when one of
 * them needs a capability the client did not declare, or the client answered one with an error.
 */
export async function answerInputRequests (
  inputRequests: Record<string, unknown> | undefined,
  input: InputRound & { relay: ClientRelay },
  signal: AbortSignal
): Promise<Record<string, unknown>> {
  const entries = Object.entries(inputRequests ?? {})
  const ask = input.relay.ask
  if (ask === undefined) throw new JsonRpcError(METHOD_NOT_FOUND, 'The MCP server asks the client for input, which its client cannot be asked')
  const requests = entries.map(([key, raw]) => {
    const r = raw as { method?: unknown, params?: unknown } | null
    const request: ClientRequest = {
      method: typeof r?.method === 'string' ? r.method : '',
      params: r?.params !== null && typeof r?.params === 'object' ? r.params as Record<string, unknown> : undefined
    }
    if (!declares(input.capabilities, request)) {
      throw new JsonRpcError(METHOD_NOT_FOUND, `The MCP server asks the client for ${request.method === '' ? 'an unknown request' : request.method} (input '${key}'), which its client did not declare`)
    }
    return [key, request] as const
  })
  const answers = await Promise.all(requests.map(async ([key, request]) => [key, await ask(request, signal)] as const))
  return Object.fromEntries(answers)
}

/**
 * A form the client accepted, with the schema's defaults filled in for the fields it left out,
 * when the client declared `elicitation.form.applyDefaults` (what the SDK client does for its own
 * answers; here the client may be a REST caller that answered in a later request).
 */
function withDefaults (capabilities: Record<string, unknown>, request: ClientRequest, result: unknown): unknown {
  if (request.method !== 'elicitation/create' || (request.params?.mode ?? 'form') !== 'form') return result
  const form = (capabilities.elicitation as { form?: { applyDefaults?: unknown } } | undefined)?.form
  if (form?.applyDefaults !== true || result === null || typeof result !== 'object') return result
  const answer = result as { action?: unknown, content?: unknown }
  const properties = (request.params?.requestedSchema as { properties?: Record<string, { default?: unknown }> } | undefined)?.properties
  if (answer.action !== 'accept' || properties === null || typeof properties !== 'object') return result
  const content = answer.content !== null && typeof answer.content === 'object' ? { ...answer.content as Record<string, unknown> } : {}
  for (const [name, schema] of Object.entries(properties)) {
    if (content[name] === undefined && schema !== null && typeof schema === 'object' && schema.default !== undefined) content[name] = schema.default
  }
  return { ...answer, content }
}

function answerError (err: unknown): { code: number, message: string, data?: unknown } {
  if (err instanceof JsonRpcError) return { code: err.code, message: err.message, ...(err.data !== undefined ? { data: err.data } : {}) }
  // The client went away or did not answer in time: the server learns only that.
  return { code: -32603, message: 'The client did not answer (it went away, or the call ended)' }
}
