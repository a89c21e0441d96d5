// The gateway half of an orchestrator, shared by the OpenAI and Anthropic loops: list the tools a
// model may see, run the calls it makes. Plain fetch, no SDK: it is two HTTP routes.

export interface GatewayOptions {
  url: string
  /** Sent as `Authorization: Bearer <key>`; leave empty for a gateway in open mode. */
  apiKey?: string | undefined
  /** The allow-list: the same one for GET /tools and for every POST /invoke/batch. */
  functions: string[]
  mcp: string[]
  userId?: string | undefined
  workspaceId?: string | undefined
  /**
   * `search`: the model is shown only `tool_search` (and `pinned`); each tool it finds is added to
   * the tools it sees from the next turn on (README "Tool search"). The allow-list stays the whole one.
   */
  mode?: 'all' | 'search'
  pinned?: string[]
}

export interface ToolCall {
  /** The model's id for the call; passed as the gateway's callId so logs line up. */
  id: string
  name: string
  /** An object, or the JSON string a model emitted (the gateway parses and validates it). */
  arguments: unknown
}

export interface ToolResult { callId: string, output: string, isError: boolean }

/** What a loop returns: the final answer, the model turns it took, the whole conversation. */
export interface LoopResult<M> { text: string, steps: number, messages: M[] }

const list = (value: string | undefined, fallback: string): string[] =>
  (value ?? fallback).split(',').map((s) => s.trim()).filter(Boolean)

/** GATEWAY_URL, GATEWAY_API_KEY, GATEWAY_FUNCTIONS, GATEWAY_MCP, GATEWAY_USER_ID, GATEWAY_WORKSPACE, GATEWAY_MODE, GATEWAY_PINNED. */
export function gatewayFromEnv (env: NodeJS.ProcessEnv = process.env): GatewayOptions {
  return {
    url: env.GATEWAY_URL ?? 'http://127.0.0.1:8080',
    apiKey: env.GATEWAY_API_KEY || undefined,
    functions: list(env.GATEWAY_FUNCTIONS, 'read_file,write_file,glob,grep,calculate,current_time'),
    mcp: list(env.GATEWAY_MCP, ''),
    userId: env.GATEWAY_USER_ID || undefined,
    workspaceId: env.GATEWAY_WORKSPACE || undefined,
    mode: env.GATEWAY_MODE === 'search' ? 'search' : 'all',
    pinned: list(env.GATEWAY_PINNED, '')
  }
}

async function request (gw: GatewayOptions, path: string, body?: unknown): Promise<any> {
  const res = await fetch(new URL(path, gw.url), {
    method: body === undefined ? 'GET' : 'POST',
    headers: {
      ...(gw.apiKey ? { authorization: `Bearer ${gw.apiKey}` } : {}),
      ...(body === undefined ? {} : { 'content-type': 'application/json' })
    },
    body: body === undefined ? undefined : JSON.stringify(body)
  }).catch((err: Error) => {
    throw new Error(`gateway ${gw.url} unreachable: ${(err.cause as Error | undefined)?.message ?? err.message}`)
  })
  const json: any = await res.json().catch(() => null)
  // An HTTP error here is the orchestrator's problem (bad key, rate limit, malformed request), not
  // something to show the model: per-call failures come back inside a 200.
  if (!res.ok) throw new Error(`gateway ${path}: ${res.status} ${json?.code ?? ''} ${json?.message ?? ''}`.trim())
  return json
}

/** GET /tools in a provider's format. Names that resolved to nothing are reported, not hidden. */
export async function listTools (gw: GatewayOptions, format: 'openai' | 'responses' | 'anthropic'): Promise<unknown[]> {
  const query = new URLSearchParams({ format, functions: gw.functions.join(','), mcp: gw.mcp.join(',') })
  if (gw.userId) query.set('userId', gw.userId)
  if (gw.mode === 'search') query.set('mode', 'search')
  if (gw.mode === 'search' && (gw.pinned ?? []).length > 0) query.set('pinned', (gw.pinned ?? []).join(','))
  const listing = await request(gw, `/tools?${query}`)
  for (const u of listing.unresolved ?? []) console.error(`[gateway] unresolved ${u.kind} ${u.name}: ${u.reason}`)
  for (const u of listing.unavailable ?? []) console.error(`[gateway] unavailable server ${u.serverId}: ${u.reason}`)
  return listing.tools
}

/**
 * Search mode: the tools the model's `tool_search` calls of this turn found, in the provider's
 * format, to add to what it is shown. GET /tools/search ranks the same allow-list the same way
 * as the call did, so these are the tools its result named.
 */
export async function foundTools (gw: GatewayOptions, format: 'openai' | 'responses' | 'anthropic', calls: ToolCall[]): Promise<unknown[]> {
  const found: unknown[] = []
  for (const call of calls) {
    if (call.name !== 'tool_search') continue
    let args: { query?: unknown, limit?: unknown }
    try {
      args = typeof call.arguments === 'string' ? JSON.parse(call.arguments) : call.arguments as typeof args
    } catch {
      continue // the call itself answered the model a tool error
    }
    if (typeof args?.query !== 'string' || args.query === '') continue
    const query = new URLSearchParams({ q: args.query, limit: String(args.limit ?? 5), format, functions: gw.functions.join(','), mcp: gw.mcp.join(',') })
    if (gw.userId) query.set('userId', gw.userId)
    found.push(...(await request(gw, `/tools/search?${query}`)).tools)
  }
  return found
}

/**
 * How the orchestrator answers what a tool's MCP server asks while a call runs (MCP elicitation
 * and sampling): `elicit` asks the user (its answer is MCP's ElicitResult: `{action, content?}`),
 * `sample` asks the orchestrator's own model (MCP's CreateMessageResult). What it can answer is
 * declared with every call (`clientCapabilities`); a server never asks for anything else.
 */
export interface InputAnswers {
  elicit?: (params: any) => Promise<unknown>
  sample?: (params: any) => Promise<unknown>
}

/** Asks the user an elicitation form's question: the fields it wants, or undefined to decline. */
export type AskUser = (message: string, requestedSchema: any) => Promise<Record<string, unknown> | undefined>

/** The elicitation answer of an orchestrator whose user fills forms (`askUser`); none without one. */
export function formsFor (askUser: AskUser | undefined): Pick<InputAnswers, 'elicit'> {
  if (askUser === undefined) return {}
  return {
    elicit: async (params: any) => {
      const content = await askUser(String(params.message), params.requestedSchema)
      return content === undefined ? { action: 'decline' } : { action: 'accept', content }
    }
  }
}

/**
 * Runs all calls of one model turn in one POST /invoke/batch; results come back in call order.
 * A call whose server asks for input answers `status: "input_required"`: its questions are
 * answered (`answers`) and the call is sent again with `inputResponses` and the gateway's
 * `requestState`, until it ends (at most 8 rounds).
 */
export async function invokeAll (gw: GatewayOptions, calls: ToolCall[], answers?: InputAnswers): Promise<ToolResult[]> {
  const capabilities = {
    ...(answers?.elicit !== undefined ? { elicitation: { form: {} } } : {}),
    ...(answers?.sample !== undefined ? { sampling: {} } : {})
  }
  const entry = (c: ToolCall, round: Record<string, unknown> = {}): Record<string, unknown> => ({
    name: c.name,
    arguments: c.arguments,
    callId: c.id,
    userId: gw.userId,
    allow: { functions: gw.functions, mcp: gw.mcp },
    ...(gw.workspaceId ? { context: { workspaceId: gw.workspaceId } } : {}),
    ...(Object.keys(capabilities).length > 0 ? { clientCapabilities: capabilities } : {}),
    ...round
  })
  const { results } = await request(gw, '/invoke/batch', { calls: calls.map((c) => entry(c)) })
  for (let round = 0; round < 8; round++) {
    if (answers === undefined) break
    const asking = calls.flatMap((_c, i) => (results[i]?.status === 'input_required' ? [i] : []))
    if (asking.length === 0) break
    const retries = await Promise.all(asking.map(async (i) => entry(calls[i]!, {
      inputResponses: await answerAll(results[i].inputRequests, answers),
      requestState: results[i].requestState
    })))
    const again = (await request(gw, '/invoke/batch', { calls: retries })).results
    asking.forEach((i, j) => { results[i] = again[j] })
  }
  return calls.map((call, i) => {
    const r = results[i]
    // A call that never reached a tool (not allowed, unknown name) has no `output`: tell the model
    // in the same TOOL_ERROR form the gateway uses for tool failures, so it can correct itself.
    const output: string = typeof r.output === 'string'
      ? r.output
      : `TOOL_ERROR: ${JSON.stringify({ errorType: r.error?.code, error: r.error?.message, tool: call.name, callId: call.id })}`
    return { callId: call.id, output, isError: r.isError === true }
  })
}

/** The answers to one round's questions, keyed as the server keyed them. */
async function answerAll (requests: Record<string, { method: string, params?: any }>, answers: InputAnswers): Promise<Record<string, unknown>> {
  const entries = await Promise.all(Object.entries(requests ?? {}).map(async ([key, q]) => {
    if (q.method === 'elicitation/create') return [key, answers.elicit !== undefined ? await answers.elicit(q.params) : { action: 'decline' }]
    if (q.method === 'sampling/createMessage' && answers.sample !== undefined) return [key, await answers.sample(q.params)]
    // Roots: this orchestrator exposes none.
    return [key, q.method === 'roots/list' ? { roots: [] } : { action: 'decline' }]
  }))
  return Object.fromEntries(entries)
}
