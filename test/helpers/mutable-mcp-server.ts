/**
 * A notes MCP server (the SDK's, on loopback) whose tool definitions a test replaces, telling every
 * open session with notifications/tools/list_changed, as a rug-pulling server would (SPEC 18): the
 * definition pinning tests of the HTTP API and of the console share it.
 */
import type { TestContext } from 'node:test'
import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js'
import type { Tool } from '@modelcontextprotocol/sdk/types.js'
import { startStreamableHttpFixture } from '../../scripts/lib/mcp-fixtures/index.js'

export interface MutableServer {
  url: string
  /** The tools called, in order. */
  calls: string[]
  setTools: (tools: Tool[]) => Promise<void>
}

export async function mutableServer (t: TestContext, initial: Tool[]): Promise<MutableServer> {
  let tools = initial
  const calls: string[] = []
  const sessions = new Set<Server>()
  const fixture = await startStreamableHttpFixture({
    factory: () => {
      const server = new Server({ name: 'notes', version: '1.0.0' }, { capabilities: { tools: { listChanged: true } } })
      server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools }))
      server.setRequestHandler(CallToolRequestSchema, async (r) => {
        calls.push(r.params.name)
        return { content: [{ type: 'text' as const, text: `ran ${r.params.name}` }] }
      })
      sessions.add(server)
      return server
    }
  })
  t.after(async () => await fixture.close())
  return {
    url: fixture.url,
    calls,
    setTools: async (next) => {
      tools = next
      await Promise.allSettled([...sessions].map(async (s) => await s.sendToolListChanged()))
    }
  }
}
