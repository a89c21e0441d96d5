import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js'
import { z } from 'zod'
import type { McpConnector, RemoteServer } from '../../../src/remote-mcp/source.js'

/**
 * Connects registry entries whose url is `memory://{name}` to real in-process MCP servers
 * over InMemoryTransport. It stands in for the network client pool in router tests: the
 * priority and isolation rules are about naming and routing, not transports (the pool has
 * its own tests against loopback servers).
 */
export class InProcessConnector implements McpConnector {
  readonly #factories = new Map<string, () => McpServer>()
  readonly #clients = new Map<string, Promise<Client>>()
  readonly calls: Array<{ key: string, tool: string }> = []
  readonly #dead = new Set<string>()
  readonly #slow = new Map<string, number>()

  /** Registers `memory://{name}`. */
  add (name: string, factory: () => McpServer): this {
    this.#factories.set(name, factory)
    return this
  }

  /** Listing `memory://{name}` fails (a dead server). */
  kill (name: string): void {
    this.#dead.add(name)
  }

  /** Listing `memory://{name}` takes `ms` (a slow server). */
  slow (name: string, ms: number): void {
    this.#slow.set(name, ms)
  }

  #name (server: RemoteServer): string {
    const url = (server.config as { url?: string }).url ?? ''
    return url.replace(/^memory:\/\//, '')
  }

  async #client (key: string, server: RemoteServer): Promise<Client> {
    const name = this.#name(server)
    const cacheKey = `${key}|${name}`
    let client = this.#clients.get(cacheKey)
    if (!client) {
      const factory = this.#factories.get(name)
      if (!factory) throw new Error(`no in-process server ${name}`)
      client = (async () => {
        const [a, b] = InMemoryTransport.createLinkedPair()
        await factory().connect(b)
        const c = new Client({ name: 'test', version: '1' })
        await c.connect(a)
        return c
      })()
      this.#clients.set(cacheKey, client)
    }
    return await client
  }

  async listTools (key: string, server: RemoteServer): Promise<Tool[]> {
    const name = this.#name(server)
    if (this.#dead.has(name)) throw new Error('connection refused')
    const delay = this.#slow.get(name)
    if (delay) await new Promise((resolve) => setTimeout(resolve, delay).unref())
    return (await (await this.#client(key, server)).listTools()).tools
  }

  async callTool (key: string, server: RemoteServer, tool: string, args: Record<string, unknown>): Promise<CallToolResult> {
    this.calls.push({ key, tool })
    return await (await this.#client(key, server)).callTool({ name: tool, arguments: args }) as CallToolResult
  }

  async close (): Promise<void> {
    await Promise.allSettled([...this.#clients.values()].map(async (c) => await (await c).close()))
  }
}

/**
 * A real MCP server whose every tool answers `{marker}:{tool}` plus its arguments, so a test
 * can tell exactly which server and tool served a call.
 */
export function markerServer (marker: string, tools: string[]): () => McpServer {
  return () => {
    const server = new McpServer({ name: marker, version: '1.0.0' })
    for (const tool of tools) {
      server.registerTool(tool, {
        description: `${tool} of ${marker}`,
        inputSchema: { value: z.string().optional() }
      }, async (args) => ({ content: [{ type: 'text', text: `${marker}:${tool}:${JSON.stringify(args)}` }] }))
    }
    return server
  }
}
