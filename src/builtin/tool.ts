/**
 * What a built-in tool is and what it gets per call. Kept apart from types.ts (workspaces and
 * ToolError, which the workspace modules import) so that no import cycle runs through the usage meter.
 */
import type { BuiltinName } from '../naming/builtin-names.js'
import type { JsonSchema } from '../routing/types.js'
import type { Workspace } from './types.js'
import type { WorkspaceUsage } from './workspace/usage.js'

/**
 * The built-ins' MCP annotations (SPEC 18: honest, so a policy's `requireApproval: [{annotation}]`
 * and an MCP host can rely on them): the readers change nothing; the writers and bash may destroy
 * what is in the workspace; none reaches beyond it (the sandbox has no network).
 */
export const BUILTIN_ANNOTATIONS: Readonly<Record<BuiltinName, Readonly<Record<string, boolean>>>> = {
  bash: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
  read_file: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  write_file: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
  apply_patch: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
  glob: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  grep: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  edit: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
  update_agents_md: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false }
}

/** Per-call context handed to a built-in tool. */
export interface BuiltinCallContext {
  workspace: Workspace
  signal: AbortSignal
  /** The workspaces' usage figures and quota; without it, writes are not counted or limited. */
  usage?: WorkspaceUsage
}

/** One built-in tool: schema plus implementation. `run` throws ToolError for expected failures. */
export interface BuiltinTool {
  name: BuiltinName
  description: string
  inputSchema: JsonSchema
  /** True when a call may change the workspace (batch invokes serialise these per workspace). */
  mutates: (args: Record<string, unknown>) => boolean
  run: (args: Record<string, unknown>, ctx: BuiltinCallContext) => Promise<unknown>
}
