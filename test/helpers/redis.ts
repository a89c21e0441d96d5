import type { TestContext } from 'node:test'
import { Redis } from 'ioredis'
import { REDIS_URL, deleteKeys, uniquePrefix } from './redis-utils.js'

export { REDIS_URL }

/**
 * A connected Redis client (REDIS_URL, its database included) and a unique key prefix whose keys
 * are deleted after the test, and again once the file has run (uniquePrefix).
 * Without a reachable Redis the test is skipped, except under CI=true where that fails it.
 */
export async function redisForTest (t: TestContext): Promise<{ redis: Redis, prefix: string } | undefined> {
  const redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false, connectTimeout: 2000 })
  redis.on('error', () => {})
  try {
    await redis.connect()
    await redis.ping()
  } catch (err) {
    redis.disconnect()
    if (process.env.CI === 'true') throw new Error(`Redis is required under CI=true (${REDIS_URL}): ${(err as Error).message}`)
    t.skip(`no Redis at ${REDIS_URL}`)
    return undefined
  }
  const prefix = uniquePrefix()
  t.after(async () => {
    redis.disconnect()
    await deleteKeys(prefix)
  })
  return { redis, prefix }
}
