import { test } from 'node:test'
import assert from 'node:assert/strict'
import { FairShare } from '../../../src/workers/fair-share.js'
import type { FairShareOptions, Turn } from '../../../src/workers/fair-share.js'

/** A FairShare on a manual clock, and a log of the turns it grants, in order. */
function setup (opts: Partial<FairShareOptions> = {}): {
  share: FairShare
  clock: { now: number }
  granted: string[]
  take: (tenant: string, label?: string, signal?: AbortSignal) => Promise<Turn>
} {
  const clock = { now: 0 }
  const share = new FairShare({ capacity: 1, burst: 0, budgetMs: 1000, windowMs: 10_000, now: () => clock.now, ...opts })
  const granted: string[] = []
  const take = async (tenant: string, label = tenant, signal?: AbortSignal): Promise<Turn> => {
    const turn = await share.acquire(tenant, signal)
    granted.push(label)
    return turn
  }
  return { share, clock, granted, take }
}

/** Lets granted turns' continuations run. */
async function settle (): Promise<void> {
  await new Promise((resolve) => setImmediate(resolve))
}

test('fair share: tenants are served round-robin, each tenant\'s calls in their own order', async () => {
  const { share, granted, take } = setup()
  const first = await take('a', 'a1')
  const pending = new Map<string, Promise<Turn>>()
  for (const [tenant, label] of [['b', 'b1'], ['a', 'a2'], ['a', 'a3'], ['c', 'c1'], ['b', 'b2'], ['a', 'a4']] as const) {
    pending.set(label, take(tenant, label))
  }
  await settle()
  assert.deepEqual(granted, ['a1'])
  let turn = first
  for (const label of ['b1', 'a2', 'c1', 'b2', 'a3', 'a4']) {
    share.release(turn, 1)
    turn = await (pending.get(label) as Promise<Turn>)
    await settle()
    assert.equal(granted.at(-1), label)
    assert.equal(share.running, 1)
  }
  // A FIFO would have served a2, a3 and a4 (queued before c1) ahead of c1.
  assert.deepEqual(granted, ['a1', 'b1', 'a2', 'c1', 'b2', 'a3', 'a4'])
})

test('fair share: a tenant alone may use every worker, but gets no second one while another tenant waits', async () => {
  const { share, granted, take } = setup({ capacity: 2 })
  const a1 = await take('a', 'a1')
  const a2 = await take('a', 'a2')
  const a3 = take('a', 'a3')
  const a4 = take('a', 'a4')
  const b1 = take('b', 'b1')
  const b2 = take('b', 'b2')
  await settle()
  assert.deepEqual(granted, ['a1', 'a2'])
  share.release(a1, 1)
  await settle()
  // a3 waited first, but a runs one turn and b none.
  assert.deepEqual(granted, ['a1', 'a2', 'b1'])
  share.release(a2, 1)
  await settle()
  // Now a runs none and b one: a3 before b2.
  assert.deepEqual(granted, ['a1', 'a2', 'b1', 'a3'])
  share.release(await b1, 1)
  await settle()
  assert.deepEqual(granted, ['a1', 'a2', 'b1', 'a3', 'b2'])
  share.release(await a3, 1)
  await settle()
  assert.deepEqual(granted, ['a1', 'a2', 'b1', 'a3', 'b2', 'a4'])
  share.release(await b2, 1)
  share.release(await a4, 1)
  assert.equal(share.running, 0)
})

test('fair share: a burst turn goes to a tenant running none, never to one already running', async () => {
  const { share, granted, take } = setup({ capacity: 1, burst: 1 })
  const a1 = await take('a', 'a1')
  const a2 = take('a', 'a2')
  await settle()
  // The pool is full and a runs a turn: a2 waits.
  assert.deepEqual(granted, ['a1'])
  // b runs none: it gets the burst turn at once, beside a1.
  const b1 = await take('b', 'b1')
  assert.equal(share.running, 2)
  // Full with the burst too: c waits although it runs none.
  const c1 = take('c', 'c1')
  await settle()
  assert.deepEqual(granted, ['a1', 'b1'])
  share.release(b1, 1)
  await settle()
  // The freed turn goes to c (running none), not to a's waiting call.
  assert.deepEqual(granted, ['a1', 'b1', 'c1'])
  share.release(await c1, 1)
  await settle()
  // Nobody else waits, but a already runs a1 and the pool's capacity is 1: a2 still waits.
  assert.deepEqual(granted, ['a1', 'b1', 'c1'])
  share.release(a1, 1)
  await a2
  assert.deepEqual(granted, ['a1', 'b1', 'c1', 'a2'])
})

test('fair share: a tenant over its budget waits behind the others, gets no burst turn, and is served when alone', async () => {
  const { share, clock, granted, take } = setup({ capacity: 1, burst: 1, budgetMs: 100, windowMs: 1000 })
  const a1 = await take('a', 'a1')
  share.release(a1, 150)
  assert.equal(share.usage('a'), 150)
  const x1 = await take('x', 'x1')
  // a runs none but is over budget: no burst turn.
  const a2 = take('a', 'a2')
  await settle()
  assert.deepEqual(granted, ['a1', 'x1'])
  // b, within budget, gets the burst turn.
  const b1 = await take('b', 'b1')
  const b2 = take('b', 'b2')
  share.release(b1, 1)
  await settle()
  // a waited first and both run none, but a is over budget: b2 first.
  assert.deepEqual(granted, ['a1', 'x1', 'b1', 'b2'])
  share.release(await b2, 1)
  share.release(x1, 1)
  // Alone, a is served (the workers do not idle for the budget's sake).
  share.release(await a2, 30)
  assert.deepEqual(granted, ['a1', 'x1', 'b1', 'b2', 'a2'])

  // The window slides: the previous window counts pro rata, then not at all.
  assert.equal(share.usage('a'), 180)
  clock.now = 1500
  assert.equal(share.usage('a'), 90)
  const x2 = await take('x', 'x2')
  // Back within its budget, a gets the burst turn it was refused before.
  const a3 = await take('a', 'a3')
  assert.equal(share.running, 2)
  share.release(x2, 1)
  share.release(a3, 1)
  clock.now = 3000
  assert.equal(share.usage('a'), 0)
})

test('fair share: a waiter that is cancelled leaves the queue; close rejects the rest', async () => {
  const { share, granted, take } = setup()
  const a1 = await take('a', 'a1')
  const ac = new AbortController()
  const b1 = take('b', 'b1', ac.signal)
  const c1 = take('c', 'c1')
  const c2 = take('c', 'c2')
  ac.abort(new Error('gone'))
  await assert.rejects(b1, /gone/)
  share.release(a1, 1)
  await c1
  assert.deepEqual(granted, ['a1', 'c1'])
  // An aborted signal is refused before queueing.
  await assert.rejects(share.acquire('d', ac.signal), /gone/)
  share.close(new Error('closing'))
  await assert.rejects(c2, /closing/)
  await assert.rejects(share.acquire('e'), /closing/)
})

test('fair share: idle tenants are forgotten once their usage has expired', async () => {
  const { share, clock, take } = setup({ windowMs: 1000 })
  for (let i = 0; i < 3000; i++) share.release(await take(`t${i}`), i < 1500 ? 1 : 0)
  // The first 1024 were swept only if unused; those that used time in the window are kept.
  assert.ok(share.tracked >= 1500, String(share.tracked))
  clock.now = 5000
  for (let i = 0; i < 3000; i++) share.release(await take(`u${i}`), 0)
  assert.ok(share.tracked < 2100, `tracked ${share.tracked} tenants after every usage expired`)
  assert.equal(share.usage('t0'), 0)
})
