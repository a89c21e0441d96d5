export { createSandbox, SandboxUnavailableError, DEFAULT_SANDBOX_LIMITS, DEFAULT_SANDBOX_UID, DEFAULT_UID_RANGE, NONE_WARNING } from './create-sandbox.js'
export { SANDBOX_MODES } from './types.js'
export type {
  EffectiveSandboxMode, ExecRequest, ExecResult, ExitInfo, Sandbox, SandboxedProcess, SandboxIsolation, SandboxLimits,
  SandboxMode, SandboxOptions, SandboxProbe, SandboxStats, SpawnRequest
} from './types.js'
export { parseUidRange, tenantOwners } from './tenant-uids.js'
export { PROCESS_UID_POOL, processDeployment } from './host-claim.js'
export type { UidStore } from './tenant-uids.js'
