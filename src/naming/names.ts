import { createHash } from 'node:crypto'

/**
 * Tool naming (docs/ARCHITECTURE.md#names). Pure functions: the router and the catalog build every exposed
 * name with these, and /invoke resolves names through the catalog, never by splitting.
 */

/** userIds and serverIds: no underscore, so `_tool_` / `_service_` always end the id. */
export const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9-]{0,63}$/

/** What OpenAI and Anthropic accept, and starting with a letter. */
export const WIRE_NAME_PATTERN = /^[a-zA-Z][a-zA-Z0-9_-]{0,63}$/

const WIRE_NAME_MAX = 64
const HASH_CHARS = 8

export function isValidId (id: string): boolean {
  return ID_PATTERN.test(id)
}

export function isWireName (name: string): boolean {
  return WIRE_NAME_PATTERN.test(name)
}

/** First 8 hex chars of the SHA-256 of `text`: short, stable, and collision-resistant enough for names. */
export function shortHash (text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, HASH_CHARS)
}

/**
 * The name a model sees. A natural name that already fits is returned unchanged; otherwise
 * invalid characters become `_`, a `tool_` prefix is added when it does not start with a
 * letter, and the result is cut to leave room for `_` + a hash of the FULL natural name, so
 * two natural names never share a wire name (unless their hashes collide).
 */
export function toWireName (natural: string): string {
  if (WIRE_NAME_PATTERN.test(natural)) return natural
  let base = natural.replace(/[^a-zA-Z0-9_-]/g, '_')
  if (!/^[a-zA-Z]/.test(base)) base = `tool_${base}`
  const suffix = `_${shortHash(natural)}`
  return base.slice(0, WIRE_NAME_MAX - suffix.length) + suffix
}

/** `user_{userId}_tool_{toolName}`: the natural tier-2 name (may need toWireName). */
export function encodeUserToolName (userId: string, toolName: string): string {
  return `user_${userId}_tool_${toolName}`
}

/** A tenant server's prompt as /mcp exposes it: `user_{userId}_prompt_{promptName}` (as encodeUserToolName for tools). */
export function encodeUserPromptName (userId: string, promptName: string): string {
  return `user_${userId}_prompt_${promptName}`
}

/** `user_{userId}_service_{serverId}`: AI4J's client key, also accepted in `mcp=`. */
export function encodeUserServiceName (userId: string, serverId: string): string {
  return `user_${userId}_service_${serverId}`
}

function parseUserEncoded (name: string, marker: 'tool' | 'service'): { userId: string, rest: string } | undefined {
  if (!name.startsWith('user_')) return undefined
  const afterPrefix = name.slice('user_'.length)
  // userIds never contain `_`, so the first `_` ends the userId; the tool name may contain `_tool_`.
  const end = afterPrefix.indexOf('_')
  if (end <= 0) return undefined
  const userId = afterPrefix.slice(0, end)
  if (!ID_PATTERN.test(userId)) return undefined
  const tail = afterPrefix.slice(end)
  const sep = `_${marker}_`
  if (!tail.startsWith(sep)) return undefined
  const rest = tail.slice(sep.length)
  if (rest.length === 0) return undefined
  return { userId, rest }
}

/** Parses `user_{userId}_tool_{toolName}`; `user_42_tool_get_tool_info` is tool `get_tool_info` of user `42`. */
export function parseUserToolName (name: string): { userId: string, toolName: string } | undefined {
  const parsed = parseUserEncoded(name, 'tool')
  return parsed && { userId: parsed.userId, toolName: parsed.rest }
}

/** Parses `user_{userId}_service_{serverId}`; the serverId must itself be a valid id. */
export function parseUserServiceName (name: string): { userId: string, serverId: string } | undefined {
  const parsed = parseUserEncoded(name, 'service')
  if (!parsed || !ID_PATTERN.test(parsed.rest)) return undefined
  return { userId: parsed.userId, serverId: parsed.rest }
}

/** `{serverId}__{toolName}`: every MCP tool's qualified natural name. */
export function qualifiedName (serverId: string, toolName: string): string {
  return `${serverId}__${toolName}`
}

/**
 * AI4J's generateApiFunctionName, fixed: join with `_`, replace chars outside
 * `[a-zA-Z0-9_-]`, collapse and trim `_`, prefix `tool_` when empty or not starting with a
 * letter, THEN shorten to 64 (AI4J truncates before prefixing and can reach 69 chars).
 */
export function apiFunctionName (service: string, tool: string): string {
  let name = `${service}_${tool}`
    .replace(/[^a-zA-Z0-9_-]/g, '_')
    .replace(/_+/g, '_')
    .replace(/^_+|_+$/g, '')
  if (name.length === 0 || !/^[a-zA-Z]/.test(name)) name = `tool_${name}`
  if (name.length <= WIRE_NAME_MAX) return name
  const suffix = `_${shortHash(name)}`
  return name.slice(0, WIRE_NAME_MAX - suffix.length) + suffix
}
