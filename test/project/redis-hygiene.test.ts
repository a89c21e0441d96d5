import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { Redis } from 'ioredis'
import { REDIS_URL, TcpProxy, countKeys, requireRedis } from '../helpers/redis-utils.js'

// The suite shares one Redis with whoever runs it (REDIS_URL, any database): it must use that
// database only and leave nothing behind, even where a test's app or gateway process writes
// while it closes, after the test's own clean-up of its prefix ran (t.after hooks run in order).

const run = promisify(execFile)

/** REDIS_URL with another database, so a helper that ignores the URL's database shows up. */
function otherDatabase (): string {
  const url = new URL(REDIS_URL)
  const db = Number(url.pathname.slice(1) || '0')
  url.pathname = `/${(db + 3) % 16}`
  return url.toString()
}

test('a test file\'s Redis prefixes hold no key once the file has run, writes after their clean-up included', async (t) => {
  if (!await requireRedis(t)) return
  const url = otherDatabase()
  // Without NODE_TEST_CONTEXT the child reports to its stdout, in TAP, not to this runner.
  const { NODE_TEST_CONTEXT: _, ...env } = process.env
  const { stdout } = await run(process.execPath, ['--import', 'tsx', '--test', '--test-reporter=tap', 'test/fixtures/redis-hygiene/late-writes.test.ts'], {
    env: { ...env, REDIS_URL: url },
    timeout: 60_000
  })
  const prefixes = [...stdout.matchAll(/PREFIX (\S+)/g)].map((m) => m[1] ?? '')
  assert.equal(prefixes.length, 2, stdout)
  assert.match(stdout, /# pass 2/)
  for (const prefix of prefixes) {
    assert.equal(await countKeys(prefix, url), 0, `${prefix} in ${url}`)
    assert.equal(await countKeys(prefix, REDIS_URL), 0, `${prefix} in ${REDIS_URL}`)
  }
})

test('the fault proxy in front of Redis keeps REDIS_URL\'s database', async (t) => {
  if (!await requireRedis(t)) return
  const url = otherDatabase()
  const proxy = new TcpProxy(url)
  await proxy.start()
  t.after(async () => await proxy.stop())
  const key = `tg-test:proxy-db:${process.pid}`
  const through = new Redis(proxy.url, { maxRetriesPerRequest: 1 })
  const direct = new Redis(url, { maxRetriesPerRequest: 1 })
  t.after(async () => { await direct.del(key); through.disconnect(); direct.disconnect() })
  await through.set(key, 'x', 'EX', 60)
  assert.equal(await direct.get(key), 'x')
})
