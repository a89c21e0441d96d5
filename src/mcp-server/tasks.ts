/**
 * The Tasks extension (SEP-2663, `io.modelcontextprotocol/tasks`) on /mcp, 2026-07-28 clients
 * (docs/ARCHITECTURE.md#mcp-eras). A client that declares the extension in a tools/call's client
 * capabilities has them passed to the tool's server; a server that then runs the call as a task
 * answers a CreateTaskResult, which reaches the client with the gateway's own task id: a handle
 * (request-state.ts's sealer, HMAC-SHA256 with the key derived from SECRETS_KEY) binding the
 * tenant, the caller's API key, the server (its tier and id) and the server's own taskId. Nothing
 * is stored: `tasks/get`, `tasks/update` and `tasks/cancel` on ANY instance open the handle and
 * send the request, with the server's taskId, to that server through the tenant's pooled client.
 * An altered, expired, another tenant's or another key's handle is an unknown task (-32602),
 * refused before anything goes upstream; a request without the extension declared is -32021,
 * as the extension requires. `tasks/result` and `tasks/list` are not part of the extension
 * (method not found).
 */
import { CLIENT_CAPABILITIES_META_KEY, MissingRequiredClientCapabilityError } from '@modelcontextprotocol/server'
import type { Server, ServerContext } from '@modelcontextprotocol/server'
import * as z from 'zod'
import { HttpError } from '../errors.js'
import type { Gateway } from '../gateway.js'
import type { TaskMethod } from '../routing/source.js'
import type { Caller, CreatedTask } from '../routing/types.js'
import { declaredTasks, TASKS_EXTENSION } from '../routing/tasks-extension.js'
import type { OpenedRound, RequestStateSealer } from '../routing/input-rounds.js'

/**
 * The `name` claim of a task handle: no tool is called this (a space is in no tool name), so a
 * tool's requestState handle is never taken for a task handle, nor the other way round.
 */
const TASK_CLAIM = 'tasks extension'
/** How long a handle is good for when the server's task has no ttlMs (or a longer one). */
const MAX_HANDLE_TTL_MS = 24 * 60 * 60_000

/** Whom a handle is bound to: the tenant the call acted for and the caller's API key. */
export interface TaskOwner {
  tenant: string
  keyId: string
}

/** The CreateTaskResult a caller gets: the server's, with the gateway's handle as its taskId. */
export function sealedTaskResult (sealer: RequestStateSealer, owner: TaskOwner, created: CreatedTask): Record<string, unknown> {
  const ttl = created.task.ttlMs
  const ttlMs = typeof ttl === 'number' && ttl > 0 ? Math.min(ttl, MAX_HANDLE_TTL_MS) : MAX_HANDLE_TTL_MS
  const taskId = sealer.seal({ ...owner, name: TASK_CLAIM, server: `${created.route}/${created.serverId}`, state: created.task.taskId }, ttlMs)
  return { ...withoutServerInfo(created.task), resultType: 'task', taskId }
}

const TASK_REFUSALS: Record<Exclude<OpenedRound, { ok: true }>['why'], string> = {
  malformed: 'not a task handle of this gateway',
  signature: 'it was altered',
  expired: 'it expired',
  tenant: 'it belongs to another tenant',
  key: 'it belongs to another API key',
  tool: 'not a task handle of this gateway',
  arguments: 'not a task handle of this gateway'
}

export interface OpenedTask {
  route: string
  serverId: string
  /** The server's own taskId. */
  taskId: string
}

/** The handle's server and upstream taskId, or an HttpError (GW_TASK_NOT_FOUND) saying why not, never what it held. */
function openTaskHandle (sealer: RequestStateSealer | undefined, handle: string, owner: TaskOwner): OpenedTask | HttpError {
  const opened: OpenedRound = sealer === undefined ? { ok: false, why: 'malformed' } : sealer.open(handle, { ...owner, name: TASK_CLAIM })
  if (!opened.ok) return new HttpError('GW_TASK_NOT_FOUND', `Unknown task (${TASK_REFUSALS[opened.why]})`)
  const cut = opened.server.indexOf('/')
  if (cut < 0 || opened.state === undefined) return new HttpError('GW_TASK_NOT_FOUND', `Unknown task (${TASK_REFUSALS.malformed})`)
  return { route: opened.server.slice(0, cut), serverId: opened.server.slice(cut + 1), taskId: opened.state }
}

/**
 * Sends one task request to the server that runs the task (the tenant's or a global server,
 * as the call's tier was), with the server's own taskId; tasks/get's answer names the handle
 * again. The server's JSON-RPC error is thrown as it came.
 */
async function forwardTaskRequest (
  gateway: Gateway,
  caller: Caller,
  tenant: string | undefined,
  task: OpenedTask,
  method: TaskMethod,
  params: Record<string, unknown>,
  handle: string,
  signal: AbortSignal
): Promise<Record<string, unknown>> {
  const { servers } = await gateway.surface({ mcp: task.serverId, ...(tenant !== undefined ? { userId: tenant } : {}) }, caller, signal)
  const server = servers.find((s) => s.route === task.route && s.source === task.serverId)
  if (server === undefined) throw new HttpError('GW_TASK_NOT_FOUND', `Unknown task (the MCP server '${task.serverId}' that runs it is no longer available)`)
  const result = withoutServerInfo(await server.request({ method, params: { ...params, taskId: task.taskId } }, signal) as Record<string, unknown>)
  return method === 'tasks/get' ? { ...result, taskId: handle } : result
}

const SERVER_INFO_KEY = 'io.modelcontextprotocol/serverInfo'

/** The server's result without its `_meta` serverInfo: the gateway is the client's server and stamps its own. */
function withoutServerInfo (result: Record<string, unknown>): Record<string, unknown> {
  const meta = result._meta as Record<string, unknown> | undefined
  if (meta === undefined || meta === null || typeof meta !== 'object' || !(SERVER_INFO_KEY in meta)) return result
  const { [SERVER_INFO_KEY]: _server, ...rest } = meta
  const { _meta: _dropped, ...fields } = result
  return Object.keys(rest).length > 0 ? { ...fields, _meta: rest } : fields
}

/**
 * REST (GET and DELETE /users/{u}/tasks/{taskId}): the same handle, for the tenant the path
 * names (tenancy as every /users/{u} route) and the caller's key. A handle that does not open, or
 * the server's own "unknown task" (-32602), is GW_TASK_NOT_FOUND; another answer of the server
 * that is an error, GW_UPSTREAM_ERROR.
 */
export async function restTaskRequest (
  gateway: Gateway,
  sealer: RequestStateSealer | undefined,
  caller: Caller,
  userId: string | undefined,
  handle: string,
  method: 'tasks/get' | 'tasks/cancel',
  signal: AbortSignal
): Promise<Record<string, unknown>> {
  const task = openTaskHandle(sealer, handle, { tenant: userId ?? '_', keyId: caller.keyId ?? '' })
  if (task instanceof HttpError) throw task
  try {
    const { _meta: _server, resultType: _type, ...result } = await forwardTaskRequest(gateway, caller, userId, task, method, {}, handle, signal)
    return result
  } catch (err) {
    if (err instanceof HttpError) throw err
    const code = (err as { code?: unknown }).code
    if (err instanceof Error && typeof code === 'number') {
      if (code === -32602) throw new HttpError('GW_TASK_NOT_FOUND', 'Unknown task (the MCP server that ran it no longer knows it)')
      throw new HttpError('GW_UPSTREAM_ERROR', `MCP server '${task.serverId}' refused ${method}: ${err.message}`)
    }
    throw err
  }
}

/** POST /invoke's `task` (REST): the server's task with the handle as taskId, bound to the call's tenant and the caller's key. */
function restTaskField (sealer: RequestStateSealer, caller: Caller, created: CreatedTask): Record<string, unknown> {
  const { resultType: _type, ...task } = sealedTaskResult(sealer, { tenant: created.tenant ?? '_', keyId: caller.keyId ?? '' }, created)
  return task
}

/** An invoke result as REST answers it: a task's handle in place of the server's task (restTaskField). */
export function withRestTask<T extends { task?: CreatedTask | undefined }> (
  sealer: RequestStateSealer | undefined, caller: Caller, result: T
): T | (Omit<T, 'task'> & { task: Record<string, unknown> }) {
  if (result.task === undefined) return result
  // Services built without a sealer (an embedder's): a task cannot be handed out.
  if (sealer === undefined) throw new HttpError('GW_INTERNAL', 'An MCP task was created, but this gateway has no task handle key')
  return { ...result, task: restTaskField(sealer, caller, result.task) }
}

const TASK_PARAMS = z.looseObject({ taskId: z.string() })

export interface TaskMethodOptions {
  gateway: Gateway
  caller: Caller
  /** The tenant the exchange acts for (its URL's userId, else the caller's). */
  tenant: string | undefined
  sealer: RequestStateSealer | undefined
  /** Turns a failure into the JSON-RPC error the client gets (handlers.ts). */
  toRpcError: (err: unknown) => Error
}

/** Registers tasks/get, tasks/update and tasks/cancel on a 2026-07-28 exchange's server. */
export function registerTaskMethods (server: Server, opts: TaskMethodOptions): void {
  const owner: TaskOwner = { tenant: opts.tenant ?? '_', keyId: opts.caller.keyId ?? '' }
  const handle = (method: TaskMethod) => async (params: z.infer<typeof TASK_PARAMS>, ctx: ServerContext): Promise<Record<string, unknown>> => {
    const declared = (ctx.mcpReq.envelope as Record<string, unknown> | undefined)?.[CLIENT_CAPABILITIES_META_KEY]
    if (declaredTasks(declared as Record<string, unknown> | undefined) === undefined) {
      throw new MissingRequiredClientCapabilityError({ requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } } as never,
        `${method} needs the ${TASKS_EXTENSION} extension declared in the request's client capabilities`)
    }
    const task = openTaskHandle(opts.sealer, params.taskId, owner)
    if (task instanceof HttpError) throw Object.assign(opts.toRpcError(task), { code: -32602 })
    const { taskId: _handle, _meta: _envelope, ...rest } = params
    // The SDK lifts a tasks/update's answers out of its params, as it does a retry's.
    if (method === 'tasks/update' && ctx.mcpReq.inputResponses !== undefined) rest.inputResponses = ctx.mcpReq.inputResponses
    try {
      return await forwardTaskRequest(opts.gateway, opts.caller, opts.tenant, task, method, rest, params.taskId, ctx.mcpReq.signal)
    } catch (err) {
      const rpc = opts.toRpcError(err)
      throw err instanceof HttpError && err.code === 'GW_TASK_NOT_FOUND' ? Object.assign(rpc, { code: -32602 }) : rpc
    }
  }
  for (const method of ['tasks/get', 'tasks/update', 'tasks/cancel'] as const) {
    server.setRequestHandler(method, { params: TASK_PARAMS }, handle(method))
  }
}
