import type { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js'

/** What a module in MCP_SERVICES_DIR exports (default export or a named `service`). */
export interface LocalMcpServiceModule {
  /** The service name: the first half of every exposed name, apiFunctionName(name, tool). */
  name: string
  /**
   * The SDK server: an McpServer (or low-level Server) instance, or a factory returning one.
   * It is connected once, in-process, over an InMemoryTransport pair.
   */
  server: McpServerLike | (() => McpServerLike | Promise<McpServerLike>)
}

/** The part of McpServer / Server the gateway uses; duck-typed so a module may bring its own SDK copy. */
export interface McpServerLike {
  connect: (transport: InMemoryTransport) => Promise<void>
  close: () => Promise<void>
}

/**
 * Declares a local MCP service (tier 3: docs/ARCHITECTURE.md#tiers). It only types its argument:
 * a module exporting a plain object of the same shape is loaded too.
 */
export function defineMcpService (service: LocalMcpServiceModule): LocalMcpServiceModule {
  return service
}
