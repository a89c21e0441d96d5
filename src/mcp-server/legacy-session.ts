/**
 * What a legacy /mcp client declared in `initialize`, kept without any state: the gateway's
 * answer to `initialize` carries an `Mcp-Session-Id` that holds the client's capabilities (those
 * that let a server ask it something: elicitation, sampling, roots), and the client sends it back
 * on every request, as the streamable HTTP transport requires. Any instance reads it; nothing has
 * to expire. It says only what the client said of itself, so it is not signed: a client that
 * forges one claims capabilities for its own calls, which it could have declared anyway. A value
 * that is not one of these (another server's, garbage) means: nothing declared.
 */
import { INPUT_CAPABILITIES } from '../routing/client-relay.js'

export { canBeAsked } from '../routing/client-relay.js'

const PREFIX = 'gs1.'
/** Longest session id read; a real one is well under it. */
const MAX_LENGTH = 2048

/** The session id for a client that declared `capabilities`. */
export function sessionIdFor (capabilities: unknown): string {
  return `${PREFIX}${Buffer.from(JSON.stringify(keptCapabilities(capabilities))).toString('base64url')}`
}

/** The capabilities a session id holds; {} for none, or for an id that is not one of the gateway's. */
export function capabilitiesOf (sessionId: string | null | undefined): Record<string, unknown> {
  if (typeof sessionId !== 'string' || !sessionId.startsWith(PREFIX) || sessionId.length > MAX_LENGTH) return {}
  try {
    return keptCapabilities(JSON.parse(Buffer.from(sessionId.slice(PREFIX.length), 'base64url').toString('utf8')))
  } catch {
    return {}
  }
}

/** A sub-capability's own boolean flags (e.g. elicitation.form.applyDefaults), nothing deeper. */
function subFlags (sub: Record<string, unknown>): Record<string, boolean> {
  const flags: Record<string, boolean> = {}
  for (const [key, value] of Object.entries(sub).slice(0, 8)) if (key.length <= 32 && value === true) flags[key] = true
  return flags
}

/** Only the capabilities that let a server ask, each an object (a sub-capability's flags as declared, bounded above). */
function keptCapabilities (capabilities: unknown): Record<string, unknown> {
  const kept: Record<string, unknown> = {}
  if (capabilities === null || typeof capabilities !== 'object') return kept
  const declared = capabilities as Record<string, unknown>
  for (const name of INPUT_CAPABILITIES) {
    const value = declared[name]
    if (value === null || typeof value !== 'object' || Array.isArray(value)) continue
    const flags: Record<string, unknown> = {}
    for (const [key, sub] of Object.entries(value as Record<string, unknown>).slice(0, 8)) {
      if (key.length > 32) continue
      flags[key] = sub !== null && typeof sub === 'object' && !Array.isArray(sub) ? subFlags(sub as Record<string, unknown>) : sub === true
    }
    kept[name] = flags
  }
  return kept
}
