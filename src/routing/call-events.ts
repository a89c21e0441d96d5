import type { InvokeOutcome } from './router.js'

/**
 * Where a call came from: POST /invoke, one entry of POST /invoke/batch, an /mcp tools/call, the
 * decision on a held call (POST /approvals/{approvalId}: the approved run, or the denial), or a
 * code-mode script's inner call (its parent is the `run_tools_script` call).
 */
export type CallVia = 'invoke' | 'batch' | 'mcp' | 'approval' | 'script'

/**
 * How a call's answer came about:
 * - `finished`: the call ran, or the gateway refused it (tenancy, policy, an unknown name): its
 *   one outcome, the one the journal records;
 * - `held`: held for a human's approval and still pending when its caller was answered;
 * - `decided`: held, and its caller was answered with the decision's outcome (the approved run
 *   is a `finished` call of its own, via `approval`);
 * - `refused`: it never became a call: a malformed batch entry, an approver key, an MCP
 *   exchange's spent call budget.
 */
export type CallEnd = 'finished' | 'held' | 'decided' | 'refused'

/** One answered call (docs/ARCHITECTURE.md#journal). Listeners read it synchronously: the object may be reused. */
export interface CallEvent {
  readonly via: CallVia
  readonly end: CallEnd
  readonly outcome: InvokeOutcome
  readonly callId: string
  readonly name: string
  /** As the caller sent them (an object, or the JSON string a model emitted). */
  readonly arguments: unknown
  /** The tenant the call acted for; undefined for none. */
  readonly userId: string | undefined
  /** The remote MCP server that served it (tiers user_mcp and global_mcp). */
  readonly serverId: string | undefined
  readonly keyId: string | undefined
  /** performance.now() when the call arrived. */
  readonly startedAt: number
  /** The approval a held call ran (or was refused) under. */
  readonly approvalId: string | undefined
  /** The `run_tools_script` call whose script made this call (via `script`). */
  readonly parentCallId: string | undefined
}

export type CallListener = (call: CallEvent) => void

/**
 * The gateway's outcome observer: every answered call is published here once, and the journal
 * and the metrics subscribe (docs/ARCHITECTURE.md#journal), as undici publishes through
 * diagnostics_channel: nobody re-reads answers. One per gateway, not a process-wide channel, so
 * two apps in one process (tests, embedders) never see each other's calls.
 */
export class CallObserver {
  #listeners: readonly CallListener[] = []
  #tracing = 0

  /**
   * Adds a listener; `trace` asks every call's source for its trace (the journal keeps it) even
   * when the caller did not. Returns the unsubscribe function.
   */
  subscribe (listener: CallListener, opts: { trace?: boolean } = {}): () => void {
    const trace = opts.trace === true
    this.#listeners = [...this.#listeners, listener]
    if (trace) this.#tracing++
    let subscribed = true
    return () => {
      if (!subscribed) return
      subscribed = false
      const at = this.#listeners.indexOf(listener)
      this.#listeners = [...this.#listeners.slice(0, at), ...this.#listeners.slice(at + 1)]
      if (trace) this.#tracing--
    }
  }

  /** Whether a listener wants every call's trace. */
  get wantsTrace (): boolean {
    return this.#tracing > 0
  }

  publish (call: CallEvent): void {
    const listeners = this.#listeners
    for (let i = 0; i < listeners.length; i++) (listeners[i] as CallListener)(call)
  }
}
