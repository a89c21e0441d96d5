/**
 * The rounds of a call whose MCP server asks for input before it answers (MCP 2026-07-28
 * `input_required`, multi round-trip; docs/ARCHITECTURE.md#mcp-eras), the same for `/mcp` and
 * REST (`POST /invoke`, each `/invoke/batch` entry): the `requestState` the gateway hands the
 * caller is a self-contained, HMAC-SHA256-protected, expiring handle binding the round to the
 * tenant, the caller's key, the tool's exposed name, the call's arguments and the server that
 * asked, and carrying the call's id, the approval it passed (if any) and that server's own
 * requestState byte for byte. Nothing is stored: any instance with the same key continues the
 * call. The handle is signed, not encrypted: it holds nothing the client did not see (the
 * server's state went to the client before the gateway existed in between, and the tenant, the
 * callId and the approvalId are the client's own). It is never logged or journaled.
 */
import { createHash, createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto'
import { HttpError } from '../errors.js'
import type { InvokeResult } from './router.js'
import type { InputRound } from './types.js'
import { hasObjectWiderThan, MAX_OBJECT_MEMBERS } from './wide-json.js'

/** What a handle binds; `state` is the upstream server's own requestState (absent when it sent none). */
export interface RoundClaims {
  /** The acting tenant (`_` for none). */
  tenant: string
  /** The caller's API key id (`''` in open mode). */
  keyId: string
  /** The tool's name as the client called it (or the subject of another request: `prompts/get:{name}`). */
  name: string
  /** argumentsDigest of a tool call's arguments: a retry with other arguments is another call. Absent for other requests. */
  args?: string | undefined
  /** The server that asked (its pool key). */
  server: string
  state?: string | undefined
  /** A tool call's id: every round of one call is journaled under it. */
  callId?: string | undefined
  /** The approval the call passed (requireApproval): the retry is not held again. */
  approvalId?: string | undefined
}

/** What a retry's handle is checked against. */
export type RoundExpectation = Pick<RoundClaims, 'tenant' | 'keyId' | 'name' | 'args'>

/** Why a handle is refused. */
export type RoundRefusal = 'malformed' | 'signature' | 'expired' | 'tenant' | 'key' | 'tool' | 'arguments'

export type OpenedRound =
  | { ok: true, server: string, state: string | undefined, callId: string | undefined, approvalId: string | undefined }
  | { ok: false, why: RoundRefusal }

export interface RequestStateSealerOptions {
  /** HMAC key material (any length; a key is derived from it). Absent: a random key of this process. */
  secret?: string | Buffer | undefined
  /** How long a handle is good for; default 10 minutes. */
  ttlMs?: number
  /** The clock (tests). */
  now?: () => number
}

// g2: the handle binds the arguments and carries the callId and approvalId (g1 handles did not).
const VERSION = 'g2'
const DEFAULT_TTL_MS = 10 * 60_000
const INFO = 'tool-gateway /mcp requestState v1'

interface Payload { t: string, k: string, n: string, h?: string, s: string, c?: string, a?: string, u?: string, e: number }

export class RequestStateSealer {
  /** True when the key is this process's own (no SECRETS_KEY): another instance cannot continue a call. */
  readonly ephemeral: boolean
  readonly ttlMs: number
  readonly #key: Buffer
  readonly #now: () => number

  constructor (opts: RequestStateSealerOptions = {}) {
    this.ephemeral = opts.secret === undefined
    const material = opts.secret === undefined ? randomBytes(32) : Buffer.from(opts.secret)
    // A key of its own, derived from the secret: SECRETS_KEY also seals secrets at rest.
    this.#key = Buffer.from(hkdfSync('sha256', material, Buffer.alloc(0), INFO, 32))
    this.ttlMs = opts.ttlMs ?? DEFAULT_TTL_MS
    this.#now = opts.now ?? Date.now
  }

  /** The handle for one round; `ttlMs` (an MCP task handle's, src/mcp-server/tasks.ts) overrides the sealer's. */
  seal (claims: RoundClaims, ttlMs = this.ttlMs): string {
    const payload: Payload = { t: claims.tenant, k: claims.keyId, n: claims.name, s: claims.server, e: this.#now() + ttlMs }
    if (claims.args !== undefined) payload.h = claims.args
    if (claims.callId !== undefined) payload.c = claims.callId
    if (claims.approvalId !== undefined) payload.a = claims.approvalId
    if (claims.state !== undefined) payload.u = claims.state
    const body = `${VERSION}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}`
    return `${body}.${this.#mac(body)}`
  }

  /**
   * Checks a handle against the retry's tenant, key, tool and arguments (a handle of a tool call
   * opens for no request without them, and the reverse); why not, when it fails.
   */
  open (handle: string, expect: RoundExpectation): OpenedRound {
    const parts = handle.split('.')
    if (parts.length !== 3 || parts[0] !== VERSION) return { ok: false, why: 'malformed' }
    const body = `${parts[0]}.${parts[1] as string}`
    const mac = Buffer.from(parts[2] as string, 'base64url')
    const want = Buffer.from(this.#mac(body), 'base64url')
    if (mac.length !== want.length || !timingSafeEqual(mac, want)) return { ok: false, why: 'signature' }
    let payload: Payload
    try {
      payload = JSON.parse(Buffer.from(parts[1] as string, 'base64url').toString('utf8')) as Payload
    } catch {
      return { ok: false, why: 'malformed' }
    }
    if (typeof payload.e !== 'number' || payload.e <= this.#now()) return { ok: false, why: 'expired' }
    if (payload.t !== expect.tenant) return { ok: false, why: 'tenant' }
    if (payload.k !== expect.keyId) return { ok: false, why: 'key' }
    if (payload.n !== expect.name) return { ok: false, why: 'tool' }
    if (payload.h !== expect.args) return { ok: false, why: 'arguments' }
    return { ok: true, server: payload.s, state: payload.u, callId: payload.c, approvalId: payload.a }
  }

  #mac (body: string): string {
    return createHmac('sha256', this.#key).update(body).digest('base64url')
  }
}

/** Why a handle was refused, for the caller: never what it held. */
const STATE_REFUSALS: Readonly<Record<RoundRefusal, string>> = {
  malformed: 'not a handle of this gateway',
  signature: 'it was altered',
  expired: 'it expired',
  tenant: 'it belongs to another tenant',
  key: 'it belongs to another API key',
  tool: 'it belongs to another tool',
  arguments: 'it belongs to a call with other arguments'
}

/**
 * The refusal of a retry whose handle does not open: 400 GW_INVALID_REQUEST_STATE on REST, and on
 * /mcp the spec's answer to a requestState that fails its integrity check, -32602 with
 * `data.reason` `invalid_request_state` (toJsonRpcFailure). It says why, never what the handle held.
 */
export function requestStateRefusal (why: RoundRefusal | 'call' | 'gone'): HttpError {
  const reason = why === 'call'
    ? 'it belongs to another callId'
    : why === 'gone' ? 'the call it continues no longer waits: it ended, or waited too long' : STATE_REFUSALS[why]
  return new HttpError('GW_INVALID_REQUEST_STATE', `Invalid or expired requestState (${reason}); call the tool again without inputResponses and requestState`)
}

/**
 * The digest a handle binds the arguments by: SHA-256 of their JSON with object keys sorted at
 * every depth, so the same arguments sent as a model's JSON string, or re-serialised in another
 * key order, are the same call. Arguments that are not JSON are digested as the string they are.
 */
export function argumentsDigest (args: Record<string, unknown> | string | undefined): string {
  let value: unknown = args ?? {}
  if (typeof value === 'string') {
    if (value.trim() === '') value = {}
    // Too wide to parse (wide-json.ts): the call refuses them; the string itself is what was sent.
    else if (!hasObjectWiderThan(value, MAX_OBJECT_MEMBERS)) {
      try {
        value = JSON.parse(value)
      } catch {
        // Not JSON: the call fails its validation anyway; the string itself is what was sent.
      }
    }
  }
  return createHash('sha256').update(canonicalJson(value)).digest('base64url')
}

function canonicalJson (value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value).sort()
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`).join(',')}}`
  }
  return JSON.stringify(value) ?? 'null'
}

/** What a call's request says of its round (POST /invoke's body, a batch entry, /mcp's tools/call as the gateway makes it). */
export interface RoundRequest {
  name: string
  arguments?: Record<string, unknown> | string | undefined
  callId?: string | undefined
  /** MCP client capabilities: what the caller can answer. */
  clientCapabilities?: Record<string, unknown> | undefined
  inputResponses?: Record<string, unknown> | undefined
  /** The gateway's handle of the previous round. */
  requestState?: string | undefined
}

/** Who makes the call: the tenant it acts for (undefined: none) and the caller's key id (undefined: open mode). */
export interface RoundParty {
  tenant: string | undefined
  keyId: string | undefined
}

/**
 * A call's input round: none (the caller cannot be asked), or what the source is given
 * (CallContext.input) and, on a retry, the callId and approvalId its handle carries; or the
 * refusal of a handle that does not open.
 */
export type RoundOpening =
  | { ok: true, input: InputRound | undefined, callId?: string | undefined, approvalId?: string | undefined }
  | { ok: false, error: HttpError }

export const NO_ROUND: RoundOpening = { ok: true, input: undefined }

/**
 * The round of a request: without clientCapabilities, inputResponses and requestState, none (the
 * server is told no capabilities, as before); else the capabilities declared (none: `{}`), and a
 * handle opened for the party, the tool's name as called and the arguments. A callId in the
 * request must be the handle's.
 */
export function openRound (sealer: RequestStateSealer, req: RoundRequest, party: RoundParty): RoundOpening {
  if (req.clientCapabilities === undefined && req.inputResponses === undefined && req.requestState === undefined) return NO_ROUND
  const input: InputRound = { capabilities: req.clientCapabilities ?? {}, inputResponses: req.inputResponses }
  if (req.requestState === undefined) return { ok: true, input }
  const opened = sealer.open(req.requestState, { tenant: party.tenant ?? '_', keyId: party.keyId ?? '', name: req.name, args: argumentsDigest(req.arguments) })
  if (!opened.ok) return { ok: false, error: requestStateRefusal(opened.why) }
  if (req.callId !== undefined && req.callId !== opened.callId) return { ok: false, error: requestStateRefusal('call') }
  input.server = opened.server
  input.requestState = opened.state
  return { ok: true, input, callId: opened.callId, approvalId: opened.approvalId }
}

/**
 * A result whose server asks for input, made the wire form of REST and /mcp: its questions as they
 * came (`inputRequests`), `status: "input_required"`, and the server's own state only inside the
 * handle for the retry (`requestState`), which binds the round to the party, the tool, the arguments
 * and the server and carries the callId and the approval the call passed. The router's
 * `inputRequired` (with the server's state) is removed.
 */
export function sealRound (
  sealer: RequestStateSealer,
  result: InvokeResult,
  req: RoundRequest,
  party: RoundParty,
  call: { callId: string, approvalId: string | undefined }
): void {
  const asked = result.inputRequired
  if (asked === undefined) return
  delete result.inputRequired
  result.status = 'input_required'
  result.inputRequests = asked.inputRequests
  result.requestState = sealer.seal({
    tenant: party.tenant ?? '_',
    keyId: party.keyId ?? '',
    name: req.name,
    args: argumentsDigest(req.arguments),
    server: asked.server,
    state: asked.requestState,
    callId: call.callId,
    approvalId: call.approvalId
  })
}
