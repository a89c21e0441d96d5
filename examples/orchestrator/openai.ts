// A tool loop against OpenAI Chat Completions, with the gateway as the only source of tools.
//   npx tsx examples/orchestrator/openai.ts "Write a haiku to haiku.txt, then read it back"
// Env: OPENAI_API_KEY, OPENAI_BASE_URL (any Chat Completions server), OPENAI_MODEL, MAX_STEPS, and
// the gateway's (see gateway.ts): GATEWAY_URL, GATEWAY_API_KEY, GATEWAY_FUNCTIONS, GATEWAY_MCP,
// GATEWAY_USER_ID, GATEWAY_WORKSPACE, GATEWAY_MODE (search: tool_search first), GATEWAY_PINNED.
import { pathToFileURL } from 'node:url'
import OpenAI from 'openai'
import type { ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions'
import { formsFor, foundTools, gatewayFromEnv, invokeAll, listTools } from './gateway.js'
import type { AskUser, GatewayOptions, InputAnswers, LoopResult, ToolCall } from './gateway.js'

export interface OpenAILoopOptions {
  gateway: GatewayOptions
  client?: OpenAI
  model?: string
  maxSteps?: number
  log?: (line: string) => void
  /** Asks the user a tool's server's question (an MCP elicitation form); the fields, or undefined to decline. */
  askUser?: AskUser | undefined
}

export async function runOpenAILoop (prompt: string, opts: OpenAILoopOptions): Promise<LoopResult<ChatCompletionMessageParam>> {
  const client = opts.client ?? new OpenAI() // reads OPENAI_API_KEY and OPENAI_BASE_URL
  const model = opts.model ?? 'gpt-5-mini'
  const log = opts.log ?? (() => {})
  // Chat Completions tools, exactly as the gateway renders them for this allow-list.
  const tools = await listTools(opts.gateway, 'openai') as ChatCompletionTool[]
  const messages: ChatCompletionMessageParam[] = [{ role: 'user', content: prompt }]
  // What a tool's server may ask while it runs: the user fills its forms, this loop's model samples for it.
  const answers: InputAnswers = {
    ...formsFor(opts.askUser),
    sample: async (params: any) => {
      const reply = await client.chat.completions.create({
        model,
        max_completion_tokens: params.maxTokens ?? 1024,
        messages: [
          ...(typeof params.systemPrompt === 'string' ? [{ role: 'system' as const, content: params.systemPrompt }] : []),
          ...(params.messages as any[]).map((m) => ({ role: m.role, content: m.content?.type === 'text' ? m.content.text : JSON.stringify(m.content) }))
        ]
      })
      return { role: 'assistant', content: { type: 'text', text: reply.choices[0]?.message.content ?? '' }, model: reply.model, stopReason: 'endTurn' }
    }
  }

  for (let step = 1; step <= (opts.maxSteps ?? 10); step++) {
    const completion = await client.chat.completions.create({
      model,
      messages,
      ...(tools.length > 0 ? { tools } : {})
    })
    const message = completion.choices[0]?.message
    if (!message) throw new Error('the model returned no choice')
    // The assistant turn goes back into the history as it came, tool_calls included: the
    // tool messages below answer its ids.
    messages.push(message)
    const toolCalls = message.tool_calls ?? []
    if (toolCalls.length === 0) return { text: message.content ?? '', steps: step, messages }

    const calls: ToolCall[] = toolCalls.map((tc) => tc.type === 'function'
      // `arguments` is the model's JSON string, passed through: the gateway parses it and
      // answers a tool error the model can act on when it is not valid JSON or not valid input.
      ? { id: tc.id, name: tc.function.name, arguments: tc.function.arguments }
      // Custom (free-text) tools are never in a gateway listing; such a call still gets an answer.
      : { id: tc.id, name: tc.custom.name, arguments: { input: tc.custom.input } })
    for (const c of calls) log(`-> ${c.name} ${typeof c.arguments === 'string' ? c.arguments : JSON.stringify(c.arguments)}`)
    const results = await invokeAll(opts.gateway, calls, answers)
    for (const r of results) {
      log(`<- ${r.isError ? 'error ' : ''}${r.output.slice(0, 200)}`)
      // One `tool` message per call, matched by id; the content is the gateway's output string.
      messages.push({ role: 'tool', tool_call_id: r.callId, content: r.output })
    }
    // Search mode: what tool_search found is shown from the next turn on (the model calls it by name).
    for (const tool of await foundTools(opts.gateway, 'openai', calls) as ChatCompletionTool[]) {
      if (tool.type === 'function' && !tools.some((t) => t.type === 'function' && t.function.name === tool.function.name)) tools.push(tool)
    }
  }
  throw new Error(`no final answer after ${opts.maxSteps ?? 10} steps`)
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const prompt = process.argv.slice(2).join(' ')
  if (!prompt) {
    console.error('usage: npx tsx examples/orchestrator/openai.ts "your prompt"')
    process.exit(2)
  }
  const result = await runOpenAILoop(prompt, {
    gateway: gatewayFromEnv(),
    model: process.env.OPENAI_MODEL,
    maxSteps: Number(process.env.MAX_STEPS ?? 10),
    log: (line) => console.error(line)
  })
  console.log(result.text)
}
