/**
 * What the conformance fixture server offers: the tools, resources, prompts, logging and completion
 * that the scenarios of `@modelcontextprotocol/conformance` call by name (the suite's scenario code,
 * dist/index.js of @modelcontextprotocol/conformance (scripts/conformance.ts installs it), is the specification). One
 * `buildConformanceServer()` serves both eras: a 2025-11-25 session and each 2026-07-28 request get a
 * fresh McpServer from it.
 */
import { randomUUID } from 'node:crypto'
import {
  CLIENT_CAPABILITIES_META_KEY,
  McpServer,
  ProtocolError,
  ProtocolErrorCode,
  ResourceTemplate,
  acceptedContent,
  createRequestStateCodec,
  fromJsonSchema,
  inputRequired
} from '@modelcontextprotocol/server'
import type { CallToolResult, ClientCapabilities, GetPromptResult, InputRequests, InputRequiredResult, ServerContext } from '@modelcontextprotocol/server'
import * as z from 'zod'
import { TASKS_EXTENSION, registerTaskMethods, registerTaskTools } from './tasks.js'

/** What the HTTP layer lends the tools that act on the connection or on the 2026 listen streams. */
export interface ConformanceHooks {
  /** Ends the SSE stream of a legacy request (the client must reconnect with Last-Event-ID). */
  closeRequestStream: (ctx: ServerContext) => void
  /** Publishes a list_changed event to the open `subscriptions/listen` streams. */
  listChanged: (what: 'tools' | 'prompts') => void
}

const PNG_1PX = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=='
const WAV_TINY = 'UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA='
const LOGGER = 'conformance-fixture'

// A retried multi-round request brings its requestState back from the client: it is sealed (HMAC,
// per process) so a tampered one is refused by the server before the handler runs (-32602).
const stateCodec = createRequestStateCodec<Record<string, unknown>>({ key: crypto.getRandomValues(new Uint8Array(32)) })

const text = (value: string): CallToolResult => ({ content: [{ type: 'text', text: value }] })
const sleep = async (ms: number): Promise<void> => { await new Promise((resolve) => setTimeout(resolve, ms)) }
const noArgs = z.object({})

type FormSchema = { type: 'object', properties: Record<string, never>, required: string[] }
const objectSchema = (properties: Record<string, unknown>, required: string[] = []): FormSchema =>
  ({ type: 'object', properties: properties as Record<string, never>, required })

const askName = (message = 'What is your name?'): InputRequests[string] =>
  inputRequired.elicit({ message, requestedSchema: objectSchema({ name: { type: 'string' } }, ['name']) })
const askConfirm = (): InputRequests[string] =>
  inputRequired.elicit({ message: 'Please confirm', requestedSchema: objectSchema({ ok: { type: 'boolean' } }, ['ok']) })
const askLlm = (prompt: string, maxTokens: number): InputRequests[string] =>
  inputRequired.createMessage({ messages: [{ role: 'user', content: { type: 'text', text: prompt } }], maxTokens })

/** Tools whose answer is fixed content. */
const FIXED_TOOLS: Record<string, { description: string, result: CallToolResult }> = {
  test_simple_text: { description: 'Answers one text item', result: text('This is a simple text response for testing.') },
  test_image_content: { description: 'Answers one image item', result: { content: [{ type: 'image', data: PNG_1PX, mimeType: 'image/png' }] } },
  test_audio_content: { description: 'Answers one audio item', result: { content: [{ type: 'audio', data: WAV_TINY, mimeType: 'audio/wav' }] } },
  test_embedded_resource: {
    description: 'Answers an embedded resource',
    result: { content: [{ type: 'resource', resource: { uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' } }] }
  },
  test_multiple_content_types: {
    description: 'Answers text, an image and an embedded resource',
    result: {
      content: [
        { type: 'text', text: 'Multiple content types test:' },
        { type: 'image', data: PNG_1PX, mimeType: 'image/png' },
        { type: 'resource', resource: { uri: 'test://mixed-content-resource', mimeType: 'application/json', text: '{"test":"data","value":123}' } }
      ]
    }
  },
  test_streaming_elicitation: { description: 'A plain result: its stream carries no request of the server', result: text('result frames only') }
}

/** Elicitation forms of the 2025 scenarios' tools (asked with input_required, served to 2025 sessions by the SDK's shim). */
const ELICIT_FORMS: Record<string, { message: string, schema: Record<string, unknown> }> = {
  test_elicitation_sep1034_defaults: {
    message: 'Please review and update the form fields with defaults',
    schema: {
      name: { type: 'string', description: 'User name', default: 'John Doe' },
      age: { type: 'integer', description: 'User age', default: 30 },
      score: { type: 'number', description: 'User score', default: 95.5 },
      status: { type: 'string', description: 'User status', enum: ['active', 'inactive', 'pending'], default: 'active' },
      verified: { type: 'boolean', description: 'Verification status', default: true }
    }
  },
  test_elicitation_sep1330_enums: {
    message: 'Please select options from the enum fields',
    schema: {
      untitledSingle: { type: 'string', description: 'Select one option', enum: ['option1', 'option2', 'option3'] },
      titledSingle: {
        type: 'string',
        description: 'Select one option with titles',
        oneOf: [{ const: 'value1', title: 'First Option' }, { const: 'value2', title: 'Second Option' }, { const: 'value3', title: 'Third Option' }]
      },
      legacyEnum: {
        type: 'string',
        description: 'Select one option (legacy)',
        enum: ['opt1', 'opt2', 'opt3'],
        enumNames: ['Option One', 'Option Two', 'Option Three']
      },
      untitledMulti: {
        type: 'array',
        description: 'Select multiple options',
        minItems: 1,
        maxItems: 3,
        items: { type: 'string', enum: ['option1', 'option2', 'option3'] }
      },
      titledMulti: {
        type: 'array',
        description: 'Select multiple options with titles',
        minItems: 1,
        maxItems: 3,
        items: { anyOf: [{ const: 'value1', title: 'First Choice' }, { const: 'value2', title: 'Second Choice' }, { const: 'value3', title: 'Third Choice' }] }
      }
    }
  }
}

const SCHEMA_2020_12 = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  $defs: { address: { $anchor: 'addressDef', type: 'object', properties: { street: { type: 'string' }, city: { type: 'string' } } } },
  properties: {
    name: { type: 'string' },
    address: { $ref: '#/$defs/address' },
    contactMethod: { type: 'string', enum: ['phone', 'email'] },
    phone: { type: 'string' },
    email: { type: 'string' }
  },
  allOf: [{ anyOf: [{ required: ['phone'] }, { required: ['email'] }] }],
  if: { properties: { contactMethod: { const: 'phone' } }, required: ['contactMethod'] },
  then: { required: ['phone'] },
  else: { required: ['email'] },
  additionalProperties: false
}

// Keywords beyond the typed vocabulary (x-mcp-header) must reach tools/list as written.
type JsonSchema = Parameters<typeof fromJsonSchema>[0]
const X_MCP_HEADER_SCHEMA = {
  type: 'object',
  properties: { region: { type: 'string', 'x-mcp-header': 'Region' }, level: { type: 'integer' } }
} as unknown as JsonSchema

function registerTools (server: McpServer, hooks: ConformanceHooks): void {
  for (const [name, { description, result }] of Object.entries(FIXED_TOOLS)) {
    server.registerTool(name, { description, inputSchema: noArgs }, async () => result)
  }
  server.registerTool('test_error_handling', { description: 'Always fails' }, async () => {
    throw new Error('This tool intentionally returns an error for testing')
  })
  server.registerTool('test_x_mcp_header', {
    description: 'Mirrors `region` into the Mcp-Param-Region header (SEP-2243)',
    inputSchema: fromJsonSchema<{ region?: string, level?: number }>(X_MCP_HEADER_SCHEMA)
  }, async (args) => text(`region=${args.region ?? '<none>'}`))
  server.registerTool('json_schema_2020_12_tool', {
    description: 'Input schema with JSON Schema 2020-12 keywords, to be listed verbatim',
    inputSchema: fromJsonSchema(SCHEMA_2020_12 as JsonSchema)
  }, async (args) => text(`called with ${JSON.stringify(args)}`))

  server.registerTool('test_tool_with_logging', { description: 'Sends three log messages, then answers', inputSchema: noArgs }, async (_args, ctx) => {
    for (const data of ['Tool execution started', 'Tool processing data', 'Tool execution completed']) {
      await ctx.mcpReq.notify({ method: 'notifications/message', params: { level: 'info', data } })
      await sleep(20)
    }
    return text('Tool with logging executed successfully')
  })
  const logOnRequest = { description: 'Logs through the request (delivered only with _meta logLevel)', inputSchema: noArgs }
  server.registerTool('test_logging_tool', logOnRequest, async (_args, ctx) => {
    await ctx.mcpReq.log('info', 'test_logging_tool ran')
    return text('logged')
  })
  server.registerTool('test_tool_with_progress', { description: 'Reports progress 0, 50, 100 when asked for', inputSchema: noArgs }, async (_args, ctx) => {
    const progressToken = ctx.mcpReq._meta?.progressToken
    if (progressToken !== undefined) {
      for (const progress of [0, 50, 100]) {
        await ctx.mcpReq.notify({ method: 'notifications/progress', params: { progressToken, progress, total: 100, message: `step ${progress}` } })
        if (progress < 100) await sleep(20)
      }
    }
    return text(String(progressToken ?? 'no-progress-token'))
  })
  const reconnection = { description: 'Ends its SSE stream mid-call, answers after the client reconnects (SEP-1699)', inputSchema: noArgs }
  server.registerTool('test_reconnection', reconnection, async (_args, ctx) => {
    hooks.closeRequestStream(ctx)
    await sleep(100)
    return text('Reconnection test completed successfully.')
  })
  // Written once for both eras (the SDK v2 idiom): the first entry answers input_required; a
  // 2026-07-28 client answers it itself, and on a 2025-11-25 session the SDK's legacy shim sends
  // the request on the call's stream and runs the handler again with the client's answer.
  server.registerTool('test_sampling', {
    description: 'Asks the client for an LLM completion (sampling/createMessage)',
    inputSchema: z.object({ prompt: z.string() })
  }, async (args, ctx) => {
    const answer = ctx.mcpReq.inputResponses?.completion as { content?: { text?: string } } | undefined
    if (answer === undefined) return inputRequired({ inputRequests: { completion: askLlm(args.prompt, 100) } })
    return text(`LLM response: ${answer.content?.text ?? 'No response'}`)
  })
  server.registerTool('test_elicitation', {
    description: 'Asks the client for input (elicitation/create)',
    inputSchema: z.object({ message: z.string() })
  }, async (args, ctx) => {
    const answer = ctx.mcpReq.inputResponses?.response as { action?: string, content?: unknown } | undefined
    if (answer === undefined) {
      const requestedSchema = objectSchema({ response: { type: 'string', description: 'Your response' } }, ['response'])
      return inputRequired({ inputRequests: { response: inputRequired.elicit({ message: args.message, requestedSchema }) } })
    }
    return text(`User response: action=${answer.action}, content=${JSON.stringify(answer.content ?? {})}`)
  })
  for (const [name, form] of Object.entries(ELICIT_FORMS)) {
    server.registerTool(name, { description: `Elicitation form: ${form.message}`, inputSchema: noArgs }, async (_args, ctx) => {
      const answer = ctx.mcpReq.inputResponses?.form as { action?: string, content?: unknown } | undefined
      const ask = inputRequired.elicit({ message: form.message, requestedSchema: objectSchema(form.schema) })
      if (answer === undefined) return inputRequired({ inputRequests: { form: ask } })
      return text(`Elicitation completed: action=${answer.action}, content=${JSON.stringify(answer.content ?? {})}`)
    })
  }
  for (const what of ['tools', 'prompts'] as const) {
    const name = what === 'tools' ? 'test_trigger_tool_change' : 'test_trigger_prompt_change'
    server.registerTool(name, { description: `Publishes ${what}/list_changed to the listen streams`, inputSchema: noArgs }, async () => {
      hooks.listChanged(what)
      return text(`${what} list_changed published`)
    })
  }
  registerInputRequiredTools(server)
}

/** The multi-round-trip tools (SEP-2322, 2026-07-28): `input_required` until the retry carries the answers. */
function registerInputRequiredTools (server: McpServer): void {
  const tool = (name: string, description: string, handler: (ctx: ServerContext) => Promise<CallToolResult | InputRequiredResult>): void => {
    server.registerTool(name, { description, inputSchema: noArgs }, async (_args, ctx) => await handler(ctx))
  }
  tool('test_missing_capability', 'Needs the sampling capability (an undeclared one is -32021)', async (ctx) => {
    if (ctx.mcpReq.inputResponses?.llm_answer !== undefined) return text('sampling done')
    return inputRequired({ inputRequests: { llm_answer: askLlm('Reply with the single word: pong', 16) } })
  })
  tool('test_input_required_result_elicitation', 'Asks for a name in-band', async (ctx) => {
    const name = acceptedContent<{ name: string }>(ctx.mcpReq.inputResponses, 'user_name')?.name
    return typeof name === 'string' ? text(`Hello, ${name}!`) : inputRequired({ inputRequests: { user_name: askName() } })
  })
  tool('test_input_required_result_sampling', 'Asks for an LLM completion in-band', async (ctx) => {
    const answer = ctx.mcpReq.inputResponses?.capital_question as { content?: { text?: unknown } } | undefined
    if (answer === undefined) return inputRequired({ inputRequests: { capital_question: askLlm('What is the capital of France?', 100) } })
    return text(`Sampling response: ${typeof answer.content?.text === 'string' ? answer.content.text : JSON.stringify(answer)}`)
  })
  tool('test_input_required_result_list_roots', 'Asks for the client roots in-band', async (ctx) => {
    const roots = (ctx.mcpReq.inputResponses?.client_roots as { roots?: Array<{ uri?: string }> } | undefined)?.roots
    if (!Array.isArray(roots)) return inputRequired({ inputRequests: { client_roots: inputRequired.listRoots() } })
    return text(`Client exposed ${roots.length} root(s): ${roots.map((r) => r.uri).join(', ')}`)
  })
  tool('test_input_required_result_request_state', 'Round-trips a sealed requestState with an elicitation', async (ctx) => {
    if (acceptedContent(ctx.mcpReq.inputResponses, 'confirm') === undefined) {
      return inputRequired({ inputRequests: { confirm: askConfirm() }, requestState: await stateCodec.mint({ tool: 'request_state', nonce: randomUUID() }) })
    }
    if (ctx.mcpReq.requestState() === undefined) throw new ProtocolError(ProtocolErrorCode.InvalidParams, 'Invalid requestState: missing or not verified')
    return text('state-ok: requestState verified and confirmation received')
  })
  tool('test_input_required_result_multiple_inputs', 'Asks for elicitation, sampling and roots in one round', async (ctx) => {
    const responses = ctx.mcpReq.inputResponses
    const name = acceptedContent<{ name: string }>(responses, 'user_name')?.name
    const greeting = (responses?.greeting as { content?: { text?: unknown } } | undefined)?.content?.text
    const roots = (responses?.client_roots as { roots?: unknown[] } | undefined)?.roots
    if (typeof name === 'string' && typeof greeting === 'string' && Array.isArray(roots)) return text(`${greeting} ${name}: ${roots.length} root(s)`)
    return inputRequired({
      inputRequests: { user_name: askName(), greeting: askLlm('Generate a greeting', 50), client_roots: inputRequired.listRoots() },
      requestState: await stateCodec.mint({ tool: 'multiple_inputs', nonce: randomUUID() })
    })
  })
  tool('test_input_required_result_multi_round', 'Two elicitation rounds, the round kept in requestState', async (ctx) => {
    const state = ctx.mcpReq.requestState<Record<string, unknown>>()
    const round = state?.tool === 'multi_round' && typeof state.round === 'number' ? state.round : 0
    if (round === 0) {
      const requestState = await stateCodec.mint({ tool: 'multi_round', round: 1 })
      return inputRequired({ inputRequests: { step1: askName('Step 1: What is your name?') }, requestState })
    }
    if (round === 1) {
      const name = acceptedContent<{ name: string }>(ctx.mcpReq.inputResponses, 'step1')?.name ?? 'unknown'
      const requestedSchema = objectSchema({ color: { type: 'string' } }, ['color'])
      const step2 = inputRequired.elicit({ message: 'Step 2: What is your favorite color?', requestedSchema })
      return inputRequired({ inputRequests: { step2 }, requestState: await stateCodec.mint({ tool: 'multi_round', round: 2, name }) })
    }
    const color = acceptedContent<{ color: string }>(ctx.mcpReq.inputResponses, 'step2')?.color ?? 'unknown'
    return text(`Multi-round complete: ${String(state?.name ?? 'unknown')} likes ${color}`)
  })
  tool('test_input_required_result_tampered_state', 'Refuses a retry whose requestState fails verification', async (ctx) => {
    if (ctx.mcpReq.requestState() !== undefined && acceptedContent(ctx.mcpReq.inputResponses, 'confirm') !== undefined) return text('integrity-ok')
    return inputRequired({ inputRequests: { confirm: askConfirm() }, requestState: await stateCodec.mint({ tool: 'tampered_state', nonce: randomUUID() }) })
  })
  tool('test_input_required_result_capabilities', 'Asks only for the input kinds the client declared', async (ctx) => {
    if (ctx.mcpReq.inputResponses !== undefined) return text('Capability-aware input requests fulfilled')
    const declared = (ctx.mcpReq.envelope as Record<string, ClientCapabilities | undefined> | undefined)?.[CLIENT_CAPABILITIES_META_KEY]
    const inputRequests: InputRequests = {}
    if (declared?.elicitation !== undefined) inputRequests.user_name = askName()
    if (declared?.sampling !== undefined) inputRequests.greeting = askLlm('Generate a short greeting', 50)
    if (declared?.roots !== undefined) inputRequests.client_roots = inputRequired.listRoots()
    return Object.keys(inputRequests).length === 0 ? text('No declared capability allows an input request') : inputRequired({ inputRequests })
  })
}

function registerResources (server: McpServer): void {
  const fixed = (name: string, uri: string, mimeType: string, body: { text: string } | { blob: string }): void => {
    server.registerResource(name, uri, { title: name, description: `Fixed resource ${uri}`, mimeType }, async () => ({ contents: [{ uri, mimeType, ...body }] }))
  }
  fixed('static-text', 'test://static-text', 'text/plain', { text: 'This is the content of the static text resource.' })
  fixed('static-binary', 'test://static-binary', 'image/png', { blob: PNG_1PX })
  fixed('watched-resource', 'test://watched-resource', 'text/plain', { text: 'Watched resource content' })
  server.registerResource('template', new ResourceTemplate('test://template/{id}/data', { list: undefined }), {
    title: 'Resource template',
    description: 'Substitutes {id}',
    mimeType: 'application/json'
  }, async (uri, { id }) => ({
    contents: [{ uri: uri.toString(), mimeType: 'application/json', text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${String(id)}` }) }]
  }))
  // 2025-11-25 only (the 2026 registry has no resources/(un)subscribe).
  const subscribed = new Set<string>()
  server.server.setRequestHandler('resources/subscribe', async (request) => { subscribed.add(request.params.uri); return {} })
  server.server.setRequestHandler('resources/unsubscribe', async (request) => { subscribed.delete(request.params.uri); return {} })
}

function registerPrompts (server: McpServer): void {
  const user = (content: GetPromptResult['messages'][number]['content']): GetPromptResult['messages'][number] => ({ role: 'user', content })
  server.registerPrompt('test_simple_prompt', { title: 'Simple prompt', description: 'No arguments' }, async () => ({
    messages: [user({ type: 'text', text: 'This is a simple prompt for testing.' })]
  }))
  server.registerPrompt('test_prompt_with_arguments', {
    title: 'Prompt with arguments',
    description: 'Two required arguments',
    argsSchema: z.object({ arg1: z.string().describe('First test argument'), arg2: z.string().describe('Second test argument') })
  }, async ({ arg1, arg2 }) => ({ messages: [user({ type: 'text', text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'` })] }))
  server.registerPrompt('test_prompt_with_embedded_resource', {
    title: 'Prompt with an embedded resource',
    description: 'Embeds the resource named by resourceUri',
    argsSchema: z.object({ resourceUri: z.string().describe('URI of the resource to embed') })
  }, async ({ resourceUri }) => ({
    messages: [
      user({ type: 'resource', resource: { uri: resourceUri, mimeType: 'text/plain', text: 'Embedded resource content for testing.' } }),
      user({ type: 'text', text: 'Please process the embedded resource above.' })
    ]
  }))
  server.registerPrompt('test_prompt_with_image', { title: 'Prompt with an image', description: 'An image message' }, async () => ({
    messages: [user({ type: 'image', data: PNG_1PX, mimeType: 'image/png' }), user({ type: 'text', text: 'Please analyze the image above.' })]
  }))
  const multiRound = { title: 'Multi-round prompt', description: 'Asks for context in-band before rendering' }
  server.registerPrompt('test_input_required_result_prompt', multiRound, async (ctx) => {
    const context = acceptedContent<{ context: string }>((ctx as ServerContext).mcpReq.inputResponses, 'user_context')?.context
    if (typeof context !== 'string') {
      const requestedSchema = objectSchema({ context: { type: 'string' } }, ['context'])
      const ask = inputRequired.elicit({ message: 'What context should the prompt use?', requestedSchema })
      return inputRequired({ inputRequests: { user_context: ask } })
    }
    return { messages: [user({ type: 'text', text: `Use the following context: ${context}` })] }
  })
}

/** A fresh McpServer with every feature the scenarios call. */
export function buildConformanceServer (hooks: ConformanceHooks): McpServer {
  const server = new McpServer({ name: 'tool-gateway-conformance-fixture', version: '1.0.0' }, {
    capabilities: {
      tools: { listChanged: true },
      resources: { subscribe: true, listChanged: true },
      prompts: { listChanged: true },
      logging: {},
      completions: {},
      extensions: { [TASKS_EXTENSION]: {} }
    },
    requestState: { verify: stateCodec.verify }
  })
  registerTools(server, hooks)
  registerTaskTools(server)
  registerTaskMethods(server)
  registerResources(server)
  registerPrompts(server)
  server.server.setRequestHandler('logging/setLevel', async (request) => {
    server.server.notification({ method: 'notifications/message', params: { level: 'info', logger: LOGGER, data: `level ${request.params.level}` } }).catch(() => {})
    return {}
  })
  server.server.setRequestHandler('completion/complete', async () => ({ completion: { values: [], total: 0, hasMore: false } }))
  return server
}
