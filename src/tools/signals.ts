import { setMaxListeners } from 'node:events'

/**
 * An AbortController for a signal that one request shares with all the work it fans out to: a
 * batch's concurrent calls, a listing's servers, an MCP exchange's calls. Each of those adds
 * abort listeners and removes them when it ends, so the count is bounded by the request's own
 * work (batch size, servers asked), not a leak; Node's leak warning (at 11 listeners) is turned
 * off for this signal so it does not flood the logs.
 */
export function fanOutAbortController (): AbortController {
  const controller = new AbortController()
  setMaxListeners(0, controller.signal)
  return controller
}
