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
 * A list not kept because it passes a bound: the server's own list (too many items, too many bytes)
 * or the tenant's lists together. The tool list cache remembers it like a list (tool-cache.ts): asking
 * the server again would fetch and parse the whole list to refuse it again. `stillHolds` says whether
 * the refusal still stands for reasons other than the list (the tenant's room).
 */
export class ListRefusedError extends UpstreamError {
  readonly stillHolds: () => boolean
  constructor (message: string, stillHolds: () => boolean = () => true) {
    super('GW_UPSTREAM_ERROR', message)
    this.stillHolds = stillHolds
  }
}

/**
 * `items` and their size as JSON (bytes), or an UpstreamError naming the bound they pass:
 * MAX_LIST_ITEMS, or `maxBytes` of JSON for all pages together.
 */
export function keptList<T> (items: T[], what: 'tools' | 'resources' | 'resource templates' | 'prompts', maxBytes: number): { items: T[], bytes: number } {
  if (items.length > MAX_LIST_ITEMS) {
    throw new ListRefusedError(`The MCP server lists ${items.length} ${what}; at most ${MAX_LIST_ITEMS} are kept of one server`)
  }
  const bytes = Buffer.byteLength(JSON.stringify(items))
  if (bytes > maxBytes) {
    throw new ListRefusedError(`The MCP server's ${what} take ${bytes} bytes as JSON (all pages together); at most ${maxBytes} (MCP_MAX_MESSAGE_BYTES) are kept`)
  }
  return { items, bytes }
}

/** A list a client keeps: its size as JSON and its items. */
interface Kept { bytes: number, items: number }

/**
 * The lists kept for one owner's servers together (a tenant; each global server is its own owner):
 * tools, and resources, resource templates and prompts for /mcp, bounded by MCP_TENANT_LIST_BYTES
 * of JSON in all and MCP_TENANT_LIST_ITEMS items of each kind. Each server's list is bounded, but a
 * tenant has up to TENANT_MAX_SERVERS of them, and the pool keeps one per client: 200 lists of 4 MB
 * were ~2 GB of heap for one tenant, and 20 lists of 5,000 small tools (100,000 tools in 32 MB) made
 * each of its listings hold the event loop for over a second (every listing merges, polices, pins and
 * renders each tool). A client's list is charged when it is kept and given back when the client
 * closes (idle, evicted, its server removed or changed).
 */
export class KeptLists {
  readonly maxBytes: number
  readonly maxItems: number
  /** Per owner, per holder (a client's id for its tools, `<id>\n<method>` for its other lists): what it keeps. */
  readonly #byOwner = new Map<string, Map<string, Kept>>()
  /** Per owner holding lists, when it last made room (a stamp of #stamp): a refusal before it no longer stands. */
  readonly #madeRoom = new Map<string, number>()
  #stamp = 0

  constructor (maxBytes: number, maxItems: number = Number.POSITIVE_INFINITY) {
    this.maxBytes = maxBytes
    this.maxItems = maxItems
  }

  /** Bytes kept for `owner` now. */
  bytesOf (owner: string): number {
    let sum = 0
    for (const kept of this.#byOwner.get(owner)?.values() ?? []) sum += kept.bytes
    return sum
  }

  /**
   * `holder` (a client) keeps `bytes` of JSON holding `items` for `owner` instead of what it kept;
   * refused (UpstreamError, nothing changed) past either bound.
   */
  keep (owner: string, holder: string, bytes: number, items = 0): void {
    const held = this.#byOwner.get(owner)
    const previous = held?.get(holder)
    const total = this.bytesOf(owner) - (previous?.bytes ?? 0) + bytes
    if (total > this.maxBytes) {
      throw this.#refusal(owner, `The list was not kept: the tenant's servers would keep ${total} bytes of lists together; at most ${this.maxBytes} (MCP_TENANT_LIST_BYTES)`)
    }
    const kind = kindOf(holder)
    let sameKind = items
    for (const [other, kept] of held ?? []) if (other !== holder && kindOf(other) === kind) sameKind += kept.items
    if (sameKind > this.maxItems) {
      const what = KIND_NAMES[kind] ?? 'items'
      throw this.#refusal(owner, `The list was not kept: the tenant's servers would keep ${sameKind} ${what} together; at most ${this.maxItems} (MCP_TENANT_LIST_ITEMS)`)
    }
    if (previous !== undefined && (bytes < previous.bytes || items < previous.items)) this.#madeRoom.set(owner, ++this.#stamp)
    if (held === undefined) this.#byOwner.set(owner, new Map([[holder, { bytes, items }]]))
    else held.set(holder, { bytes, items })
  }

  /** A refusal for `owner`'s room: it stands until the owner makes room (a list released or smaller). */
  #refusal (owner: string, message: string): ListRefusedError {
    const stamp = this.#stamp
    return new ListRefusedError(message, () => this.#byOwner.has(owner) && (this.#madeRoom.get(owner) ?? 0) <= stamp)
  }

  /** `client` keeps nothing any more: its tool list (`holder` = its id) and its other lists (`<id>\n<method>`). */
  release (owner: string, client: string): void {
    const held = this.#byOwner.get(owner)
    if (held === undefined) return
    for (const holder of held.keys()) {
      if (holder === client || holder.startsWith(`${client}\n`)) held.delete(holder)
    }
    this.#madeRoom.set(owner, ++this.#stamp)
    if (held.size === 0) {
      this.#byOwner.delete(owner)
      this.#madeRoom.delete(owner)
    }
  }
}

const KIND_NAMES: Record<string, string> = {
  'tools/list': 'tools', 'resources/list': 'resources', 'resources/templates/list': 'resource templates', 'prompts/list': 'prompts'
}

/** The kind of list a holder keeps: the method after its client's id, or tools/list for the id alone. */
function kindOf (holder: string): string {
  const newline = holder.indexOf('\n')
  return newline < 0 ? 'tools/list' : holder.slice(newline + 1)
}
