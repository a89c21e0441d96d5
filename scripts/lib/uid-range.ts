import { createHash } from 'node:crypto'

/** Slots of 1,000 uids from 1,000,000 on: far from the default SANDBOX_UID_RANGE and its no-Redis pool. */
const FIRST = 1_000_000
const SLOT = 1_000
const SLOTS = 40_000

/**
 * The SANDBOX_UID_RANGE a test gateway on a registry store gets unless the test names one. A gateway
 * with Redis claims its whole range on the host, and another store's gateway overlapping it refuses
 * to start (src/builtin/sandbox/host-claim.ts): test files running side by side, each on a store
 * prefix of its own, would refuse each other on the default range. The range is derived from the
 * store (URL and prefix), so the instances of one test's cluster share theirs, as in production.
 */
export function testUidRange (env: Record<string, string | undefined>): Record<string, string> {
  if ((env.REDIS_URL ?? '') === '' && (env.REDIS_CLUSTER_NODES ?? '') === '') return {}
  if (env.SANDBOX_UID_RANGE !== undefined) return {}
  const store = JSON.stringify([env.REDIS_URL ?? '', env.REDIS_CLUSTER_NODES ?? '', env.REDIS_KEY_PREFIX ?? ''])
  const slot = createHash('sha256').update(store).digest().readUInt32BE(0) % SLOTS
  const first = FIRST + slot * SLOT
  return { SANDBOX_UID_RANGE: `${first}-${first + SLOT - 1}` }
}
