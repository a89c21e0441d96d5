import type { CallContext } from '../routing/types.js'
import type { ScriptWorkspace } from '../code-mode/index.js'
import type { Sandbox } from './sandbox/index.js'
import type { WorkspaceManager } from './workspace/workspaces.js'
import type { WorkspaceUsage } from './workspace/usage.js'

/** Same ceilings as bash's exec (tools/bash.ts): a script is a command with a socket. */
const MAX_COMMAND_TIMEOUT_MS = 600_000
const MIN_OUTPUT_BYTES = 1024
const MAX_OUTPUT_BYTES = 10 * 1024 * 1024

/**
 * Where code mode's scripts run (SPEC 19): the call's workspace (resolved for its tenant as every
 * built-in's is), in the tenant's sandbox, as its uid, under its cgroups and rlimits, with no
 * network, and no file past the workspace's quota room (RLIMIT_FSIZE, as bash's exec). A script
 * takes no workspace write lock: its inner write calls take it, one by one.
 */
export function scriptHost (
  workspaces: WorkspaceManager,
  sandbox: Sandbox,
  usage: WorkspaceUsage | undefined
): (ctx: CallContext) => Promise<ScriptWorkspace> {
  return async (ctx) => {
    const ws = await workspaces.resolve(ctx.workspace, ctx.caller)
    await sandbox.prepareWorkspace(ws)
    return {
      owner: ws.owner ?? sandbox.owner,
      timeoutCeilingMs: Math.min(ws.limits.commandTimeoutMs, MAX_COMMAND_TIMEOUT_MS),
      exec: async ({ command, binds, timeoutMs, signal }) => {
        const byFs = usage?.enforcedByFs(ws) === true
        const before = usage !== undefined && !byFs ? await usage.current(ws) : undefined
        const room = usage !== undefined && before !== undefined ? Math.max(0, usage.quotaBytes - before.bytes) : undefined
        return await sandbox.exec({
          workspace: ws,
          command,
          cwd: ws.root,
          binds,
          timeoutMs,
          maxOutputBytes: Math.min(MAX_OUTPUT_BYTES, Math.max(MIN_OUTPUT_BYTES, ws.limits.outputMaxChars)),
          signal,
          ...(room !== undefined ? { fileSizeBytes: room } : {})
        })
      }
    }
  }
}
