/**
 * Core domain types shared by the router and every tool source.
 * Nothing here imports Fastify: the HTTP layer adapts these values.
 */
import type { AbortSource } from './signals.js'

/** The five tiers a tool can come from, in routing priority order (the wire field is `route`). */
export const TIERS = ['builtin', 'user_mcp', 'local_mcp', 'function', 'global_mcp'] as const
export type Tier = typeof TIERS[number]

/** A JSON Schema object as tools declare it. Passed through whole, never lossily converted. */
export type JsonSchema = Record<string, unknown>

/** A tool as a source offers it, before naming for a wire format. */
export interface ToolSpec {
  /** The tool's own name inside its source (MCP tool name, function name, built-in name). */
  name: string
  description: string
  inputSchema: JsonSchema
  title?: string
  annotations?: Record<string, unknown>
  /** MCP tools: the schema of the tool's structuredContent (passed through to MCP clients). */
  outputSchema?: JsonSchema
  /** MCP tools: how the tool runs (`taskSupport`); the router does not offer task-only tools. */
  execution?: Record<string, unknown>
}

/**
 * Why a tool call failed. Expected failures are values, not exceptions:
 * - invalid-arguments: arguments did not match the schema (the model should fix them and retry)
 * - timeout: the tool ran past its deadline
 * - upstream: a remote server failed or could not be reached
 * - tool-error: the tool itself reported an error (exception, isError, bad result)
 * - sandbox: the sandbox refused or could not run the command
 * - forbidden: a path or operation the workspace policy refuses
 * - cancelled: the caller went away
 */
export type ToolFailureReason =
  | 'invalid-arguments'
  | 'timeout'
  | 'upstream'
  /** A remote MCP server's circuit breaker is open: the call was not attempted. */
  | 'upstream-unavailable'
  /** A remote MCP server's answer passed MCP_MAX_MESSAGE_BYTES: it was not read further. */
  | 'upstream-too-large'
  /** No room in the budget of remote MCP answers in flight (per tenant or instance): the answer was not read further. */
  | 'upstream-budget'
  | 'tool-error'
  | 'sandbox'
  | 'forbidden'
  | 'cancelled'
  /** A workspace quota (bytes or files) would be or was passed. */
  | 'quota'
  /** The tenant is at TENANT_MAX_WORKSPACES or TENANT_QUOTA_BYTES (a new workspace was refused). */
  | 'tenant-quota'
  /** The tool policy refused these arguments (a `bash.denyCommands` rule). */
  | 'policy'
  /** The tool policy holds the call for a human's approval: it has not run (yet). */
  | 'approval-pending'
  /** A human denied the held call. */
  | 'approval-denied'
  /** Nobody decided the held call within APPROVAL_TTL. */
  | 'approval-expired'

/** What a source returns for one call. */
export type ToolOutcome =
  | {
    ok: true
    /** A string is handed to the model as is; anything else is serialised as JSON. */
    value: unknown
    /** The tool's own error flag (MCP `isError`): the call worked but the tool reports failure. */
    isError?: boolean
    /** The source already shortened the value to fit the output cap (the result's `truncated`). */
    truncated?: boolean
    /** Structured side channel for observability; never shown to the model. */
    trace?: unknown
    /** A checkpoint taken before the tool ran (context.checkpoint). */
    checkpointId?: string
  }
  | {
    ok: false
    reason: ToolFailureReason
    message: string
    trace?: unknown
    checkpointId?: string
  }

/** Per-request workspace selection as the caller sends it (docs/ARCHITECTURE.md#workspaces). */
export interface WorkspaceRequest {
  workspaceId?: string
  readRoots?: string[]
  limits?: Partial<WorkspaceLimits>
  /** Admin only: an absolute root under WORKSPACE_BASES. */
  workspaceRoot?: string
  /** Take a checkpoint before a mutating built-in runs; its id comes back as the result's checkpointId. */
  checkpoint?: boolean
}

/** Limits for built-in tools; requests may only lower the server's maxima. */
export interface WorkspaceLimits {
  readMaxChars: number
  commandTimeoutMs: number
  bashLogChars: number
  maxProcessOutputChars: number
  outputMaxChars: number
}

/** Who is calling. `userId` undefined means no tenant (tenant key `_`). */
export interface Caller {
  userId: string | undefined
  isAdmin: boolean
  /** The short, non-reversible id of the API key that made the request (journal entries carry it); absent in open mode. */
  keyId?: string | undefined
  /**
   * `approver`: a key that decides and reads the held calls (and journal) of its tenant
   * (`key:approver:{userId}`) but runs no tools.
   */
  role?: 'approver'
}

/** Everything a source needs for one call. Created per call, never shared between calls. */
export interface CallContext {
  callId: string
  caller: Caller
  /** Aborted when the caller goes away (or cancels). May be made when first read: read it only to pass it on. */
  signal: AbortSignal
  /**
   * The same cancellation without making an AbortSignal, for work that only needs to be told
   * (a deadline's listener). Absent: use `signal`.
   */
  abortSource?: AbortSource
  workspace: WorkspaceRequest
  /** Deadline for this call in ms (sources may apply a lower one of their own). */
  timeoutMs: number
  /**
   * Set when the caller wants progress (an MCP client's progressToken on /mcp): MCP sources ask
   * their server for progress on this call and report each notification here. Progress never
   * extends the deadline.
   */
  onProgress?: (progress: ToolProgress) => void
}

/** One progress notification of a running call (MCP `notifications/progress` without its token). */
export interface ToolProgress {
  progress: number
  total?: number
  message?: string
}
