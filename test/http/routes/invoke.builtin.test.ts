import { test } from 'node:test'
import assert from 'node:assert/strict'
import { buildTestApp } from '../../helpers/app.js'

test('@builtin and @builtin-readonly groups list the built-ins in AI4J order', async (t) => {
  const app = await buildTestApp(t)
  let body = (await app.inject({ method: 'GET', url: '/tools?functions=@builtin&format=anthropic' })).json()
  assert.deepEqual(body.tools.map((x: any) => x.name), ['bash', 'read_file', 'write_file', 'apply_patch', 'glob', 'grep', 'edit', 'update_agents_md'])
  assert.ok(body.tools.every((x: any) => x.input_schema.type === 'object'))
  body = (await app.inject({ method: 'GET', url: '/tools?functions=@builtin-readonly,calculate' })).json()
  assert.deepEqual(body.tools.map((x: any) => x.function.name), ['read_file', 'glob', 'grep', 'calculate'])
})

test('built-ins run in the tenant workspace; tenants never share one', async (t) => {
  const app = await buildTestApp(t)
  const call = async (body: Record<string, unknown>): Promise<any> => (await app.inject({ method: 'POST', url: '/invoke', payload: body })).json()
  let r = await call({ name: 'write_file', userId: 'alice', arguments: { path: 'notes.md', content: 'alice secret\n' } })
  assert.equal(r.route, 'builtin')
  assert.equal(r.isError, false, r.output)
  assert.equal(JSON.parse(r.output).created, true)
  r = await call({ name: 'read_file', userId: 'alice', arguments: { path: 'notes.md' } })
  assert.equal(JSON.parse(r.output).content, 'alice secret')
  r = await call({ name: 'read_file', userId: 'bob', arguments: { path: 'notes.md' } })
  assert.equal(r.isError, true)
  assert.match(r.error.message, /File does not exist/)
  r = await call({ name: 'read_file', userId: 'bob', arguments: { path: '../alice/default/notes.md' } })
  assert.equal(r.isError, true)
  assert.match(r.error.message, /escapes workspace root/)
  // another workspace of the same tenant is separate too
  r = await call({ name: 'read_file', userId: 'alice', arguments: { path: 'notes.md' }, context: { workspaceId: 'other' } })
  assert.equal(r.isError, true)
  // invalid built-in arguments never reach the tool
  r = await call({ name: 'edit', userId: 'alice', arguments: { path: 'notes.md', old_string: 'a' } })
  assert.equal(r.error.code, 'GW_INVALID_ARGUMENTS')
  assert.match(r.error.message, /new_string/)
})

test('concurrent edits to one file through batch invoke are serialised: no lost update', async (t) => {
  const app = await buildTestApp(t, { env: { BATCH_CONCURRENCY: '16' } })
  const lines = Array.from({ length: 40 }, (_, i) => `line ${i}: todo`)
  await app.inject({ method: 'POST', url: '/invoke', payload: { name: 'write_file', arguments: { path: 'f.txt', content: lines.join('\n') + '\n' } } })
  const calls = lines.map((line, i) => ({ name: 'edit', callId: `e${i}`, arguments: { path: 'f.txt', old_string: line, new_string: `line ${i}: done` } }))
  const res = await app.inject({ method: 'POST', url: '/invoke/batch', payload: { calls } })
  const { results } = res.json()
  assert.equal(results.length, 40)
  for (const r of results) assert.equal(r.isError, false, r.output)
  const read = await app.inject({ method: 'POST', url: '/invoke', payload: { name: 'read_file', arguments: { path: 'f.txt' } } })
  const content = JSON.parse(read.json().output).content as string
  assert.equal((content.match(/: done/g) ?? []).length, 40)
  assert.equal((content.match(/: todo/g) ?? []).length, 0)
})

test('one batch on one workspace runs in the listed order: each read sees the write and edit before it', async (t) => {
  // A model's turn "write a haiku to haiku.txt, then read it back": reads are not writes, yet they must see them.
  const app = await buildTestApp(t, { env: { BATCH_CONCURRENCY: '8' } })
  for (let round = 0; round < 3; round++) {
    const ws = (id: string): Record<string, unknown> => ({ userId: 'alice', context: { workspaceId: `${id}-${round}` } })
    const calls = [
      { name: 'write_file', ...ws('one'), arguments: { path: 'f.txt', content: 'first\n' } },
      { name: 'read_file', ...ws('one'), arguments: { path: 'f.txt' } },
      { name: 'edit', ...ws('one'), arguments: { path: 'f.txt', old_string: 'first', new_string: 'second' } },
      { name: 'read_file', ...ws('one'), arguments: { path: 'f.txt' } },
      { name: 'glob', ...ws('one'), arguments: { pattern: '*.txt' } },
      // Another workspace is another lane: it sees nothing of the first, and its own write.
      { name: 'read_file', ...ws('two'), arguments: { path: 'f.txt' } },
      { name: 'write_file', ...ws('two'), arguments: { path: 'f.txt', content: 'other\n' } },
      { name: 'read_file', ...ws('two'), arguments: { path: 'f.txt' } }
    ]
    const res = await app.inject({ method: 'POST', url: '/invoke/batch', payload: { calls } })
    assert.equal(res.statusCode, 200, res.body)
    const results = res.json().results as Array<{ isError: boolean, output: string }>
    assert.equal(results[1]!.isError, false, results[1]!.output)
    assert.equal(JSON.parse(results[1]!.output).content, 'first')
    assert.equal(results[3]!.isError, false, results[3]!.output)
    assert.equal(JSON.parse(results[3]!.output).content, 'second')
    assert.match(results[4]!.output, /f\.txt/)
    assert.equal(results[5]!.isError, true)
    assert.match(results[5]!.output, /does not exist/)
    assert.equal(JSON.parse(results[7]!.output).content, 'other')
  }
})
