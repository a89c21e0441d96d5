/**
 * A legacy (2025-11-25, v1 SDK, session mode) MCP server whose tools ask their client while they
 * run, on the call's own stream: `ask_name` logs a line and asks for a name (elicitation/create),
 * `sample {prompt}` asks the client's model (sampling/createMessage), `roots` lists the client's
 * roots (roots/list); `chatty` logs a debug and an info line; `wait` waits until it is cancelled;
 * `ask_and_go` asks for a name and answers without waiting (how its question ended is kept). For the gateway's relay of a server's requests (issue 30).
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { CreateMessageResultSchema, ElicitResultSchema, ListRootsResultSchema } from '@modelcontextprotocol/sdk/types.js'
import { z } from 'zod'
import { startStreamableHttpFixture } from './http-servers.js'
import type { HttpFixture } from './http-servers.js'

const NAME_SCHEMA = { type: 'object' as const, properties: { name: { type: 'string' as const } }, required: ['name'] }

/** The fixture, how many `wait` calls it has seen cancelled (and begun), and how the questions `ask_and_go` left behind ended. */
export interface AskingFixture extends HttpFixture {
  waits: { started: number, cancelled: number }
  leftBehind: string[]
}

export async function startAskingFixture (options: { port?: number } = {}): Promise<AskingFixture> {
  const waits = { started: 0, cancelled: 0 }
  const leftBehind: string[] = []
  const fixture = await startStreamableHttpFixture({
    ...(options.port !== undefined ? { port: options.port } : {}),
    factory: () => {
      const server = new McpServer({ name: 'asker', version: '1.0.0' }, { capabilities: { tools: {}, logging: {} } })
      server.registerTool('ask_name', { description: 'asks the user for a name' }, async (extra) => {
        await extra.sendNotification({ method: 'notifications/message', params: { level: 'info', data: 'asking for a name' } })
        const params = { message: 'Your name?', requestedSchema: NAME_SCHEMA }
        const answer = await extra.sendRequest({ method: 'elicitation/create', params }, ElicitResultSchema)
        return { content: [{ type: 'text', text: answer.action === 'accept' ? `hello ${String(answer.content?.name)}` : `no name (${answer.action})` }] }
      })
      server.registerTool('ask_and_go', { description: 'asks for a name and answers at once, without waiting for it' }, async (extra) => {
        const params = { message: 'Your name?', requestedSchema: NAME_SCHEMA }
        extra.sendRequest({ method: 'elicitation/create', params }, ElicitResultSchema).then(
          (answer) => { leftBehind.push(`answered: ${answer.action}`) },
          (err: unknown) => { leftBehind.push(`failed: ${err instanceof Error ? err.message : String(err)}`) }
        )
        return { content: [{ type: 'text', text: 'gone' }] }
      })
      server.registerTool('sample', { description: 'asks the client\'s model', inputSchema: { prompt: z.string() } }, async ({ prompt }, extra) => {
        const answer = await extra.sendRequest({
          method: 'sampling/createMessage',
          params: { messages: [{ role: 'user', content: { type: 'text', text: prompt } }], maxTokens: 20 }
        }, CreateMessageResultSchema)
        const said = answer.content as { type?: string, text?: string }
        return { content: [{ type: 'text', text: `model said: ${said.type === 'text' ? String(said.text) : '?'}` }] }
      })
      server.registerTool('ask_url', { description: 'sends the user to a URL, then says the elicitation completed' }, async (extra) => {
        const params = { mode: 'url', elicitationId: 'el-1', url: 'https://example.invalid/consent', message: 'Please consent' }
        const answer = await extra.sendRequest({ method: 'elicitation/create', params } as never, ElicitResultSchema)
        await extra.sendNotification({ method: 'notifications/elicitation/complete', params: { elicitationId: 'el-1' } } as never)
        return { content: [{ type: 'text', text: `url ${answer.action}` }] }
      })
      server.registerTool('chatty', { description: 'logs at debug and info, then answers' }, async (extra) => {
        for (const [level, data] of [['debug', 'detail'], ['info', 'progress made']] as const) {
          await extra.sendNotification({ method: 'notifications/message', params: { level, data } })
        }
        return { content: [{ type: 'text', text: 'chatted' }] }
      })
      server.registerTool('wait', { description: 'waits until cancelled (at most 30 s)' }, async (extra) => {
        waits.started++
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, 30_000)
          extra.signal.addEventListener('abort', () => { waits.cancelled++; clearTimeout(timer); resolve() }, { once: true })
        })
        return { content: [{ type: 'text', text: 'waited' }] }
      })
      server.registerTool('roots', { description: 'lists the client roots' }, async (extra) => {
        const answer = await extra.sendRequest({ method: 'roots/list' }, ListRootsResultSchema)
        return { content: [{ type: 'text', text: answer.roots.map((r) => r.uri).join(',') }] }
      })
      return server
    }
  })
  return Object.assign(fixture, { waits, leftBehind })
}
