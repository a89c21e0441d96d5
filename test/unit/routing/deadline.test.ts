import { test } from 'node:test'
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { getEventListeners } from 'node:events'
import { runWithDeadline } from '../../../src/routing/deadline.js'
import type { DeadlineCall } from '../../../src/routing/deadline.js'

test('runWithDeadline: the work\'s outcome, no abort, no listener left on the caller\'s signal', async () => {
  const parent = new AbortController()
  let seen: AbortSignal | undefined
  const out = await runWithDeadline(1000, parent.signal, async (call) => {
    seen = call.signal
    return { ok: true, value: 'v' }
  }, 'late')
  assert.deepEqual(out, { ok: true, value: 'v' })
  assert.equal(seen?.aborted, false)
  assert.equal(getEventListeners(parent.signal, 'abort').length, 0)
  parent.abort()
  assert.equal(seen?.aborted, false)
})

test('runWithDeadline: on the deadline a timeout outcome at once; the signal is aborted whether read before or after', async () => {
  let call: DeadlineCall | undefined
  let early: AbortSignal | undefined
  const out = await runWithDeadline(20, new AbortController().signal, async (c) => {
    call = c
    await sleep(200)
    return { ok: true, value: 'too late' }
  }, 'did not finish within 20 ms')
  assert.deepEqual(out, { ok: false, reason: 'timeout', message: 'did not finish within 20 ms' })
  assert.ok(call !== undefined)
  const late = call.signal
  assert.equal(late.aborted, true)
  assert.equal((late.reason as Error).message, 'timeout')
  // Read before the deadline: aborted by it.
  await runWithDeadline(10, new AbortController().signal, async (c) => {
    early = c.signal
    await sleep(100)
    return { ok: true, value: 'x' }
  }, 't')
  assert.equal(early?.aborted, true)
})

test('runWithDeadline: the caller\'s abort cancels (its reason reaches the work), also when it came first; a late rejection is swallowed', async () => {
  const parent = new AbortController()
  let signal: AbortSignal | undefined
  const pending = runWithDeadline(5000, parent.signal, async (c) => {
    signal = c.signal
    await sleep(50)
    throw new Error('after the abort')
  }, 't')
  parent.abort(new Error('client disconnected'))
  assert.deepEqual(await pending, { ok: false, reason: 'cancelled', message: 'The caller cancelled the call' })
  assert.equal((signal?.reason as Error).message, 'client disconnected')
  await sleep(80)

  const gone = new AbortController()
  gone.abort(new Error('gone'))
  let lazy: DeadlineCall | undefined
  const out = await runWithDeadline(5000, gone.signal, async (c) => {
    lazy = c
    return { ok: true, value: 'v' }
  }, 't')
  assert.equal(out.ok, false)
  assert.equal((lazy?.signal.reason as Error).message, 'gone')
})

test('runWithDeadline: work that rejects before the deadline rejects the call', async () => {
  await assert.rejects(runWithDeadline(1000, new AbortController().signal, async () => { throw new Error('bug') }, 't'), /bug/)
})
