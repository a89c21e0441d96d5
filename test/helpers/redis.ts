import { randomBytes } from 'node:crypto'
import type { TestContext } from 'node:test'
import { Redis } from 'ioredis'

export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'

/**
 * A connected Redis client and a unique key prefix whose keys are deleted after the test.
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
  const prefix = `tg-test-${randomBytes(6).toString('hex')}:`
  t.after(async () => {
    const keys = await redis.keys(`${prefix}*`)
    if (keys.length > 0) await redis.del(...keys)
    redis.disconnect()
  })
  return { redis, prefix }
}
