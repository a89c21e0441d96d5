export { createRedisClient, isReady, parseNode, redisTargetOf } from './connection.js'
export type { RedisClient, RedisClientOptions, RedisTarget } from './connection.js'
export { taggedKey } from './keys.js'
export { quitWithTimeout } from './quit.js'
