import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { BuiltinSource } from '../../../../src/builtin/source.js'
import { applyPatchTool } from '../../../../src/builtin/tools/apply-patch.js'
import { editTool } from '../../../../src/builtin/tools/edit.js'
import { updateAgentsMdTool } from '../../../../src/builtin/tools/update-agents-md.js'
import { writeFileTool } from '../../../../src/builtin/tools/write-file.js'
import { ToolError } from '../../../../src/builtin/types.js'
import type { Workspace } from '../../../../src/builtin/types.js'
import type { BuiltinTool } from '../../../../src/builtin/tool.js'
import { WorkspaceUsage } from '../../../../src/builtin/workspace/usage.js'
import { toolErrorCode } from '../../../../src/routing/output.js'
import type { CallContext } from '../../../../src/routing/types.js'
import { toolWorkspace } from '../../../helpers/tool-workspace.js'

// The file tools under WORKSPACE_QUOTA_BYTES / WORKSPACE_MAX_FILES: a write that would pass either
// is refused with the quota reason (WORKSPACE_QUOTA_EXCEEDED) and leaves the tree as it was.

async function quotaWorkspace (t: Parameters<typeof toolWorkspace>[0], quotaBytes: number, maxFiles: number) {
  const base = await toolWorkspace(t)
  const usage = new WorkspaceUsage({ quotaBytes, maxFiles })
  const run = async (tool: BuiltinTool, args: Record<string, unknown>) =>
    await tool.run(args, { workspace: base.ws, signal: new AbortController().signal, usage }) as Record<string, unknown>
  return { ...base, usage, run }
}

async function quotaRefusal (p: Promise<unknown>): Promise<ToolError> {
  let caught: unknown
  await assert.rejects(p, (err: unknown) => { caught = err; return true })
  assert.ok(caught instanceof ToolError, `expected a ToolError, got ${String(caught)}`)
  assert.equal(caught.reason, 'quota', caught.message)
  assert.match(caught.message, /WORKSPACE_QUOTA_EXCEEDED/)
  return caught
}

async function tree (root: string): Promise<string[]> {
  return (await readdir(root, { recursive: true })).map(String).sort()
}

test('write_file: a write past the byte quota is refused with nothing written; within it, the figure follows the writes', async (t) => {
  const { root, ws, usage, run } = await quotaWorkspace(t, 1000, 100)
  await writeFile(path.join(root, 'old.txt'), 'x'.repeat(600))
  const written = await run(writeFileTool, { path: 'a.txt', content: 'y'.repeat(300) })
  assert.deepEqual(written, { path: 'a.txt', mode: 'overwrite', created: true, appended: false, bytesWritten: 300 })
  assert.deepEqual(usage.get(ws), { bytes: 900, files: 2, exact: true })

  await quotaRefusal(run(writeFileTool, { path: 'b.txt', content: 'z'.repeat(101) }))
  await quotaRefusal(run(writeFileTool, { path: 'deep/er/b.txt', content: 'z'.repeat(101) }))
  await quotaRefusal(run(writeFileTool, { path: 'a.txt', content: 'z'.repeat(101), mode: 'append' }))
  await quotaRefusal(run(writeFileTool, { path: 'a.txt', content: 'z'.repeat(401) }))
  assert.deepEqual(await tree(root), ['a.txt', 'old.txt'], 'no file, folder or temp file of a refused write')
  assert.equal(await readFile(path.join(root, 'a.txt'), 'utf8'), 'y'.repeat(300))
  assert.deepEqual(usage.get(ws), { bytes: 900, files: 2, exact: true }, 'a refusal reserves nothing')

  // Up to the quota exactly is fine, and so is replacing a file with a smaller one.
  await run(writeFileTool, { path: 'a.txt', content: 'z'.repeat(400) })
  assert.equal(usage.get(ws)?.bytes, 1000)
  await run(writeFileTool, { path: 'old.txt', content: 'small' })
  assert.deepEqual(usage.get(ws), { bytes: 405, files: 2, exact: true })
  // The kept figure matches a fresh measure.
  const m = await new WorkspaceUsage({ quotaBytes: 1000, maxFiles: 100 }).measure(ws)
  assert.deepEqual(m, { bytes: 405, files: 2, exact: true })
})

test('write_file: new files and the folders made for them count against WORKSPACE_MAX_FILES', async (t) => {
  const { root, ws, usage, run } = await quotaWorkspace(t, 1 << 20, 4)
  await run(writeFileTool, { path: 'one.txt', content: '1' })
  // a/, a/b/, a/b/c.txt would make 4 entries with one.txt: allowed; one more is not.
  await run(writeFileTool, { path: 'a/b/c.txt', content: 'c' })
  assert.deepEqual(usage.get(ws), { bytes: 2, files: 4, exact: true })
  await quotaRefusal(run(writeFileTool, { path: 'd.txt', content: 'd' }))
  await quotaRefusal(run(writeFileTool, { path: 'x/y.txt', content: 'd' }))
  assert.deepEqual(await tree(root), ['a', 'a/b', 'a/b/c.txt', 'one.txt'])
  // Overwriting an existing file adds no entry.
  await run(writeFileTool, { path: 'one.txt', content: 'again' })
})

test('edit: growing a file past the quota is refused and the file is unchanged', async (t) => {
  const { root, run } = await quotaWorkspace(t, 1000, 100)
  const text = 'const a = 1\n'.repeat(50) + 'MARK\n'
  await writeFile(path.join(root, 'f.ts'), text)
  assert.equal(text.length, 605)
  await quotaRefusal(run(editTool, { path: 'f.ts', old_string: 'MARK', new_string: 'M'.repeat(400) }))
  assert.equal(await readFile(path.join(root, 'f.ts'), 'utf8'), text)
  // A growth that fits goes through.
  await run(editTool, { path: 'f.ts', old_string: 'MARK', new_string: 'M'.repeat(390) })
  assert.equal((await readFile(path.join(root, 'f.ts'))).length, 991)
})

test('update_agents_md: a write past the quota is refused', async (t) => {
  const { root, run } = await quotaWorkspace(t, 1024 * 1024, 100)
  await writeFile(path.join(root, 'big'), Buffer.alloc(1024 * 1024 - 10))
  await quotaRefusal(run(updateAgentsMdTool, { action: 'write', content: '# Rules\n'.repeat(4) }))
  assert.deepEqual(await tree(root), ['big'])
  await run(updateAgentsMdTool, { action: 'write', content: '# R\n' })
  assert.equal(await readFile(path.join(root, 'AGENTS.md'), 'utf8'), '# R\n')
})

test('apply_patch: files added past WORKSPACE_MAX_FILES are refused with nothing applied; deletes make room', async (t) => {
  const { root, ws, usage, run } = await quotaWorkspace(t, 1 << 20, 5)
  await mkdir(path.join(root, 'src'))
  await writeFile(path.join(root, 'src', 'keep.ts'), 'old\n')
  await writeFile(path.join(root, 'gone.txt'), 'bye\n')
  // 3 entries now; the patch would add new/, new/a, new/b, c and change keep.ts: 7 entries.
  const patch = [
    '*** Begin Patch',
    '*** Update File: src/keep.ts',
    '@@',
    '-old',
    '+new',
    '*** Add File: new/a.ts',
    '+a',
    '*** Add File: new/b.ts',
    '+b',
    '*** Add File: c.ts',
    '+c',
    '*** End Patch'
  ].join('\n')
  await quotaRefusal(run(applyPatchTool, { patch }))
  assert.deepEqual(await tree(root), ['gone.txt', 'src', 'src/keep.ts'])
  assert.equal(await readFile(path.join(root, 'src', 'keep.ts'), 'utf8'), 'old\n')
  assert.equal(usage.get(ws)?.files, 3)

  // Deleting a file and dropping one addition: 3 - 1 + 3 (new/, new/a.ts, new/b.ts) = 5, at the limit.
  const fits = patch.replace('*** Add File: c.ts\n+c\n', '*** Delete File: gone.txt\n')
  const r = await run(applyPatchTool, { patch: fits })
  assert.equal(r.filesChanged, 4)
  assert.deepEqual(await tree(root), ['new', 'new/a.ts', 'new/b.ts', 'src', 'src/keep.ts'])
  assert.deepEqual(usage.get(ws), { bytes: 8, files: 5, exact: true })
  assert.deepEqual(await new WorkspaceUsage({ quotaBytes: 1 << 20, maxFiles: 5 }).measure(ws), { bytes: 8, files: 5, exact: true })
})

test('apply_patch: content past the byte quota is refused', async (t) => {
  const { root, run } = await quotaWorkspace(t, 2000, 100)
  await writeFile(path.join(root, 'a.txt'), 'a\n'.repeat(900))
  const lines = Array.from({ length: 120 }, () => '+' + 'b'.repeat(20)).join('\n')
  await quotaRefusal(run(applyPatchTool, { patch: `*** Begin Patch\n*** Add File: b.txt\n${lines}\n*** End Patch` }))
  assert.deepEqual(await tree(root), ['a.txt'])
})

test('through the built-in source, a quota refusal is a failed outcome whose code is WORKSPACE_QUOTA_EXCEEDED', async (t) => {
  const { ws } = await toolWorkspace(t)
  const usage = new WorkspaceUsage({ quotaBytes: 1024 * 1024, maxFiles: 10 })
  const source = new BuiltinSource([writeFileTool], { resolve: async (): Promise<Workspace> => ws }, { usage })
  const entry = await source.resolve('write_file', {} as never)
  assert.ok(entry !== undefined)
  const ctx = { workspace: {}, caller: { isAdmin: false }, signal: new AbortController().signal } as unknown as CallContext
  const out = await source.call(entry, { path: 'big.txt', content: 'x'.repeat(1024 * 1024 + 1) }, ctx)
  assert.equal(out.ok, false)
  assert.ok(!out.ok && out.reason === 'quota')
  assert.equal(toolErrorCode('quota'), 'WORKSPACE_QUOTA_EXCEEDED')
  const ok = await source.call(entry, { path: 'small.txt', content: 'x' }, ctx)
  assert.equal(ok.ok, true)
  assert.equal(usage.get(ws)?.bytes, 1)
})
