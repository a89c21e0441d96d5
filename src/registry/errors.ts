import { ID_PATTERN } from '../naming/names.js'
import type { RegistryScope } from './types.js'

/**
 * The registry backend cannot be reached (connection refused or lost, command timed out).
 * The HTTP layer maps it to 503 GW_REGISTRY_UNAVAILABLE. The message names no host or key.
 */
export class RegistryUnavailableError extends Error {
  readonly code = 'GW_REGISTRY_UNAVAILABLE'
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
