/**
 * An oidc-provider storage adapter over one Map per authorization server. oidc-provider's own
 * fallback keeps every provider's state in one module-level store and warns on each start; two
 * fixtures in one test process must not share codes, grants or sessions.
 */

type Payload = Record<string, unknown> & { grantId?: string, uid?: string, userCode?: string, consumed?: number }

interface Entry { payload: Payload, expiresAt: number }

/** oidc-provider's adapter interface (one instance per model name). */
interface Adapter {
  upsert: (id: string, payload: Payload, expiresIn?: number) => Promise<void>
  find: (id: string) => Promise<Payload | undefined>
  findByUid: (uid: string) => Promise<Payload | undefined>
  findByUserCode: (userCode: string) => Promise<Payload | undefined>
  consume: (id: string) => Promise<void>
  destroy: (id: string) => Promise<void>
  revokeByGrantId: (grantId: string) => Promise<void>
}

/** The adapter factory, plus `forget(models)`: drops every stored entry of those models. */
type MemoryAdapterFactory = ((model: string) => Adapter) & { forget: (models: string[]) => void }

/**
 * The `adapter` option of a Provider: a factory of per-model adapters over a store of its own.
 * Without `keepClientScope`, a stored client loses its `scope`: oidc-provider then lets it ask for
 * any scope the server supports (authorization-server.ts says why).
 */
export function memoryAdapter ({ keepClientScope }: { keepClientScope: boolean }): MemoryAdapterFactory {
  const entries = new Map<string, Entry>()
  const live = (key: string): Entry | undefined => {
    const entry = entries.get(key)
    if (entry !== undefined && entry.expiresAt <= Date.now()) {
      entries.delete(key)
      return undefined
    }
    return entry
  }
  const factory = (model: string): Adapter => {
    const key = (id: string): string => `${model}:${id}`
    const findBy = (field: 'uid' | 'userCode', value: string): Payload | undefined => {
      for (const [k, e] of entries) {
        if (k.startsWith(`${model}:`) && e.payload[field] === value && live(k) !== undefined) return e.payload
      }
      return undefined
    }
    return {
      upsert: async (id, payload, expiresIn) => {
        if (model === 'Client' && !keepClientScope) delete payload.scope
        entries.set(key(id), { payload, expiresAt: typeof expiresIn === 'number' ? Date.now() + expiresIn * 1000 : Infinity })
      },
      find: async (id) => live(key(id))?.payload,
      findByUid: async (uid) => findBy('uid', uid),
      findByUserCode: async (userCode) => findBy('userCode', userCode),
      consume: async (id) => {
        const entry = live(key(id))
        if (entry !== undefined) entry.payload.consumed = Math.floor(Date.now() / 1000)
      },
      destroy: async (id) => { entries.delete(key(id)) },
      // Every model's tokens of the grant go, as a revoked grant (or a replayed refresh token) requires.
      revokeByGrantId: async (grantId) => {
        for (const [k, e] of entries) if (e.payload.grantId === grantId) entries.delete(k)
      }
    }
  }
  return Object.assign(factory, {
    forget: (models: string[]) => {
      for (const k of [...entries.keys()]) if (models.includes(k.slice(0, k.indexOf(':')))) entries.delete(k)
    }
  })
}
