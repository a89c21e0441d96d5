import { test } from 'node:test'
import assert from 'node:assert/strict'
import { AnswerBytes, CallBudget, countToolCalls } from '../../../src/mcp-server/budget.js'

test('a POST /mcp body counts its tools/call: one message or each of a batch, nothing else', () => {
  const call = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'x' } }
  assert.equal(countToolCalls(call), 1)
  assert.equal(countToolCalls({ jsonrpc: '2.0', id: 1, method: 'tools/list' }), 0)
  // Each request that reaches one upstream server counts; listings do not.
  for (const method of ['resources/read', 'prompts/get', 'completion/complete']) {
    assert.equal(countToolCalls({ jsonrpc: '2.0', id: 1, method }), 1, method)
  }
  for (const method of ['resources/list', 'resources/templates/list', 'prompts/list']) {
    assert.equal(countToolCalls({ jsonrpc: '2.0', id: 1, method }), 0, method)
  }
  assert.equal(countToolCalls([call, call, { jsonrpc: '2.0', method: 'notifications/initialized' }, call]), 3)
  assert.equal(countToolCalls([null, 'tools/call', 5, { method: 'tools/call' }]), 1)
  assert.equal(countToolCalls(undefined), 0)
  assert.equal(countToolCalls([]), 0)
})

test('an exchange\'s budget refuses calls past its minute\'s allowance and runs at most `concurrency` at once', async () => {
  const budget = new CallBudget({ calls: 2, concurrency: 1 })
  assert.equal(budget.take(), undefined)
  assert.equal(budget.take(), undefined)
  assert.equal(budget.take()?.code, 'GW_RATE_LIMITED')
  let running = 0
  let most = 0
  await Promise.all([1, 2, 3].map(async () => await budget.run(async () => {
    running++
    most = Math.max(most, running)
    await new Promise((resolve) => setImmediate(resolve))
    running--
  })))
  assert.equal(most, 1)
})

test('whole-text listing answers: a tenant holds at most its share, its first always answered; an exchange gives back all it held', () => {
  const bytes = new AnswerBytes({ tenant: 100, instance: 250 })
  const a = bytes.exchange('t:a')
  a.hold(60)
  a.hold(40)
  assert.throws(() => a.hold(1), (err: Error & { code?: string }) => err.code === 'GW_RATE_LIMITED' && /100 bytes/.test(err.message))
  const a2 = bytes.exchange('t:a')
  assert.throws(() => a2.hold(1), { code: 'GW_RATE_LIMITED' }, 'another exchange of the same tenant shares its share')
  // Another tenant's first listing is answered however large; its next one is within its own share and the instance's.
  const b = bytes.exchange('t:b')
  b.hold(500)
  assert.throws(() => b.hold(1), { code: 'GW_RATE_LIMITED' })
  const c = bytes.exchange('t:c')
  c.hold(10)
  assert.throws(() => c.hold(10), { code: 'GW_RATE_LIMITED' }, 'the instance holds 610 of 250')
  b.release()
  b.release()
  c.hold(10)
  a.release()
  a2.hold(100)
  assert.throws(() => a2.hold(1), { code: 'GW_RATE_LIMITED' })
})
