/**
 * What the gateway asks of tracing (src/tracing/README.md): one object with an `enabled` flag that
 * every hot path checks first, so that with tracing off (the default) a request or a call costs one
 * property read: no span, no context switch, no header written.
 */
import type { IncomingHttpHeaders } from 'node:http'

/** The server span of one incoming HTTP request (plugins/tracing.ts starts and ends it). */
export interface RequestSpan {
  /** Ends the span with the response's status code; a second call does nothing (an abort, then the response). */
  end: (statusCode: number | undefined) => void
}

/**
 * One tool call as the tool-call span reads it (the Gateway's Call): known before the call are
 * its name, id and entry point; once it ran, the tier it resolved to and the tenant it acted for.
 */
export interface TracedCall {
  readonly name: string
  readonly callId: string
  readonly via: string
  readonly userId: string | undefined
  readonly route: string | undefined
}

/** The outcome of a call as the span reads it: only codes, never outputs or messages (they may quote arguments). */
export type TracedOutcome =
  | { ok: true, result: { isError: boolean, status?: string | undefined, error: { code: string } | null }, pending?: unknown }
  | { ok: false, error: { code: string } }

/** One request to an upstream MCP server (a client span). */
export interface UpstreamTarget {
  /** The registry's server id (a tenant's server or a global one). */
  serverId: string
  /** The JSON-RPC method, e.g. `tools/call`. */
  method: string
  /** The tool (or prompt, resource) named by the request, as the server knows it. */
  target?: string | undefined
}

/** Tracing as the gateway uses it: {@link NO_TRACING} when off, src/tracing/sdk.ts's when on. */
export interface Tracing {
  /** False: every method below is a pass-through and callers skip them altogether. */
  readonly enabled: boolean
  /** Starts the server span of a request, continuing the caller's W3C trace (`traceparent`, `tracestate`) when it sent one. */
  startRequest: (method: string, route: string | undefined, headers: IncomingHttpHeaders) => RequestSpan
  /** Runs `fn` with the request's span as the active context (the route handler: the tool-call spans become its children). */
  within: <T>(request: RequestSpan, fn: () => T) => T
  /** Runs one tool call inside its span (a child of the active context); the span ends when `run` settles. */
  toolCall: <T extends TracedOutcome>(call: TracedCall, run: () => Promise<T>) => Promise<T>
  /**
   * Runs one upstream MCP request inside its client span; `params` (the JSON-RPC request's params, when
   * the method carries them) get the span's `traceparent` and `tracestate` in `_meta`.
   */
  upstream: <T>(target: UpstreamTarget, params: Record<string, unknown> | undefined, run: () => Promise<T>) => Promise<T>
  /** Writes the active span's `traceparent` (and `tracestate`) into an upstream HTTP request's headers; nothing without one. */
  inject: (headers: Record<string, string>) => void
  /** Exports what is buffered and stops (bounded by the exporter's own timeout). */
  shutdown: () => Promise<void>
}

const NOOP_REQUEST: RequestSpan = { end: () => {} }

/** Tracing off: every method is a pass-through; nothing is allocated per call. */
export const NO_TRACING: Tracing = {
  enabled: false,
  startRequest: () => NOOP_REQUEST,
  within: (_request, fn) => fn(),
  toolCall: async (_call, run) => await run(),
  upstream: async (_target, _params, run) => await run(),
  inject: () => {},
  shutdown: async () => {}
}

/** A call's outcome as one attribute value: `ok`, `input_required`, the tool error's code, or the GW_ code of a refused call. */
export function outcomeCode (outcome: TracedOutcome): string {
  if (!outcome.ok) return outcome.error.code
  const r = outcome.result
  if (r.status === 'input_required') return 'input_required'
  if (outcome.pending !== undefined) return 'GW_APPROVAL_PENDING'
  return r.isError ? (r.error?.code ?? 'GW_TOOL_ERROR') : 'ok'
}
