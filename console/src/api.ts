// The console's typed client of the gateway's public HTTP API. Request and response types come from
// the same TypeBox schemas (src/api) that validate the routes and generate openapi.yaml, as types
// only: nothing of the server is bundled.
import type { Static } from '@sinclair/typebox'
import type { ToolsResponse, ToolSearchResponse, CatalogResponse, SelectedByRoute } from '../../src/api/tools.js'
import type { InvokeBodyT, InvokeResult, InvokePending } from '../../src/api/invoke.js'
import type {
  ServerList,
  PutServerBody,
  PutServerResponse,
  DeleteServerResponse,
  LiveToolsResponse,
  StatusResponse,
  ServerView
} from '../../src/api/registry.js'
import type { InvocationPage, InvocationEntry } from '../../src/api/invocations.js'
import type { ApprovalsResponse, Approval, DecisionBodyT } from '../../src/api/approvals.js'
import type { WorkspaceList, WorkspaceSummary, UploadResponse, CheckpointList, CheckpointInfo, RestoreResponse } from '../../src/api/workspaces.js'
import type { AuthorizeResponse, OAuthStatusResponse } from '../../src/api/oauth.js'
import type { AcceptPinsBody, AcceptPinsResponse, PinsResponse } from '../../src/api/pins.js'
import type { ClusterResponse } from '../../src/api/cluster.js'
import type { WhoAmIResponse } from '../../src/api/whoami.js'
import type { ErrorResponse } from '../../src/api/common.js'
import { ROUTES, fillPath } from './routes.js'
import type { PathParams, RouteName } from './routes.js'

export type Tools = Static<typeof ToolsResponse>
export type ToolSearch = Static<typeof ToolSearchResponse>
export type Catalog = Static<typeof CatalogResponse>
export type { SelectedByRoute }
export type InvokeBody = InvokeBodyT
export type InvokeOutcome = Static<typeof InvokeResult>
export type InvokeHeld = Static<typeof InvokePending>
export type Servers = Static<typeof ServerList>
export type Server = Static<typeof ServerView>
export type ServerInput = Static<typeof PutServerBody>
export type PutServer = Static<typeof PutServerResponse>
export type DeleteServer = Static<typeof DeleteServerResponse>
export type LiveTools = Static<typeof LiveToolsResponse>
export type OAuthStatus = Static<typeof OAuthStatusResponse>
export type OAuthAuthorization = Static<typeof AuthorizeResponse>
export type Pins = Static<typeof PinsResponse>
export type PinnedTool = Pins['tools'][number]
export type AcceptPins = NonNullable<Static<typeof AcceptPinsBody>>
export type PinsAccepted = Static<typeof AcceptPinsResponse>
export type Status = Static<typeof StatusResponse>
export type Invocations = Static<typeof InvocationPage>
export type Invocation = Static<typeof InvocationEntry>
export type Approvals = Static<typeof ApprovalsResponse>
export type ApprovalT = Static<typeof Approval>
export type Decision = DecisionBodyT
export type Workspaces = Static<typeof WorkspaceList>
export type Workspace = Static<typeof WorkspaceSummary>
export type Uploaded = Static<typeof UploadResponse>
export type Checkpoints = Static<typeof CheckpointList>
export type Checkpoint = Static<typeof CheckpointInfo>
export type Restored = Static<typeof RestoreResponse>
export type Cluster = Static<typeof ClusterResponse>
export type WhoAmI = Static<typeof WhoAmIResponse>
export type ApiErrorBody = Static<typeof ErrorResponse>
/** GET /readyz (its schema lives in routes/health.ts). */
export interface Readiness {
  ready: boolean
  reasons: string[]
  registry: { backend: string, reachable: boolean }
  sandbox: { mode: string, ok: boolean, reason: string, warning: string | null }
  sources: { builtin: number, functions: number, localMcpTools: number }
}

/** An answer of the API that is not a success: its own code and message, as the API sent them. */
class ApiError extends Error {
  readonly status: number
  readonly code: string
  constructor (status: number, code: string, message: string) {
    super(message)
    this.name = 'ApiError'
    this.status = status
    this.code = code
  }
}

type Query = Record<string, string | number | boolean | undefined>

interface CallOptions<R extends RouteName> {
  params?: PathParams<typeof ROUTES[R][1]>
  query?: Query
  /** A JSON body, or raw bytes with their content type. */
  json?: unknown
  bytes?: { data: ArrayBuffer | Blob, type: string }
  accept?: string
  signal?: AbortSignal
  /** Statuses besides 2xx whose body is an answer, not an error (/readyz's 503). */
  alsoOk?: number[]
}

/** What a call returned: the body as the route answers it, the status and the headers. */
export interface Answer<T> { status: number, body: T, headers: Headers }

/** The URL a route call goes to (same origin), for display (copy as curl) as well as for fetch. */
export function urlOf<R extends RouteName> (route: R, params?: PathParams<typeof ROUTES[R][1]>, query?: Query): string {
  const path = fillPath(ROUTES[route][1], (params ?? {}) as Record<string, string>)
  const search = new URLSearchParams()
  for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined && v !== '') search.set(k, String(v))
  const qs = search.toString()
  return qs === '' ? path : `${path}?${qs}`
}

async function errorOf (res: Response): Promise<ApiError> {
  const text = await res.text().catch(() => '')
  try {
    const body = JSON.parse(text) as Partial<ApiErrorBody>
    if (typeof body.message === 'string') return new ApiError(res.status, body.code ?? `HTTP_${res.status}`, body.message)
  } catch {}
  return new ApiError(res.status, `HTTP_${res.status}`, text.trim() === '' ? `${res.status} ${res.statusText}` : text.slice(0, 500))
}

/** A client bound to one API key (none in open mode). */
export class Api {
  readonly #key: string

  constructor (key: string) {
    this.#key = key
  }

  /** Calls a route of ROUTES; non-2xx answers throw ApiError with the API's code and message. */
  async call<T, R extends RouteName = RouteName> (route: R, opts: CallOptions<R> = {}): Promise<Answer<T>> {
    const [method] = ROUTES[route]
    const headers: Record<string, string> = {}
    if (this.#key !== '') headers.authorization = `Bearer ${this.#key}`
    if (opts.accept !== undefined) headers.accept = opts.accept
    let body: BodyInit | undefined
    if (opts.json !== undefined) {
      headers['content-type'] = 'application/json'
      body = JSON.stringify(opts.json)
    } else if (opts.bytes !== undefined) {
      headers['content-type'] = opts.bytes.type
      body = opts.bytes.data
    }
    let res: Response
    try {
      res = await fetch(urlOf(route, opts.params, opts.query), {
        method,
        headers,
        ...(body !== undefined ? { body } : {}),
        ...(opts.signal !== undefined ? { signal: opts.signal } : {}),
        cache: 'no-store'
      })
    } catch (err) {
      if ((err as Error).name === 'AbortError') throw err
      throw new ApiError(0, 'NETWORK', `The gateway could not be reached: ${(err as Error).message}`)
    }
    if (!res.ok && !(opts.alsoOk ?? []).includes(res.status)) throw await errorOf(res)
    const type = res.headers.get('content-type') ?? ''
    let parsed: unknown
    if (res.status === 204) parsed = null
    else if (type.includes('application/json')) parsed = await res.json()
    else if (type.startsWith('text/')) parsed = await res.text()
    else parsed = await res.blob()
    return { status: res.status, body: parsed as T, headers: res.headers }
  }

  async get<T, R extends RouteName = RouteName> (route: R, opts: CallOptions<R> = {}): Promise<T> {
    return (await this.call<T, R>(route, opts)).body
  }

  whoami (): Promise<WhoAmI> { return this.get('getWhoAmI') }
  tools (query: Query): Promise<Tools> { return this.get('listTools', { query }) }
  searchTools (query: Query): Promise<ToolSearch> { return this.get('searchTools', { query }) }
  catalog (userId: string | undefined): Promise<Catalog> { return this.get('getCatalog', { query: { userId } }) }
  invoke (body: InvokeBody): Promise<Answer<InvokeOutcome | InvokeHeld>> { return this.call('invokeTool', { json: body }) }

  servers (userId: string | undefined): Promise<Servers> {
    return userId === undefined ? this.get('listGlobalServers') : this.get('listUserServers', { params: { userId } })
  }

  putServer (userId: string | undefined, serverId: string, config: ServerInput): Promise<PutServer> {
    return userId === undefined
      ? this.get('putGlobalServer', { params: { serverId }, json: config })
      : this.get('putUserServer', { params: { userId, serverId }, json: config })
  }

  deleteServer (userId: string | undefined, serverId: string): Promise<DeleteServer> {
    return userId === undefined
      ? this.get('deleteGlobalServer', { params: { serverId } })
      : this.get('deleteUserServer', { params: { userId, serverId } })
  }

  liveTools (userId: string | undefined, serverId: string): Promise<LiveTools> {
    return userId === undefined
      ? this.get('listGlobalServerTools', { params: { serverId } })
      : this.get('listUserServerTools', { params: { userId, serverId } })
  }

  /** A server's OAuth connection (SPEC 16): its status, never a token. */
  oauthStatus (userId: string | undefined, serverId: string): Promise<OAuthStatus> {
    return userId === undefined
      ? this.get('getGlobalServerOAuth', { params: { serverId } })
      : this.get('getUserServerOAuth', { params: { userId, serverId } })
  }

  /**
   * Starts an authorization: the URL to open for the user. No returnTo: the console cannot know
   * OAUTH_RETURN_ALLOW, so the callback ends on the gateway's own "connected" page.
   */
  authorizeOAuth (userId: string | undefined, serverId: string): Promise<OAuthAuthorization> {
    return userId === undefined
      ? this.get('authorizeGlobalServerOAuth', { params: { serverId }, json: {} })
      : this.get('authorizeUserServerOAuth', { params: { userId, serverId }, json: {} })
  }

  disconnectOAuth (userId: string | undefined, serverId: string): Promise<null> {
    return userId === undefined
      ? this.get('deleteGlobalServerOAuth', { params: { serverId } })
      : this.get('deleteUserServerOAuth', { params: { userId, serverId } })
  }

  /** A server's definition pins (SPEC 18): each tool's status against what the server offers now, both definitions. */
  pins (userId: string | undefined, serverId: string): Promise<Pins> {
    return userId === undefined
      ? this.get('getGlobalServerPins', { params: { serverId } })
      : this.get('getUserServerPins', { params: { userId, serverId } })
  }

  /** Pins what the server offers now; with `digests`, only if still offered as read (else 409 GW_DEFINITION_CHANGED). */
  acceptPins (userId: string | undefined, serverId: string, body: AcceptPins): Promise<PinsAccepted> {
    return userId === undefined
      ? this.get('acceptGlobalServerPins', { params: { serverId }, json: body })
      : this.get('acceptUserServerPins', { params: { userId, serverId }, json: body })
  }

  invocations (userId: string, query: Query): Promise<Invocations> { return this.get('listInvocations', { params: { userId }, query }) }
  invocation (userId: string, callId: string): Promise<Invocation> { return this.get('getInvocation', { params: { userId, callId } }) }

  approvals (userId: string | undefined): Promise<Approvals> { return this.get('listApprovals', { query: { userId } }) }
  approval (approvalId: string): Promise<ApprovalT> { return this.get('getApproval', { params: { approvalId } }) }
  decide (approvalId: string, decision: Decision): Promise<ApprovalT> { return this.get('decideApproval', { params: { approvalId }, json: decision }) }

  workspaces (userId: string): Promise<Workspaces> { return this.get('listWorkspaces', { params: { userId } }) }
  upload (userId: string, workspaceId: string, file: Blob, type: string, mode: 'replace' | 'merge'): Promise<Uploaded> {
    return this.get('uploadWorkspace', { params: { userId, workspaceId }, query: { mode }, bytes: { data: file, type } })
  }

  deleteWorkspace (userId: string, workspaceId: string): Promise<null> { return this.get('deleteWorkspace', { params: { userId, workspaceId } }) }
  download (userId: string, workspaceId: string): Promise<Blob> { return this.get('downloadWorkspace', { params: { userId, workspaceId } }) }
  checkpoints (userId: string, workspaceId: string): Promise<Checkpoints> { return this.get('listCheckpoints', { params: { userId, workspaceId } }) }
  checkpoint (userId: string, workspaceId: string, label: string): Promise<Checkpoint> {
    return this.get('createCheckpoint', { params: { userId, workspaceId }, json: label === '' ? {} : { label } })
  }

  restore (userId: string, workspaceId: string, checkpointId: string): Promise<Restored> {
    return this.get('restoreCheckpoint', { params: { userId, workspaceId, checkpointId }, json: {} })
  }

  deleteCheckpoint (userId: string, workspaceId: string, checkpointId: string): Promise<null> {
    return this.get('deleteCheckpoint', { params: { userId, workspaceId, checkpointId } })
  }

  status (): Promise<Status> { return this.get('getStatus') }
  cluster (): Promise<Cluster> { return this.get('getCluster') }

  /** /readyz answers 503 with the same body when not ready: both are an answer here. */
  readiness (): Promise<Readiness> { return this.get('getReadiness', { alsoOk: [503] }) }

  metrics (): Promise<string> { return this.get('getMetrics') }
}

/** The text of an error for people: the API's code and message when it sent one. */
export function describeError (err: unknown): { code: string, message: string } {
  if (err instanceof ApiError) return { code: err.code, message: err.message }
  return { code: 'CONSOLE_ERROR', message: err instanceof Error ? err.message : String(err) }
}
