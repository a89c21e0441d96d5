/**
 * The conformance fixture client (SDK v2 `Client`), run by the suite as
 * `conformance client --command 'node --import tsx scripts/lib/mcp-fixtures/conformance/client.ts'`:
 * the suite appends its scenario server's URL and names the scenario in MCP_CONFORMANCE_SCENARIO
 * (MCP_CONFORMANCE_PROTOCOL_VERSION: the revision of the run, MCP_CONFORMANCE_CONTEXT: scenario data).
 * The `auth/*` scenarios connect with OAuth (oauth.ts). Exits non-zero when the scenario's flow fails
 * on our side (which is what the suite expects of a client refusing a bad authorization server).
 */
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client'
import type { ClientCapabilities, DiscoverResult, FetchLike } from '@modelcontextprotocol/client'
import { oauthFetch } from './oauth.js'

const INFO = { name: 'tool-gateway-conformance-client', version: '1.0.0' }
const modernRun = process.env.MCP_CONFORMANCE_PROTOCOL_VERSION === '2026-07-28'

interface Connected { client: Client, close: () => Promise<void> }

/**
 * Connects in the run's era: legacy `initialize` at 2025-11-25; at 2026-07-28 the `server/discover`
 * probe (`auto`), or, with `assumeModern`, a known 2026 server without a probe (the header scenarios'
 * servers record every request, and a probe is not what they test).
 */
async function connect (url: string, capabilities: ClientCapabilities = {}, assumeModern = false, fetch?: FetchLike): Promise<Connected> {
  const client = new Client(INFO, { capabilities, versionNegotiation: { mode: modernRun ? 'auto' : 'legacy' } })
  const transport = new StreamableHTTPClientTransport(new URL(url), fetch !== undefined ? { fetch } : {})
  if (modernRun && assumeModern) {
    const discover = { supportedVersions: ['2026-07-28'], capabilities: { tools: {}, resources: {}, prompts: {} } } as unknown as DiscoverResult
    await client.connect(transport, { prior: { kind: 'modern', discover } })
  } else {
    await client.connect(transport)
  }
  return { client, close: async () => { await client.close() } }
}

const scenarios: Record<string, (url: string) => Promise<void>> = {
  async initialize (url) {
    const { client, close } = await connect(url)
    await client.listTools()
    await close()
  },
  async tools_call (url) {
    const { client, close } = await connect(url)
    const { tools } = await client.listTools()
    if (tools.some((t) => t.name === 'add_numbers')) await client.callTool({ name: 'add_numbers', arguments: { a: 5, b: 3 } })
    await close()
  },
  async 'request-metadata' (url) {
    const { close } = await connect(url, { roots: { listChanged: true }, sampling: {}, elicitation: {} })
    await close()
  },
  async 'http-standard-headers' (url) {
    const { client, close } = await connect(url, {}, true)
    const [tool] = (await client.listTools()).tools
    if (tool !== undefined) await client.callTool({ name: tool.name, arguments: {} })
    const [resource] = (await client.listResources()).resources
    if (resource !== undefined) await client.readResource({ uri: resource.uri })
    const [prompt] = (await client.listPrompts()).prompts
    if (prompt !== undefined) await client.getPrompt({ name: prompt.name, arguments: {} })
    await close()
  },
  async 'http-custom-headers' (url) {
    const { client, close } = await connect(url, {}, true)
    await client.listTools()
    const context = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT ?? '{}') as { toolCalls?: Array<{ name: string, arguments: Record<string, unknown> }> }
    for (const call of context.toolCalls ?? []) await client.callTool(call)
    await close()
  },
  async 'http-invalid-tool-headers' (url) {
    const { client, close } = await connect(url, {}, true)
    // Tools whose x-mcp-header annotations are invalid must have been dropped from the listing.
    for (const tool of (await client.listTools()).tools) await client.callTool({ name: tool.name, arguments: { region: 'us-west1' } }).catch(() => {})
    await close()
  },
  async 'sep-2322-client-request-state' (url) {
    const { client, close } = await connect(url, { elicitation: {} }, true)
    client.setRequestHandler('elicitation/create', async () => ({ action: 'accept' as const, content: { confirmed: true } }))
    for (const name of ['test_mrtr_echo_state', 'test_mrtr_no_state', 'test_mrtr_unrelated']) await client.callTool({ name, arguments: {} })
    // A result without resultType must not be retried; the client may refuse it locally.
    await client.callTool({ name: 'test_mrtr_no_result_type', arguments: {} }).catch(() => {})
    await close()
  },
  async 'elicitation-sep1034-client-defaults' (url) {
    const { client, close } = await connect(url, { elicitation: { form: { applyDefaults: true } } })
    client.setRequestHandler('elicitation/create', async () => ({ action: 'accept' as const, content: {} }))
    await client.callTool({ name: 'test_client_elicitation_defaults', arguments: {} })
    await close()
  },
  async 'sse-retry' (url) {
    const { client, close } = await connect(url)
    await client.callTool({ name: 'test_reconnection', arguments: {} })
    await close()
  },
  async 'json-schema-ref-no-deref' (url) {
    const { client, close } = await connect(url)
    await client.listTools()
    await close()
  },
  async 'json-schema-2020-12-preservation' (url) {
    const { client, close } = await connect(url)
    const focal = (await client.listTools()).tools.find((t) => t.name === 'json_schema_2020_12_tool')
    if (focal === undefined) throw new Error('json_schema_2020_12_tool is not listed')
    await client.callTool({ name: 'json_schema_echo', arguments: { schema: focal.inputSchema } })
    await close()
  }
}

/**
 * Every auth/* scenario: connect, list, call the first tool, as the gateway's adapter does, with
 * OAuth answering the server's challenges (pre-registered from the scenario's context when it gives
 * a client, else the client ID metadata document or dynamic registration, as the server offers).
 */
async function oauthScenario (url: string): Promise<void> {
  const context = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT ?? '{}') as { client_id?: string, client_secret?: string }
  const preRegistered = context.client_id !== undefined
    ? { client_id: context.client_id, ...(context.client_secret !== undefined ? { client_secret: context.client_secret } : {}) }
    : undefined
  const { client, close } = await connect(url, {}, false, oauthFetch(url, preRegistered))
  const [tool] = (await client.listTools()).tools
  if (tool !== undefined) await client.callTool({ name: tool.name, arguments: {} })
  await close()
}

const scenario = process.env.MCP_CONFORMANCE_SCENARIO ?? ''
const url = process.argv[2]
const run = scenario.startsWith('auth/') ? oauthScenario : scenarios[scenario]
if (run === undefined || url === undefined) {
  console.error(`usage: MCP_CONFORMANCE_SCENARIO=<${Object.keys(scenarios).join('|')}> client.ts <server url>`)
  process.exit(2)
}
try {
  await run(url)
  process.exit(0)
} catch (err) {
  console.error(`scenario ${scenario} failed:`, err)
  process.exit(1)
}
