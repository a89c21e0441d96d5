import { HttpError } from '../errors.js'
import { parseUserServiceName, parseUserToolName } from '../naming/names.js'
import type { Caller } from './types.js'

/**
 * The tenant a request acts for. An admin may act for any userId (or none); a tenant-bound
 * caller acts only as itself, and naming another userId anywhere is a 403.
 */
export function actingUserId (caller: Caller, requested: string | undefined): string | undefined {
  if (caller.isAdmin) return requested
  if (requested !== undefined && requested !== caller.userId) {
    throw new HttpError('GW_TENANT_MISMATCH', 'The credentials are bound to another tenant than the requested userId')
  }
  return caller.userId
}

/** The names of a tool request that may encode a tenant. */
export interface TenantNames {
  /** The invoked tool's name (`user_{u}_tool_{t}` encodes u). */
  toolName?: string | undefined
  /** `mcp=` or `allow.mcp` entries (`user_{u}_service_{s}` encodes u). */
  mcp?: readonly string[] | undefined
}

/**
 * The tenant a tool request acts for: one rule for listing (GET /tools) and invoking (/invoke,
 * /invoke/batch), so a name that lists also invokes and the reverse.
 *
 * - A tenant key acts as itself. A requested userId or an encoded name of another tenant is 403
 *   `GW_TENANT_MISMATCH`: a tenant key never reaches another tenant.
 * - An admin (every caller in open mode, which has no keys) may act for any tenant, so an encoded
 *   name is just another way to say which: without a userId, the tenant the names encode is the
 *   one the request acts for. Names must agree with each other and with a requested userId;
 *   otherwise 403 `GW_TENANT_MISMATCH`, since one request acts for one tenant.
 */
export function toolRequestTenant (caller: Caller, requested: string | undefined, names: TenantNames): string | undefined {
  const userId = actingUserId(caller, requested)
  // Each encoded tenant with the first name that encodes it (for the message).
  const encoded = new Map<string, string>()
  const tool = names.toolName === undefined ? undefined : parseUserToolName(names.toolName)
  if (tool && names.toolName !== undefined) encoded.set(tool.userId, `Tool '${names.toolName}'`)
  for (const raw of names.mcp ?? []) {
    const id = raw.trim()
    const server = parseUserServiceName(id)
    if (server && !encoded.has(server.userId)) encoded.set(server.userId, `Server '${id}'`)
  }
  if (encoded.size === 0) return userId
  if (userId === undefined) {
    if (encoded.size > 1) throw new HttpError('GW_TENANT_MISMATCH', `The request names tools of more than one tenant (${[...encoded.values()].join(', ')}); one request acts for one tenant`)
    return encoded.keys().next().value as string
  }
  for (const [other, what] of encoded) {
    if (other !== userId) throw new HttpError('GW_TENANT_MISMATCH', `${what} belongs to another tenant than the request's`)
  }
  return userId
}
