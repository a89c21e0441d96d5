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

/** Runs `body` in a child process with the gateway's stdout log stream as `logs`; what it wrote and when, in order. */
async function childLogs (body: string): Promise<Array<{ line: string, at: number }>> {
  const { spawn } = await import('node:child_process')
  const script = `import { pino } from 'pino'\nimport { stdoutLogStream } from ${JSON.stringify(new URL('../../src/logger.ts', import.meta.url).href)}\n` +
    `const logs = pino({ base: null }, stdoutLogStream())\n${body}`
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
  const seen: Array<{ line: string, at: number }> = []
  let rest = ''
  child.stdout.on('data', (chunk: Buffer) => {
    const lines = (rest + chunk.toString()).split('\n')
    rest = lines.pop() ?? ''
    for (const line of lines) seen.push({ line, at: Date.now() })
  })
  await new Promise((resolve) => child.once('close', resolve))
  return seen
}

test('the stdout log stream: a lone line is written within a fraction of a second, not when a batch fills', { timeout: 20_000 }, async () => {
  const seen = await childLogs([
    "logs.info('one line')",
    "setTimeout(() => { logs.info('after'); process.exit(0) }, 1500)"
  ].join('\n'))
  assert.deepEqual(seen.map((s) => JSON.parse(s.line).msg), ['one line', 'after'])
  // The first line reached stdout well before the process ended (the second is written at exit).
  assert.ok(seen[1]!.at - seen[0]!.at > 800, `the first line came ${seen[1]!.at - seen[0]!.at} ms before the last`)
})

test('the stdout log stream: every line logged before an exit or a crash is written, in order', { timeout: 20_000 }, async () => {
  const many = await childLogs("for (let i = 0; i < 1000; i++) logs.info({ i }, 'line')\nprocess.exit(3)")
  assert.deepEqual(many.map((s) => JSON.parse(s.line).i), Array.from({ length: 1000 }, (_, i) => i))
  const crash = await childLogs([
    "logs.info('before')",
    "process.on('uncaughtException', (err) => { logs.error({ err: err.message }, 'crashed'); process.exit(1) })",
    "setTimeout(() => { throw new Error('boom') }, 10)"
  ].join('\n'))
  assert.deepEqual(crash.map((s) => JSON.parse(s.line).msg), ['before', 'crashed'])
})
