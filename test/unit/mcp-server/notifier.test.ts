/**
 * ListChangedNotifier's costs (src/mcp-server/notifier.ts): one tenant's notification streams watch at most 8 MiB
 * of listings (100 of them) on an instance; a cached listing (the same object) is not serialised again to be compared;
 * the timer's check of a listing that took long waits in proportion. An audit measured 100 streams of distinct
 * allow-lists over a 4 MB listing holding the event loop 8-12 s at a time, with no request after they opened.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { ListChangedNotifier } from '../../../src/mcp-server/notifier.js'
import type { Gateway } from '../../../src/gateway.js'
import { HttpError } from '../../../src/errors.js'

const target = { sendToolListChanged: async () => {} }
const caller = { userId: undefined, isAdmin: true }

test('a tenant\'s streams watch listings up to 8 MiB of tools together, or 100 of them; more streams of one listing, other tenants still go', async (t) => {
  // Listings of 1 MiB of tools each: the ninth is refused (8 MiB watched).
  const big = { tools: [{ name: 'a', description: 'd'.repeat(1024 * 1024) }], unresolved: [], unavailable: [], diagnostics: [] }
  const small = { tools: [{ name: 'a' }], unresolved: [], unavailable: [], diagnostics: [] }
  const gateway = { listTools: async (query: { mcp?: string }) => query.mcp?.startsWith('big') === true ? big : small } as unknown as Gateway
  const notifier = new ListChangedNotifier({ gateway, pollMs: 3_600_000 })
  t.after(() => notifier.close())
  for (let i = 0; i < 8; i++) await notifier.watch({ mcp: `big${i}`, userId: 'acme' }, 'acme', caller, target, [`big${i}`])
  await assert.rejects(notifier.watch({ mcp: 'big8', userId: 'acme' }, 'acme', caller, target, ['big8']),
    (err: unknown) => err instanceof HttpError && err.code === 'GW_RATE_LIMITED' && /watch 8 different listings \(8\.0 MiB/.test(err.message))
  await notifier.watch({ mcp: 'big0', userId: 'acme' }, 'acme', caller, { sendToolListChanged: async () => {} }, ['big0'])
  // Small listings: a multi-agent tenant's many allow-lists, up to 100.
  for (let i = 0; i < 100; i++) await notifier.watch({ mcp: `s${i}`, userId: 'globex' }, 'globex', caller, target, [`s${i}`])
  await assert.rejects(notifier.watch({ mcp: 's100', userId: 'globex' }, 'globex', caller, target, ['s100']),
    (err: unknown) => err instanceof HttpError && err.code === 'GW_RATE_LIMITED' && /watch 100 different listings/.test(err.message))
  await notifier.watch({ mcp: 'big8', userId: 'initech' }, 'initech', caller, target, ['big8'])
  assert.equal(notifier.streams, 110)
})

test('a cached listing is not serialised again at each check; a slow check makes the timer wait in proportion', async (t) => {
  let reads = 0
  let calls = 0
  const tools = [{ name: 'a' }]
  // The same object at every check, as the listings cache answers; its tools counted when read.
  const listing = { get tools () { reads++; return tools }, unresolved: [], unavailable: [], diagnostics: [] }
  const gateway = {
    listTools: async () => {
      calls++
      const until = performance.now() + 25
      while (performance.now() < until) { /* a listing that costs 25 ms of CPU to render */ }
      return listing
    }
  } as unknown as Gateway
  const notifier = new ListChangedNotifier({ gateway, pollMs: 20 })
  t.after(() => notifier.close())
  await notifier.watch({ mcp: 's', userId: 'acme' }, 'acme', caller, target, ['s'])
  await notifier.checkAll()
  await notifier.checkAll()
  assert.equal(reads, 1, 'the same listing object was serialised again')
  // 25 ms per check: the timer (every 20 ms) checks at most every ~500 ms, not at each tick.
  const before = calls
  await sleep(400)
  assert.ok(calls - before <= 2, `${calls - before} checks in 400 ms`)
})
