import { HttpError } from '../errors.js'
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
