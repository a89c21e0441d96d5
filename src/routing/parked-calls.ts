/**
 * Calls whose server asks its client something while it runs, for callers that answer in a later
 * request (MCP 2026-07-28 multi round-trip: a 2026-07-28 /mcp client, REST): a legacy server sends
 * `elicitation/create` on the call's stream and waits, but the caller can only be answered
 * `input_required` and come back with `inputResponses`. The call stays parked on this instance,
 * its upstream request open, while the caller answers: the first request gets the questions and
 * the parked call's id (inside the gateway's sealed handle), the retry delivers the answers and
 * waits for what comes next: the result, or the next questions. A retry that reaches another
 * instance is forwarded to the one the call waits on.
 *
 * Bounded: a parked call lives at most `ttlMs` (then it is aborted, which cancels it upstream), at
 * most `maxParked` on the instance and `maxPerOwner` per tenant; a retry is honoured only from the
 * tenant and key that started the call.
 */
import { randomUUID } from 'node:crypto'
import type { ClientRelay, ClientRequest } from './client-relay.js'
import { JsonRpcError } from './client-relay.js'

/** Whose call it is: only the same tenant and key may continue it. */
export interface ParkOwner {
  tenant: string
  keyId: string
}

/** What a parked run has come to: its value, or questions for the caller (keyed as `inputRequests`). */
export type ParkedStep<T> =
  | { kind: 'done', value: T }
  | { kind: 'asks', id: string, inputRequests: Record<string, { method: string, params?: Record<string, unknown> | undefined }> }

export interface ParkedCallsOptions {
  /** This instance's id (the cluster's): a parked call's handle names the instance it waits on. */
  instanceId?: string
  /** How long a call may wait for its caller's answers (default 10 minutes, the handle's lifetime). */
  ttlMs?: number
  maxParked?: number
  maxPerOwner?: number
  /**
   * A retry that reached another instance than the one its call waits on: the resume there (the
   * cluster's signed call), its step as JSON; undefined when that instance cannot be reached.
   * Absent: one instance.
   */
  forward?: (instanceId: string, resume: ForwardedResume) => Promise<unknown>
}

/** What one instance sends the instance a parked call waits on. */
export interface ForwardedResume {
  owner: ParkOwner
  id: string
  inputResponses?: Record<string, unknown> | undefined
}

/** The instance-to-instance route a resume is forwarded on (routes/cluster.ts). */
export const FORWARDED_RESUME_PATH = '/internal/cluster/parked-calls'

/** A parked call's "server" in the gateway's handle (InputRound.server): the instance and the id it waits under. */
const PARKED = '~parked:'

interface Question {
  request: ClientRequest
  resolve: (value: unknown) => void
  reject: (err: unknown) => void
}

interface Parked<T> {
  owner: ParkOwner
  /** Questions the caller has not answered yet, by key. */
  open: Map<string, Question>
  next: number
  /** Settled once the run is done (its value) or failed. */
  done: Promise<{ ok: true, value: T } | { ok: false, err: unknown }>
  /** Wakes whoever waits for the next step (a question was asked). */
  wake: (() => void) | undefined
  abort: AbortController
  timer: NodeJS.Timeout
}

const DEFAULT_TTL_MS = 10 * 60_000

export class ParkedCalls {
  readonly instanceId: string
  readonly #forward: ParkedCallsOptions['forward']
  readonly #ttlMs: number
  readonly #maxParked: number
  readonly #maxPerOwner: number
  readonly #parked = new Map<string, Parked<unknown>>()

  constructor (opts: ParkedCallsOptions = {}) {
    this.instanceId = opts.instanceId ?? randomUUID()
    this.#forward = opts.forward
    this.#ttlMs = opts.ttlMs ?? DEFAULT_TTL_MS
    this.#maxParked = opts.maxParked ?? 1000
    this.#maxPerOwner = opts.maxPerOwner ?? 50
  }

  /** Calls waiting for their callers' answers on this instance. */
  get size (): number {
    return this.#parked.size
  }

  /** The handle's "server" of the parked call `id` of this instance. */
  serverOf (id: string): string {
    return `${PARKED}${this.instanceId}:${id}`
  }

  /** Whether a round's server (InputRound.server) names a parked call rather than an MCP server. */
  static names (server: string | undefined): server is string {
    return server?.startsWith(PARKED) === true
  }

  /**
   * Runs `run` with a relay whose questions park the run: resolves with its value when it ends
   * without asking, else with its first questions and the id a retry resumes it with. The run gets
   * a signal of its own: `caller` (the first request) leaving ends it only until it parks; then
   * the park's lifetime does.
   */
  async start<T> (
    owner: ParkOwner,
    run: (ask: NonNullable<ClientRelay['ask']>, signal: AbortSignal) => Promise<T>,
    caller?: AbortSignal
  ): Promise<ParkedStep<T>> {
    const id = randomUUID()
    const abort = new AbortController()
    caller?.addEventListener('abort', () => { if (!this.#parked.has(id)) abort.abort(caller.reason) }, { once: true })
    const entry: Parked<T> = {
      owner,
      open: new Map(),
      next: 0,
      done: undefined as never,
      wake: undefined,
      abort,
      timer: setTimeout(() => { this.#expire(id) }, this.#ttlMs)
    }
    entry.timer.unref()
    const ask = async (request: ClientRequest, signal: AbortSignal): Promise<unknown> => {
      if (!this.#parked.has(id)) {
        // Parking needs room: a full instance, or a tenant with too many, refuses the question (the call ends as its tool says).
        const mine = [...this.#parked.values()].filter((p) => p.owner.tenant === owner.tenant).length
        if (this.#parked.size >= this.#maxParked || mine >= this.#maxPerOwner) {
          throw new JsonRpcError(-32603, 'Too many calls are waiting for their callers\' answers; the server\'s request was not passed on')
        }
        this.#parked.set(id, entry as Parked<unknown>)
      }
      signal.throwIfAborted()
      return await new Promise<unknown>((resolve, reject) => {
        const key = `q${entry.next++}`
        entry.open.set(key, { request, resolve, reject })
        signal.addEventListener('abort', () => {
          entry.open.delete(key)
          reject(signal.reason)
        }, { once: true })
        // Questions asked together go out together: the step is taken once this turn's asks are in.
        const wake = entry.wake
        entry.wake = undefined
        if (wake !== undefined) setImmediate(wake)
      })
    }
    entry.done = run(ask, abort.signal).then((value) => ({ ok: true as const, value }), (err: unknown) => ({ ok: false as const, err }))
    return await this.#step(id, entry, caller)
  }

  /**
   * A retry: delivers the caller's answers to the parked run `id` (each to the question of its
   * key; answers to questions nobody asked are ignored) and waits for its next step. Undefined
   * when no such call waits here for this owner (ended, expired, never was, someone else's).
   * `signal` (the retry's caller leaving) stops the wait, not the run.
   */
  async resume<T> (owner: ParkOwner, id: string, inputResponses: Record<string, unknown> | undefined, signal: AbortSignal): Promise<ParkedStep<T> | undefined> {
    const entry = this.#parked.get(id) as Parked<T> | undefined
    if (entry === undefined || entry.owner.tenant !== owner.tenant || entry.owner.keyId !== owner.keyId) return undefined
    for (const [key, answer] of Object.entries(inputResponses ?? {})) {
      const question = entry.open.get(key)
      if (question === undefined) continue
      entry.open.delete(key)
      question.resolve(answer)
    }
    return await this.#step(id, entry, signal)
  }

  /**
   * resume() for the parked call a handle's server names: here, or on the instance it waits on
   * (forwarded). Undefined when it waits nowhere (ended, expired, its instance gone or unreachable).
   */
  async resumeNamed<T> (
    owner: ParkOwner,
    server: string,
    inputResponses: Record<string, unknown> | undefined,
    signal: AbortSignal
  ): Promise<ParkedStep<T> | undefined> {
    const rest = server.slice(PARKED.length)
    const cut = rest.lastIndexOf(':')
    const instance = rest.slice(0, cut)
    const id = rest.slice(cut + 1)
    if (instance === this.instanceId || this.#forward === undefined) return await this.resume<T>(owner, id, inputResponses, signal)
    const step = await this.#forward(instance, { owner, id, ...(inputResponses !== undefined ? { inputResponses } : {}) })
    return step === undefined || step === null ? undefined : step as ParkedStep<T>
  }

  /** Ends every parked call (the instance is closing): their runs are aborted. */
  close (): void {
    for (const id of [...this.#parked.keys()]) this.#expire(id)
  }

  /** Waits until the run is done or has questions nobody has answered: then that step. */
  async #step<T> (id: string, entry: Parked<T>, signal: AbortSignal | undefined): Promise<ParkedStep<T>> {
    for (;;) {
      if (entry.open.size > 0) return { kind: 'asks', id, inputRequests: questionsOf(entry) }
      const asked = new Promise<'asked'>((resolve) => { entry.wake = () => { resolve('asked') } })
      const gone = signal === undefined
        ? undefined
        : new Promise<'gone'>((resolve) => { signal.addEventListener('abort', () => { resolve('gone') }, { once: true }) })
      const first = await Promise.race([entry.done, asked, ...(gone !== undefined ? [gone] : [])])
      if (first === 'gone') {
        // The first request's caller left before the run parked: the run is aborted and ends soon; wait for it.
        if (!this.#parked.has(id)) continue
        throw signal?.reason ?? new Error('the caller went away')
      }
      if (first === 'asked') continue
      this.#forget(id, entry)
      if (!first.ok) throw first.err
      return { kind: 'done', value: first.value }
    }
  }

  #expire (id: string): void {
    const entry = this.#parked.get(id)
    if (entry === undefined) return
    this.#forget(id, entry)
    entry.abort.abort(new Error('the caller did not answer the server\'s questions in time'))
    for (const question of entry.open.values()) question.reject(new JsonRpcError(-32603, 'The caller did not answer in time'))
    entry.open.clear()
  }

  #forget (id: string, entry: Parked<unknown>): void {
    clearTimeout(entry.timer)
    this.#parked.delete(id)
  }
}

function questionsOf (entry: Parked<unknown>): Record<string, { method: string, params?: Record<string, unknown> | undefined }> {
  const out: Record<string, { method: string, params?: Record<string, unknown> | undefined }> = {}
  for (const [key, q] of entry.open) out[key] = { method: q.request.method, ...(q.request.params !== undefined ? { params: q.request.params } : {}) }
  return out
}
