// A tool loop against the Anthropic Messages API, with the gateway as the only source of tools.
//   npx tsx examples/orchestrator/anthropic.ts "Write a haiku to haiku.txt, then read it back"
// Env: ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, ANTHROPIC_MODEL, MAX_STEPS, and the gateway's (see
// gateway.ts): GATEWAY_URL, GATEWAY_API_KEY, GATEWAY_FUNCTIONS, GATEWAY_MCP, GATEWAY_USER_ID,
// GATEWAY_WORKSPACE, GATEWAY_MODE (search: tool_search first), GATEWAY_PINNED.
import { pathToFileURL } from 'node:url'
import Anthropic from '@anthropic-ai/sdk'
import type { MessageParam, Tool, ToolResultBlockParam } from '@anthropic-ai/sdk/resources/messages'
import { createInterface } from 'node:readline/promises'
import { formsFor, foundTools, gatewayFromEnv, invokeAll, listTools } from './gateway.js'
import type { AskUser, GatewayOptions, InputAnswers, LoopResult, ToolCall } from './gateway.js'

export interface AnthropicLoopOptions {
  gateway: GatewayOptions
  client?: Anthropic
  model?: string
  maxTokens?: number
  maxSteps?: number
  log?: (line: string) => void
  /**
   * Asks the user a tool's server's question (an MCP elicitation form: its message and the fields
   * it wants); the fields, or undefined to decline. Absent: nothing is asked of the user.
   */
  askUser?: AskUser | undefined
}

export async function runAnthropicLoop (prompt: string, opts: AnthropicLoopOptions): Promise<LoopResult<MessageParam>> {
  const client = opts.client ?? new Anthropic() // reads ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL
  const model = opts.model ?? 'claude-sonnet-4-5'
  const log = opts.log ?? (() => {})
  // Messages API tools ({ name, description, input_schema }), as the gateway renders them.
  const tools = await listTools(opts.gateway, 'anthropic') as Tool[]
  const messages: MessageParam[] = [{ role: 'user', content: prompt }]
  // What a tool's server may ask while it runs: the user fills its forms, this loop's model samples for it.
  const answers: InputAnswers = {
    ...formsFor(opts.askUser),
    sample: async (params: any) => {
      const reply = await client.messages.create({
        model,
        max_tokens: params.maxTokens ?? 1024,
        ...(typeof params.systemPrompt === 'string' ? { system: params.systemPrompt } : {}),
        messages: (params.messages as any[]).map((m) => ({ role: m.role, content: m.content?.type === 'text' ? m.content.text : JSON.stringify(m.content) }))
      })
      const text = reply.content.flatMap((b) => (b.type === 'text' ? [b.text] : [])).join('')
      return { role: 'assistant', content: { type: 'text', text }, model: reply.model, stopReason: 'endTurn' }
    }
  }

  for (let step = 1; step <= (opts.maxSteps ?? 10); step++) {
    const response = await client.messages.create({
      model,
      max_tokens: opts.maxTokens ?? 4096,
      messages,
      ...(tools.length > 0 ? { tools } : {})
    })
    // The whole assistant turn goes back, text and tool_use blocks alike: each tool_result below
    // must answer a tool_use of the message right before it.
    messages.push({ role: 'assistant', content: response.content })
    const calls: ToolCall[] = response.content.flatMap((block) => block.type === 'tool_use'
      // `input` is already an object; the gateway validates it against the tool's schema.
      ? [{ id: block.id, name: block.name, arguments: block.input }]
      : [])
    if (response.stop_reason !== 'tool_use' || calls.length === 0) {
      const text = response.content.flatMap((b) => (b.type === 'text' ? [b.text] : [])).join('')
      return { text, steps: step, messages }
    }

    for (const c of calls) log(`-> ${c.name} ${JSON.stringify(c.arguments)}`)
    const results = await invokeAll(opts.gateway, calls, answers)
    // All results of one turn go in one user message, one tool_result block per tool_use id; the
    // content is the gateway's output string, and is_error lets the model know the call failed.
    const content: ToolResultBlockParam[] = results.map((r) => {
      log(`<- ${r.isError ? 'error ' : ''}${r.output.slice(0, 200)}`)
      return { type: 'tool_result', tool_use_id: r.callId, content: r.output, ...(r.isError ? { is_error: true } : {}) }
    })
    messages.push({ role: 'user', content })
    // Search mode: what tool_search found is shown from the next turn on (the model calls it by name).
    for (const tool of await foundTools(opts.gateway, 'anthropic', calls) as Tool[]) {
      if (!tools.some((t) => t.name === tool.name)) tools.push(tool)
    }
  }
  throw new Error(`no final answer after ${opts.maxSteps ?? 10} steps`)
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const prompt = process.argv.slice(2).join(' ')
  if (!prompt) {
    console.error('usage: npx tsx examples/orchestrator/anthropic.ts "your prompt"')
    process.exit(2)
  }
  const result = await runAnthropicLoop(prompt, {
    gateway: gatewayFromEnv(),
    model: process.env.ANTHROPIC_MODEL,
    maxSteps: Number(process.env.MAX_STEPS ?? 10),
    log: (line) => console.error(line),
    // A tool's server that asks the user something: each field asked on the terminal (when there is one).
    ...(process.stdin.isTTY ? { askUser: askOnTerminal } : {})
  })
  console.log(result.text)
}

/** Asks the form's fields one by one on the terminal; an empty first answer declines. */
async function askOnTerminal (message: string, requestedSchema: any): Promise<Record<string, unknown> | undefined> {
  const rl = createInterface({ input: process.stdin, output: process.stderr })
  try {
    console.error(`[a tool asks] ${message}`)
    const content: Record<string, unknown> = {}
    for (const [name, field] of Object.entries<any>(requestedSchema?.properties ?? {})) {
      const answer = await rl.question(`  ${field.title ?? name}${field.description ? ` (${field.description})` : ''}: `)
      if (answer === '' && Object.keys(content).length === 0) return undefined
      content[name] = field.type === 'number' || field.type === 'integer' ? Number(answer) : field.type === 'boolean' ? /^(y|yes|true)$/i.test(answer) : answer
    }
    return content
  } finally {
    rl.close()
  }
}
