import { ID_PATTERN } from '../naming/names.js'
import type { GwCode } from '../errors.js'
import type { RegistryScope } from './types.js'

/**
 * The registry backend cannot be reached (connection refused or lost, command timed out).
 * The HTTP layer maps it to 503 GW_REGISTRY_UNAVAILABLE. The message names no host or key.
 */
export class RegistryUnavailableError extends Error {
  readonly code = 'GW_REGISTRY_UNAVAILABLE' satisfies GwCode
  readonly statusCode = 503
  constructor (message = 'registry unavailable', options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'RegistryUnavailableError'
  }
}

export function isRegistryUnavailableError (err: unknown): err is RegistryUnavailableError {
  return err instanceof RegistryUnavailableError
}

/** Invalid ids reaching a store are bugs (routes validate first): fail loudly. */
export function assertScope (scope: RegistryScope): void {
  if (scope.kind === 'user' && !ID_PATTERN.test(scope.userId)) {
    throw new RangeError(`invalid userId for registry scope: ${JSON.stringify(scope.userId.slice(0, 80))}`)
  }
  if (scope.kind !== 'user' && scope.kind !== 'global') throw new RangeError('invalid registry scope')
}

export function assertServerId (serverId: string): void {
  if (!ID_PATTERN.test(serverId)) throw new RangeError(`invalid serverId: ${JSON.stringify(serverId.slice(0, 80))}`)
}

/** A sandbox uid range as the config parses it; anything else is a bug. Never includes root. */
export function assertUidRange (range: { first: number, last: number }): void {
  const ok = Number.isSafeInteger(range.first) && Number.isSafeInteger(range.last) &&
    range.first > 0 && range.first <= range.last && range.last < 2 ** 32 - 1
  if (!ok) throw new RangeError(`invalid sandbox uid range ${String(range.first)}-${String(range.last)}`)
}

/** The tenant key of a workspace: a userId, or `_` without one. */
export function assertTenant (tenant: string): void {
  if (tenant !== '_' && !ID_PATTERN.test(tenant)) throw new RangeError(`invalid tenant: ${JSON.stringify(tenant.slice(0, 80))}`)
}
