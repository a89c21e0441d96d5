import { test } from 'node:test'
import assert from 'node:assert/strict'
import { CommandCheckTimeout, CommandGuard } from '../../../src/policy/command-guard.js'

test('a catastrophic rule is stopped at the budget, the event loop stays free, and the next check works', async () => {
  const guard = new CommandGuard({ budgetMs: 200 })
  try {
    let ticks = 0
    const timer = setInterval(() => { ticks++ }, 5)
    const hostile = guard.firstMatch('k1', ['^(a+)+$'], 'a'.repeat(40) + '!')
    const queued = guard.firstMatch('k2', ['b'], 'abc')
    await assert.rejects(hostile, CommandCheckTimeout)
    clearInterval(timer)
    // The loop ran while the worker was stuck (a check on the main thread would have frozen it).
    assert.ok(ticks > 0)
    assert.equal(await queued, 0)
    assert.equal(await guard.firstMatch('k3', ['x', 'y'], 'zzz'), -1)
    assert.equal(await guard.firstMatch('k3', ['x', 'y'], 'zzy'), 1)
  } finally {
    await guard.close()
  }
})
