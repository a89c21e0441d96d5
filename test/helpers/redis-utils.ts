import { randomBytes } from 'node:crypto'
import { createServer, connect, type Server, type Socket } from 'node:net'
import { after } from 'node:test'
import type { TestContext } from 'node:test'

import { REDIS_URL, deleteKeys, redisReachable } from '../../scripts/lib/redis-keys.js'

export { REDIS_URL, countKeys, deleteKeys, redisReachable } from '../../scripts/lib/redis-keys.js'

/** Under CI a missing Redis is a failure, never a skip. */
export const REDIS_REQUIRED = process.env.CI === 'true'

/** Whether the test may use Redis: true when it answers; else the test is skipped, or fails under CI=true. */
export async function requireRedis (t: TestContext): Promise<boolean> {
  if (await redisReachable()) return true
  if (REDIS_REQUIRED) throw new Error(`Redis is required under CI=true (${REDIS_URL})`)
  t.skip(`no Redis at ${REDIS_URL}`)
  return false
}

/** The prefixes this test file took (each test file runs in a process of its own). */
const taken = new Set<string>()

// t.after hooks run in the order they were added, so a test's clean-up of its prefix runs before
// the app or gateway process it started later is closed, and what that writes while closing (a
// journal flush, a membership or process record) would stay for days (journal keys expire after
// 7 days). The file's own after hook runs once every test and its hooks are done: each prefix is
// swept again there. Sweeping connects to Redis only when a prefix was taken.
after(async () => {
  for (const prefix of taken) await deleteKeys(prefix).catch(() => {})
  taken.clear()
})

/**
 * A prefix no other run shares, so parallel runs and leftovers never collide. Its keys are
 * deleted (in REDIS_URL's database) once the test file has run; a test may delete them sooner.
 */
export function uniquePrefix (): string {
  const prefix = `tg-test:${randomBytes(6).toString('hex')}:`
  taken.add(prefix)
  return prefix
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
  /** The target URL, whose host and port become the proxy's: its database and credentials are kept. */
  readonly #target: URL
  #server: Server | undefined
  #sockets = new Set<Socket>()
  #paused = false

  constructor (targetUrl = REDIS_URL) {
    const url = new URL(targetUrl)
    this.targetHost = url.hostname
    this.targetPort = Number(url.port || 6379)
    this.#target = url
  }

  get url (): string {
    const url = new URL(this.#target.href)
    url.hostname = '127.0.0.1'
    url.port = String(this.port)
    return url.href
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
