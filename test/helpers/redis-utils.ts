import { randomBytes } from 'node:crypto'
import { createServer, connect, type Server, type Socket } from 'node:net'
import { Redis } from 'ioredis'

/** The real redis-server the suite runs against (REDIS_URL overrides). */
export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'

/** Under CI a missing Redis is a failure, never a skip (STYLE "Tests"). */
export const REDIS_REQUIRED = process.env.CI === 'true'

/** A prefix no other run shares, so parallel runs and leftovers never collide. */
export function uniquePrefix (): string {
  return `tg-test:${randomBytes(6).toString('hex')}:`
}

/** Whether Redis answers PING (bounded: one connect attempt, no offline queue). */
export async function redisReachable (url = REDIS_URL): Promise<boolean> {
  const client = new Redis(url, { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, connectTimeout: 1000, retryStrategy: () => null })
  client.on('error', () => {})
  try {
    await client.connect()
    return (await client.ping()) === 'PONG'
  } catch {
    return false
  } finally {
    client.disconnect()
  }
}

/** Deletes every key under `prefix` (SCAN, never KEYS, so a big shared Redis is not blocked). */
export async function deleteKeys (prefix: string, url = REDIS_URL): Promise<number> {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1, connectTimeout: 1000, retryStrategy: () => null })
  client.on('error', () => {})
  let deleted = 0
  try {
    await client.connect()
    // Escape glob characters so a prefix can never match another run's keys.
    const pattern = prefix.replace(/[*?[\]\\]/g, (c) => `\\${c}`) + '*'
    let cursor = '0'
    do {
      const [next, keys] = await client.scan(cursor, 'MATCH', pattern, 'COUNT', 500)
      cursor = next
      if (keys.length > 0) deleted += await client.del(...keys)
    } while (cursor !== '0')
  } finally {
    client.disconnect()
  }
  return deleted
}

/** Counts keys under `prefix`. */
export async function countKeys (prefix: string, url = REDIS_URL): Promise<number> {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1, connectTimeout: 1000, retryStrategy: () => null })
  client.on('error', () => {})
  try {
    await client.connect()
    const pattern = prefix.replace(/[*?[\]\\]/g, (c) => `\\${c}`) + '*'
    let count = 0
    let cursor = '0'
    do {
      const [next, keys] = await client.scan(cursor, 'MATCH', pattern, 'COUNT', 500)
      cursor = next
      count += keys.length
    } while (cursor !== '0')
    return count
  } finally {
    client.disconnect()
  }
}

/** A loopback port nothing listens on (bound then released). */
export async function freePort (): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  await new Promise<void>((resolve) => server.close(() => resolve()))
  if (address === null || typeof address === 'string') throw new Error('no port')
  return address.port
}

/**
 * A TCP proxy in front of the real Redis, to simulate faults without touching the shared
 * server: `stop()` is Redis going down (listener closed, connections reset), `start()` is
 * Redis coming back on the same port, `pause()` is a Redis that accepts but never answers.
 */
export class TcpProxy {
  readonly targetHost: string
  readonly targetPort: number
  port = 0
  #server: Server | undefined
  #sockets = new Set<Socket>()
  #paused = false

  constructor (targetUrl = REDIS_URL) {
    const url = new URL(targetUrl)
    this.targetHost = url.hostname
    this.targetPort = Number(url.port || 6379)
  }

  get url (): string {
    return `redis://127.0.0.1:${this.port}`
  }

  async start (): Promise<void> {
    const server = createServer((client) => {
      const upstream = connect(this.targetPort, this.targetHost)
      this.#sockets.add(client)
      this.#sockets.add(upstream)
      client.on('data', (chunk) => { if (!this.#paused) upstream.write(chunk) })
      upstream.on('data', (chunk) => { if (!this.#paused) client.write(chunk) })
      const end = (): void => {
        client.destroy()
        upstream.destroy()
        this.#sockets.delete(client)
        this.#sockets.delete(upstream)
      }
      client.on('close', end)
      upstream.on('close', end)
      client.on('error', end)
      upstream.on('error', end)
    })
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(this.port, '127.0.0.1', () => resolve())
    })
    const address = server.address()
    if (address !== null && typeof address !== 'string') this.port = address.port
    this.#server = server
  }

  async stop (): Promise<void> {
    for (const socket of this.#sockets) socket.destroy()
    this.#sockets.clear()
    const server = this.#server
    this.#server = undefined
    if (server !== undefined) await new Promise<void>((resolve) => server.close(() => resolve()))
  }

  pause (): void { this.#paused = true }
  resume (): void { this.#paused = false }
}

export const delay = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))
