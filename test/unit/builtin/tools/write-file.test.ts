import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdir, readFile } from 'node:fs/promises'
import path from 'node:path'
import { writeFileTool } from '../../../../src/builtin/tools/write-file.js'
import { assertClosedSchema, toolError, toolWorkspace } from '../../../helpers/tool-workspace.js'

test('schema is a closed object with the AI4J parameter names', () => {
  assertClosedSchema(writeFileTool, ['path', 'content', 'mode'])
})

test('write_file modes', async (t) => {
  const { root, run } = await toolWorkspace(t)
  assert.deepEqual(await run(writeFileTool, { path: 'n/a.txt', content: 'hi', mode: 'create' }), { path: 'n/a.txt', mode: 'create', created: true, appended: false, bytesWritten: 2 })
  await toolError(run(writeFileTool, { path: 'n/a.txt', content: 'x', mode: 'create' }), /^File already exists: n\/a.txt$/)
  assert.deepEqual(await run(writeFileTool, { path: 'n/a.txt', content: '!', mode: 'append' }), { path: 'n/a.txt', mode: 'append', created: false, appended: true, bytesWritten: 1 })
  assert.equal(await readFile(path.join(root, 'n/a.txt'), 'utf8'), 'hi!')
  const r = await run(writeFileTool, { path: 'n/a.txt', content: 'new' })
  assert.equal(r.mode, 'overwrite')
  assert.equal(r.created, false)
  assert.ok(!('resolvedPath' in r))
  assert.equal(await readFile(path.join(root, 'n/a.txt'), 'utf8'), 'new')
  await mkdir(path.join(root, 'dir'))
  await toolError(run(writeFileTool, { path: 'dir', content: 'x' }), /Path is a directory: dir/)
  await toolError(run(writeFileTool, { path: 'x', content: 'x', mode: 'bogus' }), /mode/)
})
