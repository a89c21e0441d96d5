/** Models emit arguments as a JSON string; an empty string means no arguments. */
export function parseArguments (raw: Record<string, unknown> | string): { ok: true, value: Record<string, unknown> } | { ok: false, message: string } {
  if (typeof raw !== 'string') return { ok: true, value: raw }
  if (raw.trim() === '') return { ok: true, value: {} }
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
