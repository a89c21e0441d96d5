import type { JsonSchema } from '../routing/types.js'

/** What a function handler receives besides its arguments. */
export interface FunctionContext {
  callId: string
  /** The tenant the call acts for, if any. */
  userId: string | undefined
  /** Aborted when the call times out or the caller goes away; long handlers should honour it. */
  signal: AbortSignal
}

/** A local function tool (tier 4: docs/ARCHITECTURE.md#tiers). */
export interface FunctionTool<A extends Record<string, unknown> = Record<string, unknown>> {
  /** The name the model sees: ^[a-zA-Z][a-zA-Z0-9_-]{0,63}$. */
  name: string
  description: string
  /** JSON Schema of the arguments object; arguments are validated against it before `handler` runs. */
  parameters: JsonSchema
  /**
   * Returns a string (given to the model as is) or a JSON-serialisable value. Returning
   * undefined is an error: return a short confirmation instead. Throwing an Error gives the
   * model a tool error with its message.
   */
  handler: (args: A, ctx: FunctionContext) => unknown
  /** Per-function deadline; defaults to the gateway's FUNCTION_TIMEOUT_MS. */
  timeoutMs?: number
}

/**
 * Declares a function tool. Modules in FUNCTIONS_DIR export these (default or named
 * exports); a plain object of the same shape works too, so a module does not need to import
 * this package.
 */
export function defineFunction<A extends Record<string, unknown> = Record<string, unknown>> (tool: FunctionTool<A>): FunctionTool<A> {
  return tool
}
