/**
 * What a built-in tool is and what it gets per call. Kept apart from types.ts (workspaces and
 * ToolError, which the workspace modules import) so that no import cycle runs through the usage meter.
 */
import type { BuiltinName } from '../naming/builtin-names.js'
import type { JsonSchema } from '../routing/types.js'
import type { Workspace } from './types.js'
import type { WorkspaceUsage } from './workspace/usage.js'

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
