import { test } from 'node:test'
import assert from 'node:assert/strict'
import { CallerAbort } from '../../../src/routing/signals.js'
import { runWithDeadline } from '../../../src/routing/deadline.js'

test('CallerAbort: listeners added before any signal was made are told on abort, once, and see aborted and reason set', () => {
  const gone = new CallerAbort()
  const seen: unknown[] = []
  const listener = { handleEvent: () => { seen.push([gone.aborted, gone.reason]) } }
  const removed = { handleEvent: () => { seen.push('removed one called') } }
  gone.addEventListener('abort', listener)
  gone.addEventListener('abort', removed)
  gone.removeEventListener('abort', removed)
  const why = new Error('client disconnected')
  gone.abort(why)
  gone.abort(new Error('again'))
  assert.deepEqual(seen, [[true, why]])
  // Read after the fact, the signal is already aborted with the same reason.
  assert.equal(gone.signal.aborted, true)
  assert.equal(gone.signal.reason, why)
})

test('CallerAbort: a signal read before the abort aborts with it, and so do listeners of either kind', () => {
  const gone = new CallerAbort()
  const order: string[] = []
  gone.addEventListener('abort', { handleEvent: () => { order.push('early listener') } })
  const signal = gone.signal
  signal.addEventListener('abort', () => { order.push('signal listener') })
  gone.addEventListener('abort', { handleEvent: () => { order.push('late listener') } })
  assert.equal(signal, gone.signal, 'one signal, made once')
  gone.abort(new Error('gone'))
  assert.equal(signal.aborted, true)
  assert.deepEqual(order.sort(), ['early listener', 'late listener', 'signal listener'])
})

test('runWithDeadline on a CallerAbort: cancelled when the caller leaves, and no AbortSignal made for work that never reads one', async () => {
  const gone = new CallerAbort()
  const outcome = runWithDeadline(10_000, gone, async () => await new Promise(() => {}), 'timed out')
  gone.abort(new Error('client disconnected'))
  assert.deepEqual(await outcome, { ok: false, reason: 'cancelled', message: 'The caller cancelled the call' })

  // A call that finished keeps its result when the caller leaves afterwards.
  const quiet = new CallerAbort()
  const done = await runWithDeadline(10_000, quiet, async () => ({ ok: true, value: 'done' }), 'timed out')
  quiet.abort(new Error('late'))
  assert.deepEqual(done, { ok: true, value: 'done' })
})
