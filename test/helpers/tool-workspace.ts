import assert from 'node:assert/strict'
import { mkdir, mkdtemp, realpath, rm } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { ToolError } from '../../src/builtin/types.js'
import type { Workspace } from '../../src/builtin/types.js'
import type { BuiltinTool } from '../../src/builtin/tool.js'

// A workspace for the file tools' unit tests (read_file, write_file, edit, update_agents_md),
// and the two checks they share.

const LIMITS = { readMaxChars: 12000, commandTimeoutMs: 30000, bashLogChars: 12000, maxProcessOutputChars: 120000, outputMaxChars: 100000 }

/** A fresh workspace root under a temporary directory, removed after the test; `run` calls a tool in it. */
export async function toolWorkspace (t: { after: (fn: () => Promise<void>) => void }) {
  const dir = await realpath(await mkdtemp(path.join(os.tmpdir(), 'tg-ft-')))
  t.after(() => rm(dir, { recursive: true, force: true }))
  const root = path.join(dir, 'root')
  await mkdir(root)
  const ws: Workspace = { tenant: 't', workspaceId: 'default', root, readRoots: [], limits: { ...LIMITS } }
  const run = (tool: BuiltinTool, args: Record<string, unknown>) =>
    tool.run(args, { workspace: ws, signal: new AbortController().signal }) as Promise<Record<string, unknown>>
  return { dir, root, ws, run }
}

/** `p` rejects with a ToolError whose message matches `re`. */
export async function toolError (p: Promise<unknown>, re: RegExp): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof ToolError, `expected ToolError, got ${String(err)}`)
    assert.match(err.message, re)
    return true
  })
}

/** The tool's schema is a closed object with exactly these parameters, each described. */
export function assertClosedSchema (tool: BuiltinTool, names: string[]): void {
  const s = tool.inputSchema as { type: string, properties: Record<string, { description?: string }>, additionalProperties: boolean }
  assert.equal(s.type, 'object')
  assert.equal(s.additionalProperties, false)
  assert.deepEqual(Object.keys(s.properties), names)
  for (const p of Object.values(s.properties)) assert.ok((p.description ?? '').length > 10)
}
