/**
 * Servers the gateway starts itself (stdio; any transport whose kind says `slowFirstStart`) may
 * take a minute to answer the first time (`npx -y` downloads the package): a config's first
 * connection gets the longer MCP_STDIO_FIRST_CONNECT_MS deadline, is started in the background when
 * registered (the pool's `warm`), and while it runs a caller whose own deadline ran out is told the
 * server is `starting`, not that it timed out (docs/ARCHITECTURE.md#mcp-pool). This file holds
 * which client ids connected once (bounded, oldest forgotten first) and those decisions; the pool
 * holds the connects themselves.
 */
import { transportKind } from './transports.js'
import type { ConnectType } from './transport.js'

/** What the pool's `starting` reports about a client whose first connection is under way. */
export interface StartingState {
  /** Why the previous attempt failed, when this is a retry. */
  lastError: string | undefined
}

export interface FirstConnectOptions {
  connectTimeoutMs: number
  /** The first connection's deadline; the longer of this and connectTimeoutMs applies. */
  firstConnectTimeoutMs: number
  /** Client ids remembered as connected once; past this the oldest are forgotten. */
  maxRemembered: number
}

export class FirstConnects {
  readonly #opts: FirstConnectOptions
  /** Client ids (key and config hash) that connected at least once; Set order is the age order. */
  readonly #connectedOnce = new Set<string>()

  constructor (options: FirstConnectOptions) {
    this.#opts = options
  }

  /** Whether the next connect of this client is its config's first start. */
  isFirst (id: string, type: ConnectType): boolean {
    return transportKind(type).slowFirstStart && !this.#connectedOnce.has(id)
  }

  /** The deadline of the next connect of this client (ms). */
  connectTimeoutMs (id: string, type: ConnectType): number {
    return this.isFirst(id, type) ? Math.max(this.#opts.firstConnectTimeoutMs, this.#opts.connectTimeoutMs) : this.#opts.connectTimeoutMs
  }

  /** The client connected: its later connects get the ordinary deadline. */
  connected (id: string): void {
    this.#connectedOnce.delete(id)
    this.#connectedOnce.add(id)
    if (this.#connectedOnce.size > this.#opts.maxRemembered) this.#connectedOnce.delete(this.#connectedOnce.values().next().value as string)
  }

  /** Defined while a first start is under way (`connecting`); `lastError` is why the previous attempt failed. */
  starting (id: string, type: ConnectType, connecting: boolean, lastError: string | undefined): StartingState | undefined {
    if (!connecting || !this.isFirst(id, type)) return undefined
    return { lastError }
  }
}
