/**
 * The request's allow-list as written (`functions=` and `mcp=`, comma lists or arrays) turned
 * into what the router resolves: group tokens expanded, blanks and duplicates dropped, server
 * selections split into plain ids and a tenant's own `user_{u}_service_{s}` ids. No I/O: which
 * names exist is the router's question (router.ts).
 */
import { HttpError } from '../errors.js'
import { BUILTIN_NAMES, BUILTIN_READONLY, META_TOOL_NAMES } from '../naming/builtin-names.js'
import { isValidId, parseUserServiceName } from '../naming/names.js'

export interface AllowList {
  functions?: readonly string[]
  mcp?: readonly string[]
}

/** A name of the allow-list that matched nothing. */
export interface Unresolved {
  /** `pinned`: a name of `pinned=` (search mode) that is not in the listing. */
  kind: 'function' | 'mcp' | 'pinned'
  name: string
  reason: string
}

/** Group tokens of `functions=`. */
const GROUPS: ReadonlyMap<string, readonly string[]> = new Map<string, readonly string[]>([
  ['@builtin', BUILTIN_NAMES],
  ['@builtin-readonly', BUILTIN_READONLY],
  // Code mode (SPEC 19): the script tool beside the tools it calls.
  ['@code', [META_TOOL_NAMES[1]]]
])

/** A query parameter's comma list: items trimmed, empty ones dropped; absent is empty. */
export function splitComma (value: string | undefined): string[] {
  if (value === undefined) return []
  return value.split(',').map((s) => s.trim()).filter((s) => s !== '')
}

/** Expands group tokens and removes duplicates, keeping the first occurrence's order. */
export function expandFunctionNames (names: readonly string[]): string[] {
  const out = new Set<string>()
  for (const raw of names) {
    const name = raw.trim()
    if (name === '') continue
    const group = GROUPS.get(name)
    if (group !== undefined) group.forEach((n) => out.add(n))
    else out.add(name)
  }
  return [...out]
}

/**
 * Splits `mcp=` into serverIds. The form `user_{u}_service_{s}` names tenant u's server s only
 * (never a global one) and must name the request's own tenant.
 */
export function parseServerSelection (
  ids: readonly string[],
  userId: string | undefined
): { serverIds: string[], userOnly: Set<string>, errors: Unresolved[] } {
  const serverIds: string[] = []
  const userOnly = new Set<string>()
  const errors: Unresolved[] = []
  for (const raw of ids) {
    const id = raw.trim()
    if (id === '') continue
    const encoded = parseUserServiceName(id)
    if (encoded) {
      if (encoded.userId !== userId) throw new HttpError('GW_TENANT_MISMATCH', `Server '${id}' belongs to another tenant than the request's`)
      userOnly.add(encoded.serverId)
      if (!serverIds.includes(encoded.serverId)) serverIds.push(encoded.serverId)
      continue
    }
    if (!isValidId(id)) {
      errors.push({ kind: 'mcp', name: id, reason: 'Not a valid serverId (^[A-Za-z0-9][A-Za-z0-9-]{0,63}$)' })
      continue
    }
    if (!serverIds.includes(id)) serverIds.push(id)
  }
  return { serverIds, userOnly, errors }
}
