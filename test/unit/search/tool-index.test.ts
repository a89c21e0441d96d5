/**
 * The search engine (src/search): text analysis, ranking, bounds, and the embeddings hook with a
 * deterministic embedder written for the test (the gateway ships none: no model runs here).
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { MAX_INDEX_CHARS, ToolIndex, toolDocument } from '../../../src/search/index.js'
import type { Embedder } from '../../../src/search/index.js'
import { processTerm, synonymsOf, tokenize } from '../../../src/search/text.js'

const UNITS = { properties: { unit: { enum: ['celsius', 'fahrenheit'] } } }
const TOOLS = [
  { name: 'create_issue', description: 'Create a new issue in a repository', inputSchema: { properties: { title: { description: 'The title' } } } },
  { name: 'deleteFile', description: 'Remove a file from the workspace', inputSchema: {} },
  { name: 'get-weather', title: 'Weather', description: 'Current conditions for a city', inputSchema: UNITS },
  { name: 'list_commits', description: 'List the commits of a branch', inputSchema: {} }
]
const index = ToolIndex.buildNow(TOOLS.map((t) => toolDocument(t, 'srv')))
const top = async (q: string, i = index): Promise<string | undefined> => TOOLS[(await i.search(q, 1))[0]?.index ?? -1]?.name

test('words split at case changes and punctuation; stop words go; stems meet', () => {
  const words = ['create', 'Issue', 'get', 'weather', 'list', 'commits', 'HTTP', 'Server', 'v2']
  assert.deepEqual(tokenize('createIssue get-weather list_commits HTTPServer v2'), words)
  assert.equal(processTerm('The'), null)
  assert.equal(processTerm('issues'), processTerm('issue'))
  assert.equal(processTerm('Creating'), processTerm('create'))
  assert.ok(synonymsOf(processTerm('delete') as string).includes(processTerm('remove') as string))
  assert.deepEqual(tokenize(`a ${'x'.repeat(41)} b`), ['a', 'b'], 'a blob is not a word')
})

test('ranking: names, camelCase, stems, synonyms, parameter enums and titles all reach the right tool', async () => {
  assert.equal(await top('open issues'), 'create_issue')
  assert.equal(await top('erase a file'), 'deleteFile', 'a synonym of the name\'s word')
  assert.equal(await top('temperature in fahrenheit'), 'get-weather', 'an enum value')
  assert.equal(await top('weather'), 'get-weather', 'the title')
  assert.equal(await top('commit history of a branch'), 'list_commits')
  assert.equal(await top('creat'), 'create_issue', 'a prefix')
  assert.equal(await top('repositry'), 'create_issue', 'a typo (fuzzy)')
  assert.deepEqual(await index.search('the of and', 5), [], 'no searchable word: nothing')
  assert.deepEqual(await index.search('zzzz qqqq', 5), [])
})

test('a query\'s own word weighs more than a synonym of it', async () => {
  const pair = ToolIndex.buildNow([
    toolDocument({ name: 'remove_branch', description: 'Remove a branch' }, 's'),
    toolDocument({ name: 'delete_branch', description: 'Delete a branch' }, 's')
  ])
  const hits = await pair.search('delete branch', 2)
  assert.equal(hits[0]?.index, 1)
  assert.ok((hits[0]?.score ?? 0) > (hits[1]?.score ?? 0))
})

test('bounds: a long query is cut, a huge schema is indexed in part, limit is kept', async () => {
  const huge = { properties: Object.fromEntries(Array.from({ length: 2000 }, (_, i) => [`p${i}`, { description: 'lorem ipsum dolor sit amet' }])) }
  const big = ToolIndex.buildNow([toolDocument({ name: 'wide', description: 'many parameters', inputSchema: huge }, 's')])
  assert.ok(big.textChars < 6000, String(big.textChars))
  // A server's megabyte of description and title is indexed in part too.
  const wordy = ToolIndex.buildNow([toolDocument({ name: 'n'.repeat(10_000), title: 't '.repeat(100_000), description: 'lorem '.repeat(200_000) }, 's')])
  assert.ok(wordy.textChars < 10_000, String(wordy.textChars))
  const long = 'file '.repeat(10_000)
  assert.equal((await index.search(long, 5))[0]?.index, 1)
  assert.equal((await index.search('a issue file weather commits', 2)).length, 2)
})

/** Vectors over three "concepts"; the word "forecast" means weather to it, though no tool says so. */
const conceptEmbedder: Embedder & { calls: number } = {
  calls: 0,
  async embed (texts) {
    this.calls++
    return texts.map((text) => {
      const t = text.toLowerCase()
      return [/weather|forecast|rain/.test(t) ? 1 : 0, /issue|bug/.test(t) ? 1 : 0, /file/.test(t) ? 1 : 0]
    })
  }
}

test('the embeddings hook: vectors computed once at build, fused with the text rank, reaching what words do not', async () => {
  const docs = TOOLS.map((t) => toolDocument(t, 'srv'))
  const semantic = await ToolIndex.build(docs, conceptEmbedder)
  assert.equal(conceptEmbedder.calls, 1)
  assert.equal(await top('will it rain tomorrow', index), undefined, 'the words alone find nothing')
  assert.equal(await top('will it rain tomorrow', semantic), 'get-weather')
  assert.equal(conceptEmbedder.calls, 2, 'one embedding per search')
  assert.equal(await top('open issues', semantic), 'create_issue', 'agreement keeps the text winner')
  const wrong: Embedder = { embed: async () => [[1]] }
  await assert.rejects(ToolIndex.build(docs, wrong), /answered 1 vectors for 4 tools/)
})

test('a catalog of thousands of long tools is indexed in slices, the event loop turning between them, and fitted to MAX_INDEX_CHARS', async () => {
  // A tenant's kept lists may hold 32 MiB of definitions: 20,000 tools of ~900 characters took ~4 s of the event loop
  // at once to index (MiniSearch's own work), and ~12 s for 50,000.
  const words = ['alpha', 'beta', 'gamma', 'delta', 'omega', 'sigma']
  const docs = Array.from({ length: 6000 }, (_, i) => toolDocument({
    name: `tool_${i}`,
    description: `unique${i} ` + Array.from({ length: 150 }, (_v, j) => `${words[(i + j) % words.length] as string}${(i * 7 + j) % 997}`).join(' ')
  }, 'srv'))
  const total = docs.reduce((n, d) => n + d.name.length + d.description.length + d.source.length, 0)
  assert.ok(total > MAX_INDEX_CHARS, `${total} characters offered`)
  let turns = 0
  let turning = true
  const turn = (): void => { if (turning) { turns++; setImmediate(turn) } }
  setImmediate(turn)
  const big = await ToolIndex.build(docs)
  turning = false
  // Before: built in one go (no turn of the loop until it was done) and holding every character.
  assert.ok(turns >= 20, `the event loop turned ${turns} times during the build`)
  assert.ok(big.textChars <= MAX_INDEX_CHARS && big.textChars > MAX_INDEX_CHARS * 0.99, String(big.textChars))
  assert.equal(big.size, 6000)
  // Every tool keeps its name and the head of its description: each is still found by them.
  for (const i of [0, 2999, 5999]) {
    assert.equal((await big.search(`tool_${i}`, 1))[0]?.index, i)
    assert.equal((await big.search(`unique${i}`, 1))[0]?.index, i)
  }
  // A catalog that fits is indexed whole, as buildNow does it.
  const small = docs.slice(0, 100)
  assert.equal((await ToolIndex.build(small)).textChars, ToolIndex.buildNow(small).textChars)
  assert.equal(ToolIndex.buildNow(small).textChars, small.reduce((n, d) => n + d.name.length + d.description.length + d.source.length, 0))
})
