import { test } from 'node:test'
import assert from 'node:assert/strict'
import { MemoryJournalStore } from '../../../src/journal/memory-store.js'
import { journalStoreConformance } from '../../helpers/journal-conformance.js'

journalStoreConformance('memory', async (t, opts) => {
  const store = new MemoryJournalStore({ ...opts, maxBytes: 64 * 1024 * 1024 })
  t.after(async () => await store.close())
  return store
})

const json = (callId: string, pad = 0): string => JSON.stringify({ callId, pad: 'x'.repeat(pad) })

test('memory: many tenants stay within the total budget; the oldest entries of any tenant go first', async () => {
  const store = new MemoryJournalStore({ maxEntriesPerTenant: 1000, retentionMs: 3_600_000, maxBytes: 100_000 })
  for (let i = 0; i < 5000; i++) {
    await store.append([{ tenant: `t${i}`, callId: `c${i}`, name: 'bash', isError: false, json: json(`c${i}`, 100) }])
    assert.ok(store.size.bytes <= 100_000)
  }
  const { entries, tenants } = store.size
  assert.ok(entries < 1000 && entries > 500, `${entries} entries`)
  assert.equal(tenants, entries, 'a tenant whose last entry went is forgotten')
  assert.equal(await store.get('t0', 'c0'), undefined)
  assert.notEqual(await store.get('t4999', 'c4999'), undefined)
})

test('memory: a tenant past its own cap evicts only its own entries, and the bookkeeping stays bounded', async () => {
  const store = new MemoryJournalStore({ maxEntriesPerTenant: 10, retentionMs: 3_600_000, maxBytes: 10_000_000 })
  await store.append([{ tenant: 'quiet', callId: 'q', name: 'bash', isError: false, json: json('q') }])
  for (let i = 0; i < 50_000; i++) await store.append([{ tenant: 'loud', callId: `l${i}`, name: 'bash', isError: false, json: json(`l${i}`) }])
  assert.equal(store.size.entries, 11)
  assert.notEqual(await store.get('quiet', 'q'), undefined)
  const page = await store.page('loud', { limit: 100 })
  assert.equal(page.entries.length, 10)
  assert.equal(page.next, null)
})

test('memory: one tenant writing large entries in a loop cannot push another tenant\'s entries out of the shared budget', async () => {
  // JOURNAL_MEMORY_BYTES 1 MB for all tenants, JOURNAL_TENANT_BYTES 256 KB each. Before the per-tenant budget, the
  // loud tenant's 5 MB went through the shared budget oldest first: the quiet tenant's journal was gone.
  const store = new MemoryJournalStore({ maxEntriesPerTenant: 10_000, retentionMs: 3_600_000, maxBytes: 1_000_000, maxBytesPerTenant: 256_000 })
  for (let i = 0; i < 20; i++) await store.append([{ tenant: 'quiet', callId: `q${i}`, name: 'bash', isError: false, json: json(`q${i}`, 1000) }])
  for (let i = 0; i < 500; i++) await store.append([{ tenant: 'loud', callId: `l${i}`, name: 'bash', isError: false, json: json(`l${i}`, 10_000) }])
  for (let i = 0; i < 20; i++) assert.notEqual(await store.get('quiet', `q${i}`), undefined, `quiet's q${i}`)
  assert.ok(store.size.bytes <= 256_000 + 20 * 1100, `${store.size.bytes} bytes kept`)
  assert.notEqual(await store.get('loud', 'l499'), undefined)
})

test('memory: a page never splits entries that share a millisecond', async () => {
  let now = 1_000_000
  const store = new MemoryJournalStore({ maxEntriesPerTenant: 100, retentionMs: 3_600_000, maxBytes: 1_000_000, now: () => now })
  await store.append(Array.from({ length: 5 }, (_, i) => ({ tenant: 'a', callId: `c${i}`, name: 'bash', isError: false, json: json(`c${i}`) })))
  now -= 10 // a clock step back: ids still increase
  await store.append([{ tenant: 'a', callId: 'c5', name: 'bash', isError: false, json: json('c5') }])
  const seen: string[] = []
  let before: string | undefined
  do {
    const page = await store.page('a', { limit: 2, ...(before !== undefined ? { before } : {}) })
    seen.push(...page.entries.map((e) => (JSON.parse(e) as { callId: string }).callId))
    before = page.next ?? undefined
  } while (before !== undefined)
  assert.deepEqual(seen, ['c5', 'c4', 'c3', 'c2', 'c1', 'c0'])
})
