import type { UidRange } from '../../registry/types.js'

/** The part of the registry store that hands out sandbox uids. */
export interface UidStore {
  allocateSandboxUid: (tenant: string, range: UidRange) => Promise<number>
}

/** Parses SANDBOX_UID_RANGE (`first-last`); throws naming the problem. */
export function parseUidRange (text: string): UidRange {
  const m = /^(\d{1,10})-(\d{1,10})$/.exec(text.trim())
  const first = Number(m?.[1])
  const last = Number(m?.[2])
  if (m === null || !(first >= 1000) || !(last >= first) || last >= 2 ** 32 - 1) {
    throw new Error(`SANDBOX_UID_RANGE must be first-last with 1000 <= first <= last < 4294967295, got "${text}"`)
  }
  return { first, last }
}

/**
 * The host uid/gid of each tenant's sandbox (docs/ARCHITECTURE.md#isolation), allocated in the registry store (atomic,
 * the same for every instance and across restarts) and then cached: an allocation never changes
 * while the range stays the same. gid = uid, so a tenant's group is its own too.
 */
export function tenantOwners (store: UidStore, range: UidRange): (tenant: string) => Promise<{ uid: number, gid: number }> {
  const cache = new Map<string, Promise<number>>()
  return async (tenant) => {
    let uid = cache.get(tenant)
    if (uid === undefined) {
      uid = store.allocateSandboxUid(tenant, range)
      cache.set(tenant, uid)
      // A failure (Redis down) is not remembered: the next call asks again.
      uid.catch(() => { if (cache.get(tenant) === uid) cache.delete(tenant) })
    }
    const n = await uid
    return { uid: n, gid: n }
  }
}
