import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { TestContext } from 'node:test'
import type { JournalStore } from '../../src/journal/index.js'
import type { JournalQuery, PendingEntry } from '../../src/journal/store.js'
import { delay } from './redis-utils.js'
import { prng as rng } from '../../scripts/lib/prng.js'

export interface StoreOptions { maxEntriesPerTenant: number, retentionMs: number, maxBytesPerTenant?: number }
/** Makes a fresh, empty store (undefined: skip, e.g. no Redis outside CI); closed by the suite. */
export type MakeStore = (t: TestContext, opts: StoreOptions) => Promise<JournalStore | undefined>

const TOOLS = ['read_file', 'bash', 'calculate']

function entry (tenant: string, i: number, name: string, isError: boolean): PendingEntry {
  const callId = `${tenant}-${i}`
  return { tenant, callId, name, isError, json: JSON.stringify({ callId, name, isError }) }
}

/** Every page of a query, walked through its cursors: the callIds in order. */
async function walk (store: JournalStore, tenant: string, query: JournalQuery): Promise<string[]> {
  const out: string[] = []
  let before: string | undefined
  for (let pages = 0; pages < 10_000; pages++) {
    const page = await store.page(tenant, { ...query, ...(before !== undefined ? { before } : {}) })
    assert.ok(page.entries.length <= query.limit)
    for (const e of page.entries) out.push((JSON.parse(e) as { callId: string }).callId)
    if (page.next === null) return out
    before = page.next
  }
  throw new Error('the cursor never ended')
}

/** The behaviour every JournalStore must have (memory ring and Redis Streams alike). */
export function journalStoreConformance (label: string, make: MakeStore): void {
  test(`${label}: walking every page yields each matching entry once, newest first, for random filters and page sizes`, async (t) => {
    const store = await make(t, { maxEntriesPerTenant: 10_000, retentionMs: 3_600_000 })
    if (store === undefined) return
    const rand = rng(16)
    const appended: PendingEntry[] = []
    for (let i = 0; i < 240; i++) {
      const tenant = rand() < 0.8 ? 'acme' : 'globex'
      appended.push(entry(tenant, i, TOOLS[Math.floor(rand() * TOOLS.length)] as string, rand() < 0.3))
    }
    // Several appends, as the journal's writer batches them.
    for (let i = 0; i < appended.length; i += 50) assert.equal(await store.append(appended.slice(i, i + 50)), Math.min(50, appended.length - i))
    const cases: JournalQuery[] = [{ limit: 1 }, { limit: 7 }, { limit: 500 }]
    for (let c = 0; c < 12; c++) {
      const q: JournalQuery = { limit: 1 + Math.floor(rand() * 40) }
      if (rand() < 0.5) q.tool = TOOLS[Math.floor(rand() * TOOLS.length)] as string
      if (rand() < 0.5) q.isError = rand() < 0.5
      cases.push(q)
    }
    for (const q of cases) {
      const expected = appended
        .filter((e) => e.tenant === 'acme' && (q.tool === undefined || e.name === q.tool) && (q.isError === undefined || e.isError === q.isError))
        .map((e) => e.callId)
        .reverse()
      assert.deepEqual(await walk(store, 'acme', q), expected, JSON.stringify(q))
    }
    assert.deepEqual(await walk(store, 'nobody', { limit: 10 }), [])
  })

  test(`${label}: a filter that matches rarely ends pages early, with a cursor, and the walk still finds the entry`, async (t) => {
    const store = await make(t, { maxEntriesPerTenant: 10_000, retentionMs: 3_600_000 })
    if (store === undefined) return
    await store.append([entry('acme', 0, 'grep', false)])
    for (let i = 1; i <= 4500; i += 500) await store.append(Array.from({ length: 500 }, (_, j) => entry('acme', i + j, 'bash', false)))
    const first = await store.page('acme', { limit: 10, tool: 'grep' })
    assert.deepEqual(first.entries, [])
    assert.notEqual(first.next, null, 'a page that looked at its budget hands on a cursor')
    assert.deepEqual(await walk(store, 'acme', { limit: 10, tool: 'grep' }), ['acme-0'])
  })

  test(`${label}: since and until select by write time, inclusive`, async (t) => {
    const store = await make(t, { maxEntriesPerTenant: 10_000, retentionMs: 3_600_000 })
    if (store === undefined) return
    await store.append([entry('acme', 1, 'bash', false), entry('acme', 2, 'bash', false)])
    await delay(5)
    const middle = Date.now()
    await delay(5)
    await store.append([entry('acme', 3, 'bash', true)])
    assert.deepEqual(await walk(store, 'acme', { limit: 10, until: middle }), ['acme-2', 'acme-1'])
    assert.deepEqual(await walk(store, 'acme', { limit: 10, since: middle }), ['acme-3'])
    assert.deepEqual(await walk(store, 'acme', { limit: 1, since: 0, until: Date.now() + 1000 }), ['acme-3', 'acme-2', 'acme-1'])
    assert.deepEqual(await walk(store, 'acme', { limit: 10, since: middle, until: middle }), [])
  })

  test(`${label}: one entry by callId, only in its tenant's journal; a reused callId reads its latest entry`, async (t) => {
    const store = await make(t, { maxEntriesPerTenant: 10_000, retentionMs: 3_600_000 })
    if (store === undefined) return
    await store.append([entry('acme', 1, 'bash', false), { ...entry('acme', 1, 'grep', true) }, entry('globex', 2, 'bash', false)])
    assert.deepEqual(JSON.parse(await store.get('acme', 'acme-1') ?? 'null'), { callId: 'acme-1', name: 'grep', isError: true })
    assert.equal(await store.get('globex', 'acme-1'), undefined)
    assert.equal(await store.get('acme', 'nope'), undefined)
  })

  test(`${label}: a tenant keeps about JOURNAL_MAX_ENTRIES, the newest`, async (t) => {
    const store = await make(t, { maxEntriesPerTenant: 100, retentionMs: 3_600_000 })
    if (store === undefined) return
    for (let i = 0; i < 1000; i += 100) await store.append(Array.from({ length: 100 }, (_, j) => entry('acme', i + j, 'bash', false)))
    const all = await walk(store, 'acme', { limit: 500 })
    // Redis trims with MAXLEN ~ (whole stream nodes of 100 entries): at least the cap, less than twice it.
    assert.ok(all.length >= 100 && all.length < 200, `${all.length} entries kept`)
    assert.equal(all[0], 'acme-999')
    assert.equal(all[all.length - 1], `acme-${1000 - all.length}`)
  })

  test(`${label}: a tenant past its byte budget (JOURNAL_TENANT_BYTES) loses its own oldest entries, never another's`, async (t) => {
    const store = await make(t, { maxEntriesPerTenant: 10_000, retentionMs: 3_600_000, maxBytesPerTenant: 200_000 })
    if (store === undefined) return
    const sized = (tenant: string, i: number, pad: number): PendingEntry => ({ ...entry(tenant, i, 'read_file', false), json: JSON.stringify({ callId: `${tenant}-${i}`, pad: 'x'.repeat(pad) }) })
    await store.append(Array.from({ length: 5 }, (_, i) => sized('quiet', i, 1000)))
    // 1 MB of entries of ~10 KB, five times the budget, in the writer's batches.
    for (let i = 0; i < 100; i += 10) await store.append(Array.from({ length: 10 }, (_, j) => sized('loud', i + j, 10_000)))
    const loud = await walk(store, 'loud', { limit: 500 })
    // The newest that fit: 19 of ~10,030 bytes in 200,000 (before: all 100, 1 MB).
    assert.equal(loud.length, 19, `${loud.length} entries kept`)
    assert.equal(loud[0], 'loud-99')
    assert.equal(await store.get('loud', 'loud-80'), undefined)
    assert.notEqual(await store.get('loud', 'loud-81'), undefined)
    assert.deepEqual(await walk(store, 'quiet', { limit: 10 }), ['quiet-4', 'quiet-3', 'quiet-2', 'quiet-1', 'quiet-0'])
    // An entry larger than the whole budget is still kept, alone: the newest call is always readable.
    await store.append([sized('loud', 100, 250_000)])
    assert.deepEqual(await walk(store, 'loud', { limit: 500 }), ['loud-100'])
  })

  test(`${label}: entries past the retention are not read`, async (t) => {
    const store = await make(t, { maxEntriesPerTenant: 1000, retentionMs: 300 })
    if (store === undefined) return
    await store.append([entry('acme', 1, 'bash', false)])
    await delay(400)
    await store.append([entry('acme', 2, 'bash', false)])
    assert.deepEqual(await walk(store, 'acme', { limit: 10 }), ['acme-2'])
    assert.equal(await store.get('acme', 'acme-1'), undefined)
    assert.notEqual(await store.get('acme', 'acme-2'), undefined)
  })
}
