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

/** `items`, or an UpstreamError naming the bound they pass: MAX_LIST_ITEMS, or `maxBytes` of JSON for all pages together. */
export function keptList<T> (items: T[], what: 'tools' | 'resources' | 'resource templates' | 'prompts', maxBytes: number): T[] {
  if (items.length > MAX_LIST_ITEMS) {
    throw new UpstreamError('GW_UPSTREAM_ERROR', `The MCP server lists ${items.length} ${what}; at most ${MAX_LIST_ITEMS} are kept of one server`)
  }
  if (maxBytes !== Infinity) {
    const bytes = Buffer.byteLength(JSON.stringify(items))
    if (bytes > maxBytes) {
      throw new UpstreamError('GW_UPSTREAM_ERROR', `The MCP server's ${what} take ${bytes} bytes as JSON (all pages together); at most ${maxBytes} (MCP_MAX_MESSAGE_BYTES) are kept`)
    }
  }
  return items
}
