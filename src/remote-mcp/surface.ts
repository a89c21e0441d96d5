/**
 * Resources, resource templates, prompts and completion of one upstream server, over a pooled
 * connection's v2 Client (pooled-client.ts runs these with its connect, breaker and error
 * classification). A list walks every page (the Client's no-cursor form, bounded by its
 * `listMaxPages`), and is empty when the server does not declare the capability; completion
 * of a server without `completions` is an empty completion.
 */
import { CLIENT_CAPABILITIES_META_KEY } from '@modelcontextprotocol/client'
import type { Client } from '@modelcontextprotocol/client'
import * as z from 'zod'
import { keptList, ListRefusedError } from './list-bounds.js'
import { encodeHeaderValue } from './mcp-headers.js'
import { TASKS_EXTENSION } from '../routing/tasks-extension.js'
import type { SurfaceRequest } from '../routing/source.js'

type ListMethod = 'resources/list' | 'resources/templates/list' | 'prompts/list'

export function isListRequest (req: SurfaceRequest): req is Extract<SurfaceRequest, { method: ListMethod }> {
  return req.method === 'resources/list' || req.method === 'resources/templates/list' || req.method === 'prompts/list'
}

/** How a list is bounded: `maxBytes` (MCP_MAX_MESSAGE_BYTES) for the whole list, and who is told its size as JSON and its items. */
export interface ListLimits {
  maxBytes: number
  onBytes: (bytes: number, items: number) => void
}

/**
 * One request on the client within `timeout` ms (the whole walk, for a list), aborted by `signal`.
 * A list is bounded as a whole (list-bounds.ts), and its size and items reported to `lists.onBytes`.
 */
export async function surfaceOnce (client: Client, req: SurfaceRequest, timeout: number, signal: AbortSignal, lists?: ListLimits): Promise<unknown> {
  const caps = client.getServerCapabilities()
  const bounded = AbortSignal.any([signal, AbortSignal.timeout(timeout)])
  const options = { timeout, signal: bounded }
  const kept = <T>(items: T[], what: Parameters<typeof keptList>[1]): T[] => {
    const k = keptList(items, what, lists?.maxBytes ?? Infinity)
    lists?.onBytes(k.bytes, k.items.length)
    return k.items
  }
  switch (req.method) {
    case 'resources/list':
      if (caps?.resources === undefined) return []
      return kept((await client.listResources(undefined, { ...options, cacheMode: 'bypass' })).resources, 'resources')
    case 'resources/templates/list':
      if (caps?.resources === undefined) return []
      return kept((await client.listResourceTemplates(undefined, { ...options, cacheMode: 'bypass' })).resourceTemplates, 'resource templates')
    case 'prompts/list':
      if (caps?.prompts === undefined) return []
      return kept((await client.listPrompts(undefined, { ...options, cacheMode: 'bypass' })).prompts, 'prompts')
    // A 2026-07-28 server's input_required is handed back as it came (the caller passes it on, or cannot ask).
    case 'resources/read':
      return await client.readResource(req.params as Parameters<Client['readResource']>[0], { ...options, cacheMode: 'bypass', allowInputRequired: true })
    case 'prompts/get':
      return await client.getPrompt(req.params as Parameters<Client['getPrompt']>[0], { ...options, allowInputRequired: true })
    case 'completion/complete':
      if (caps?.completions === undefined) return { completion: { values: [] } }
      return await client.complete(req.params as Parameters<Client['complete']>[0], options)
    case 'tasks/get':
    case 'tasks/update':
    case 'tasks/cancel': {
      // Each request declares the extension (SEP-2663 gates the task methods on it, per request),
      // and its Mcp-Name is the taskId (SEP-2663's HTTP binding; set here, whichever transport).
      const params = { ...req.params, _meta: { [CLIENT_CAPABILITIES_META_KEY]: { extensions: { [TASKS_EXTENSION]: {} } } } }
      return await client.request({ method: req.method, params }, ANY_RESULT, { ...options, headers: { 'mcp-name': encodeHeaderValue(req.params.taskId) } })
    }
  }
}

/** The task methods' results are passed on as the server sent them (the SDK has no schema of them). */
const ANY_RESULT = z.looseObject({})

/**
 * A list asked for `fresh` (by a read that missed the cached lists: the server may have added the
 * resource or prompt since) is asked of the server only when it is older than this. Otherwise a client
 * reading unknown URIs in a loop made every server of its allow-list, global ones included, send its
 * whole lists at each read, for the gateway to parse and measure.
 */
export const FRESH_FLOOR_MS = 5000

/** One kept list: its items, or the refusal of the last fetch for a bound (list-bounds.ts), and when. */
interface Slot { at: number, items?: unknown[], refused?: ListRefusedError }

/**
 * The last lists of one client, each reused for `ttlMs` (reads route by them; a miss asks again with
 * `fresh`, at most once per FRESH_FLOOR_MS). One fetch of a list at a time, shared by its callers; a
 * list refused for a bound is remembered as a list is, so it is not fetched and parsed whole again
 * only to be refused again (as the tool list's refusal, tool-cache.ts).
 */
export class SurfaceLists {
  readonly #lists = new Map<ListMethod, Slot>()
  readonly #loading = new Map<ListMethod, Promise<unknown[]>>()

  /** The list while young enough (`ttlMs`, FRESH_FLOOR_MS at most when `fresh`); a remembered refusal that still holds is thrown. */
  cached (method: ListMethod, ttlMs: number, fresh: boolean, now = Date.now()): unknown[] | undefined {
    const slot = this.#lists.get(method)
    if (slot === undefined || now - slot.at >= (fresh ? Math.min(ttlMs, FRESH_FLOOR_MS) : ttlMs)) return undefined
    if (slot.refused === undefined) return slot.items
    if (slot.refused.stillHolds()) throw slot.refused
    return undefined
  }

  /** Single-flight fetch of a list; the list (or its refusal) is kept when `keep()` still holds once it lands. */
  load (method: ListMethod, fetch: () => Promise<unknown[]>, keep: () => boolean): Promise<unknown[]> {
    let loading = this.#loading.get(method)
    if (loading === undefined) {
      loading = this.#load(method, fetch, keep).finally(() => { this.#loading.delete(method) })
      this.#loading.set(method, loading)
    }
    return loading
  }

  async #load (method: ListMethod, fetch: () => Promise<unknown[]>, keep: () => boolean): Promise<unknown[]> {
    let items: unknown[]
    try {
      items = await fetch()
    } catch (err) {
      if (err instanceof ListRefusedError && keep()) this.#lists.set(method, { at: Date.now(), refused: err })
      throw err
    }
    if (keep()) this.#lists.set(method, { at: Date.now(), items })
    return items
  }
}
