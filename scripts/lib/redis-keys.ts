import { Redis } from 'ioredis'

// Redis chores shared by tests and benches (which may not import test/): reachability and the
// keys of one run's prefix. The real redis-server they use is REDIS_URL or 127.0.0.1:6379.

/** The real redis-server of tests and benches (REDIS_URL overrides). */
export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'

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
