import { randomUUID } from 'node:crypto'
import { Client as ClientV2 } from '@modelcontextprotocol/client'
import type { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js'
import { ProgressNotificationSchema } from '@modelcontextprotocol/sdk/types.js'
import type { Progress, ProgressToken } from '@modelcontextprotocol/sdk/types.js'

type ProgressHandler = (progress: Progress) => void
/** The remote pool's clients are the SDK v2's; the local services' (tier 3) still the v1 SDK's. */
type Client = ClientV1 | ClientV2
type ProgressParams = { progressToken: ProgressToken, progress: number, total?: number | undefined, message?: string | undefined }

/** Replaces the client's notifications/progress handler with `handle`. */
function onProgressNotification (client: Client, handle: (params: ProgressParams) => void): void {
  if (client instanceof ClientV2) client.setNotificationHandler('notifications/progress', (n) => { handle(n.params) })
  else client.setNotificationHandler(ProgressNotificationSchema, (n) => { handle(n.params) })
}

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
    onProgressNotification(client, (params) => {
      const { progressToken, ...progress } = params
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
