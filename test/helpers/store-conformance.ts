import assert from 'node:assert/strict'
import { test } from 'node:test'
import { RegistryUnavailableError } from '../../src/registry/errors.js'
import type { ServerConfig } from '../../src/registry/server-config.js'
import type { DocumentChange, RegistryChange, RegistryScope, RegistryStore } from '../../src/registry/types.js'
import { DocumentConflictError, ServerLimitError } from '../../src/registry/types.js'

/**
 * One behavioural contract for every RegistryStore implementation. Each test gets fresh
 * stores from the factory (an empty namespace) and releases them afterwards.
 */
export interface StoreFixture {
  store: RegistryStore
  /** Another store over the same data, as a second gateway process would have (shared backends only). */
  peer?: () => Promise<RegistryStore>
  /** Removes whatever the stores left behind (Redis keys). Called after the stores are closed. */
  cleanup: () => Promise<void>
}

export type StoreFactory = () => Promise<StoreFixture>

const G: RegistryScope = { kind: 'global' }
const user = (userId: string): RegistryScope => ({ kind: 'user', userId })

function http (url: string, extra: Partial<ServerConfig> = {}): ServerConfig {
  return { type: 'streamable_http', url, enabled: true, priority: 0, ...extra }
}

/** The first change matching `match`; the test's own timeout bounds the wait. */
function nextChange (store: RegistryStore, match: (c: RegistryChange) => boolean): Promise<RegistryChange> {
  return new Promise((resolve) => {
    const off = store.subscribe((change) => {
      if (match(change)) {
        off()
        resolve(change)
      }
    })
  })
}

export function registryStoreConformance (label: string, factory: StoreFactory): void {
  const TIMEOUT = { timeout: 20_000 }

  async function setup (t: { after: (fn: () => Promise<void>) => void }): Promise<StoreFixture & { peers: RegistryStore[] }> {
    const fixture = await factory()
    const peers: RegistryStore[] = []
    t.after(async () => {
      await Promise.all([fixture.store.close(), ...peers.map(async (p) => { await p.close() })])
      await fixture.cleanup()
    })
    return { ...fixture, peers }
  }

  test(`${label}: put, get, list, delete`, TIMEOUT, async (t) => {
    const { store } = await setup(t)
    assert.deepEqual(await store.list(G), [])
    assert.equal(await store.get(G, 'github'), undefined)

    const first = await store.put(G, 'github', http('https://a.example/mcp', { headers: { Authorization: 'Bearer x' }, description: 'gh' }))
    assert.equal(first.created, true)
    const second = await store.put(G, 'github', http('https://b.example/mcp', { priority: 5 }))
    assert.equal(second.created, false)
    assert.ok(second.version > first.version)
    await store.put(G, 'alpha', http('https://c.example/mcp', { disabledTools: [] }))

    const got = await store.get(G, 'github')
    assert.ok(got)
    assert.equal(got.serverId, 'github')
    assert.deepEqual(got.config, http('https://b.example/mcp', { priority: 5 }))
    assert.equal(got.version, second.version)
    assert.ok(!Number.isNaN(Date.parse(got.updatedAt)))

    const list = await store.list(G)
    assert.deepEqual(list.map((s) => s.serverId), ['alpha', 'github'], 'sorted by serverId')
    assert.deepEqual(list[0]?.config.disabledTools, [], 'empty arrays survive storage')

    const removed = await store.delete(G, 'github')
    assert.equal(removed.deleted, true)
    assert.equal(await store.get(G, 'github'), undefined)
    assert.deepEqual((await store.list(G)).map((s) => s.serverId), ['alpha'])

    const again = await store.delete(G, 'github')
    assert.equal(again.deleted, false)
    assert.equal(again.version, removed.version, 'deleting nothing leaves the version alone')
  })

  test(`${label}: versions count every change per scope and never go back`, TIMEOUT, async (t) => {
    const { store } = await setup(t)
    assert.equal(await store.version(G), 0)
    assert.equal(await store.version(user('7')), 0)
    assert.equal((await store.put(user('7'), 's1', http('https://a.example/'))).version, 1)
    assert.equal((await store.put(user('7'), 's1', http('https://b.example/'))).version, 2)
    assert.equal((await store.put(user('7'), 's2', http('https://c.example/'))).version, 3)
    assert.equal((await store.delete(user('7'), 's1')).version, 4)
    assert.equal((await store.delete(user('7'), 's2')).version, 5)
    assert.equal(await store.version(user('7')), 5, 'an emptied scope keeps its counter')
    assert.equal((await store.put(user('7'), 's1', http('https://d.example/'))).version, 6)
    assert.equal(await store.version(G), 0, 'other scopes untouched')
    const snap = await store.snapshot(user('7'))
    assert.equal(snap.version, 6)
    assert.deepEqual(snap.servers.map((s) => s.serverId), ['s1'])
  })

  test(`${label}: user 1, user 1-2 and global are isolated`, TIMEOUT, async (t) => {
    const { store } = await setup(t)
    await store.put(user('1'), 'a', http('https://one.example/'))
    await store.put(user('1-2'), 'a', http('https://one-two.example/'))
    await store.put(user('1-2'), 'b', http('https://one-two-b.example/'))
    await store.put(user('12'), 'c', http('https://twelve.example/'))
    await store.put(G, 'a', http('https://global.example/'))

    assert.deepEqual((await store.list(user('1'))).map((s) => [s.serverId, s.config.url]), [['a', 'https://one.example/']])
    assert.deepEqual((await store.list(user('1-2'))).map((s) => s.serverId), ['a', 'b'])
    assert.equal((await store.get(user('1'), 'b')), undefined)
    assert.equal((await store.get(G, 'b')), undefined)
    assert.equal((await store.get(G, 'a'))?.config.url, 'https://global.example/')

    assert.equal((await store.delete(user('1'), 'b')).deleted, false, 'user 1 cannot remove what user 1-2 has')
    assert.equal((await store.delete(user('1'), 'a')).deleted, true)
    assert.equal((await store.get(user('1-2'), 'a'))?.config.url, 'https://one-two.example/')
    assert.equal((await store.get(G, 'a'))?.config.url, 'https://global.example/')

    assert.equal(await store.version(user('1')), 2)
    assert.equal(await store.version(user('1-2')), 2)
    assert.equal(await store.version(user('12')), 1)
    assert.equal(await store.version(G), 1)
    assert.deepEqual(await store.listUserIds(), ['1-2', '12'], 'a user without servers is not listed')
  })

  test(`${label}: 50 concurrent puts to one tenant lose no increment`, TIMEOUT, async (t) => {
    const { store } = await setup(t)
    const scope = user('race')
    const urls = Array.from({ length: 50 }, (_, i) => `https://w${i}.example/`)
    const results = await Promise.all(urls.map((url) => store.put(scope, 'same', http(url))))
    assert.equal(await store.version(scope), 50)
    assert.deepEqual(results.map((r) => r.version).sort((a, b) => a - b), Array.from({ length: 50 }, (_, i) => i + 1), 'every write got its own version')
    assert.equal(results.filter((r) => r.created).length, 1, 'exactly one write created the entry')
    const list = await store.list(scope)
    assert.equal(list.length, 1)
    assert.ok(urls.includes(list[0]?.config.url ?? ''), 'final state is one of the writes')
    const last = results.find((r) => r.version === 50)
    assert.ok(last)
    assert.equal(list[0]?.version, 50, 'the entry is the last write')

    const distinct = await Promise.all(urls.map((url, i) => store.put(user('race-2'), `s${i}`, http(url))))
    assert.equal(distinct.filter((r) => r.created).length, 50)
    assert.equal((await store.list(user('race-2'))).length, 50)
    assert.equal(await store.version(user('race-2')), 50)
  })

  test(`${label}: maxServers: racing creations from two instances never pass the cap; replacing at the cap does; a refusal changes nothing`, TIMEOUT, async (t) => {
    const fixture = await setup(t)
    const { store } = fixture
    const other = fixture.peer !== undefined ? await fixture.peer() : store
    if (other !== store) fixture.peers.push(other)
    const scope = user('capped')
    const cap = 5
    const full = (err: unknown): boolean => err instanceof ServerLimitError && err.maxServers === cap
    // 40 different servers created at once, half through each instance: exactly `cap` land.
    const results = await Promise.allSettled(Array.from({ length: 40 }, async (_v, i) =>
      await (i % 2 === 0 ? store : other).put(scope, `s${i}`, http(`https://w${i}.example/`), { maxServers: cap })))
    assert.equal(results.filter((r) => r.status === 'fulfilled').length, cap)
    assert.ok(results.every((r) => r.status === 'fulfilled' || full(r.reason)), 'every other write is a ServerLimitError')
    const listed = await store.list(scope)
    assert.equal(listed.length, cap)
    const version = await store.version(scope)
    assert.equal(version, cap, 'a refused write moves no version')
    // At the cap: one more is refused, a replacement of a stored one is not, and a delete makes room.
    const changes: RegistryChange[] = []
    const off = store.subscribe((c) => { changes.push(c) })
    t.after(off)
    await assert.rejects(store.put(scope, 'one-more', http('https://x.example/'), { maxServers: cap }), full)
    assert.equal(await store.get(scope, 'one-more'), undefined)
    assert.deepEqual(changes, [], 'a refused write sends no change event')
    const kept = listed[0]?.serverId ?? ''
    assert.equal((await store.put(scope, kept, http('https://replaced.example/'), { maxServers: cap })).created, false)
    await store.delete(scope, kept)
    assert.equal((await store.put(scope, 'one-more', http('https://x.example/'), { maxServers: cap })).created, true)
    // The cap is per scope: another tenant, and a put without maxServers, are not held by it.
    assert.equal((await store.put(user('capped-2'), 'a', http('https://a.example/'), { maxServers: cap })).created, true)
    assert.equal((await store.put(scope, 'admin-made', http('https://y.example/'))).created, true)
  })

  test(`${label}: subscribers see their own instance's changes`, TIMEOUT, async (t) => {
    const { store } = await setup(t)
    const seen: RegistryChange[] = []
    const off = store.subscribe((c) => seen.push(c))
    store.subscribe(() => { throw new Error('a broken listener') })
    await store.put(user('9'), 'x', http('https://x.example/'))
    await store.delete(user('9'), 'x')
    await store.delete(user('9'), 'x')
    off()
    await store.put(G, 'y', http('https://y.example/'))
    assert.deepEqual(seen, [
      { op: 'put', scope: { kind: 'user', userId: '9' }, serverId: 'x', version: 1 },
      { op: 'delete', scope: { kind: 'user', userId: '9' }, serverId: 'x', version: 2 }
    ])
  })

  test(`${label}: stored configs are copies`, TIMEOUT, async (t) => {
    const { store } = await setup(t)
    const config = http('https://a.example/', { headers: { A: '1' } })
    await store.put(G, 'a', config)
    config.headers = { A: 'mutated' }
    const got = await store.get(G, 'a')
    assert.deepEqual(got?.config.headers, { A: '1' })
    if (got?.config.headers !== undefined) got.config.headers.A = 'mutated again'
    assert.deepEqual((await store.get(G, 'a'))?.config.headers, { A: '1' })
  })

  test(`${label}: invalid ids are refused`, TIMEOUT, async (t) => {
    const { store } = await setup(t)
    await assert.rejects(store.put(user('a_b'), 's', http('https://a.example/')), RangeError)
    await assert.rejects(store.put(G, 'a_b', http('https://a.example/')), RangeError)
    await assert.rejects(store.get(user(''), 's'), RangeError)
    await assert.rejects(store.list(user('x'.repeat(65))), RangeError)
    await assert.rejects(store.delete(G, '-x'), RangeError)
    assert.deepEqual(await store.listUserIds(), [])
  })

  test(`${label}: ping and an idempotent close`, TIMEOUT, async (t) => {
    const { store } = await setup(t)
    await store.ping()
    await store.close()
    await store.close()
    await assert.rejects(store.ping(), RegistryUnavailableError)
    await assert.rejects(store.list(G), RegistryUnavailableError)
  })

  test(`${label}: two instances see each other's changes`, TIMEOUT, async (t) => {
    const fixture = await setup(t)
    if (fixture.peer === undefined) {
      t.skip(`${label} is a single-process store`)
      return
    }
    const a = fixture.store
    const b = await fixture.peer()
    fixture.peers.push(b)

    const aSeen: RegistryChange[] = []
    a.subscribe((c) => aSeen.push(c))

    const bSawPut = nextChange(b, (c) => c.op === 'put' && c.serverId === 'shared')
    const put = await a.put(user('42'), 'shared', http('https://shared.example/'))
    assert.deepEqual(await bSawPut, { op: 'put', scope: { kind: 'user', userId: '42' }, serverId: 'shared', version: put.version })
    assert.equal((await b.get(user('42'), 'shared'))?.config.url, 'https://shared.example/')
    assert.equal(await b.version(user('42')), put.version)

    const aSawDelete = nextChange(a, (c) => c.op === 'delete' && c.serverId === 'shared')
    const del = await b.delete(user('42'), 'shared')
    assert.deepEqual(await aSawDelete, { op: 'delete', scope: { kind: 'user', userId: '42' }, serverId: 'shared', version: del.version })
    assert.equal(await a.get(user('42'), 'shared'), undefined)

    // A's own put was published before B's delete on the same channel, so its echo (if any)
    // has been delivered by now: A must have seen its own change exactly once.
    assert.deepEqual(aSeen.map((c) => c.op === 'resync' ? 'resync' : `${c.op}:${c.serverId}:${c.version}`), [
      `put:shared:${put.version}`,
      `delete:shared:${del.version}`
    ])
  })

  test(`${label}: documents: put, get, delete with a version per kind and scope; events reach every instance, not the server listeners`, TIMEOUT, async (t) => {
    const fixture = await setup(t)
    const a = fixture.store
    const serverChanges: RegistryChange[] = []
    a.subscribe((c) => serverChanges.push(c))
    const docChanges: DocumentChange[] = []
    a.subscribeDocuments((c) => docChanges.push(c))

    assert.equal(await a.getDocument('policy', G), undefined)
    assert.deepEqual(await a.deleteDocument('policy', user('1')), { version: 0, deleted: false })
    const first = await a.putDocument('policy', user('1'), { deny: ['bash'] })
    assert.deepEqual(first, { version: 1, created: true })
    const second = await a.putDocument('policy', user('1'), { deny: ['x'] })
    assert.deepEqual(second, { version: 2, created: false })
    const doc = await a.getDocument('policy', user('1'))
    assert.deepEqual(doc?.value, { deny: ['x'] })
    assert.equal(doc?.version, 2)
    // Exact scopes: user 1-2 and the global scope are other documents.
    assert.equal(await a.getDocument('policy', user('1-2')), undefined)
    assert.equal(await a.getDocument('policy', G), undefined)
    // A returned value is a copy.
    ;(doc?.value as { deny: string[] }).deny.push('y')
    assert.deepEqual((await a.getDocument('policy', user('1')))?.value, { deny: ['x'] })
    const del = await a.deleteDocument('policy', user('1'))
    assert.deepEqual(del, { version: 3, deleted: true })
    assert.equal(await a.getDocument('policy', user('1')), undefined)
    // Versions never go back, not even after a delete.
    assert.equal((await a.putDocument('policy', user('1'), {})).version, 4)
    assert.deepEqual(docChanges.map((c) => c.op === 'resync' ? 'resync' : c.version), [1, 2, 3, 4])
    // Servers' listeners never see documents, and documents never bump a server scope's version.
    assert.deepEqual(serverChanges, [])
    assert.equal(await a.version(user('1')), 0)

    if (fixture.peer === undefined) return
    const b = await fixture.peer()
    fixture.peers.push(b)
    const seen = new Promise<DocumentChange>((resolve) => {
      const off = b.subscribeDocuments((c) => { off(); resolve(c) })
    })
    const put = await a.putDocument('policy', G, { readOnly: true })
    assert.deepEqual(await seen, { op: 'document', kind: 'policy', scope: G, version: put.version })
    assert.deepEqual((await b.getDocument('policy', G))?.value, { readOnly: true })
  })

  test(`${label}: documents: ifVersion writes only over the version read; of racing writers exactly one wins`, TIMEOUT, async (t) => {
    const { store } = await setup(t)
    const conflict = (err: unknown): boolean => err instanceof DocumentConflictError
    // 0: only when there is none.
    assert.deepEqual(await store.putDocument('pins', user('c'), { n: 1 }, { ifVersion: 0 }), { version: 1, created: true })
    await assert.rejects(store.putDocument('pins', user('c'), { n: 2 }, { ifVersion: 0 }), conflict)
    await assert.rejects(store.putDocument('pins', user('c'), { n: 2 }, { ifVersion: 7 }), conflict)
    assert.deepEqual((await store.getDocument('pins', user('c')))?.value, { n: 1 })
    assert.equal((await store.putDocument('pins', user('c'), { n: 2 }, { ifVersion: 1 })).version, 2)
    // After a delete the counter moved on, but "none" is 0 again.
    await store.deleteDocument('pins', user('c'))
    await assert.rejects(store.putDocument('pins', user('c'), { n: 3 }, { ifVersion: 2 }), conflict)
    assert.equal((await store.putDocument('pins', user('c'), { n: 3 }, { ifVersion: 0 })).version, 4)
    // Ten writers that all read version 4: one write lands, nine conflict.
    const write = async (n: number): Promise<unknown> => await store.putDocument('pins', user('c'), { n }, { ifVersion: 4 })
    const results = await Promise.allSettled(Array.from({ length: 10 }, async (_v, i) => await write(10 + i)))
    assert.equal(results.filter((r) => r.status === 'fulfilled').length, 1)
    assert.ok(results.every((r) => r.status === 'fulfilled' || conflict(r.reason)))
    // Kinds are separate documents: a policy of the same scope is untouched.
    assert.equal(await store.getDocument('policy', user('c')), undefined)
  })

  test(`${label}: sandbox uids: one per tenant, stable, distinct under concurrency, within the range`, TIMEOUT, async (t) => {
    const { store } = await setup(t)
    const range = { first: 200000, last: 200099 }
    const tenants = Array.from({ length: 40 }, (_v, i) => `t${i}`)
    // Every tenant asked 3 times at once: each must get one uid, and no two tenants the same.
    const uids = await Promise.all([...tenants, ...tenants, ...tenants].map(async (tenant) => [tenant, await store.allocateSandboxUid(tenant, range)] as const))
    const byTenant = new Map<string, Set<number>>()
    for (const [tenant, uid] of uids) byTenant.set(tenant, (byTenant.get(tenant) ?? new Set()).add(uid))
    for (const [tenant, set] of byTenant) assert.equal(set.size, 1, `${tenant} got ${[...set].join(',')}`)
    const distinct = new Set([...byTenant.values()].map((s) => [...s][0]))
    assert.equal(distinct.size, tenants.length, 'no uid is shared by two tenants')
    for (const uid of distinct) assert.ok(uid !== undefined && uid >= range.first && uid <= range.last, `${uid} in range`)
    assert.equal(await store.allocateSandboxUid('t7', range), [...(byTenant.get('t7') ?? [])][0], 'stable on a later call')
    assert.ok(typeof await store.allocateSandboxUid('_', range) === 'number', 'the anonymous tenant gets one too')

    // A changed range moves a tenant into it; the uids of the old range are never reused.
    const moved = await store.allocateSandboxUid('t0', { first: 300000, last: 300009 })
    assert.ok(moved >= 300000 && moved <= 300009)
    await assert.rejects(store.allocateSandboxUid('bad:tenant', range), RangeError)
    await assert.rejects(store.allocateSandboxUid('x', { first: 0, last: 10 }), RangeError, 'root is never in a range')

    // A full range is an error, not a shared uid.
    const tiny = { first: 400000, last: 400001 }
    await store.allocateSandboxUid('a', tiny)
    await store.allocateSandboxUid('b', tiny)
    await assert.rejects(store.allocateSandboxUid('c', tiny), RangeError)
  })

  test(`${label}: sandbox uids are the same for every instance sharing the store`, TIMEOUT, async (t) => {
    const fixture = await setup(t)
    if (fixture.peer === undefined) {
      t.skip('embedded store: one instance only')
      return
    }
    const b = await fixture.peer()
    fixture.peers.push(b)
    const range = { first: 200000, last: 299999 }
    const [x, y] = await Promise.all([fixture.store.allocateSandboxUid('shared', range), b.allocateSandboxUid('shared', range)])
    assert.equal(x, y)
    const other = await b.allocateSandboxUid('other', range)
    assert.notEqual(other, x)
    assert.equal(await fixture.store.allocateSandboxUid('other', range), other)
  })
}
