import { test } from 'node:test'
import assert from 'node:assert/strict'
import { FirstConnects } from '../../../src/remote-mcp/warm-start.js'

test('only a slow-starting transport\'s first connect gets the longer deadline, and reports starting while it runs', () => {
  const first = new FirstConnects({ connectTimeoutMs: 1000, firstConnectTimeoutMs: 60_000, maxRemembered: 10 })
  assert.equal(first.connectTimeoutMs('a#1', 'stdio'), 60_000)
  assert.equal(first.connectTimeoutMs('h#1', 'streamable_http'), 1000)
  assert.equal(first.connectTimeoutMs('s#1', 'sse'), 1000)
  assert.deepEqual(first.starting('a#1', 'stdio', true, 'npx failed'), { lastError: 'npx failed' })
  assert.equal(first.starting('a#1', 'stdio', false, undefined), undefined, 'nothing under way')
  assert.equal(first.starting('h#1', 'streamable_http', true, undefined), undefined)
  first.connected('a#1')
  assert.equal(first.connectTimeoutMs('a#1', 'stdio'), 1000, 'later connects are ordinary')
  assert.equal(first.starting('a#1', 'stdio', true, undefined), undefined, 'a reconnect is not a start')
})

test('a first-connect deadline shorter than the ordinary one never shortens it', () => {
  const first = new FirstConnects({ connectTimeoutMs: 5000, firstConnectTimeoutMs: 100, maxRemembered: 10 })
  assert.equal(first.connectTimeoutMs('a#1', 'stdio'), 5000)
})

test('the ids remembered are bounded: the oldest connected is forgotten first', () => {
  const first = new FirstConnects({ connectTimeoutMs: 1000, firstConnectTimeoutMs: 60_000, maxRemembered: 2 })
  first.connected('a#1')
  first.connected('b#1')
  first.connected('a#1') // used again: now the newest
  first.connected('c#1')
  assert.equal(first.isFirst('b#1', 'stdio'), true, 'b was the oldest')
  assert.equal(first.isFirst('a#1', 'stdio'), false)
  assert.equal(first.isFirst('c#1', 'stdio'), false)
})
