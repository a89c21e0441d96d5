import { test } from 'node:test'
import assert from 'node:assert/strict'
import { CallBudget, countToolCalls } from '../../../src/mcp-server/budget.js'

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
