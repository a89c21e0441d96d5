import { hasObjectWiderThan, MAX_OBJECT_MEMBERS } from './wide-json.js'

/**
 * Models emit arguments as a JSON string; an empty string means no arguments. A string holding an
 * object wider than MAX_OBJECT_MEMBERS is refused unread, as a body holding one is (wide-json.ts):
 * the body's own scan sees only a string.
 */
export function parseArguments (raw: Record<string, unknown> | string): { ok: true, value: Record<string, unknown> } | { ok: false, message: string } {
  if (typeof raw !== 'string') return { ok: true, value: raw }
  if (raw.trim() === '') return { ok: true, value: {} }
  if (hasObjectWiderThan(raw, MAX_OBJECT_MEMBERS)) {
    return { ok: false, message: `Invalid arguments: the JSON holds an object of more than ${MAX_OBJECT_MEMBERS} members (not read)` }
  }
  let parsed: unknown
  try {
    parsed = JSON.parse(raw)
  } catch (err) {
    return { ok: false, message: `Invalid arguments: not valid JSON (${(err as Error).message})` }
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    return { ok: false, message: 'Invalid arguments: the JSON must be an object' }
  }
  return { ok: true, value: parsed as Record<string, unknown> }
}
