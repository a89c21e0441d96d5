import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { updateAgentsMdTool } from '../../../../src/builtin/tools/update-agents-md.js'
import { assertClosedSchema, toolError, toolWorkspace } from '../../../helpers/tool-workspace.js'

test('schema is a closed object with the AI4J parameter names', () => {
  assertClosedSchema(updateAgentsMdTool, ['action', 'content', 'text'])
})

test('update_agents_md read/write/append with cap', async (t) => {
  const { root, run } = await toolWorkspace(t)
  assert.deepEqual(await run(updateAgentsMdTool, { action: 'read' }), { action: 'read', path: 'AGENTS.md', exists: false, content: '' })
  await run(updateAgentsMdTool, { action: 'write', content: '# Rules' })
  await run(updateAgentsMdTool, { action: 'append', text: '- be nice\n' })
  assert.equal(await readFile(path.join(root, 'AGENTS.md'), 'utf8'), '# Rules\n- be nice\n')
  await run(updateAgentsMdTool, { action: 'append', text: '- no sep needed' })
  assert.deepEqual(
    await run(updateAgentsMdTool, { action: 'read' }),
    { action: 'read', path: 'AGENTS.md', exists: true, content: '# Rules\n- be nice\n- no sep needed' }
  )
  await toolError(run(updateAgentsMdTool, { action: 'write', content: 'x'.repeat(32 * 1024 + 1) }), /cap/)
  await toolError(run(updateAgentsMdTool, { action: 'append', text: 'x'.repeat(32 * 1024) }), /cap/)
  await toolError(run(updateAgentsMdTool, { action: 'write' }), /content is required/)
})

test('update_agents_md uses .agents/AGENTS.md when only that exists', async (t) => {
  const { root, run } = await toolWorkspace(t)
  await mkdir(path.join(root, '.agents'))
  await writeFile(path.join(root, '.agents', 'AGENTS.md'), 'nested')
  assert.deepEqual(await run(updateAgentsMdTool, { action: 'read' }), { action: 'read', path: '.agents/AGENTS.md', exists: true, content: 'nested' })
  await run(updateAgentsMdTool, { action: 'append', text: 'more' })
  assert.equal(await readFile(path.join(root, '.agents', 'AGENTS.md'), 'utf8'), 'nested\nmore')
})
