import type { Logger } from '../logger.js'
import type { RedisTarget } from '../redis/index.js'
import { Journal } from './journal.js'
import type { JournalMode } from './entry.js'
import { MemoryJournalStore } from './memory-store.js'
import { RedisJournalStore } from './redis-store.js'

export { Journal } from './journal.js'
export type { CallRecord, JournalMode } from './entry.js'
export { RedisJournalStore } from './redis-store.js'
export type { JournalStore } from './store.js'

export interface JournalSettings {
  mode: JournalMode
  /** Where Redis is (REDIS_CLUSTER_NODES or REDIS_URL); wins over redisUrl. */
  target?: RedisTarget | undefined
  /** REDIS_URL; with no target either, a memory ring per instance. */
  redisUrl?: string | undefined
  keyPrefix: string
  maxEntriesPerTenant: number
  /** JOURNAL_TENANT_BYTES: a tenant's entries kept by size, in either store. */
  maxBytesPerTenant: number
  retentionMs: number
  /** JOURNAL_MEMORY_BYTES: the memory ring's total budget over all tenants. */
  memoryBytes: number
  logger: Logger
}

/** The journal on Redis Streams when Redis is configured (a server or a cluster), else on the memory ring. */
export function createJournal (s: JournalSettings): Journal {
  const target = s.target ?? (s.redisUrl !== undefined && s.redisUrl !== '' ? { kind: 'single' as const, url: s.redisUrl } : undefined)
  const store = target !== undefined
    ? new RedisJournalStore({
      target,
      keyPrefix: s.keyPrefix,
      maxEntriesPerTenant: s.maxEntriesPerTenant,
      maxBytesPerTenant: s.maxBytesPerTenant,
      retentionMs: s.retentionMs,
      // ioredis repeats connection errors while it reconnects; the journal's drop warning says enough.
      onError: () => {}
    })
    : new MemoryJournalStore({
      maxEntriesPerTenant: s.maxEntriesPerTenant, maxBytesPerTenant: s.maxBytesPerTenant, retentionMs: s.retentionMs, maxBytes: s.memoryBytes
    })
  return new Journal({ mode: s.mode, store, logger: s.logger })
}
