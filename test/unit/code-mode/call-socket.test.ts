/**
 * Code mode's socket (src/code-mode/call-socket.ts, frames.ts) against a hostile script: real
 * Unix sockets in a temp directory, raw frames written by the test. Each attack is bounded: a bad
 * frame, a wrong token, an oversized header, a flood past CODE_MODE_MAX_CALLS, a reader that
 * never reads, more connections than allowed; and calls beyond the concurrency wait their turn.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { mkdtemp, rm, stat } from 'node:fs/promises'
import { connect } from 'node:net'
import type { Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import type { TestContext } from 'node:test'
import { CallSocket } from '../../../src/code-mode/call-socket.js'
import type { CallSocketOptions, InnerAnswer, ScriptEnd } from '../../../src/code-mode/call-socket.js'
import { encodeFrame, FrameReader } from '../../../src/code-mode/frames.js'

const TOKEN = 'tok-0123456789abcdef'

async function open (t: TestContext, opts: Partial<CallSocketOptions> = {}): Promise<CallSocket & { path: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'tg-cs-'))
  const path = join(dir, 'tools.sock')
  const socket = await CallSocket.listen({
    path,
    token: TOKEN,
    maxCalls: 5,
    concurrency: 2,
    maxFrameBytes: 4096,
    maxConnections: 2,
    maxUnreadBytes: 64 * 1024,
    call: async (c) => ({ callId: `id-${c.name}`, isError: false, output: JSON.stringify(c.arguments), error: null }),
    ...opts
  })
  t.after(async () => { await socket.close(); await rm(dir, { recursive: true, force: true }) })
  return Object.assign(socket, { path })
}

/** A client that collects every message the socket answers, and whether it was closed. */
async function client (path: string): Promise<{ s: Socket, messages: any[], closed: Promise<void> }> {
  const s = connect(path)
  const messages: any[] = []
  const reader = new FrameReader(1 << 20)
  s.on('data', (chunk: Buffer) => { const r = reader.push(chunk); if (r.ok) messages.push(...r.messages) })
  s.on('error', () => {})
  const closed = new Promise<void>((resolve) => s.once('close', () => resolve()))
  await new Promise<void>((resolve, reject) => { s.once('connect', resolve); s.once('error', reject) })
  return { s, messages, closed }
}

const callFrame = (id: number, name: string, token = TOKEN): Buffer =>
  encodeFrame({ jsonrpc: '2.0', id, method: 'tools/call', params: { token, name, arguments: { n: id } } })

async function until (what: string, check: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

test('frames: messages split across chunks are put together; a header over the limit and a body that is not JSON fail the stream', () => {
  const reader = new FrameReader(100)
  const two = Buffer.concat([encodeFrame({ a: 1 }), encodeFrame({ b: 'é' })])
  assert.deepEqual(reader.push(two.subarray(0, 3)), { ok: true, messages: [] })
  assert.deepEqual(reader.push(two.subarray(3, 12)), { ok: true, messages: [{ a: 1 }] })
  assert.deepEqual(reader.push(two.subarray(12)), { ok: true, messages: [{ b: 'é' }] })
  const big = Buffer.alloc(4)
  big.writeUInt32BE(101)
  assert.deepEqual(new FrameReader(100).push(big), { ok: false, reason: 'a frame of 101 bytes is over the limit of 100' })
  const bad = Buffer.concat([Buffer.from([0, 0, 0, 3]), Buffer.from('{x}')])
  const failed = new FrameReader(100)
  assert.equal(failed.push(bad).ok, false)
  assert.equal(failed.push(encodeFrame({ a: 1 })).ok, false, 'a failed stream stays failed')
})

test('frames: a frame holding an object of more than 10,000 members fails the stream before it is parsed', () => {
  // A script's frame may be 4 MiB: an object of 300,000 distinct keys in it cost the event loop what a wide HTTP body
  // did (parsing a dictionary-mode object, then validating and journaling the call's arguments), body limits aside.
  const wide = (members: number): Record<string, number> => Object.fromEntries(Array.from({ length: members }, (_, i) => [i.toString(36), 0]))
  const call = (members: number): Buffer => encodeFrame({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'x', arguments: wide(members) } })
  assert.deepEqual(new FrameReader(4 << 20).push(call(10_001)), { ok: false, reason: 'a frame holding an object of more than 10000 members' })
  const fine = new FrameReader(4 << 20).push(call(10_000))
  assert.equal(fine.ok && fine.messages.length, 1)
})

test('the socket is the sandbox owner\'s alone (0600); calls are answered with the inner call\'s result and counted', async (t) => {
  const socket = await open(t)
  assert.equal((await stat(socket.path)).mode & 0o777, 0o600)
  const c = await client(socket.path)
  c.s.write(Buffer.concat([callFrame(1, 'a'), callFrame(2, 'b')]))
  await until('two answers', () => c.messages.length === 2)
  const byId = new Map(c.messages.map((m) => [m.id, m]))
  assert.deepEqual(byId.get(1).result, { callId: 'id-a', isError: false, output: '{"n":1}', error: null })
  assert.deepEqual(socket.calls.map((x) => [x.name, x.callId, x.isError]), [['a', 'id-a', false], ['b', 'id-b', false]])
  c.s.write(encodeFrame({ jsonrpc: '2.0', method: 'script/result', params: { token: TOKEN, value: { done: true } } }))
  await until('the end', () => socket.end !== undefined)
  assert.deepEqual(socket.end, { ok: true, value: { done: true } })
})

test('attack: a frame without the call\'s token is refused and its connection closed; nothing runs', async (t) => {
  let ran = 0
  const socket = await open(t, { call: async () => { ran++; return { callId: 'x', isError: false, output: '', error: null } } })
  const c = await client(socket.path)
  c.s.write(callFrame(1, 'a', 'tok-wrong-000000000000'))
  await c.closed
  assert.equal(ran, 0)
  assert.equal(c.messages[0]?.error?.data?.code, 'GW_SCRIPT_LIMIT')
  assert.match(socket.problems.join(';'), /token/)
})

test('attack: a header announcing a huge frame is refused before its body arrives; garbage is refused', async (t) => {
  const socket = await open(t)
  const c = await client(socket.path)
  const header = Buffer.alloc(4)
  header.writeUInt32BE(0xffffffff)
  c.s.write(header)
  await c.closed
  assert.match(socket.problems[0] ?? '', /over the limit of 4096/)
  const d = await client(socket.path)
  d.s.write(Buffer.concat([Buffer.from([0, 0, 0, 5]), Buffer.from('nope!')]))
  await d.closed
  assert.match(socket.problems[1] ?? '', /not JSON/)
  const e = await client(socket.path)
  e.s.write(encodeFrame([1, 2, 3]))
  await e.closed
  assert.match(socket.problems[2] ?? '', /not a JSON-RPC request/)
})

test('attack: past CODE_MODE_MAX_CALLS each call is refused inside the script, and a flood past that closes the connection', async (t) => {
  const socket = await open(t)
  const c = await client(socket.path)
  c.s.write(Buffer.concat(Array.from({ length: 8 }, (_, i) => callFrame(i + 1, `t${i}`))))
  await until('eight answers', () => c.messages.length === 8)
  const refused = c.messages.filter((m) => m.error !== undefined)
  assert.equal(refused.length, 3, 'five run, three refused')
  assert.equal(refused[0].error.data.code, 'GW_SCRIPT_LIMIT')
  assert.match(refused[0].error.message, /CODE_MODE_MAX_CALLS \(5\)/)
  assert.equal(socket.calls.length, 5)
  // 5 + 16 messages at most: the flood's rest is not read.
  c.s.write(Buffer.concat(Array.from({ length: 200 }, (_, i) => callFrame(100 + i, 'flood'))))
  await c.closed
  assert.ok(c.messages.length <= 5 + 16 + 1, `${c.messages.length} answers`)
  assert.match(socket.problems.join(';'), /flood/)
})

test('attack: a script that never reads its answers is cut off once they pass the unread limit', async (t) => {
  const big = 'x'.repeat(40 * 1024)
  const socket = await open(t, { maxCalls: 100, maxUnreadBytes: 64 * 1024, call: async () => ({ callId: 'x', isError: false, output: big, error: null }) })
  const c = await client(socket.path)
  c.s.pause()
  // The kernel's buffers take a few hundred KiB first; then the gateway's own queue passes 64 KiB.
  for (let i = 0; i < 60 && !c.s.destroyed && socket.problems.length === 0; i++) {
    c.s.write(callFrame(i + 1, 'big'))
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
  await until('the reader cut off', () => socket.problems.length > 0)
  assert.match(socket.problems[0] ?? '', /unread/)
})

test('attack: connections past the limit are refused; calls past the concurrency wait their turn', async (t) => {
  let inFlight = 0
  let most = 0
  const socket = await open(t, {
    maxCalls: 10,
    call: async (c): Promise<InnerAnswer> => {
      most = Math.max(most, ++inFlight)
      await new Promise((resolve) => setTimeout(resolve, 30))
      inFlight--
      return { callId: c.name, isError: false, output: '1', error: null }
    }
  })
  const a = await client(socket.path)
  await client(socket.path)
  const third = connect(socket.path)
  third.on('error', () => {})
  await new Promise<void>((resolve) => third.once('close', () => resolve()))
  a.s.write(Buffer.concat(Array.from({ length: 6 }, (_, i) => callFrame(i + 1, `c${i}`))))
  await until('six answers', () => a.messages.length === 6)
  assert.equal(most, 2, 'concurrency 2')
})

test('the script\'s end: an error it reports is kept; closing aborts the inner calls still running', async (t) => {
  let aborted = false
  const socket = await open(t, {
    call: async (_c, signal) => await new Promise((resolve) => {
      signal.addEventListener('abort', () => {
        aborted = true
        resolve({ callId: 'x', isError: true, output: '', error: { code: 'GW_CANCELLED', message: 'stop' } })
      })
    })
  })
  const c = await client(socket.path)
  c.s.write(Buffer.concat([callFrame(1, 'slow'), encodeFrame({ jsonrpc: '2.0', method: 'script/error', params: { token: TOKEN, message: 'boom' } })]))
  await until('the end', () => socket.end !== undefined)
  assert.deepEqual(socket.end, { ok: false, message: 'boom' })
  await socket.close()
  assert.equal(aborted, true)
})

test('drained(): waits for the script\'s connections to close (its answer read), bounded; at once when it answered', async (t) => {
  const socket = await open(t, { maxFrameBytes: 8 * 1024 * 1024 })
  // A real process, as the runner: it connects, says so, waits, writes a 3 MB answer, and exits once it is flushed.
  const child = spawn(process.execPath, ['-e', `
    const { connect } = require('node:net')
    const s = connect(process.argv[1], () => {
      process.stdout.write('connected\\n')
      setTimeout(() => {
        const body = Buffer.from(JSON.stringify({ jsonrpc: '2.0', method: 'script/result', params: { token: process.argv[2], value: 'x'.repeat(3 * 1024 * 1024) } }))
        const head = Buffer.alloc(4)
        head.writeUInt32BE(body.length, 0)
        s.end(Buffer.concat([head, body]), () => process.exit(0))
      }, 300)
    })
  `, socket.path, TOKEN], { stdio: ['ignore', 'pipe', 'ignore'] })
  t.after(() => { child.kill('SIGKILL') })
  await new Promise((resolve) => child.stdout.once('data', resolve))
  // The gateway's side accepts it on its next poll.
  await new Promise((resolve) => setTimeout(resolve, 50))
  const endOf = (s: CallSocket): ScriptEnd | undefined => s.end
  assert.equal(endOf(socket), undefined, 'nothing answered yet')
  await socket.drained(10_000)
  const end = endOf(socket)
  assert.equal(end?.ok, true)
  assert.equal((end as { value?: unknown } | undefined)?.value, 'x'.repeat(3 * 1024 * 1024))
  // Answered: at once. Nobody connected: at once, whatever the bound.
  const started = Date.now()
  await socket.drained(10_000)
  const idle = await open(t)
  await idle.drained(10_000)
  assert.ok(Date.now() - started < 5000)
})
