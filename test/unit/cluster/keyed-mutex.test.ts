import { test } from 'node:test'
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { KeyedMutex } from '../../../src/cluster/index.js'

test('tasks of one key run one at a time, in order; other keys run beside them', async () => {
  const mutex = new KeyedMutex()
  const events: string[] = []
  const task = (name: string, ms: number) => async (): Promise<string> => {
    events.push(`${name}+`)
    await sleep(ms)
    events.push(`${name}-`)
    return name
  }
  const results = await Promise.all([mutex.run('a', task('a1', 30)), mutex.run('a', task('a2', 5)), mutex.run('b', task('b1', 5))])
  assert.deepEqual(results, ['a1', 'a2', 'b1'])
  // b1 ran while a1 held key a; a2 started only after a1 ended.
  assert.ok(events.indexOf('b1+') < events.indexOf('a1-'), events.join(' '))
  assert.ok(events.indexOf('a2+') > events.indexOf('a1-'), events.join(' '))
})

test('a task that fails does not hold the key: the next one runs, and the failure reaches its own caller only', async () => {
  const mutex = new KeyedMutex()
  const failed = mutex.run('k', async () => { throw new Error('boom') })
  const next = mutex.run('k', async () => 'ran')
  await assert.rejects(failed, /boom/)
  assert.equal(await next, 'ran')
})
