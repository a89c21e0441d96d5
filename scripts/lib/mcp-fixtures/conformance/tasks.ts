/**
 * The Tasks extension (SEP-2663, `io.modelcontextprotocol/tasks`) in the conformance fixture server,
 * as far as SDK v2 2.4 lets a server serve it: the SDK has no task runtime (its task types are
 * 2025-11-25 wire vocabulary only), but a 2026-07-28 `tools/call` handler may answer any
 * `resultType` and `tasks/get` / `tasks/cancel` / `tasks/update` may be registered as custom methods
 * (the SDK knows them as the extension's names and checks their `Mcp-Name` header). So the fixture
 * keeps its own store (one per process: every 2026 request gets a fresh McpServer) and decides per
 * request, from the caller's `_meta` client capabilities, whether a call becomes a task.
 *
 * Tools (the suite's names): `slow_compute` (optional; `seconds` of work, cancellable),
 * `failing_job` (required; a tool error), `protocol_error_job` (optional; fails with a JSON-RPC
 * error), `confirm_delete` / `multi_input` (optional; the task parks `input_required` until
 * `tasks/update` answers), `test_tool_with_task` (required; one MRTR round, then a task).
 */
import { randomUUID } from 'node:crypto'
import {
  CLIENT_CAPABILITIES_META_KEY,
  MissingRequiredClientCapabilityError,
  ProtocolError,
  ProtocolErrorCode,
  acceptedContent,
  inputRequired
} from '@modelcontextprotocol/server'
import type { CallToolResult, ClientCapabilities, InputRequests, McpServer, RegisteredTool, ServerContext } from '@modelcontextprotocol/server'
import * as z from 'zod'

export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks'
const TTL_MS = 10 * 60_000
const POLL_INTERVAL_MS = 200

type Status = 'working' | 'input_required' | 'completed' | 'failed' | 'cancelled'
interface StoredTask {
  taskId: string
  status: Status
  createdAt: string
  lastUpdatedAt: string
  result?: CallToolResult
  error?: { code: number, message: string }
  /** Pending questions (answered keys are removed) and what the work waits on. */
  inputRequests?: InputRequests
  answers: Record<string, unknown>
  answered?: () => void
  abort: AbortController
  expires: number
}

const tasks = new Map<string, StoredTask>()
const TERMINAL = new Set<Status>(['completed', 'failed', 'cancelled'])
const now = (): string => new Date().toISOString()
const text = (value: string): CallToolResult => ({ content: [{ type: 'text', text: value }] })

const declaresTasks = (ctx: ServerContext): boolean => {
  const caps = (ctx.mcpReq.envelope as Record<string, ClientCapabilities | undefined> | undefined)?.[CLIENT_CAPABILITIES_META_KEY]
  const extensions = (caps as { extensions?: Record<string, unknown> } | undefined)?.extensions
  return extensions?.[TASKS_EXTENSION] !== undefined
}
const missingTasks = (): MissingRequiredClientCapabilityError =>
  new MissingRequiredClientCapabilityError({ requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } } as never,
    `This request needs the ${TASKS_EXTENSION} extension`)

const touch = (task: StoredTask, status: Status): void => {
  if (TERMINAL.has(task.status)) return
  task.status = status
  task.lastUpdatedAt = now()
}

const sleep = async (ms: number, signal: AbortSignal): Promise<void> => {
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms)
    signal.addEventListener('abort', () => { clearTimeout(timer); resolve() }, { once: true })
  })
}

/** Parks the task in input_required with `questions` until every key has an answer (or it is cancelled). */
async function ask (task: StoredTask, questions: InputRequests): Promise<Record<string, unknown>> {
  task.inputRequests = { ...questions }
  touch(task, 'input_required')
  while (Object.keys(task.inputRequests).length > 0 && !task.abort.signal.aborted) {
    await new Promise<void>((resolve) => {
      task.answered = resolve
      task.abort.signal.addEventListener('abort', () => { resolve() }, { once: true })
    })
  }
  delete task.inputRequests
  touch(task, 'working')
  return task.answers
}

type Work = (task: StoredTask) => Promise<CallToolResult>

/** Stores a working task, runs `work` in the background and answers the flat CreateTaskResult. */
function startTask (work: Work): Record<string, unknown> {
  for (const [id, old] of tasks) if (old.expires < Date.now()) tasks.delete(id)
  const createdAt = now()
  const task: StoredTask = {
    taskId: randomUUID(), status: 'working', createdAt, lastUpdatedAt: createdAt, answers: {}, abort: new AbortController(), expires: Date.now() + TTL_MS
  }
  tasks.set(task.taskId, task)
  work(task).then((result) => {
    if (task.abort.signal.aborted) return
    task.result = result
    touch(task, 'completed')
  }, (err: unknown) => {
    if (task.abort.signal.aborted) return
    task.error = err instanceof ProtocolError ? { code: err.code, message: err.message } : { code: ProtocolErrorCode.InternalError, message: String(err) }
    touch(task, 'failed')
  })
  return { resultType: 'task', taskId: task.taskId, status: task.status, createdAt, lastUpdatedAt: createdAt, ttlMs: TTL_MS, pollIntervalMs: POLL_INTERVAL_MS }
}

const detailed = (task: StoredTask): Record<string, unknown> => ({
  taskId: task.taskId,
  status: task.status,
  createdAt: task.createdAt,
  lastUpdatedAt: task.lastUpdatedAt,
  ttlMs: TTL_MS,
  pollIntervalMs: POLL_INTERVAL_MS,
  ...(task.status === 'input_required' && task.inputRequests !== undefined ? { inputRequests: task.inputRequests } : {}),
  ...(task.status === 'completed' && task.result !== undefined ? { result: task.result } : {}),
  ...(task.status === 'failed' && task.error !== undefined ? { error: task.error } : {})
})

const findTask = (ctx: ServerContext, taskId: string): StoredTask => {
  if (!declaresTasks(ctx)) throw missingTasks()
  const task = tasks.get(taskId)
  if (task === undefined || task.expires < Date.now()) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Unknown taskId: ${taskId}`)
  return task
}

const slow = async (task: StoredTask, seconds: number, label: string): Promise<CallToolResult> => {
  await sleep(seconds * 1000, task.abort.signal)
  return text(`computed ${label} after ${seconds}s`)
}

const elicitConfirm = (message: string): InputRequests[string] =>
  inputRequired.elicit({ message, requestedSchema: { type: 'object', properties: { confirm: { type: 'boolean' } } as never, required: [] } })

/**
 * Registers the task tools. A caller that declared the extension gets a task; one that did not gets
 * the optional tools synchronously and -32021 for the required ones.
 */
export function registerTaskTools (server: McpServer): void {
  const taskTool = (name: string, description: string, taskSupport: 'optional' | 'required', inputSchema: z.ZodObject,
    work: (args: Record<string, unknown>) => Work, mrtr?: (ctx: ServerContext) => Record<string, unknown> | undefined): void => {
    const tool: RegisteredTool = server.registerTool(name, { description, inputSchema }, async (args: Record<string, unknown>, ctx: ServerContext) => {
      const round = mrtr?.(ctx)
      if (round !== undefined) return round as never
      if (declaresTasks(ctx)) return startTask(work(args)) as never
      if (taskSupport === 'required') throw missingTasks()
      const standIn: StoredTask = { taskId: '', status: 'working', createdAt: '', lastUpdatedAt: '', answers: {}, abort: new AbortController(), expires: 0 }
      return await work(args)(standIn)
    })
    tool.execution = { taskSupport }
  }
  server.registerTool('greet', { description: 'Greets (never a task)', inputSchema: z.object({ name: z.string().optional() }) },
    async (args) => text(`Hello, ${args.name ?? 'World'}!`))
  const seconds = z.object({ seconds: z.number().optional(), label: z.string().optional() })
  taskTool('slow_compute', 'Sleeps `seconds`, then answers (a task when the caller takes tasks)', 'optional', seconds,
    (args) => async (task) => await slow(task, typeof args.seconds === 'number' ? args.seconds : 1, String(args.label ?? 'slow_compute')))
  taskTool('failing_job', 'A task that ends in a tool error after about a second', 'required', z.object({}), () => async (task) => {
    await sleep(1000, task.abort.signal)
    return { content: [{ type: 'text', text: 'failing_job failed on purpose' }], isError: true }
  })
  taskTool('protocol_error_job', 'A task that fails with a protocol error', 'optional', z.object({}), () => async () => {
    await new Promise((resolve) => setTimeout(resolve, 100))
    throw new ProtocolError(ProtocolErrorCode.InternalError, 'protocol_error_job failed on purpose')
  })
  const file = z.object({ filename: z.string().optional() })
  taskTool('confirm_delete', 'Asks to confirm (elicitation) inside its task, then deletes', 'optional', file, (args) => async (task) => {
    const answers = await ask(task, { confirm: elicitConfirm(`Delete ${String(args.filename ?? 'the file')}?`) })
    return text(`delete of ${String(args.filename ?? 'the file')}: ${JSON.stringify(answers.confirm ?? null)}`)
  })
  taskTool('multi_input', 'Asks two questions at once inside its task', 'optional', z.object({}), () => async (task) => {
    const answers = await ask(task, { first: elicitConfirm('First question'), second: elicitConfirm('Second question') })
    return text(`answered ${Object.keys(answers).sort().join(', ')}`)
  })
  taskTool('test_tool_with_task', 'Asks for a name (MRTR), then continues as a task', 'required', z.object({}), () => async () => text('unreachable'),
    (ctx) => {
      const name = acceptedContent<{ name: string }>(ctx.mcpReq.inputResponses, 'user_name')?.name
      if (typeof name !== 'string') {
        const requestedSchema = { type: 'object' as const, properties: { name: { type: 'string' } } as never, required: ['name'] }
        return inputRequired({ inputRequests: { user_name: inputRequired.elicit({ message: 'What is your name?', requestedSchema }) } }) as never
      }
      if (!declaresTasks(ctx)) throw missingTasks()
      return startTask(async (task) => { await sleep(200, task.abort.signal); return text(`Hello, ${name}! (from a task)`) })
    })
}

/** tasks/get, tasks/update, tasks/cancel (tasks/result and tasks/list are not part of the extension: -32601). */
export function registerTaskMethods (server: McpServer): void {
  const id = z.object({ taskId: z.string() }).passthrough()
  server.server.setRequestHandler('tasks/get', { params: id }, async (params, ctx) => detailed(findTask(ctx as ServerContext, params.taskId)))
  server.server.setRequestHandler('tasks/cancel', { params: id }, async (params, ctx) => {
    const task = findTask(ctx as ServerContext, params.taskId)
    if (!TERMINAL.has(task.status)) {
      touch(task, 'cancelled')
      task.abort.abort()
    }
    return {}
  })
  // The SDK lifts `inputResponses` out of the params into the request context (as for an MRTR retry).
  const update = z.object({ taskId: z.string(), inputResponses: z.record(z.string(), z.unknown()).optional() }).passthrough()
  server.server.setRequestHandler('tasks/update', { params: update }, async (params, ctx) => {
    const task = findTask(ctx as ServerContext, params.taskId)
    const responses = (ctx as ServerContext).mcpReq.inputResponses ?? params.inputResponses ?? {}
    for (const [key, answer] of Object.entries(responses)) {
      if (task.inputRequests?.[key] === undefined) continue
      task.answers[key] = answer
      const { [key]: _answered, ...rest } = task.inputRequests
      task.inputRequests = rest
    }
    task.lastUpdatedAt = now()
    task.answered?.()
    return {}
  })
}
