/**
 * ClientRequests (src/mcp-server/client-requests.ts): the questions waiting for /mcp clients' answers are bounded
 * per instance, and one tenant holds at most a tenth of them, so its servers cannot leave every other tenant's
 * questions refused; a question settled, answered or aborted gives its slot back.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { ClientRequests } from '../../../src/mcp-server/client-requests.js'
import { JsonRpcError } from '../../../src/routing/client-relay.js'

const ASK = { method: 'elicitation/create', params: { message: 'name?' } }

test('one tenant holds at most a tenth of the waiting questions; another tenant is still asked; a settled question frees its slot', {
  timeout: 10_000
}, async () => {
  const requests = new ClientRequests({ instanceId: 'i1', maxWaiting: 20 })
  const acme = { tenant: 'acme', keyId: 'k1' }
  const globex = { tenant: 'globex', keyId: 'k2' }
  const sent: Array<{ id: string }> = []
  const send = async (m: { id: string }): Promise<void> => { sent.push(m) }
  const calls = [new AbortController(), new AbortController()]
  const waits = calls.map(async (c) => await requests.ask(acme, send, ASK, c.signal).catch((err: unknown) => err))
  await assert.rejects(requests.ask(acme, send, ASK, new AbortController().signal), (err: unknown) =>
    err instanceof JsonRpcError && /This tenant has 2 questions waiting/.test(err.message))
  assert.equal(sent.length, 2, 'the refused question was not sent')
  // Another tenant's question still goes out and is answered.
  const theirs = requests.ask(globex, send, ASK, new AbortController().signal)
  await new Promise((resolve) => setImmediate(resolve))
  await requests.deliver(globex, { jsonrpc: '2.0', id: sent[2]?.id, result: { action: 'decline' } })
  assert.deepEqual(await theirs, { action: 'decline' })
  // acme's call ends: its question is settled and its slot comes back.
  calls[0]?.abort(new Error('call ended'))
  assert.match(String(await waits[0]), /call ended/)
  assert.equal(requests.waiting, 1)
  const again = requests.ask(acme, send, ASK, new AbortController().signal)
  await new Promise((resolve) => setImmediate(resolve))
  await requests.deliver(acme, { jsonrpc: '2.0', id: sent[3]?.id, result: { action: 'accept' } })
  assert.deepEqual(await again, { action: 'accept' })
  calls[1]?.abort(new Error('call ended'))
  await waits[1]
  assert.equal(requests.waiting, 0)
})
