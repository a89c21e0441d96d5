import { test } from 'node:test'
import assert from 'node:assert/strict'
import { templateMatches } from '../../../src/mcp-server/uri-template-match.js'

test('URIs that expand a template match it; others do not', () => {
  const yes: Array<[string, string]> = [
    ['file:///docs/{name}', 'file:///docs/readme.md'],
    ['test://template/{id}/data', 'test://template/123/data'],
    ['notes://{book}/{page}', 'notes://a/b'],
    ['repo://{owner}/{repo}{/path*}', 'repo://me/r/src/index.ts'],
    ['search://items{?q,limit}', 'search://items?q=x&limit=2'],
    ['blob://{+path}', 'blob://a/b/c?x#y'],
    ['x://{a}-{b}', 'x://one-two-three'],
    ['doc://{id}.json', 'doc://a.b.json'],
    ['plain://fixed', 'plain://fixed']
  ]
  for (const [template, uri] of yes) assert.equal(templateMatches(template, uri), true, `${template} ~ ${uri}`)
  const no: Array<[string, string]> = [
    ['file:///docs/{name}', 'file:///docs/a/b'],
    ['test://template/{id}/data', 'test://template/123/other'],
    ['notes://{book}/{page}', 'other://a/b'],
    ['doc://{id}.json', 'doc://a.yaml'],
    ['plain://fixed', 'plain://fixed/more'],
    ['broken://{id', 'broken://x']
  ]
  for (const [template, uri] of no) assert.equal(templateMatches(template, uri), false, `${template} !~ ${uri}`)
})

// The attack: a tenant's server lists a template of many reserved expansions and the tenant reads
// a long URI that almost matches. A backtracking matcher (the SDK's regex, `^(.+)(.+)...Z$`) takes
// exponential time and holds the event loop; this one is one pass. The test's timeout is the bound.
test('a template built to make a regex backtrack is decided in one pass', { timeout: 10_000 }, () => {
  const template = 'x:' + '{+a}{+b}{+c}{+d}{+e}{+f}{+g}{+h}{+i}{+j}{+k}{+l}'.repeat(4) + 'Z'
  const uri = 'x:' + 'a'.repeat(60_000)
  for (let i = 0; i < 100; i++) assert.equal(templateMatches(template, uri), false)
  assert.equal(templateMatches(template, uri + 'Z'), true)
  // Many literals with long spans between them: still bounded by length x literals.
  const many = Array.from({ length: 200 }, (_, i) => `{v${i}}-`).join('') + 'end'
  assert.equal(templateMatches(many, 'a-'.repeat(200) + 'end'), true)
  assert.equal(templateMatches(many, 'a-'.repeat(199) + 'end'), false)
  // Over the bounds: not matched at all.
  assert.equal(templateMatches('x:{+a}', 'x:' + 'a'.repeat(70_000)), false)
})
