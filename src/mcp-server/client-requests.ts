/**
 * The requests the gateway sends a legacy /mcp client while one of its tool calls runs (an
 * upstream server's elicitation, sampling or roots request, relayed: src/routing/client-relay.ts),
 * and the client's answers, which come back as POSTs of their own.
 *
 * /mcp is stateless, so an answer may reach any instance: each request's id names the instance
 * that waits for it (`gwq:<instance>:<uuid>`), and an answer that arrives elsewhere is forwarded
 * there (the cluster's signed instance-to-instance call). An answer counts only when it comes from
 * the tenant and API key whose call asked: anyone else's, with a guessed or stolen id, is dropped
 * (the POST still gets its 202, as for any answer nobody waits for), so one tenant cannot answer,
 * or cut short, another's questions. How many wait at once is bounded.
 */
import { randomUUID } from 'node:crypto'
import { JsonRpcError } from '../routing/client-relay.js'
import type { ClientRequest } from '../routing/client-relay.js'

/** The instance-to-instance route an answer is forwarded on (routes/cluster.ts). */
export const FORWARDED_MCP_ANSWER_PATH = '/internal/cluster/mcp-answers'

/** Whose call a request belongs to: its answer must come from the same tenant and key. */
export interface AnswerOwner {
  tenant: string
  keyId: string
}

/** What one instance forwards to the instance that waits for an answer. */
export interface ForwardedAnswer {
  owner: AnswerOwner
  message: AnswerMessage
}

type AnswerMessage =
  | { jsonrpc: '2.0', id: string, result: unknown }
  | { jsonrpc: '2.0', id: string, error: { code: number, message: string, data?: unknown } }

type JsonRpcOut = { jsonrpc: '2.0', id: string, method: string, params?: Record<string, unknown> }

export interface ClientRequestsOptions {
  /** This instance's id (the cluster's), named in each request id. */
  instanceId: string
  /** Requests waiting for an answer on this instance at most; more fail at once. */
  maxWaiting?: number
  /** Delivers an answer to the instance that waits for it; false when it cannot be reached. Absent: one instance. */
  forward?: (instanceId: string, answer: ForwardedAnswer) => Promise<boolean>
  onError?: (err: unknown, what: string) => void
}

interface Waiting {
  owner: AnswerOwner
  settle: (message: AnswerMessage) => void
}

const PREFIX = 'gwq'
const DEFAULT_MAX_WAITING = 10_000

export class ClientRequests {
  readonly #instanceId: string
  readonly #maxWaiting: number
  readonly #forward: ClientRequestsOptions['forward']
  readonly #onError: NonNullable<ClientRequestsOptions['onError']>
  readonly #waiting = new Map<string, Waiting>()
  /** Questions waiting per tenant: one tenant holds at most a tenth of the instance's (its servers could fill it). */
  readonly #perTenant = new Map<string, number>()

  constructor (opts: ClientRequestsOptions) {
    this.#instanceId = opts.instanceId
    this.#maxWaiting = opts.maxWaiting ?? DEFAULT_MAX_WAITING
    this.#forward = opts.forward
    this.#onError = opts.onError ?? (() => {})
  }

  /** Requests waiting for their answer on this instance. */
  get waiting (): number {
    return this.#waiting.size
  }

  /**
   * Sends `request` to the client with an id of its own (through `send`: the call's response
   * stream) and waits for its answer: the result as the client sent it, or JsonRpcError
   * with the client's error. An abort of `signal` (the call ended, the client left) stops the wait.
   */
  async ask (owner: AnswerOwner, send: (message: JsonRpcOut) => Promise<void>, request: ClientRequest, signal: AbortSignal): Promise<unknown> {
    signal.throwIfAborted()
    if (this.#waiting.size >= this.#maxWaiting) {
      throw new JsonRpcError(-32603, `The gateway has ${this.#maxWaiting} questions waiting for their clients' answers; the server's request was not sent`)
    }
    const share = Math.max(1, Math.floor(this.#maxWaiting / 10))
    const held = this.#perTenant.get(owner.tenant) ?? 0
    if (held >= share) {
      throw new JsonRpcError(-32603, `This tenant has ${share} questions waiting for its clients' answers; the server's request was not sent`)
    }
    this.#perTenant.set(owner.tenant, held + 1)
    const id = `${PREFIX}:${this.#instanceId}:${randomUUID()}`
    return await new Promise<unknown>((resolve, reject) => {
      let settled = false
      const done = (): void => {
        if (settled) return
        settled = true
        this.#waiting.delete(id)
        signal.removeEventListener('abort', onAbort)
        const left = (this.#perTenant.get(owner.tenant) ?? 1) - 1
        if (left > 0) this.#perTenant.set(owner.tenant, left)
        else this.#perTenant.delete(owner.tenant)
      }
      const onAbort = (): void => {
        done()
        reject(signal.reason)
      }
      signal.addEventListener('abort', onAbort, { once: true })
      this.#waiting.set(id, {
        owner,
        settle: (message) => {
          done()
          if ('error' in message) reject(new JsonRpcError(message.error.code, message.error.message, message.error.data))
          else resolve(message.result)
        }
      })
      const out: JsonRpcOut = { jsonrpc: '2.0', id, method: request.method, ...(request.params !== undefined ? { params: request.params } : {}) }
      send(out).catch((err: unknown) => {
        done()
        reject(err)
      })
    })
  }

  /**
   * Whether a POSTed body is only answers to this gateway's requests (one, or a batch of them):
   * such a body is delivered here and never reaches the SDK.
   */
  static isAnswerBody (body: unknown): boolean {
    const messages = Array.isArray(body) ? body : [body]
    return messages.length > 0 && messages.every((m) => toAnswer(m) !== undefined)
  }

  /** Delivers each answer of a body (isAnswerBody) from `owner`: here, or forwarded to the instance that asked. */
  async deliver (owner: AnswerOwner, body: unknown): Promise<void> {
    const messages = Array.isArray(body) ? body : [body]
    await Promise.all(messages.map(async (m) => {
      const message = toAnswer(m)
      if (message === undefined) return
      const instance = message.id.slice(PREFIX.length + 1, message.id.lastIndexOf(':'))
      if (instance === this.#instanceId || this.#forward === undefined) {
        this.#settle(owner, message)
        return
      }
      try {
        if (!await this.#forward(instance, { owner, message })) this.#onError(new Error(`instance ${instance} is gone`), 'an MCP client\'s answer could not be forwarded')
      } catch (err) {
        this.#onError(err, 'an MCP client\'s answer could not be forwarded')
      }
    }))
  }

  /** An answer another instance forwarded (the cluster route); false when its body is not one. */
  deliverForwarded (body: unknown): boolean {
    const b = body as Partial<ForwardedAnswer> | null
    const owner = b?.owner
    const message = toAnswer(b?.message)
    if (message === undefined || owner === null || typeof owner !== 'object') return false
    if (typeof owner.tenant !== 'string' || typeof owner.keyId !== 'string') return false
    this.#settle({ tenant: owner.tenant, keyId: owner.keyId }, message)
    return true
  }

  #settle (owner: AnswerOwner, message: AnswerMessage): void {
    const waiting = this.#waiting.get(message.id)
    // Nobody waits for it, or not this caller: dropped, without a word that would tell which.
    if (waiting === undefined || waiting.owner.tenant !== owner.tenant || waiting.owner.keyId !== owner.keyId) return
    waiting.settle(message)
  }
}

/** A JSON-RPC response to one of the gateway's requests, checked; undefined for anything else. */
function toAnswer (m: unknown): AnswerMessage | undefined {
  if (m === null || typeof m !== 'object') return undefined
  const r = m as Record<string, unknown>
  if (r.jsonrpc !== '2.0' || typeof r.id !== 'string' || !r.id.startsWith(`${PREFIX}:`) || 'method' in r) return undefined
  if ('result' in r && !('error' in r)) return { jsonrpc: '2.0', id: r.id, result: r.result }
  const e = r.error as Record<string, unknown> | null | undefined
  if ('error' in r && e !== null && typeof e === 'object' && Number.isSafeInteger(e.code) && typeof e.message === 'string') {
    return { jsonrpc: '2.0', id: r.id, error: { code: e.code as number, message: e.message, ...(e.data !== undefined ? { data: e.data } : {}) } }
  }
  return undefined
}
