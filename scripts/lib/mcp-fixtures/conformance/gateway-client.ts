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
  tools: () => Promise<McpTool[]>
  invoke: (tool: string, args: Record<string, unknown>, round?: Record<string, unknown>) => Promise<InvokeAnswer>
}
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

/** Registers the scenario server for a tenant of its own and returns how to list and call through it. */
async function register (url: string): Promise<{ gateway: Gateway, remove: () => Promise<void> }> {
  const userId = `conformance-${randomUUID().slice(0, 8)}`
  const serverId = 'scenario'
  await call('PUT', `/users/${userId}/mcp/servers/${serverId}`, { type: 'streamable_http', url })
  const prefix = `user_${userId}_tool_`
  const gateway: Gateway = {
    tools: async () => {
      const listing = await call('GET', `/tools?mcp=${serverId}&userId=${userId}&format=mcp`) as { tools: McpTool[], unavailable?: unknown[] }
      if ((listing.unavailable ?? []).length > 0) console.error('unavailable:', JSON.stringify(listing.unavailable))
      return listing.tools.map((t) => ({ ...t, name: t.name.startsWith(prefix) ? t.name.slice(prefix.length) : t.name }))
    },
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

const run = scenarios[scenario]
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
