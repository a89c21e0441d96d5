/**
 * The Tasks extension (SEP-2663, `io.modelcontextprotocol/tasks`) on the gateway's upstream side:
 * a 2026-07-28 server may answer a tools/call of a caller that declared the extension with a
 * CreateTaskResult (`resultType: "task"`, the task's fields flat beside it). The SDK v2 Client
 * (2.4) has no task runtime and refuses any `resultType` but `complete` and `input_required`
 * before a caller sees it (UNSUPPORTED_RESULT_TYPE). So the connection's transport hands the
 * Client such a result as a `complete` shell holding the task under a key of the gateway's own
 * (`shellTaskResults`), and the call takes it out again (`unshellTask`): the Client never parses
 * the task, and nothing of the shell ever leaves the gateway.
 */
import type { Transport } from '@modelcontextprotocol/client'

/** Where the shell keeps the task (a `_meta` key in the gateway's own namespace). */
const SHELL_KEY = 'io.tool-gateway/upstream-task'

/** A server's CreateTaskResult as it sent it (`taskId`, `status`, `createdAt`, `ttlMs`, ...). */
export interface UpstreamTask {
  resultType: 'task'
  taskId: string
  status?: string
  [field: string]: unknown
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v)

/**
 * The shell of a JSON-RPC response whose result is a task; anything else as it is, except that a
 * server's own use of the shell's key is removed (a server cannot pass a result off as a task).
 */
function shellTaskResponse (message: unknown): unknown {
  if (!isObject(message) || !isObject(message.result)) return message
  if (message.result.resultType !== 'task') {
    const meta = message.result._meta
    if (!isObject(meta) || !(SHELL_KEY in meta)) return message
    const { [SHELL_KEY]: _forged, ...rest } = meta
    return { ...message, result: { ...message.result, _meta: rest } }
  }
  // isError: the Client then checks no structuredContent against the tool's outputSchema.
  return { ...message, result: { resultType: 'complete', content: [], isError: true, _meta: { [SHELL_KEY]: message.result } } }
}

/** From now on, the transport's task results reach its Client as shells (call after the Client connected). */
export function shellTaskResults (transport: Transport): void {
  const inner = transport.onmessage
  if (inner === undefined) return
  transport.onmessage = ((message: unknown, extra?: unknown) => {
    (inner as (m: unknown, e?: unknown) => void).call(transport, shellTaskResponse(message), extra)
  }) as Transport['onmessage']
}

/** The task in a shell, or undefined for any other result (a task without a string taskId is not one). */
export function unshellTask (result: unknown): UpstreamTask | undefined {
  if (!isObject(result) || !isObject(result._meta)) return undefined
  const task = result._meta[SHELL_KEY]
  if (!isObject(task) || typeof task.taskId !== 'string') return undefined
  return task as UpstreamTask
}
