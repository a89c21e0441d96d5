/**
 * Listings (src/listing/listings.ts) of an allow-list with an unavailable server: listed again at each
 * request (the server is tried again), what is made of it (policed listing, rendering, search index)
 * reused while the same servers are unavailable for the same reasons, and a recovered server listed at once.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Listings } from '../../../src/listing/listings.js'
import type { ListingScope } from '../../../src/listing/listings.js'
import type { ListedTool, ToolRouter } from '../../../src/routing/router.js'
import type { Unavailable } from '../../../src/routing/source.js'

function listed (name: string): ListedTool {
  return { name, entry: { route: 'user_mcp', source: 'docs', name, spec: { name, description: `the ${name} tool`, inputSchema: { type: 'object' } } } } as unknown as ListedTool
}

test('a listing with an unavailable server is listed again each time, and rendered again only when what is unavailable changes', async () => {
  const token = {}
  let unavailable: Unavailable[] = [{ serverId: 'down', reason: 'connect ECONNREFUSED' }]
  let tools = [listed('one'), listed('two')]
  let lists = 0
  const router = {
    catalogVersion: async () => [token],
    list: async () => { lists++; return { tools, unresolved: [], unavailable, diagnostics: [] } }
  } as unknown as ToolRouter
  const listings = new Listings(router)
  const scope: ListingScope = { userId: 'acme', policy: undefined, signal: new AbortController().signal }
  const query = { mcp: 'docs,down', format: 'openai' as const }

  const first = await listings.render(query, scope)
  const second = await listings.render(query, scope)
  assert.equal(lists, 2, 'the unavailable server is tried at every listing')
  assert.equal(second, first, 'the same rendering: not policed and rendered again')
  assert.equal(await listings.policed({ mcp: ['docs', 'down'] }, scope), await listings.policed({ mcp: ['docs', 'down'] }, scope))
  const found = await listings.search('two', 5, { mcp: ['docs', 'down'] }, scope)
  assert.equal(found.matches[0]?.tool.name, 'two')

  unavailable = [{ serverId: 'down', reason: 'its circuit breaker opened', retryAt: '2026-12-07T00:00:00.000Z' }]
  const third = await listings.render(query, scope)
  assert.notEqual(third, first, 'another reason: rendered again')
  assert.deepEqual(third.unavailable, unavailable)

  // The server recovers: its tools are listed at once, and nothing is unavailable.
  unavailable = []
  tools = [listed('one'), listed('two'), listed('three')]
  const recovered = await listings.render(query, scope)
  assert.deepEqual(recovered.unavailable, [])
  assert.deepEqual((recovered.tools as Array<{ function: { name: string } }>).map((t) => t.function.name), ['one', 'two', 'three'])
  assert.equal((await listings.search('three', 5, { mcp: ['docs', 'down'] }, scope)).matches[0]?.tool.name, 'three')
  // Without an unavailable server the listing is cached whole: not listed again.
  const before = lists
  assert.equal(await listings.render(query, scope), recovered)
  assert.equal(lists, before)
})
