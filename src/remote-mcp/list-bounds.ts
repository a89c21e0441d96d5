/**
 * What one server's list may hold (tools, resources, resource templates, prompts): a list is kept
 * per pooled client and rendered into every listing that names its server, so it is bounded as a
 * whole, not only page by page (each page is bounded by MCP_MAX_MESSAGE_BYTES as it is read, and a
 * server could page 1,000 of them into one list). A list past either bound is refused whole: a
 * partial list would be a different server.
 */
import { UpstreamError } from './errors.js'

/** Items one list may hold (pins keep as many tools per server). */
const MAX_LIST_ITEMS = 5000

/**
 * `items` and their size as JSON (bytes), or an UpstreamError naming the bound they pass:
 * MAX_LIST_ITEMS, or `maxBytes` of JSON for all pages together.
 */
export function keptList<T> (items: T[], what: 'tools' | 'resources' | 'resource templates' | 'prompts', maxBytes: number): { items: T[], bytes: number } {
  if (items.length > MAX_LIST_ITEMS) {
    throw new UpstreamError('GW_UPSTREAM_ERROR', `The MCP server lists ${items.length} ${what}; at most ${MAX_LIST_ITEMS} are kept of one server`)
  }
  const bytes = Buffer.byteLength(JSON.stringify(items))
  if (bytes > maxBytes) {
    throw new UpstreamError('GW_UPSTREAM_ERROR', `The MCP server's ${what} take ${bytes} bytes as JSON (all pages together); at most ${maxBytes} (MCP_MAX_MESSAGE_BYTES) are kept`)
  }
  return { items, bytes }
}

/**
 * The lists kept for one owner's servers together (a tenant; each global server is its own owner):
 * tools, and resources, resource templates and prompts for /mcp, in bytes of JSON, bounded by
 * MCP_TENANT_LIST_BYTES: each server's list is bounded, but
 * a tenant has up to TENANT_MAX_SERVERS of them, and the pool keeps one per client (200 lists of
 * 4 MB were ~2 GB of heap for one tenant). A client's list is charged when it is kept and given
 * back when the client closes (idle, evicted, its server removed or changed).
 */
export class KeptLists {
  readonly maxBytes: number
  readonly #byOwner = new Map<string, Map<string, number>>()

  constructor (maxBytes: number) {
    this.maxBytes = maxBytes
  }

  /** Bytes kept for `owner` now. */
  bytesOf (owner: string): number {
    let sum = 0
    for (const bytes of this.#byOwner.get(owner)?.values() ?? []) sum += bytes
    return sum
  }

  /** `holder` (a client) keeps `bytes` for `owner` instead of what it kept; refused (UpstreamError, nothing changed) past the bound. */
  keep (owner: string, holder: string, bytes: number): void {
    const held = this.#byOwner.get(owner)
    const total = this.bytesOf(owner) - (held?.get(holder) ?? 0) + bytes
    if (total > this.maxBytes) {
      throw new UpstreamError('GW_UPSTREAM_ERROR', `The list was not kept: the tenant's servers would keep ${total} bytes of lists together; at most ${this.maxBytes} (MCP_TENANT_LIST_BYTES)`)
    }
    if (held === undefined) this.#byOwner.set(owner, new Map([[holder, bytes]]))
    else held.set(holder, bytes)
  }

  /** `client` keeps nothing any more: its tool list (`holder` = its id) and its other lists (`<id>\n<method>`). */
  release (owner: string, client: string): void {
    const held = this.#byOwner.get(owner)
    if (held === undefined) return
    for (const holder of held.keys()) {
      if (holder === client || holder.startsWith(`${client}\n`)) held.delete(holder)
    }
    if (held.size === 0) this.#byOwner.delete(owner)
  }
}
