/**
 * The `pins` document of a registry scope (a tenant's, or the global scope's for calls without a
 * tenant): per remote server, the digest of each tool's definition the scope trusts. Stored as
 * arrays, never as objects keyed by names a server chose (`__proto__` is a fine tool name).
 */

/** The two tiers whose tools are pinned (TIER_TRAITS.pinned). */
export type PinnedRoute = 'user_mcp' | 'global_mcp'

/** A different definition seen since the pin: reported (and journaled) once per digest, kept for the diff. */
export interface PendingDefinition {
  digest: string
  definition: string | null
  seenAt: string
}

export interface Pin {
  digest: string
  /** The definition's canonical JSON when it is at most DEFINITION_MAX_CHARS (for diffs); null beyond. */
  definition: string | null
  pinnedAt: string
  pending: PendingDefinition | null
}

export interface ServerPins {
  route: PinnedRoute
  serverId: string
  tools: Map<string, Pin>
}

/** The servers of a scope by `serverKey`, in the order they were last pinned (the bound drops the first). */
export type PinSet = Map<string, ServerPins>

/** Definitions kept for a diff: one at most this long, and all of a document's together at most DOCUMENT_DEFINITION_CHARS. */
export const DEFINITION_MAX_CHARS = 16 * 1024
const DOCUMENT_DEFINITION_CHARS = 512 * 1024
/** Servers per document (beyond: the least recently pinned is forgotten) and pinned tools per server (beyond: not pinned). */
export const MAX_SERVERS = 200
export const MAX_TOOLS_PER_SERVER = 5000
/**
 * Tools one scope pins at most, over its servers: a scope keeps ~2x what its servers may offer at once
 * (MCP_TENANT_LIST_ITEMS, 10,000 by default). Without it, servers offering new names at each listing grew
 * the document toward 200 x 5,000 pins (~150 MB, read and written whole at each change). Past it, new tools
 * are not pinned (as past MAX_TOOLS_PER_SERVER); the pins held are never pushed out by new names.
 */
export const MAX_PINS_PER_SCOPE = 20_000

export function serverKey (route: PinnedRoute, serverId: string): string {
  return `${route}:${serverId}`
}

/** The stored value: `{servers: [{route, serverId, tools: [{name, digest, definition, pinnedAt, pending}]}]}`. */
export function serializePins (set: PinSet): unknown {
  return {
    servers: [...set.values()].map((s) => ({
      route: s.route,
      serverId: s.serverId,
      tools: [...s.tools].map(([name, pin]) => ({ name, ...pin }))
    }))
  }
}

/** A stored document back into a PinSet; what is not a well-formed pin is skipped (it is pinned again when next seen). */
export function parsePins (value: unknown): PinSet {
  const set: PinSet = new Map()
  const servers = (value as { servers?: unknown } | null)?.servers
  if (!Array.isArray(servers)) return set
  let pinned = 0
  for (const raw of servers.slice(0, MAX_SERVERS)) {
    const s = raw as { route?: unknown, serverId?: unknown, tools?: unknown } | null
    if (s === null || typeof s !== 'object' || (s.route !== 'user_mcp' && s.route !== 'global_mcp')) continue
    if (typeof s.serverId !== 'string' || !Array.isArray(s.tools)) continue
    const tools = new Map<string, Pin>()
    for (const t of s.tools.slice(0, MAX_TOOLS_PER_SERVER)) {
      if (pinned >= MAX_PINS_PER_SCOPE) break
      const pin = parsePin(t)
      if (pin !== undefined && !tools.has(pin.name)) pinned++
      if (pin !== undefined) tools.set(pin.name, pin.pin)
    }
    set.set(serverKey(s.route, s.serverId), { route: s.route, serverId: s.serverId, tools })
  }
  return set
}

function parsePin (raw: unknown): { name: string, pin: Pin } | undefined {
  const t = raw as Record<string, unknown> | null
  if (t === null || typeof t !== 'object' || typeof t.name !== 'string' || typeof t.digest !== 'string' || typeof t.pinnedAt !== 'string') return undefined
  const p = t.pending as Record<string, unknown> | null | undefined
  const pending = p !== null && typeof p === 'object' && typeof p.digest === 'string' && typeof p.seenAt === 'string'
    ? { digest: p.digest, definition: typeof p.definition === 'string' ? p.definition : null, seenAt: p.seenAt }
    : null
  return { name: t.name, pin: { digest: t.digest, definition: typeof t.definition === 'string' ? t.definition : null, pinnedAt: t.pinnedAt, pending } }
}

/** Characters of definitions a set keeps (the document bound). */
export function definitionChars (set: PinSet): number {
  let chars = 0
  for (const s of set.values()) {
    for (const pin of s.tools.values()) chars += (pin.definition?.length ?? 0) + (pin.pending?.definition?.length ?? 0)
  }
  return chars
}

/** A definition to keep, or null when it is too long or the document has no room left for it. */
export function keptDefinition (json: string, budget: { chars: number }): string | null {
  if (json.length > DEFINITION_MAX_CHARS || budget.chars + json.length > DOCUMENT_DEFINITION_CHARS) return null
  budget.chars += json.length
  return json
}
