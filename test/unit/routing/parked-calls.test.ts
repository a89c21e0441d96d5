/**
 * ParkedCalls: a run whose server asks its client mid-call is parked until the caller's retry
 * brings the answers; the first step is the questions (asked together, they come together), a
 * resume delivers answers and waits for the next step. Only the owner resumes; an unanswered park
 * expires and aborts its run; the instance and each tenant hold a bounded number.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { ParkedCalls } from '../../../src/routing/parked-calls.js'
import { JsonRpcError } from '../../../src/routing/client-relay.js'

const ACME = { tenant: 'acme', keyId: 'k1' }
const never = new AbortController().signal

test('a run that does not ask is done at once and parks nothing', async () => {
  const parked = new ParkedCalls()
  const step = await parked.start(ACME, async () => 42)
  assert.deepEqual(step, { kind: 'done', value: 42 })
  assert.equal(parked.size, 0)
})

test('questions asked together come together; answers continue the run; the next question is the next step', async () => {
  const parked = new ParkedCalls()
  const step = await parked.start(ACME, async (ask, signal) => {
    const [name, roots] = await Promise.all([
      ask({ method: 'elicitation/create', params: { message: 'name?' } }, signal),
      ask({ method: 'roots/list' }, signal)
    ])
    const color = await ask({ method: 'elicitation/create', params: { message: 'color?' } }, signal)
    return { name, roots, color }
  })
  assert.equal(step.kind, 'asks')
  if (step.kind !== 'asks') return
  assert.deepEqual(Object.values(step.inputRequests).map((q) => q.method).sort(), ['elicitation/create', 'roots/list'])
  const [nameKey, rootsKey] = Object.keys(step.inputRequests) as [string, string]
  assert.equal(parked.size, 1)

  const second = await parked.resume(ACME, step.id, { [nameKey]: 'Ada', [rootsKey]: ['/a'] }, never)
  assert.equal(second?.kind, 'asks')
  if (second?.kind !== 'asks') return
  assert.deepEqual(Object.values(second.inputRequests), [{ method: 'elicitation/create', params: { message: 'color?' } }])
  const colorKey = Object.keys(second.inputRequests)[0] as string
  const last = await parked.resume(ACME, step.id, { [colorKey]: 'teal' }, never)
  assert.deepEqual(last, { kind: 'done', value: { name: 'Ada', roots: ['/a'], color: 'teal' } })
  assert.equal(parked.size, 0)
  assert.equal(await parked.resume(ACME, step.id, {}, never), undefined, 'a finished call cannot be resumed')
})

test('attack: another tenant or key cannot resume, answer or end a parked call', async () => {
  const parked = new ParkedCalls()
  const step = await parked.start(ACME, async (ask, signal) => await ask({ method: 'elicitation/create' }, signal))
  assert.equal(step.kind, 'asks')
  if (step.kind !== 'asks') return
  const key = Object.keys(step.inputRequests)[0] as string
  assert.equal(await parked.resume({ tenant: 'globex', keyId: 'k1' }, step.id, { [key]: 'stolen' }, never), undefined)
  assert.equal(await parked.resume({ tenant: 'acme', keyId: 'k2' }, step.id, { [key]: 'stolen' }, never), undefined)
  assert.deepEqual(await parked.resume(ACME, step.id, { [key]: 'mine' }, never), { kind: 'done', value: 'mine' })
})

test('an unanswered park expires: its run is aborted and its question fails; the count goes back to zero', async () => {
  const parked = new ParkedCalls({ ttlMs: 50 })
  let aborted = false
  const step = await parked.start(ACME, async (ask, signal) => {
    signal.addEventListener('abort', () => { aborted = true })
    try {
      return await ask({ method: 'elicitation/create' }, signal)
    } catch (err) {
      return err instanceof JsonRpcError ? 'timed out' : 'other'
    }
  })
  assert.equal(step.kind, 'asks')
  await sleep(120)
  assert.equal(aborted, true)
  assert.equal(parked.size, 0)
  if (step.kind === 'asks') assert.equal(await parked.resume(ACME, step.id, {}, never), undefined)
})

test('bounded: a tenant past its share cannot park another call (its question fails), another tenant still can', async () => {
  const parked = new ParkedCalls({ maxPerOwner: 2, maxParked: 3 })
  const asking = async (owner: typeof ACME): Promise<unknown> => await parked.start(owner, async (ask, signal) => {
    try {
      return await ask({ method: 'elicitation/create' }, signal)
    } catch (err) {
      return (err as Error).message
    }
  })
  assert.equal(((await asking(ACME)) as { kind: string }).kind, 'asks')
  assert.equal(((await asking(ACME)) as { kind: string }).kind, 'asks')
  const third = await asking(ACME) as { kind: string, value?: string }
  assert.equal(third.kind, 'done')
  assert.match(third.value ?? '', /Too many calls/)
  assert.equal(((await asking({ tenant: 'globex', keyId: 'g' })) as { kind: string }).kind, 'asks')
  parked.close()
  assert.equal(parked.size, 0)
})
