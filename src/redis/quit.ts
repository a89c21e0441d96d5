import type { RedisClient } from './connection.js'

/**
 * Closes a connection politely (QUIT) but never waits more than `timeoutMs`: during a Redis
 * outage QUIT can hang or fail, and shutdown must stay bounded. Falls back to a hard
 * disconnect, which also stops ioredis' reconnect timer. Never rejects.
 */
export async function quitWithTimeout (client: RedisClient, timeoutMs: number): Promise<void> {
  if (client.status === 'end') return
  // QUIT on a connection that is not up would only wait for a reconnect.
  if (client.status !== 'ready' && client.status !== 'connect') {
    hardDisconnect(client)
    return
  }
  let timer: NodeJS.Timeout | undefined
  const timedOut = new Promise<'timeout'>((resolve) => { timer = setTimeout(() => resolve('timeout'), timeoutMs) })
  const quit = client.quit().then(() => 'quit' as const, () => 'failed' as const)
  const outcome = await Promise.race([quit, timedOut])
  clearTimeout(timer)
  if (outcome !== 'quit') hardDisconnect(client)
}

function hardDisconnect (client: RedisClient): void {
  try {
    client.disconnect(false)
  } catch {
    // Already torn down: nothing left to release.
  }
}
