import type { Redis } from 'ioredis'

/**
 * Moves one key to its new name in one atomic step (the server runs a script alone, so several
 * instances migrating at once never interleave on a key). Old key gone: nothing to do (0). New
 * name free: RENAME, which keeps the value and the TTL (1). Both there (an instance already on
 * the new layout wrote first): merged into the new key, whose entries win, then the old one is
 * deleted (2): hash fields and set/zset members the new key lacks are added, a counter keeps the
 * larger value (a scope's version never goes back), a stream gets the union of both entries in
 * id order. Different types: left alone (-1), nothing is destroyed.
 * KEYS: old, new, a scratch key (for streams). Single Redis only: the keys are in different slots.
 */
const MOVE_SCRIPT = `
local t = redis.call('TYPE', KEYS[1]).ok
if t == 'none' then return 0 end
if redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('RENAME', KEYS[1], KEYS[2])
  return 1
end
if redis.call('TYPE', KEYS[2]).ok ~= t then return -1 end
if t == 'hash' then
  local h = redis.call('HGETALL', KEYS[1])
  for i = 1, #h, 2 do redis.call('HSETNX', KEYS[2], h[i], h[i + 1]) end
elseif t == 'set' then
  for _, m in ipairs(redis.call('SMEMBERS', KEYS[1])) do redis.call('SADD', KEYS[2], m) end
elseif t == 'zset' then
  local z = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
  for i = 1, #z, 2 do redis.call('ZADD', KEYS[2], 'NX', z[i + 1], z[i]) end
elseif t == 'string' then
  local a = tonumber(redis.call('GET', KEYS[1]))
  local b = tonumber(redis.call('GET', KEYS[2]))
  if a and b and a > b then redis.call('SET', KEYS[2], redis.call('GET', KEYS[1]), 'KEEPTTL') end
elseif t == 'stream' then
  local function before (x, y)
    local xm, xs = string.match(x, '^(%d+)-(%d+)$')
    local ym, ys = string.match(y, '^(%d+)-(%d+)$')
    xm, xs, ym, ys = tonumber(xm), tonumber(xs), tonumber(ym), tonumber(ys)
    return xm < ym or (xm == ym and xs < ys)
  end
  local a = redis.call('XRANGE', KEYS[1], '-', '+')
  local b = redis.call('XRANGE', KEYS[2], '-', '+')
  local ttl = math.max(redis.call('PTTL', KEYS[1]), redis.call('PTTL', KEYS[2]))
  redis.call('DEL', KEYS[3])
  local i, j = 1, 1
  while i <= #a or j <= #b do
    local e
    if j > #b or (i <= #a and before(a[i][1], b[j][1])) then
      e = a[i]; i = i + 1
    else
      if i <= #a and a[i][1] == b[j][1] then i = i + 1 end
      e = b[j]; j = j + 1
    end
    redis.call('XADD', KEYS[3], e[1], unpack(e[2]))
  end
  redis.call('RENAME', KEYS[3], KEYS[2])
  if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
else
  return -1
end
redis.call('DEL', KEYS[1])
return 2
`

/** What a store's migration moved (for tests and a start-up log line). */
export interface MigrationResult {
  /** false: the marker said it was done already, nothing was scanned. */
  ran: boolean
  renamed: number
  merged: number
  /** Old keys left in place because the new name holds another type. */
  skipped: number
}

/** Glob characters in a prefix match literally. */
export function escapeGlob (s: string): string {
  return s.replace(/[*?[\]\\]/g, (c) => `\\${c}`)
}

/**
 * Moves a store's keys from an older layout to the current one, once. `patterns` (SCAN MATCH
 * globs) find candidate old keys, `rename` names each one's new key (undefined: not one of ours).
 * Idempotent and safe with several instances starting at once (each key moves in one script, a
 * key already moved is simply gone); `marker` is set when the scan completed, so later starts
 * skip it. Single Redis only: a fresh cluster deployment has no old keys.
 */
export async function migrateKeys (
  client: Redis,
  opts: { marker: string, patterns: readonly string[], rename: (key: string) => string | undefined }
): Promise<MigrationResult> {
  const result: MigrationResult = { ran: false, renamed: 0, merged: 0, skipped: 0 }
  if (await client.exists(opts.marker) === 1) return result
  result.ran = true
  for (const pattern of opts.patterns) {
    let cursor = '0'
    do {
      const [next, keys] = await client.scan(cursor, 'MATCH', pattern, 'COUNT', 500)
      cursor = next
      for (const key of keys) {
        const to = opts.rename(key)
        if (to === undefined || to === key) continue
        const outcome = Number(await client.eval(MOVE_SCRIPT, 3, key, to, `${to}:migrating`))
        if (outcome === 1) result.renamed++
        else if (outcome === 2) result.merged++
        else if (outcome === -1) result.skipped++
      }
    } while (cursor !== '0')
  }
  await client.set(opts.marker, new Date().toISOString())
  return result
}
