import { test } from 'node:test'
import assert from 'node:assert/strict'
import { REGEX_TIMEOUT_MESSAGE, RegexPool } from '../../../../../src/builtin/tools/grep/regex-worker.js'
import type { RegexBudget } from '../../../../../src/builtin/tools/grep/regex-worker.js'

/** A file's bytes in their own ArrayBuffer (the pool transfers them). */
function file (text: string): Uint8Array {
  return new Uint8Array(Buffer.from(text))
}

/** A small per-call budget, so that a runaway pattern ends in about `ms` of CPU (a second by default). */
function budget (ms = 1000): RegexBudget {
  return { leftMs: ms, wallLeftMs: 10 * ms }
}

const BOMB = { source: '(?=(a+)+\\s)', flags: '', room: 10 }
const HELLO = { source: '(?<=hello )world', flags: '', room: 10 }

test('regex pool: another tenant\'s batch runs beside a runaway one, which still ends at its budget', async (t) => {
  const pool = new RegexPool(1)
  t.after(async () => { await pool.close() })
  const ended: string[] = []
  const note = <T>(what: string, p: Promise<T>): Promise<T> => p.finally(() => { ended.push(what) })
  // Two runaway calls of mallory: one runs, the other waits for mallory's turn. Their 3 s leave the victim's spare
  // worker time to start on a loaded machine (it lost the race against a 1 s budget while a CI run shared the CPUs).
  const bombs = [1, 2].map((i) => note(`mallory${i}`, pool.match({ ...BOMB, files: [file(`${'a'.repeat(40)}\n`)] }, { tenant: 'mallory', budget: budget(3000) })))
  for (const b of bombs) b.catch(() => {})
  const hello = await note('victim', pool.match({ ...HELLO, files: [file('hello world')] }, { tenant: 'victim', budget: budget() }))
  assert.deepEqual(hello, [{ m: [[1, 'hello world']], t: 1 }])
  // A FIFO pool (or round-robin without a spare worker) answers the victim after mallory's first call.
  assert.deepEqual(ended, ['victim'])
  // The spare worker is not mallory's: it never ran two at once.
  assert.equal(pool.workers, 2)
  for (const b of bombs) await assert.rejects(b, (err: Error) => err.message === REGEX_TIMEOUT_MESSAGE)
  assert.deepEqual(ended, ['victim', 'mallory1', 'mallory2'])
  // The terminated workers were replaced: the pool still answers.
  assert.deepEqual(await pool.match({ ...HELLO, files: [file('hello world')] }, { tenant: 'mallory', budget: budget() }), [{ m: [[1, 'hello world']], t: 1 }])
})

test('regex pool: a call cancelled while it waits for a worker is a clear error', async (t) => {
  const pool = new RegexPool(1)
  t.after(async () => { await pool.close() })
  const running = pool.match({ ...BOMB, files: [file(`${'a'.repeat(40)}\n`)] }, { tenant: 'mallory', budget: budget() })
  running.catch(() => {})
  const ac = new AbortController()
  const waiting = pool.match({ ...BOMB, files: [file('aaa\n')] }, { tenant: 'mallory', budget: budget(), signal: ac.signal })
  ac.abort()
  await assert.rejects(waiting, /Cancelled/)
  await assert.rejects(running, (err: Error) => err.message === REGEX_TIMEOUT_MESSAGE)
})
