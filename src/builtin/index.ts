import type { CallContext } from '../routing/types.js'
import { createHash, randomUUID } from 'node:crypto'
import os from 'node:os'
import path from 'node:path'
import type { Config } from '../config.js'
import { parseDuration } from '../config.js'
import type { Logger } from '../logger.js'
import { KeyedMutex, LeaseLock } from '../cluster/index.js'
import type { Coordination, WriteLock } from '../cluster/index.js'
import { ProcessManager, ProcessService } from './processes/index.js'
import { createSandbox, DEFAULT_UID_RANGE, defaultTenantCpus, parseUidRange, PROCESS_UID_POOL, processDeployment, tenantOwners } from './sandbox/index.js'
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
import type { BuiltinTool } from './tool.js'
import { WorkspaceManager } from './workspace/workspaces.js'
import { CheckpointStore } from './workspace/checkpoint-store.js'
import { WorkspaceLifecycle } from './workspace/lifecycle.js'
import { WorkspaceUsage } from './workspace/usage.js'
import { scriptHost } from './scripts.js'
import type { ScriptWorkspace } from '../code-mode/index.js'
import { probeLoopVolumes, WorkspaceVolumes } from './workspace/volumes.js'
import type { QuotaMode } from './workspace/volumes.js'

/** Tier 1 assembled: the tools (one per name of BUILTIN_NAMES), the workspaces they run in, the sandbox and background processes. */
export interface Builtins {
  source: BuiltinSource
  sandbox: Sandbox
  processes: ProcessManager
  /** What bash's background actions go through: cluster-wide with Redis (docs/CLUSTER.md), else the manager alone. */
  processService: ProcessService
  workspaces: WorkspaceManager
  /** Per-workspace bytes/files figures and the quota (WORKSPACE_QUOTA_BYTES, WORKSPACE_MAX_FILES). */
  usage: WorkspaceUsage
  /** Upload, download, delete, checkpoints and idle expiry of tenant workspaces. */
  lifecycle: WorkspaceLifecycle
  /** How the workspace quota is enforced (WORKSPACE_QUOTA_MODE as resolved), and why not by images when it is not. */
  quota: { mode: QuotaMode, reason: string | null }
  /** Where code mode's scripts run: the call's workspace in the tenant's sandbox (scripts.ts). */
  scripts: (ctx: CallContext) => Promise<ScriptWorkspace>
  /** Kills every sandboxed and background process. */
  close: () => Promise<void>
  /**
   * Serves a background-process call another instance forwarded to this one (the owner); the
   * body is what that instance sent, already authenticated. Undefined without Redis.
   */
  serveForwarded?: (call: unknown) => Promise<unknown>
}

/**
 * Where workspaces go when WORKSPACES_DIR is not set and its default (./data/workspaces) is out of
 * the sandbox uid's reach (`npm start` as root from a clone under /root): tried in order.
 */
const FALLBACK_WORKSPACES_DIRS = ['/var/lib/tool-gateway/workspaces', path.join(os.tmpdir(), 'tool-gateway-workspaces')]

export interface BuiltinDeps {
  /** Allocates each tenant's sandbox uid (the registry store). */
  uids?: UidStore
  fallbackWorkspacesDirs?: string[]
  /** With Redis: process ownership and workspace write leases are cluster-wide. */
  coordination?: Coordination
}

/**
 * Who shares this gateway's table of tenant uids, for the sandbox's claim on the host
 * (src/builtin/sandbox/host-claim.ts). With Redis: an id kept in it (SET NX), the same for every
 * instance on that store and across restarts; the table is kept, so the configured range is claimed
 * as is. Without Redis: this process alone, whose uids are given out afresh at each start.
 */
async function sandboxDeployment (config: Config, deps: BuiltinDeps, logger: Logger): Promise<{ deployment: string, uidsPersisted: boolean }> {
  const c = deps.coordination
  if (c === undefined) return { deployment: processDeployment(), uidsPersisted: false }
  const key = `${c.keyPrefix}sandbox:deployment`
  try {
    await c.redis.set(key, randomUUID(), 'NX')
    const id = await c.redis.get(key)
    if (id !== null) return { deployment: `redis:${id}`, uidsPersisted: true }
  } catch (err) {
    logger.warn({ err }, 'sandbox: the deployment id could not be read from Redis; the Redis settings stand for it')
  }
  // Instances configured alike still match each other; one that read the id from Redis does not (it refuses to share).
  const settings = JSON.stringify([config.redisUrl ?? '', config.redisClusterNodes, config.redisKeyPrefix])
  return { deployment: `redis-settings:${createHash('sha256').update(settings).digest('hex')}`, uidsPersisted: true }
}

/**
 * Builds tier 1. The sandbox probe runs here, at start-up: with SANDBOX=bwrap a failing probe
 * throws (start-up stops with what to install or which container options to set).
 */
export async function createBuiltins (config: Config, logger: Logger, deps: BuiltinDeps = {}): Promise<Builtins> {
  const configured = parseUidRange(config.sandboxUidRange)
  const host = deps.uids !== undefined ? await sandboxDeployment(config, deps, logger) : undefined
  // Without Redis and with the default range, a block of another pool (host-claim.ts: PROCESS_UID_POOL).
  const isDefault = configured.first === DEFAULT_UID_RANGE.first && configured.last === DEFAULT_UID_RANGE.last
  const uidRange = host?.uidsPersisted === false && isDefault ? { ...PROCESS_UID_POOL } : configured
  const sandbox = await createSandbox({
    mode: config.sandbox,
    logger,
    // A uid per tenant needs the store that allocates them; without it all tenants share one.
    ...(host !== undefined ? { uidRange, host } : {}),
    ...(config.sandboxCgroupRoot !== undefined ? { cgroupRoot: config.sandboxCgroupRoot } : {}),
    tenantLimits: { memoryBytes: config.sandboxTenantMemoryBytes, pids: config.sandboxTenantPids, cpus: config.sandboxTenantCpus ?? defaultTenantCpus() }
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
    // The range the sandbox claimed on the host: SANDBOX_UID_RANGE, or without Redis a block of it.
    ...(sandbox.isolation.uidPerTenant && deps.uids !== undefined ? { ownerFor: tenantOwners(deps.uids, sandbox.uidRange ?? uidRange) } : {}),
    ...(config.workspacesDirExplicit === false ? { fallbackDirs: deps.fallbackWorkspacesDirs ?? FALLBACK_WORKSPACES_DIRS } : {}),
    maxWorkspacesPerTenant: config.tenantMaxWorkspaces
  })
  if (workspaces.usedFallback !== undefined) {
    logger.warn({ workspacesDir: workspaces.dir, unreachable: workspaces.usedFallback.from }, `workspaces live in ${workspaces.dir}: the sandbox uid cannot reach the default ${workspaces.usedFallback.from} (set WORKSPACES_DIR to choose)`)
  } else {
    logger.info({ workspacesDir: workspaces.dir }, `workspaces live in ${workspaces.dir}`)
  }
  // One figure per workspace, shared by the file tools (they reserve before writing) and bash (watched while it runs).
  const usage = new WorkspaceUsage({ quotaBytes: config.workspaceQuotaBytes, maxFiles: config.workspaceMaxFiles })
  // The quota in the file system (an image per workspace) when this host allows it, else the
  // polling watchdog (docs/ARCHITECTURE.md#workspace-quota). Existing images are mounted before
  // any call, adopting a SIGKILLed instance's mounts.
  // With Redis, instances may share WORKSPACES_DIR across hosts or containers (docs/CLUSTER.md): an
  // image mounted by two of them would be two file systems on one file, so auto means watchdog
  // there; `loop` is for instances that share one mount namespace (or a single instance).
  const autoReason = deps.coordination !== undefined
    ? 'WORKSPACE_QUOTA_MODE=auto with Redis: instances may share WORKSPACES_DIR across hosts (set loop when they share one host and mount namespace)'
    : undefined
  const mode = config.workspaceQuotaMode === 'auto' && autoReason !== undefined ? 'watchdog' : config.workspaceQuotaMode
  const quota: Builtins['quota'] = {
    mode: 'watchdog',
    reason: config.workspaceQuotaMode === 'watchdog' ? 'WORKSPACE_QUOTA_MODE=watchdog' : mode === 'watchdog' ? autoReason ?? null : null
  }
  let volumes: WorkspaceVolumes | undefined
  if (mode !== 'watchdog') {
    const probe = await probeLoopVolumes(workspaces.stateDir)
    if (probe.ok) {
      volumes = new WorkspaceVolumes({
        stateDir: workspaces.stateDir,
        workspacesDir: workspaces.dir,
        quotaBytes: config.workspaceQuotaBytes,
        maxFiles: config.workspaceMaxFiles,
        logger
      })
      const mounted = await volumes.mountAll()
      workspaces.useVolumes(volumes)
      usage.useVolumes(volumes)
      quota.mode = 'loop'
      logger.info({ quotaMode: 'loop', mounted }, `workspace quota: enforced by the file system (a loop-mounted ext4 image per workspace; ${mounted} mounted)`)
    } else if (config.workspaceQuotaMode === 'loop') {
      throw new Error(`WORKSPACE_QUOTA_MODE=loop: ${probe.reason}`)
    } else {
      quota.reason = probe.reason
    }
  }
  if (quota.mode === 'watchdog') {
    logger.warn({ quotaMode: 'watchdog', reason: quota.reason }, `workspace quota: enforced by a polling watchdog (${quota.reason ?? ''}); fast parallel writers can pass it by more than 64 MiB`)
  }
  // The service files each process's end in Redis through the manager's hook (bound once both exist).
  const bound: { service?: ProcessService } = {}
  const processes = new ProcessManager({ sandbox, maxRunningPerTenant: config.maxProcessesPerTenant, onEnded: (ws, snap) => bound.service?.ended(ws, snap) })
  const service = bound.service = new ProcessService({
    local: processes,
    logger,
    ...(deps.coordination !== undefined ? { coordination: deps.coordination } : {})
  })
  // AI4J's allCodingToolNames() order.
  const tools: BuiltinTool[] = [
    createBashTool({ sandbox, processes: service }),
    readFileTool,
    writeFileTool,
    applyPatchTool,
    globTool,
    // ripgrep runs inside the tenant's sandbox (it opens files by path), never on host paths.
    createGrepTool({ sandbox }),
    editTool,
    updateAgentsMdTool
  ]
  // One write lock per workspace, shared by mutating tool calls and the lifecycle (upload swap, restore, delete);
  // with Redis a lease every instance honours, since instances may serve the same workspace.
  const writes: WriteLock = deps.coordination !== undefined
    ? new LeaseLock(deps.coordination, { leaseMs: config.workspaceLockLeaseMs })
    : new KeyedMutex()
  const checkpoints = new CheckpointStore({
    dir: path.join(workspaces.stateDir, 'checkpoints'),
    checkpointsPerWorkspace: config.checkpointsPerWorkspace,
    onError: (err) => logger.warn({ err }, 'checkpoint collection failed (retried by the next one)')
  })
  const lifecycle = new WorkspaceLifecycle({
    workspaces,
    // Deleting a workspace stops its processes on every instance; summaries count them all.
    processes: service,
    checkpoints,
    usage,
    writes,
    ...(config.workspaceIdleTtl !== undefined ? { idleTtlMs: parseDuration(config.workspaceIdleTtl) } : {}),
    tenantQuotaBytes: config.tenantQuotaBytes,
    logger
  })
  workspaces.setAdmission(async (tenant) => await lifecycle.admitWorkspace(tenant))
  await lifecycle.cleanLeftovers()
  return {
    source: new BuiltinSource(tools, workspaces, { usage, writes, checkpoint: async (ws) => await lifecycle.checkpointHeld(ws) }),
    sandbox,
    processes,
    processService: service,
    workspaces,
    usage,
    lifecycle,
    quota,
    scripts: scriptHost(workspaces, sandbox, usage),
    close: async () => {
      await lifecycle.close()
      await processes.killAll()
      // Bounded; lazy, so a process still inside does not hold the shutdown.
      await volumes?.close()
      // Their ends (STOPPED) recorded before Redis closes: the others see them stopped, not LOST.
      await service.close()
      await sandbox.close()
    },
    ...(deps.coordination !== undefined ? { serveForwarded: async (call: unknown) => await service.serveForwarded(call) } : {})
  }
}
export type { SandboxIsolation } from './sandbox/index.js'
export { closeInheritedDescriptors } from './sandbox/index.js'
export { WorkspaceFacade } from './workspace-facade.js'
export type { WorkspaceLifecycle } from './workspace/lifecycle.js'
