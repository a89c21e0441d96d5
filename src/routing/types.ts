/**
 * Core domain types shared by the router and every tool source.
 * Nothing here imports Fastify: the HTTP layer adapts these values.
 */
import type { AbortSource } from './signals.js'
import type { ClientRelay } from './client-relay.js'

/** The five tiers a tool can come from, in routing priority order (the wire field is `route`). */
export const TIERS = ['builtin', 'user_mcp', 'local_mcp', 'function', 'global_mcp'] as const
export type Tier = typeof TIERS[number]

/**
 * What the router, the gateway, the policy, the MCP server and the console need to know about a
 * tier (docs/ARCHITECTURE.md#tiers). They read these instead of comparing tier names, so a new
 * tier is one row of TIER_TRAITS, and a tier without a row does not compile
 * (docs/ARCHITECTURE.md#add-a-tier). Its place in the priority is its place in TIERS (TIER_RANK).
 */
export interface TierTraits {
  /**
   * The allow-list field that selects the tier's tools: `functions` by tool name, `mcp` by serverId
   * (`Selection.serverIds`), in which case an entry's `source` is the serverId (the journal's `serverId`).
   */
  readonly selectedBy: 'functions' | 'mcp'
  /**
   * Its tools are a tenant's own: the tier takes part only in requests with a userId (listing,
   * resolving, /catalog, the listing cache), answers for that tenant only, and is the only one a tenant-only server id
   * (`user_{u}_service_{s}` in `mcp=`) selects. A tool of a later tier with the same natural name is `ambiguous`.
   */
  readonly tenantScoped: boolean
  /**
   * Its tools are named `user_{u}_tool_{t}` (naming/names.ts): such a name is looked up in this tier
   * alone and never falls back to another tier's raw name. At most one tier.
   */
  readonly encodedNames: boolean
  /**
   * Its names are the reserved built-in names (naming/builtin-names.ts): it is asked before every
   * other tier, encoded names included, and the policy knows its tools by name (the read-only set,
   * `bash` and `bash.denyCommands`) rather than by their annotations. At most one tier.
   */
  readonly reserved: boolean
  /** A call's trace is the MCP CallToolResult as received: /mcp passes its content and structuredContent through. */
  readonly mcpResults: boolean
  /**
   * Its source also resolves an entry by the tool's own name (`spec.name`, the raw MCP tool name),
   * so a policy pattern that matches that name matches the tool (no deny dodged by another name).
   */
  readonly answersToToolName: boolean
  /**
   * Its tools are third parties' and can change under the gateway: each tenant pins their definitions
   * (SPEC 18, src/pins/), and a changed one is reported (`definition_changed`) or held.
   */
  readonly pinned: boolean
}

/** One row per tier; `as const` keeps each value's literal type (the console's copy is checked against it). */
export const TIER_TRAITS = {
  builtin: { selectedBy: 'functions', tenantScoped: false, encodedNames: false, reserved: true, mcpResults: false, answersToToolName: false, pinned: false },
  user_mcp: { selectedBy: 'mcp', tenantScoped: true, encodedNames: true, reserved: false, mcpResults: true, answersToToolName: true, pinned: true },
  local_mcp: { selectedBy: 'functions', tenantScoped: false, encodedNames: false, reserved: false, mcpResults: true, answersToToolName: false, pinned: false },
  function: { selectedBy: 'functions', tenantScoped: false, encodedNames: false, reserved: false, mcpResults: false, answersToToolName: false, pinned: false },
  global_mcp: { selectedBy: 'mcp', tenantScoped: false, encodedNames: false, reserved: false, mcpResults: true, answersToToolName: true, pinned: true }
} as const satisfies Record<Tier, TierTraits>

/** A tier's place in the routing priority (0 first), from TIERS. */
export const TIER_RANK: Readonly<Record<Tier, number>> = Object.fromEntries(TIERS.map((tier, rank) => [tier, rank])) as Record<Tier, number>

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
  /** A remote MCP server needs the tenant's OAuth authorization (missing, refresh failed, scope step-up): the user must connect it. */
  | 'oauth-required'
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
  /** A guardrail of the tenant's policy blocked the arguments or the result (SPEC 18). */
  | 'guardrail'
  /** A code-mode script passed a limit of its socket (CODE_MODE_MAX_CALLS, a bad frame, a flood...) and the gateway cut it off (SPEC 19). */
  | 'script-limit'
  /** The tenant is at TENANT_MAX_WORKSPACES or TENANT_QUOTA_BYTES (a new workspace was refused). */
  | 'tenant-quota'
  /** The tool policy refused these arguments (a `bash.denyCommands` rule). */
  | 'policy'
  /** The tool's definition changed since the tenant pinned it, and the policy holds such tools (SPEC 18, `pinning: hold`). */
  | 'definition-changed'
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
    /**
     * The tool's server asks for input before it answers (MCP 2026-07-28 `input_required`):
     * set only when the call's context has `input` (a caller that can receive it). Not a
     * result, not an error: `value` is a short text for logs only.
     */
    inputRequired?: InputRequired
    /**
     * The tool's server runs the call as a task (MCP Tasks extension): set only when the caller
     * declared the extension. Not a result, not an error: `value` is a short text for logs only.
     */
    task?: CreatedTask
  }
  | {
    ok: false
    reason: ToolFailureReason
    message: string
    trace?: unknown
    checkpointId?: string
    /**
     * The server refused the call for a client capability the caller did not declare (MCP
     * 2026-07-28 -32021, `data.requiredCapabilities`): a caller that declares capabilities
     * (a 2026-07-28 /mcp client) answers the error itself, others read the tool error.
     */
    requiredCapabilities?: unknown
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
  /**
   * Set when the caller can receive an MCP `input_required` answer (a 2026-07-28 client on
   * /mcp), and on its retry. Absent (REST, a legacy MCP client): a server that asks for input
   * fails the call with a tool error that says so.
   */
  input?: InputRound
  /**
   * The caller takes an MCP task (POST /invoke's `task: true`): the Tasks extension is declared to
   * the tool's server, which may run the call as a task (the outcome's `task`). An /mcp client
   * declares the extension in its own capabilities instead (`input.capabilities`).
   */
  tasks?: boolean | undefined
}

/** What a caller that can answer a server's questions brings to a call (MCP 2026-07-28 multi round-trip). */
export interface InputRound {
  /** The caller's declared client capabilities (elicitation, sampling, roots), passed to the server. */
  capabilities: Record<string, unknown>
  /** The retry's answers, keyed as the server's inputRequests were, passed on as sent. */
  inputResponses?: Record<string, unknown> | undefined
  /** The retry: the server's own requestState of the previous round, byte for byte. */
  requestState?: string | undefined
  /** The retry: the server (its pool key) that asked; another one serving the name now is a tool error. */
  server?: string | undefined
  /**
   * The caller answers within the call (client-relay.ts: a legacy /mcp client that declared the
   * capabilities): a server's questions, of either era, are asked of it while the call runs, and
   * the call never ends in `input_required`. The call's log messages go to it too.
   */
  relay?: ClientRelay | undefined
}

/** A server's request for input (MCP 2026-07-28 `InputRequiredResult`), as it sent it, and which server asked. */
export interface InputRequired {
  inputRequests: Record<string, unknown>
  /** The server's opaque state; never parsed, never logged or journaled. */
  requestState?: string
  /** The server that asked (its pool key): the retry must reach the same one. */
  server: string
}

/** A task a server created for a call (MCP Tasks extension, SEP-2663), as it sent it, and which server runs it. */
export interface CreatedTask {
  /** The tier of the server (its registry scope). */
  route: 'user_mcp' | 'global_mcp'
  /** The registered server that runs the task: its polls go there. */
  serverId: string
  /** The server's CreateTaskResult without its `resultType` (taskId, status, createdAt, ttlMs, ...). */
  task: Record<string, unknown> & { taskId: string }
  /** The tenant the call acted for (set by the Gateway): a REST handle is bound to it. */
  tenant?: string | undefined
}

/** One progress notification of a running call (MCP `notifications/progress` without its token). */
export interface ToolProgress {
  progress: number
  total?: number
  message?: string
}
