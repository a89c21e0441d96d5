import { randomUUID } from 'node:crypto'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { ProgressNotificationSchema } from '@modelcontextprotocol/sdk/types.js'
import type { Progress, ProgressToken } from '@modelcontextprotocol/sdk/types.js'

type ProgressHandler = (progress: Progress) => void

interface Routes {
  prefix: string
  next: number
  handlers: Map<ProgressToken, ProgressHandler>
}

const routesByClient = new WeakMap<Client, Routes>()

/**
 * Progress of one tools/call made with an SDK Client: a token of its own to put in the
 * request's `_meta.progressToken`, and `end()` to call once the call has settled.
 *
 * Why not the SDK's `onprogress` option: the SDK drops a progress notification that arrives
 * in the same read as the call's response (notifications are dispatched a microtask later,
 * responses at once, and the response removes the progress handler first), so the last step
 * of a server that reports progress and then answers was lost. Here a handler lives until
 * `end()`, which the caller runs after its `await` of the call: every notification read
 * before the response has been dispatched by then.
 *
 * The first use on a client replaces its notifications/progress handler; the gateway's
 * clients never use `onprogress`, so nothing else relies on it.
 */
export function trackProgress (client: Client, onProgress: ProgressHandler): { token: string, end: () => void } {
  let routes = routesByClient.get(client)
  if (routes === undefined) {
    const created: Routes = { prefix: `gw-${randomUUID()}-`, next: 0, handlers: new Map() }
    routes = created
    routesByClient.set(client, created)
    client.setNotificationHandler(ProgressNotificationSchema, (notification) => {
      const { progressToken, ...progress } = notification.params
      const handler = created.handlers.get(progressToken)
      if (handler === undefined) return
      // A caller's handler that throws must not break the client's message loop.
      try {
        handler({
          progress: progress.progress,
          ...(progress.total !== undefined ? { total: progress.total } : {}),
          ...(progress.message !== undefined ? { message: progress.message } : {})
        })
      } catch {}
    })
  }
  const token = `${routes.prefix}${routes.next++}`
  routes.handlers.set(token, onProgress)
  const own = routes
  return { token, end: () => { own.handlers.delete(token) } }
}
