/**
 * The tool list of one pooled client (docs/ARCHITECTURE.md#mcp-pool): the last list fetched, whether
 * it is still fresh, and a single-flight refresh that replaces it only on success, so a failed or
 * cancelled listing never empties what routing uses. `listAllPages` reads every page of one
 * tools/list within one deadline. How a list is fetched (connect, retry on a dead connection,
 * the breaker) is the pool's; this file does no I/O of its own.
 */
import { SdkError, SdkErrorCode } from '@modelcontextprotocol/client'
import type { Client } from '@modelcontextprotocol/client'
import type { Tool } from '@modelcontextprotocol/sdk/types.js'
import { UpstreamError } from './errors.js'
import { keptList, ListRefusedError } from './list-bounds.js'

/**
 * A server that keeps paginating is cut off here (each page is a round trip within the listing's
 * deadline): the Client's `listMaxPages` (connection.ts).
 */
export const MAX_LIST_PAGES = 1000

export class ToolListCache {
  #tools: Tool[] | undefined
  #fetchedAt = 0
  /** Bumped by notifications/tools/list_changed; a refresh that started before is not fresh. */
  #version = 0
  #fetchedVersion = -1
  #refreshing: Promise<Tool[]> | undefined
  /** The last refresh's refusal (a list past a bound), remembered as a list is: when, and at which version. */
  #refused: { error: ListRefusedError, at: number, version: number } | undefined

  /** The last list fetched, fresh or not; undefined before the first successful refresh. */
  get tools (): Tool[] | undefined {
    return this.#tools
  }

  /** The list when it is younger than `ttlMs` and no list_changed arrived since its refresh started. */
  fresh (ttlMs: number, now = Date.now()): Tool[] | undefined {
    if (this.#tools === undefined || this.#fetchedVersion !== this.#version || now - this.#fetchedAt >= ttlMs) return undefined
    return this.#tools
  }

  /**
   * The refusal of the last refresh while it holds as a fresh list would (younger than `ttlMs`, no
   * list_changed since) and its other reasons still stand: the list is not asked for again.
   */
  refusal (ttlMs: number, now = Date.now()): ListRefusedError | undefined {
    const r = this.#refused
    if (r === undefined || r.version !== this.#version || now - r.at >= ttlMs || !r.error.stillHolds()) return undefined
    return r.error
  }

  /** notifications/tools/list_changed: the list (and any refresh already under way) is stale. */
  changed (): void {
    this.#version++
  }

  /**
   * Single-flight: concurrent callers share the refresh under way. `load` fetches the list; the
   * cache takes it only when `keep()` still holds once it lands (the client was not closed meanwhile).
   */
  refresh (load: () => Promise<Tool[]>, keep: () => boolean = () => true): Promise<Tool[]> {
    this.#refreshing ??= this.#load(load, keep).finally(() => { this.#refreshing = undefined })
    return this.#refreshing
  }

  async #load (load: () => Promise<Tool[]>, keep: () => boolean): Promise<Tool[]> {
    const version = this.#version
    let tools: Tool[]
    try {
      tools = await load()
    } catch (err) {
      if (err instanceof ListRefusedError && keep()) this.#refused = { error: err, at: Date.now(), version }
      throw err
    }
    this.#refused = undefined
    if (keep()) {
      this.#tools = tools
      this.#fetchedAt = Date.now()
      this.#fetchedVersion = version
    }
    return tools
  }
}

/**
 * Every page of tools/list within one deadline (epoch ms), walked by the SDK Client (its
 * no-cursor listTools): it ends a listing whose page repeats its cursor and its tools, drops
 * tools whose `x-mcp-header` declarations are invalid (2026-07-28), and stops at its
 * `listMaxPages` (MAX_LIST_PAGES). Not written to the Client's response cache: the pool keeps
 * its own list (ToolListCache) and passes each tool's definition to callTool. Throws the SDK's
 * SdkError RequestTimeout once the deadline passes, UpstreamError past MAX_LIST_PAGES pages or past
 * what a kept list may hold (list-bounds.ts: `maxBytes` is MCP_MAX_MESSAGE_BYTES). Answers the
 * tools and their size as JSON.
 */
export async function listAllPages (client: Pick<Client, 'listTools'>, deadline: number, maxBytes = Infinity): Promise<{ items: Tool[], bytes: number }> {
  const timeout = deadline - Date.now()
  if (timeout <= 0) throw new SdkError(SdkErrorCode.RequestTimeout, 'Request timed out')
  // Each page request gets what is left of the deadline as its own timeout, and the signal
  // ends the walk as a whole when the deadline passes.
  const signal = AbortSignal.timeout(timeout)
  try {
    const result = await client.listTools(undefined, { timeout, signal, cacheMode: 'bypass' })
    return keptList(result.tools as Tool[], 'tools', maxBytes)
  } catch (err) {
    if (err instanceof SdkError && err.code === SdkErrorCode.ListPaginationExceeded) {
      throw new UpstreamError('GW_UPSTREAM_ERROR', `The MCP server returned more than ${MAX_LIST_PAGES} tools/list pages`)
    }
    throw err
  }
}
