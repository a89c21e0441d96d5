/** The MCP Tasks extension (SEP-2663): its identifier, and whether a caller's client capabilities declare it. */
export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks'

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v)

/** The caller's declaration of the extension (its settings object), from its client capabilities, or undefined. */
export function declaredTasks (capabilities: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  const extensions = capabilities?.extensions
  if (!isObject(extensions)) return undefined
  const tasks = extensions[TASKS_EXTENSION]
  return isObject(tasks) ? tasks : undefined
}
