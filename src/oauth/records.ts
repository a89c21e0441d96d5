/**
 * The connection records (provider.ts ConnectionRecord) as the rest of src/oauth reads them:
 * sealed with SECRETS_KEY on the way to the store (bound to their tenant and server: a record
 * copied to another key does not open), opened on the way back, and kept a few seconds in
 * memory so that a token is not read from Redis before every request to its server.
 */
import type { SecretBox } from '../registry/secrets.js'
import type { RegistryScope } from '../registry/types.js'
import type { ConnectionRecord } from './provider.js'
import { scopeKey } from './store.js'
import type { OAuthStore } from './store.js'

/** How long a record read from the store is used without reading it again (another instance may have refreshed). */
const CACHE_MS = 5000
const CACHE_MAX = 10_000

export class ConnectionRecords {
  readonly #store: OAuthStore
  readonly #box: SecretBox
  readonly #now: () => number
  readonly #cache = new Map<string, { record: ConnectionRecord | undefined, at: number }>()

  constructor (store: OAuthStore, box: SecretBox, now: () => number) {
    this.#store = store
    this.#box = box
    this.#now = now
  }

  /** The record, from memory when read less than CACHE_MS ago; `fresh` reads the store. A record that does not open counts as none. */
  async load (scope: RegistryScope, serverId: string, fresh = false): Promise<ConnectionRecord | undefined> {
    const key = `${scopeKey(scope)}/${serverId}`
    const cached = this.#cache.get(key)
    if (!fresh && cached !== undefined && this.#now() - cached.at < CACHE_MS) return cached.record
    const sealed = await this.#store.get(scope, serverId)
    let record: ConnectionRecord | undefined
    if (sealed !== undefined) {
      const opened = this.#box.openValue(sealed, aad(scope, serverId))
      record = opened.ok ? parse(opened.value) : undefined
    }
    this.#remember(key, record)
    return record
  }

  async save (scope: RegistryScope, serverId: string, record: ConnectionRecord): Promise<void> {
    record.updatedAt = this.#now()
    await this.#store.put(scope, serverId, this.#box.sealValue(JSON.stringify(record), aad(scope, serverId)))
    this.#remember(`${scopeKey(scope)}/${serverId}`, record)
  }

  async delete (scope: RegistryScope, serverId: string): Promise<void> {
    await this.#store.delete(scope, serverId)
    this.#remember(`${scopeKey(scope)}/${serverId}`, undefined)
  }

  #remember (key: string, record: ConnectionRecord | undefined): void {
    this.#cache.delete(key)
    if (this.#cache.size >= CACHE_MAX) this.#cache.delete(this.#cache.keys().next().value as string)
    this.#cache.set(key, { record, at: this.#now() })
  }
}

function aad (scope: RegistryScope, serverId: string): string {
  return `oauth\n${scopeKey(scope)}/${serverId}`
}

function parse (text: string): ConnectionRecord | undefined {
  try {
    const value = JSON.parse(text) as ConnectionRecord
    return typeof value === 'object' && value !== null && typeof value.serverUrl === 'string' ? value : undefined
  } catch {
    return undefined
  }
}
