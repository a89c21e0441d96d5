/**
 * The gateway as an MCP client, for `conformance client --command '...'`: the suite appends its
 * scenario server's URL and names the scenario (MCP_CONFORMANCE_SCENARIO). This registers that URL as
 * a tenant's remote MCP server of the running gateway (GATEWAY_URL; the gateway needs EGRESS_ALLOW for
 * loopback), lists its tools through `GET /tools` and calls them through `POST /invoke` as the scenario
 * asks, then removes the server. What the suite observes is the gateway's upstream client.
 */
import { randomUUID } from 'node:crypto'

interface McpTool { name: string, inputSchema?: unknown }
interface Gateway {
  userId: string
  tools: () => Promise<McpTool[]>
  listing: () => Promise<Listing>
  invoke: (tool: string, args: Record<string, unknown>, round?: Record<string, unknown>) => Promise<InvokeAnswer>
}
interface Listing { tools: McpTool[], unavailable?: Array<{ serverId: string, reason: string, code?: string, authorize?: string }> }
/** What POST /invoke answers, as far as these scenarios read it. */
interface InvokeAnswer { callId?: string, status?: string, inputRequests?: Record<string, { method?: string }>, requestState?: string }

const gatewayUrl = process.env.GATEWAY_URL ?? ''
const scenario = process.env.MCP_CONFORMANCE_SCENARIO ?? ''
const serverUrl = process.argv[2]
// Under the harness's per-scenario timeout: an upstream call the gateway never completes (sse-retry
// today) fails the scenario here rather than holding the leg for the gateway's own call timeout.
const REQUEST_TIMEOUT_MS = 12_000

async function call (method: string, path: string, body?: unknown): Promise<unknown> {
  const res = await fetch(`${gatewayUrl}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS)
  })
  const text = await res.text()
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`)
  return text === '' ? undefined : JSON.parse(text)
}

/**
 * The user's browser for an OAuth scenario: opens the authorization URL (the suite's authorization
 * server answers with a redirect at once), then follows that redirect to the gateway's callback.
 * The gateway's PUBLIC_URL is an https name (its TLS proxy in production); the browser reaches it
 * at GATEWAY_URL, as through that proxy.
 */
async function connectAsUser (authorize: string): Promise<void> {
  const { authorizationUrl } = await call('POST', authorize, {}) as { authorizationUrl: string }
  const res = await fetch(authorizationUrl, { redirect: 'manual', signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) })
  await res.body?.cancel()
  const location = res.headers.get('location')
  if (location === null) throw new Error(`the authorization server did not redirect (HTTP ${res.status})`)
  const back = new URL(location)
  const callback = await fetch(`${gatewayUrl}${back.pathname}${back.search}`, { redirect: 'manual', signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) })
  const text = await callback.text()
  if (callback.status >= 400) throw new Error(`the gateway's callback answered ${callback.status} ${text}`)
}

/** Scenario context of the suite (pre-registered client credentials). */
const context = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT ?? '{}') as { client_id?: string, client_secret?: string }

/** Registers the scenario server for a tenant of its own and returns how to list and call through it. */
async function register (url: string): Promise<{ gateway: Gateway, remove: () => Promise<void> }> {
  const userId = `conformance-${randomUUID().slice(0, 8)}`
  const serverId = 'scenario'
  const oauth = scenario.startsWith('auth/')
    ? { auth: { type: 'oauth', ...(context.client_id !== undefined ? { clientId: context.client_id, clientSecret: context.client_secret } : {}) } }
    : {}
  await call('PUT', `/users/${userId}/mcp/servers/${serverId}`, { type: 'streamable_http', url, ...oauth })
  const prefix = `user_${userId}_tool_`
  const listing = async (): Promise<Listing> => {
    const answer = await call('GET', `/tools?mcp=${serverId}&userId=${userId}&format=mcp`) as Listing
    if ((answer.unavailable ?? []).length > 0) console.error('unavailable:', JSON.stringify(answer.unavailable))
    return { ...answer, tools: answer.tools.map((t) => ({ ...t, name: t.name.startsWith(prefix) ? t.name.slice(prefix.length) : t.name })) }
  }
  const gateway: Gateway = {
    userId,
    listing,
    tools: async () => (await listing()).tools,
    invoke: async (tool, args, round = {}) => {
      const result = await call('POST', '/invoke', { name: `${prefix}${tool}`, userId, arguments: args, ...round }) as InvokeAnswer
      console.error(`${tool}:`, JSON.stringify(result).slice(0, 500))
      return result
    }
  }
  return { gateway, remove: async () => { await call('DELETE', `/users/${userId}/mcp/servers/${serverId}`) } }
}

const invokeEach = async (gateway: Gateway, calls: Array<{ name: string, arguments: Record<string, unknown> }>): Promise<void> => {
  for (const { name, arguments: args } of calls) await gateway.invoke(name, args)
}

/** What a REST caller that can answer forms declares (POST /invoke clientCapabilities). */
const FORMS = { clientCapabilities: { elicitation: { form: {} } } }

/**
 * A REST caller answering the server's questions (MCP input_required through POST /invoke): each
 * elicitation accepted, then the same call again with the answers and the gateway's requestState,
 * until the call completes (at most 4 rounds).
 */
async function invokeAnswering (
  gateway: Gateway,
  tool: string,
  args: Record<string, unknown>,
  capabilities: Record<string, unknown> = FORMS.clientCapabilities,
  content: Record<string, unknown> = { confirmed: true }
): Promise<void> {
  const declared = { clientCapabilities: capabilities }
  let answer = await gateway.invoke(tool, args, declared)
  for (let round = 0; round < 4 && answer.status === 'input_required'; round++) {
    const inputResponses = Object.fromEntries(Object.entries(answer.inputRequests ?? {}).map(([key, req]) =>
      [key, req.method === 'elicitation/create' ? { action: 'accept', content } : { action: 'decline' }]))
    answer = await gateway.invoke(tool, args, { ...declared, inputResponses, requestState: answer.requestState })
  }
}

/** How many times a user is asked to connect the server before the scenario gives up (the gateway bounds step-ups itself). */
const MAX_CONNECTS = 4

/**
 * The OAuth scenarios: list the tools and call the scenario's tool as an orchestrator would,
 * connecting the server as the user whenever the gateway says GW_OAUTH_REQUIRED.
 */
async function oauthScenario (gateway: Gateway): Promise<void> {
  let connects = 0
  const connect = async (authorize: string | undefined, why: string): Promise<void> => {
    if (authorize === undefined || ++connects > MAX_CONNECTS) throw new Error(`${why}; not connecting again`)
    await connectAsUser(authorize)
  }
  let tools: McpTool[] = []
  for (;;) {
    const listing = await gateway.listing()
    const needed = listing.unavailable?.find((u) => u.code === 'GW_OAUTH_REQUIRED')
    if (needed === undefined) { tools = listing.tools; break }
    await connect(needed.authorize, `listing: ${needed.reason}`)
  }
  const tool = tools[0]
  if (tool === undefined) throw new Error('no tool listed through the gateway')
  for (;;) {
    const answer = await gateway.invoke(tool.name, {}) as InvokeAnswer & { error?: { code?: string, message?: string } }
    if (answer.error?.code !== 'GW_OAUTH_REQUIRED') return
    await connect(`/users/${gateway.userId}/mcp/servers/scenario/oauth/authorize`, `call: ${answer.error.message ?? ''}`)
  }
}

const scenarios: Record<string, (gateway: Gateway) => Promise<void>> = {
  initialize: async (gateway) => { await gateway.tools() },
  'request-metadata': async (gateway) => { await gateway.tools() },
  'json-schema-ref-no-deref': async (gateway) => { await gateway.tools() },
  async tools_call (gateway) {
    if ((await gateway.tools()).some((t) => t.name === 'add_numbers')) await gateway.invoke('add_numbers', { a: 5, b: 3 })
  },
  async 'http-standard-headers' (gateway) {
    // The gateway's REST surface has tools only: no resources/read or prompts/get to send.
    const [tool] = await gateway.tools()
    if (tool !== undefined) await gateway.invoke(tool.name, {})
  },
  async 'http-custom-headers' (gateway) {
    await gateway.tools()
    const context = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT ?? '{}') as { toolCalls?: Array<{ name: string, arguments: Record<string, unknown> }> }
    await invokeEach(gateway, context.toolCalls ?? [])
  },
  async 'http-invalid-tool-headers' (gateway) {
    await invokeEach(gateway, (await gateway.tools()).map((t) => ({ name: t.name, arguments: { region: 'us-west1' } })))
  },
  async 'sep-2322-client-request-state' (gateway) {
    await gateway.tools()
    // Through POST /invoke's input rounds: what the suite observes is the gateway's upstream client
    // echoing the server's requestState (or none) on the retry, with a new JSON-RPC id.
    const names = ['test_mrtr_echo_state', 'test_mrtr_no_state', 'test_mrtr_unrelated', 'test_mrtr_no_result_type']
    for (const name of names) await invokeAnswering(gateway, name, {})
  },
  async 'elicitation-sep1034-client-defaults' (gateway) {
    await gateway.tools()
    // As the control client: defaults applied (declared), each form accepted with nothing filled in by the caller.
    await invokeAnswering(gateway, 'test_client_elicitation_defaults', {}, { elicitation: { form: { applyDefaults: true } } }, {})
  },
  async 'sse-retry' (gateway) {
    await gateway.tools()
    await gateway.invoke('test_reconnection', {})
  },
  async 'json-schema-2020-12-preservation' (gateway) {
    const focal = (await gateway.tools()).find((t) => t.name === 'json_schema_2020_12_tool')
    if (focal === undefined) throw new Error('json_schema_2020_12_tool is not listed through the gateway')
    await gateway.invoke('json_schema_echo', { schema: focal.inputSchema })
  }
}

const run = scenario.startsWith('auth/') ? oauthScenario : scenarios[scenario]
if (run === undefined || serverUrl === undefined || gatewayUrl === '') {
  console.error(`usage: GATEWAY_URL=<gateway> MCP_CONFORMANCE_SCENARIO=<${Object.keys(scenarios).join('|')}> gateway-client.ts <server url>`)
  process.exit(2)
}
const { gateway, remove } = await register(serverUrl)
try {
  await run(gateway)
} catch (err) {
  console.error(`scenario ${scenario} failed through the gateway:`, err)
  process.exitCode = 1
} finally {
  await remove().catch((err: unknown) => { console.error('removing the server:', err) })
}
