import { test } from 'node:test'
import assert from 'node:assert/strict'
import { buildTestApp } from '../../helpers/app.js'

// The quota on the wire: a refused write is a 200 result with isError and the tool-level code
// WORKSPACE_QUOTA_EXCEEDED, and nothing of it is in the workspace.

test('write_file past WORKSPACE_QUOTA_BYTES or WORKSPACE_MAX_FILES: isError with error.code WORKSPACE_QUOTA_EXCEEDED, nothing written', async (t) => {
  const app = await buildTestApp(t, { env: { WORKSPACE_QUOTA_BYTES: String(1024 * 1024), WORKSPACE_MAX_FILES: '3' } })
  const call = async (body: Record<string, unknown>): Promise<any> => {
    const res = await app.inject({ method: 'POST', url: '/invoke', payload: { userId: 'alice', ...body } })
    assert.equal(res.statusCode, 200)
    return res.json()
  }
  let r = await call({ name: 'write_file', arguments: { path: 'big.txt', content: 'x'.repeat(1024 * 1024 + 1) } })
  assert.equal(r.isError, true)
  assert.equal(r.error.code, 'WORKSPACE_QUOTA_EXCEEDED')
  assert.match(r.error.message, /quota/)
  r = await call({ name: 'read_file', arguments: { path: 'big.txt' } })
  assert.match(r.error.message, /File does not exist/)

  for (const name of ['a', 'b', 'c']) {
    r = await call({ name: 'write_file', arguments: { path: name, content: name } })
    assert.equal(r.isError, false, r.output)
  }
  r = await call({ name: 'write_file', arguments: { path: 'd', content: 'd' } })
  assert.equal(r.error.code, 'WORKSPACE_QUOTA_EXCEEDED')
  assert.match(r.error.message, /file limit/)
  // Another workspace has its own figure.
  r = await call({ name: 'write_file', arguments: { path: 'd', content: 'd' }, context: { workspaceId: 'other' } })
  assert.equal(r.isError, false, r.output)
})
