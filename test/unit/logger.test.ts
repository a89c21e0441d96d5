import { test } from 'node:test'
import assert from 'node:assert/strict'
import { LOG_CENSOR, redactLogLine } from '../../src/logger.js'

test('redactLogLine: a line without credentials is returned as it is (no copy)', () => {
  const line = {
    req: { method: 'POST', url: '/invoke', remoteAddress: '127.0.0.1' },
    res: { statusCode: 200 },
    responseTime: 1.5,
    tool: 'echo',
    headers: { accept: '*/*' }
  }
  assert.equal(redactLogLine(line), line)
})

test('redactLogLine: every path the pino redact option had is censored, the caller\'s objects untouched', () => {
  const line = {
    req: { method: 'GET', headers: { authorization: 'Bearer k', 'x-api-key': 'k2', 'x-gateway-cluster-token': 't', accept: 'a' } },
    headers: { authorization: 'Bearer top', host: 'h' },
    upstream: { headers: { authorization: 'Basic x', 'x-api-key': 'kept' }, secretsKey: 's', apiKeys: 'a,b', other: 1 },
    msgCount: 3
  }
  const before = JSON.stringify(line)
  const out = redactLogLine(line) as typeof line
  assert.notEqual(out, line)
  assert.equal(JSON.stringify(line), before)
  assert.deepEqual(out.req.headers, { authorization: LOG_CENSOR, 'x-api-key': LOG_CENSOR, 'x-gateway-cluster-token': LOG_CENSOR, accept: 'a' })
  assert.deepEqual(out.headers, { authorization: LOG_CENSOR, host: 'h' })
  // *.headers.authorization only: other headers of a nested value stay (as with pino's paths).
  assert.deepEqual(out.upstream, { headers: { authorization: LOG_CENSOR, 'x-api-key': 'kept' }, secretsKey: LOG_CENSOR, apiKeys: LOG_CENSOR, other: 1 })
  assert.equal(out.msgCount, 3)
})

test('redactLogLine: an Error value stays an Error (message, stack, class) with its credential censored', () => {
  class UpstreamError extends Error {}
  const err = Object.assign(new UpstreamError('boom'), { headers: { authorization: 'Bearer k' } })
  const out = redactLogLine({ err }) as { err: UpstreamError & { headers: Record<string, string> } }
  assert.ok(out.err instanceof UpstreamError)
  assert.equal(out.err.message, 'boom')
  assert.equal(out.err.stack, err.stack)
  assert.equal(out.err.headers.authorization, LOG_CENSOR)
  assert.equal(err.headers.authorization, 'Bearer k')
})
