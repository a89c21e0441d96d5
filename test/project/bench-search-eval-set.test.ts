import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { loadEvalSet, paddedServers, toolKey } from '../../bench/fixtures/search/eval-set.js'
import type { EvalQuery, EvalServer } from '../../bench/fixtures/search/eval-set.js'
import { ID_PATTERN, WIRE_NAME_PATTERN } from '../../src/naming/names.js'

// The tool-search evaluation set of bench row 7 (bench/fixtures/search/) and the process that serves it.

const toolCount = (servers: readonly EvalServer[]): number => servers.reduce((n, s) => n + s.tools.length, 0)

test('the set loads: 250+ published tools, near-duplicate servers marked eval, 120+ queries', () => {
  const { servers, queries } = loadEvalSet()
  assert.ok(toolCount(servers.filter((s) => s.origin === 'published')) >= 250)
  const written = servers.filter((s) => s.origin === 'eval').map((s) => s.id)
  for (const id of ['jira', 'linear', 'object-storage', 'mysql']) assert.ok(written.includes(id), id)
  assert.ok(queries.length >= 120)
})

test('server ids are unique valid ids; tool names are unique within a server and valid wire names', () => {
  const { servers } = loadEvalSet()
  assert.equal(new Set(servers.map((s) => s.id)).size, servers.length)
  for (const s of servers) {
    assert.match(s.id, ID_PATTERN)
    const names = s.tools.map((t) => t.name)
    assert.deepEqual(names.filter((n, i) => names.indexOf(n) !== i), [], `duplicate tool names in ${s.id}`)
    for (const n of names) assert.match(n, WIRE_NAME_PATTERN, `${s.id}/${n}`)
  }
})

test('every inputSchema is an object schema and every tool has a description', () => {
  for (const s of loadEvalSet().servers) {
    for (const t of s.tools) {
      assert.equal(t.inputSchema.type, 'object', `${s.id}/${t.name}`)
      const props = t.inputSchema.properties
      assert.ok(props === undefined || (typeof props === 'object' && props !== null && !Array.isArray(props)), `${s.id}/${t.name} properties`)
      assert.ok(t.description.trim().length > 0, `${s.id}/${t.name} description`)
    }
  }
})

test('every expected tool exists, and no query is listed twice', () => {
  const { servers, queries } = loadEvalSet()
  const keys = new Set(servers.flatMap((s) => s.tools.map((t) => toolKey(s.id, t.name))))
  for (const q of queries) {
    for (const e of q.expected) assert.ok(keys.has(e), `"${q.query}" expects ${e}, which servers.json lacks`)
    assert.equal(new Set(q.expected).size, q.expected.length, q.query)
  }
  const texts = queries.map((q) => q.query.toLowerCase())
  assert.deepEqual(texts.filter((t, i) => texts.indexOf(t) !== i), [])
})

const norm = (t: string): string => t.toLowerCase().replace(/\s+/g, ' ').trim()

/**
 * A set of queries kept apart from queries.json: `min`+ queries, every expected tool exists, none
 * listed twice, no query text shared with `others`, and every server answers at least one query.
 */
function checkSeparateSet (label: string, set: readonly EvalQuery[], min: number, others: readonly EvalQuery[]): void {
  const { servers } = loadEvalSet()
  assert.ok(set.length >= min, `${label}: ${set.length} queries, want ${min}+`)
  const keys = new Set(servers.flatMap((s) => s.tools.map((t) => toolKey(s.id, t.name))))
  for (const q of set) {
    for (const e of q.expected) assert.ok(keys.has(e), `${label} "${q.query}" expects ${e}, which servers.json lacks`)
    assert.equal(new Set(q.expected).size, q.expected.length, q.query)
  }
  const texts = set.map((q) => norm(q.query))
  assert.deepEqual(texts.filter((t, i) => texts.indexOf(t) !== i), [])
  const seen = new Set(others.map((q) => norm(q.query)))
  assert.deepEqual(texts.filter((t) => seen.has(t)), [], `${label}: query text shared with another set`)
  // Spread over the whole set: every server answers at least one of these queries.
  const answered = new Set(set.flatMap((q) => q.expected.map((e) => e.slice(0, e.indexOf('/')))))
  assert.deepEqual(servers.map((s) => s.id).filter((id) => !answered.has(id)), [])
}

test('the held-out queries: 100+, every expected tool exists, none listed twice, no query text shared with queries.json', () => {
  const { queries, holdout } = loadEvalSet()
  checkSeparateSet('held-out', holdout, 100, queries)
})

test('the test queries: 150+, every expected tool exists, none listed twice, no query text shared with queries.json or the held-out set', () => {
  const { queries, holdout, test: testSet } = loadEvalSet()
  checkSeparateSet('test', testSet, 150, [...queries, ...holdout])
})

test('paddedServers(1000) gives exactly 1,000 tools, the set first, the same every time', () => {
  const a = paddedServers(1000)
  const b = paddedServers(1000)
  assert.equal(toolCount(a), 1000)
  assert.deepEqual(a, b)
  const set = loadEvalSet().servers
  assert.deepEqual(a.slice(0, set.length), set)
  const padding = a.slice(set.length)
  assert.ok(padding.length > 0 && padding.every((s) => s.origin === 'padding' && ID_PATTERN.test(s.id)))
  assert.equal(new Set(a.map((s) => s.id)).size, a.length)
  for (const s of padding) {
    assert.equal(new Set(s.tools.map((t) => t.name)).size, s.tools.length, s.id)
    for (const t of s.tools) assert.equal(t.inputSchema.type, 'object')
  }
  assert.equal(toolCount(paddedServers(toolCount(set) + 1)), toolCount(set) + 1)
  assert.throws(() => paddedServers(toolCount(set) - 1), /more than/)
})

test('search-servers.ts serves each server\'s definitions as given and answers a call', async (t) => {
  const child = spawn(process.execPath, ['--import', 'tsx', 'bench/fixtures/search-servers.ts', 'real'], { stdio: ['pipe', 'pipe', 'inherit'] })
  t.after(() => { child.kill('SIGKILL') })
  let out = ''
  child.stdout.on('data', (d: Buffer) => { out += d.toString() })
  while (!/^READY .*\n/m.test(out)) {
    if (child.exitCode !== null) assert.fail(`exited: ${out}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  const urls = (JSON.parse(/^READY (.*)$/m.exec(out)?.[1] ?? '{}') as { servers: Record<string, string> }).servers
  const { servers } = loadEvalSet()
  assert.deepEqual(Object.keys(urls).sort(), servers.map((s) => s.id).sort())
  for (const id of ['github-official', 'fetch', 'jira']) {
    const server = servers.find((s) => s.id === id) as EvalServer
    const client = new Client({ name: 'test', version: '1' })
    await client.connect(new StreamableHTTPClientTransport(new URL(urls[id] as string)))
    const listed = (await client.listTools()).tools
    assert.deepEqual(listed, server.tools, id)
    const first = server.tools[0]?.name as string
    assert.deepEqual((await client.callTool({ name: first, arguments: {} })).content, [{ type: 'text', text: `${id}:${first}` }])
    await client.close()
  }
  // stdin closing is the bench's "I am gone": the child must exit by itself.
  child.stdin.end()
  const [code] = await once(child, 'exit') as [number | null]
  assert.equal(code, 0)
})
