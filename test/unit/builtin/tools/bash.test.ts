import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { mkdir, mkdtemp, realpath, rm, symlink } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createSandbox } from '../../../../src/builtin/sandbox/create-sandbox.js'
import type { Sandbox } from '../../../../src/builtin/sandbox/types.js'
import { ProcessManager } from '../../../../src/builtin/processes/process-manager.js'
import { createBashTool, BASH_ACTIONS } from '../../../../src/builtin/tools/bash.js'
import { ToolError, type Workspace } from '../../../../src/builtin/types.js'
import type { BuiltinTool } from '../../../../src/builtin/tool.js'

let sandbox: Sandbox
let processes: ProcessManager
let bash: BuiltinTool
before(async () => {
  sandbox = await createSandbox({ mode: 'bwrap' })
  processes = new ProcessManager({ sandbox, reapIntervalMs: 0 })
  bash = createBashTool({ sandbox, processes })
})
after(async () => {
  await processes.killAll()
  await sandbox.close()
})

async function makeWorkspace (t: { after: (fn: () => Promise<void>) => void }, commandTimeoutMs = 30000, tenant = 'acme'): Promise<Workspace> {
  const root = await realpath(await mkdtemp(join(tmpdir(), 'tg-bash-')))
  t.after(async () => { await rm(root, { recursive: true, force: true }) })
  return {
    tenant,
    workspaceId: 'default',
    root,
    readRoots: [],
    limits: { readMaxChars: 12000, commandTimeoutMs, bashLogChars: 12000, maxProcessOutputChars: 120000, outputMaxChars: 65536 }
  }
}

async function call (ws: Workspace, args: Record<string, unknown>): Promise<Record<string, unknown>> {
  return await bash.run(args, { workspace: ws, signal: new AbortController().signal }) as Record<string, unknown>
}

test('schema: AI4J parameter names and action enum; only action required', () => {
  assert.equal(bash.name, 'bash')
  const props = bash.inputSchema.properties as Record<string, { enum?: string[] }>
  assert.deepEqual(Object.keys(props).sort(), ['action', 'command', 'cwd', 'input', 'limit', 'offset', 'processId', 'timeoutMs'])
  assert.deepEqual(props.action?.enum, [...BASH_ACTIONS])
  assert.deepEqual(bash.inputSchema.required, ['action'])
  assert.equal(bash.mutates({ action: 'exec' }), true)
  assert.equal(bash.mutates({ action: '' }), true)
  assert.equal(bash.mutates({ action: 'logs' }), false)
  assert.equal(bash.mutates({ action: 'list' }), false)
})

test('exec result shape; blank action means exec; workingDirectory is workspace-relative', async (t) => {
  const ws = await makeWorkspace(t)
  await mkdir(join(ws.root, 'src', 'lib'), { recursive: true })
  const r = await call(ws, { action: '', command: 'pwd; echo err >&2; exit 2', cwd: 'src/lib' })
  assert.deepEqual(r, {
    command: 'pwd; echo err >&2; exit 2',
    workingDirectory: 'src/lib',
    stdout: `${ws.root}/src/lib\n`,
    stderr: 'err\n',
    exitCode: 2,
    timedOut: false
  })
  const root = await call(ws, { command: 'true' })
  assert.equal(root.workingDirectory, '.')
  assert.equal(root.exitCode, 0)
})

test('unknown action and missing arguments are clean errors', async (t) => {
  const ws = await makeWorkspace(t)
  await assert.rejects(call(ws, { action: 'explode' }), (e: unknown) => e instanceof ToolError && e.message === 'Unsupported bash action: explode')
  await assert.rejects(call(ws, { action: 'exec' }), /command is required/)
  await assert.rejects(call(ws, { action: 'status' }), /processId is required/)
  await assert.rejects(call(ws, { action: 'exec', command: 'true', timeoutMs: 'soon' }), /timeoutMs must be a number/)
})

test('cwd must resolve inside the workspace (.., absolute, symlink out)', async (t) => {
  const ws = await makeWorkspace(t)
  await symlink('/etc', join(ws.root, 'out'))
  for (const cwd of ['..', '/etc', 'out', 'a/../../x']) {
    await assert.rejects(call(ws, { command: 'true', cwd }), (e: unknown) => e instanceof ToolError && e.message.startsWith('Path escapes workspace root'))
  }
  await assert.rejects(call(ws, { command: 'true', cwd: 'missing' }), /does not exist/)
  await assert.rejects(call(ws, { command: 'true', cwd: 'a\0b' }), /NUL/)
  const abs = await call(ws, { command: 'true', cwd: ws.root })
  assert.equal(abs.workingDirectory, '.')
})

test('timeout: clamped to the workspace limit, exitCode -1, timedOut, hint to use start', async (t) => {
  const ws = await makeWorkspace(t, 400)
  const r = await call(ws, { command: 'echo before; sleep 30', timeoutMs: 600000 })
  assert.equal(r.timedOut, true)
  assert.equal(r.exitCode, -1)
  assert.equal(r.stdout, 'before\n')
  assert.match(String(r.stderr), /timed out after 400 ms/)
  assert.match(String(r.stderr), /action=start.*logs\/status\/write\/stop/)
})

test('background lifecycle through the tool: start, status, logs, write, list, stop', { timeout: 60_000 }, async (t) => {
  const ws = await makeWorkspace(t)
  await mkdir(join(ws.root, 'app'))
  const s = await call(ws, { action: 'start', command: 'echo ready; while read l; do echo "echo:$l"; done', cwd: 'app' })
  assert.deepEqual(Object.keys(s).sort(), ['command', 'endedAt', 'exitCode', 'pid', 'processId', 'startedAt', 'status', 'workingDirectory'])
  assert.equal(s.workingDirectory, 'app')
  const id = String(s.processId)
  assert.equal((await call(ws, { action: 'status', processId: id })).status, 'RUNNING')
  const w = await call(ws, { action: 'write', processId: id, input: 'ping\n' })
  assert.equal(w.bytesWritten, 5)
  let logs: Record<string, unknown> = {}
  for (let i = 0; i < 500 && !String(logs.content ?? '').includes('echo:ping'); i++) {
    logs = await call(ws, { action: 'logs', processId: id, offset: 0 })
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  assert.deepEqual(Object.keys(logs).sort(), ['content', 'exitCode', 'nextOffset', 'offset', 'processId', 'status', 'truncated'])
  assert.equal(logs.content, '[stdout] ready\n[stdout] echo:ping\n')
  const limited = await call(ws, { action: 'logs', processId: id, offset: 0, limit: 5 })
  assert.equal(limited.content, '[stdo')
  assert.equal(limited.nextOffset, 5)
  const list = await call(ws, { action: 'list' }) as unknown as Array<Record<string, unknown>>
  assert.deepEqual(list.map((p) => p.processId), [id])
  const stopped = await call(ws, { action: 'stop', processId: id })
  assert.equal(stopped.status, 'STOPPED')
  const other = { ...ws, tenant: 'someone-else' }
  await assert.rejects(call(other, { action: 'status', processId: id }), (e: unknown) => e instanceof ToolError && e.message === `Unknown processId: ${id}`)
  assert.deepEqual(await call(other, { action: 'list' }), [])
})
