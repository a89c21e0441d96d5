/**
 * run_tools_script's refusals before anything runs (src/code-mode/script-tool.ts): a build whose
 * runners are missing (tsc alone does not copy src/code-mode/runtime), a gateway without the
 * built-ins' sandbox, a call without `allow`. Each is a tool error that says what to do.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { ScriptTool } from '../../../src/code-mode/index.js'
import type { MetaCall } from '../../../src/routing/meta.js'

const never = async (): Promise<never> => { throw new Error('not reached') }
const call = (allow: MetaCall['allow']): MetaCall => ({
  allow,
  userId: 'acme',
  policy: undefined,
  signal: new AbortController().signal,
  includeTrace: false,
  ctx: { callId: 'c1', caller: { userId: 'acme', isAdmin: false }, signal: new AbortController().signal, workspace: {}, timeoutMs: 60_000 }
})

test('run_tools_script says what is missing: the runners in this build, the sandbox, the allow-list', async () => {
  const args = { language: 'javascript', code: 'return 1' }
  const noRunners = new ScriptTool({ host: never, invoke: never, listing: never, maxCalls: 5, runtimeDir: '/nonexistent/runtime' })
  const entry = noRunners.resolve('run_tools_script')
  assert.ok(entry !== undefined)
  assert.equal(noRunners.resolve('tool_search'), undefined)
  let r = await noRunners.call(entry, args, call({ functions: ['@code'] }))
  assert.equal(r.ok, false)
  assert.match(r.ok ? '' : r.message, /runners \(runner\.mjs, runner\.py\) are missing from \/nonexistent\/runtime/)

  const noSandbox = new ScriptTool({ host: undefined, invoke: never, listing: never, maxCalls: 5 })
  r = await noSandbox.call(entry, args, call({ functions: ['@code'] }))
  assert.match(r.ok ? '' : r.message, /needs the built-in tools' sandbox/)
  r = await noSandbox.call(entry, args, call(undefined))
  assert.match(r.ok ? '' : r.message, /call it with `allow`/)
})
