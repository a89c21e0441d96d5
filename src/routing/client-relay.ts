/**
 * A call's way back to its client while the call runs: the requests an MCP server makes of the
 * client that caused the call (elicitation, sampling, roots) and the call's log messages. A
 * caller that holds one (a legacy /mcp client that declared the capabilities: the gateway sends
 * each request on the call's own response stream and waits for the client's answer) lets a
 * server's question be answered within the same call, in either era of the server: a legacy
 * server's `elicitation/create` on the call's stream, or a 2026-07-28 server's `input_required`
 * (each of its inputRequests asked in turn, the call retried with the answers).
 */

/** A request an MCP server makes of its client (`elicitation/create`, `sampling/createMessage`, `roots/list`). */
export interface ClientRequest {
  method: string
  params?: Record<string, unknown> | undefined
}

export interface ClientRelay {
  /**
   * Asks the client; resolves with its result as it answered, rejects with JsonRpcError (its
   * JSON-RPC error) or an abort. Absent: the client can be told things (log) but not asked.
   */
  ask?: ((request: ClientRequest, signal: AbortSignal) => Promise<unknown>) | undefined
  /** A log message of the call (`notifications/message` params) for the client; best effort. */
  log?: ((params: Record<string, unknown>) => void) | undefined
  /**
   * Another notification of the call's server for its client, passed on as it is: the completion
   * of a URL-mode elicitation (`notifications/elicitation/complete`, legacy revisions only); best effort.
   */
  notify?: ((method: string, params: Record<string, unknown> | undefined) => void) | undefined
  /** The least severe log level the client wants (a 2026-07-28 server is told it per request: `logLevel`). */
  logLevel?: string | undefined
  /**
   * The caller answers a 2026-07-28 server's `input_required` itself, in a later request (it
   * receives it as it came); `ask` then serves only a legacy server's requests pushed during the
   * call (parked-calls.ts). Unset: `ask` answers both, within the call.
   */
  passInputRequired?: boolean | undefined
}

/** Whether a client with these capabilities can be asked anything by a server (elicitation, sampling or roots). */
export function canBeAsked (capabilities: Record<string, unknown>): boolean {
  return INPUT_CAPABILITIES.some((name) => capabilities[name] !== undefined)
}

/** Whether a relay answers a 2026-07-28 server's `input_required` within the call (each question asked through it). */
export function answersWithinCall (relay: ClientRelay | undefined): boolean {
  return relay?.ask !== undefined && relay.passInputRequired !== true
}

/**
 * A JSON-RPC error as it goes over the wire: the client's answer to a request (or the gateway's
 * refusal to ask it), and what /mcp's request handlers throw (both SDKs send `code`, `message` and
 * `data` as they are). Not the SDK's own error class, whose v1 message already reads `MCP error
 * <code>: ...`: the client adds that prefix again, and the user would read it twice.
 */
export class JsonRpcError extends Error {
  readonly code: number
  readonly data: unknown
  constructor (code: number, message: string, data?: unknown) {
    super(message)
    this.name = 'JsonRpcError'
    this.code = code
    this.data = data
  }
}

/** The client capabilities that let a server ask it something (elicitation, sampling, roots). */
export const INPUT_CAPABILITIES = ['elicitation', 'sampling', 'roots'] as const

/** JSON-RPC "Method not found": what a client without the capability would answer itself. */
export const METHOD_NOT_FOUND = -32601

/** The capability a server's request needs of the client, when the method is one a server may send. */
export function capabilityFor (request: ClientRequest): 'elicitation' | 'sampling' | 'roots' | undefined {
  switch (request.method) {
    case 'elicitation/create': return 'elicitation'
    case 'sampling/createMessage': return 'sampling'
    case 'roots/list': return 'roots'
    default: return undefined
  }
}

/**
 * Whether `capabilities` (a client's, as declared) cover the request: elicitation in its mode
 * (`form` is the default, and a bare `elicitation: {}` means form, as before modes existed; `url`
 * must be declared), sampling (with `tools` when the request carries tools), roots. `ping` is
 * always answerable.
 */
export function declares (capabilities: Record<string, unknown>, request: ClientRequest): boolean {
  if (request.method === 'ping') return true
  const needed = capabilityFor(request)
  if (needed === undefined) return false
  const declared = capabilities[needed]
  if (declared === null || typeof declared !== 'object') return false
  const modes = declared as Record<string, unknown>
  if (needed === 'elicitation') {
    const mode = request.params?.mode ?? 'form'
    if (mode === 'url') return modes.url !== undefined
    return modes.form !== undefined || modes.url === undefined
  }
  if (needed === 'sampling' && Array.isArray(request.params?.tools) && (request.params.tools as unknown[]).length > 0) {
    return modes.tools !== undefined
  }
  return true
}
