import { test } from 'node:test'
import assert from 'node:assert/strict'
import { MemoryOAuthStore } from '../../../src/oauth/store.js'

test('memory store: one tenant starting authorizations in a loop cannot push out another tenant\'s pending one', async () => {
  const store = new MemoryOAuthStore()
  await store.putState('globex-state', 'sealed-globex', 'u:globex')
  // The attack: 10,000 authorizations started by one tenant (the instance holds 10,000 pending at most).
  for (let i = 0; i < 10_000; i++) await store.putState(`acme-${i}`, `sealed-${i}`, 'u:acme')
  assert.equal(await store.takeState('globex-state'), 'sealed-globex', 'the other tenant\'s flow still completes')
  // The tenant keeps its newest flows; its oldest went first.
  assert.equal(await store.takeState('acme-9999'), 'sealed-9999')
  assert.equal(await store.takeState('acme-0'), undefined)
  // A state is taken once.
  assert.equal(await store.takeState('acme-9999'), undefined)
})
