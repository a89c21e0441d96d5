import { createHash } from 'node:crypto'

/**
 * Where the tools `tool_search` found for an /mcp client are kept, so that its search-mode
 * listing shows them (README "Tool search": an MCP host lets its model call only listed tools).
 * A set per key (tenant, API key, allow-list, pinned), the newest `max` names, expiring `ttlMs`
 * after its last change. The Redis store (cluster/working-sets.ts) shares them between instances.
 */
export interface WorkingSetStore {
  /** Adds names, keeps the newest `max`, restarts the expiry; true when a name was new to the set. */
  add: (key: string, names: readonly string[], max: number, ttlMs: number) => Promise<boolean>
  get: (key: string) => Promise<string[]>
}

/** Found tools kept per /mcp client and allow-list: enough for a task, few enough to keep a listing short. */
export const WORKING_SET_MAX = 32
export const WORKING_SET_TTL_MS = 60 * 60 * 1000

/** The store key of a working set: a hash, so no tenant text or allow-list reaches a key name. */
export function workingSetKey (parts: {
  tenant: string | undefined
  keyId: string | undefined
  functions: readonly string[]
  mcp: readonly string[]
  pinned: readonly string[]
}): string {
  const named = JSON.stringify([parts.tenant ?? null, parts.keyId ?? null, parts.functions, parts.mcp, parts.pinned])
  return createHash('sha256').update(named).digest('base64url')
}

/** Working sets in this process; at most `maxKeys` sets (the least recently changed go first). */
export class MemoryWorkingSets implements WorkingSetStore {
  readonly #sets = new Map<string, { names: string[], expiresAt: number }>()
  readonly #maxKeys: number
  readonly #now: () => number

  constructor (opts: { maxKeys?: number, now?: () => number } = {}) {
    this.#maxKeys = opts.maxKeys ?? 10_000
    this.#now = opts.now ?? Date.now
  }

  async add (key: string, names: readonly string[], max: number, ttlMs: number): Promise<boolean> {
    const current = await this.get(key)
    const added = names.filter((n) => !current.includes(n))
    // Newest last: a name found again moves to the end, so it is the last to go.
    const kept = [...current.filter((n) => !names.includes(n)), ...names].slice(-max)
    this.#sets.delete(key)
    this.#sets.set(key, { names: kept, expiresAt: this.#now() + ttlMs })
    while (this.#sets.size > this.#maxKeys) this.#sets.delete(this.#sets.keys().next().value as string)
    return added.length > 0
  }

  async get (key: string): Promise<string[]> {
    const set = this.#sets.get(key)
    if (set === undefined) return []
    if (set.expiresAt <= this.#now()) {
      this.#sets.delete(key)
      return []
    }
    return set.names
  }
}
