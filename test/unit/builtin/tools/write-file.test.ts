import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdir, readFile, readdir } from 'node:fs/promises'
import path from 'node:path'
import { writeFileTool } from '../../../../src/builtin/tools/write-file.js'
import { editTool } from '../../../../src/builtin/tools/edit.js'
import { LeaseLostError } from '../../../../src/cluster/index.js'
import { assertClosedSchema, toolError, toolWorkspace } from '../../../helpers/tool-workspace.js'

test('schema is a closed object with the AI4J parameter names', () => {
  assertClosedSchema(writeFileTool, ['path', 'content', 'mode'])
})

test('write_file modes', async (t) => {
  const { root, run } = await toolWorkspace(t)
  assert.deepEqual(
    await run(writeFileTool, { path: 'n/a.txt', content: 'hi', mode: 'create' }),
    { path: 'n/a.txt', mode: 'create', created: true, appended: false, bytesWritten: 2 }
  )
  await toolError(run(writeFileTool, { path: 'n/a.txt', content: 'x', mode: 'create' }), /^File already exists: n\/a.txt$/)
  assert.deepEqual(
    await run(writeFileTool, { path: 'n/a.txt', content: '!', mode: 'append' }),
    { path: 'n/a.txt', mode: 'append', created: false, appended: true, bytesWritten: 1 }
  )
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

test('a write whose signal aborted (its workspace lease was lost) is not committed: the file keeps its content, no temp file is left', async (t) => {
  const { root, ws } = await toolWorkspace(t)
  await writeFileTool.run({ path: 'a.txt', content: 'before' }, { workspace: ws, signal: new AbortController().signal })
  const lost = new AbortController()
  lost.abort(new LeaseLostError('The workspace write lease was lost: it expired and another writer holds it'))
  await toolError(writeFileTool.run({ path: 'a.txt', content: 'after' }, { workspace: ws, signal: lost.signal }), /^a\.txt was not written: The workspace write lease was lost/)
  await toolError(editTool.run({ path: 'a.txt', old_string: 'before', new_string: 'after' }, { workspace: ws, signal: lost.signal }), /^a\.txt was not written/)
  assert.equal(await readFile(path.join(root, 'a.txt'), 'utf8'), 'before')
  assert.deepEqual(await readdir(root), ['a.txt'])
})
