/**
 * SurfaceLists (src/remote-mcp/surface.ts): a client's resources, templates and prompts lists, one
 * fetch at a time, a `fresh` lookup at most once per FRESH_FLOOR_MS, a refusal remembered while it holds.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { FRESH_FLOOR_MS, SurfaceLists } from '../../../src/remote-mcp/surface.js'
import { ListRefusedError } from '../../../src/remote-mcp/list-bounds.js'

const TTL = 60_000

test('a list is reused for its TTL; a fresh lookup takes it only while it is younger than the floor', async () => {
  const lists = new SurfaceLists()
  assert.equal(lists.cached('resources/list', TTL, false), undefined)
  await lists.load('resources/list', async () => ['a'], () => true)
  const now = Date.now()
  assert.deepEqual(lists.cached('resources/list', TTL, false, now + FRESH_FLOOR_MS + 1), ['a'])
  assert.deepEqual(lists.cached('resources/list', TTL, true, now + FRESH_FLOOR_MS - 100), ['a'])
  assert.equal(lists.cached('resources/list', TTL, true, now + FRESH_FLOOR_MS + 1), undefined)
  assert.equal(lists.cached('resources/list', TTL, false, now + TTL + 1), undefined)
  // A TTL under the floor bounds a fresh lookup too; other kinds of list are kept apart.
  assert.equal(lists.cached('resources/list', 10, true, now + 11), undefined)
  assert.equal(lists.cached('prompts/list', TTL, false), undefined)
})

test('concurrent callers share one fetch; a list that lands after the client closed is not kept', async () => {
  const lists = new SurfaceLists()
  let fetches = 0
  let release!: () => void
  const gate = new Promise<void>((resolve) => { release = resolve })
  const fetch = async (): Promise<unknown[]> => { fetches++; await gate; return ['p'] }
  const all = Promise.all([1, 2, 3].map(async () => await lists.load('prompts/list', fetch, () => true)))
  release()
  assert.deepEqual(await all, [['p'], ['p'], ['p']])
  assert.equal(fetches, 1)
  await lists.load('resources/templates/list', async () => ['t'], () => false)
  assert.equal(lists.cached('resources/templates/list', TTL, false), undefined)
})

test('a refusal is thrown from the cache while it holds and fresh, then the list is asked for again', async () => {
  const lists = new SurfaceLists()
  let holds = true
  const refusal = new ListRefusedError('too many', () => holds)
  await assert.rejects(lists.load('resources/list', async () => { throw refusal }, () => true), (err) => err === refusal)
  assert.throws(() => lists.cached('resources/list', TTL, false), (err) => err === refusal)
  assert.throws(() => lists.cached('resources/list', TTL, true), (err) => err === refusal)
  holds = false
  assert.equal(lists.cached('resources/list', TTL, false), undefined)
  // Other failures are not remembered.
  const other = new SurfaceLists()
  await assert.rejects(other.load('resources/list', async () => { throw new Error('down') }, () => true))
  assert.equal(other.cached('resources/list', TTL, false), undefined)
})
