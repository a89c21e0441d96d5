import type { Config } from '../config.js'
import type { Logger } from '../logger.js'
import { ProcessManager } from './processes/index.js'
import { createSandbox, parseUidRange, tenantOwners } from './sandbox/index.js'
import type { Sandbox, UidStore } from './sandbox/index.js'
import { BuiltinSource } from './source.js'
import { applyPatchTool } from './tools/apply-patch.js'
import { createBashTool } from './tools/bash.js'
import { editTool } from './tools/edit.js'
import { globTool } from './tools/glob.js'
import { createGrepTool } from './tools/grep/tool.js'
import { readFileTool } from './tools/read-file.js'
import { updateAgentsMdTool } from './tools/update-agents-md.js'
import { writeFileTool } from './tools/write-file.js'
import type { BuiltinTool } from './types.js'
import { WorkspaceManager } from './workspace/workspaces.js'
import { WorkspaceUsage } from './workspace/usage.js'

/** Tier 1 assembled: the 8 tools, the workspaces they run in, the sandbox and background processes. */
export interface Builtins {
  source: BuiltinSource
  sandbox: Sandbox
  processes: ProcessManager
  workspaces: WorkspaceManager
  /** Per-workspace bytes/files figures and the quota (WORKSPACE_QUOTA_BYTES, WORKSPACE_MAX_FILES). */
  usage: WorkspaceUsage
  /** Kills every sandboxed and background process. */
  close: () => Promise<void>
}

/**
 * Builds tier 1. The sandbox probe runs here, at start-up: with SANDBOX=bwrap a failing probe
 * throws (start-up stops with what to install or which container options to set).
 */
export async function createBuiltins (config: Config, logger: Logger, deps: { uids?: UidStore } = {}): Promise<Builtins> {
  const uidRange = parseUidRange(config.sandboxUidRange)
  const sandbox = await createSandbox({
    mode: config.sandbox,
    logger,
    // A uid per tenant needs the store that allocates them; without it all tenants share one.
    ...(deps.uids !== undefined ? { uidRange } : {}),
    ...(config.sandboxCgroupRoot !== undefined ? { cgroupRoot: config.sandboxCgroupRoot } : {}),
    tenantLimits: { memoryBytes: config.sandboxTenantMemoryBytes, pids: config.sandboxTenantPids }
  })
  const workspaces = new WorkspaceManager({
    workspacesDir: config.workspacesDir,
    workspaceBases: config.workspaceBases,
    readRoots: config.readRoots,
    maxLimits: {
      readMaxChars: config.readMaxChars,
      commandTimeoutMs: config.commandTimeoutMs,
      bashLogChars: config.bashLogChars,
      maxProcessOutputChars: config.maxProcessOutputChars,
      outputMaxChars: config.outputMaxChars
    },
    ...(sandbox.owner ? { owner: sandbox.owner } : {}),
    ...(sandbox.isolation.uidPerTenant && deps.uids !== undefined ? { ownerFor: tenantOwners(deps.uids, uidRange) } : {})
  })
  // One figure per workspace, shared by the file tools (they reserve before writing) and bash (watched while it runs).
  const usage = new WorkspaceUsage({ quotaBytes: config.workspaceQuotaBytes, maxFiles: config.workspaceMaxFiles })
  const processes = new ProcessManager({ sandbox, maxRunningPerTenant: config.maxProcessesPerTenant })
  // AI4J's allCodingToolNames() order.
  const tools: BuiltinTool[] = [
    createBashTool({ sandbox, processes }),
    readFileTool,
    writeFileTool,
    applyPatchTool,
    globTool,
    // ripgrep runs inside the tenant's sandbox (it opens files by path), never on host paths.
    createGrepTool({ sandbox }),
    editTool,
    updateAgentsMdTool
  ]
  return {
    source: new BuiltinSource(tools, workspaces, { usage }),
    sandbox,
    processes,
    workspaces,
    usage,
    close: async () => {
      await processes.killAll()
      await sandbox.close()
    }
  }
}
export type { SandboxIsolation } from './sandbox/index.js'
