/**
 * Closing the gateway while `/mcp` calls run: every in-flight call gets its answer, as on
 * POST /invoke (test/http/shutdown.test.ts). The single requests of both eras are served by one
 * shared server per era (src/mcp-server/lean-transport.ts); closing those servers when the close
 * began (with the notification streams, which must end for the HTTP server to close) dropped the
 * answers of the calls still running: their clients waited until the drain's deadline cut them off.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { buildTestApp, listenOnLoopback } from '../../helpers/app.js'
import { MODERN } from '../../helpers/mcp-raw.js'

const KEY = 'acme-key-0123456789'

test('closing the app: in-flight /mcp tools/calls of both eras get their answers before the shared servers close', async (t) => {
  const marks = await mkdtemp(join(tmpdir(), 'tg-mcp-shutdown-'))
  t.after(async () => await rm(marks, { recursive: true, force: true }))
  const app = await buildTestApp(t, { env: { API_KEYS: `${KEY}:acme` } })
  const base = await listenOnLoopback(app)
  const deadline = AbortSignal.timeout(20_000)

  const call = async (era: 'legacy' | 'modern'): Promise<{ status: number, text: string }> => {
    const command = `touch ${join(marks, era)} && sleep 1 && echo finished-${era}`
    const params: Record<string, unknown> = { name: 'bash', arguments: { action: 'exec', command } }
    const headers: Record<string, string> = {
      authorization: `Bearer ${KEY}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': era === 'legacy' ? '2025-11-25' : MODERN
    }
    if (era === 'modern') {
      Object.assign(headers, { 'mcp-method': 'tools/call', 'mcp-name': 'bash' })
      params._meta = {
        'io.modelcontextprotocol/protocolVersion': MODERN,
        'io.modelcontextprotocol/clientCapabilities': {},
        'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' }
      }
    }
    const res = await fetch(`${base}/mcp?functions=bash`, {
      method: 'POST', headers, signal: deadline, body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params })
    })
    return { status: res.status, text: await res.text() }
  }

  const inFlight = [call('legacy'), call('modern')]
  // Both commands are running: the calls are in flight when the close begins.
  while (!existsSync(join(marks, 'legacy')) || !existsSync(join(marks, 'modern'))) await sleep(20)
  const closing = app.close()
  const [legacy, modern] = await Promise.all(inFlight)
  for (const [era, answer] of [['legacy', legacy], ['modern', modern]] as const) {
    assert.equal(answer?.status, 200, `${era}: ${answer?.text}`)
    assert.match(answer?.text ?? '', new RegExp(`finished-${era}`), era)
    assert.match(answer?.text ?? '', /"id":7/, era)
  }
  // As the process's shutdown does (src/server.ts): connections whose last answer ended during the drain are idle now.
  app.server.closeIdleConnections()
  await closing
})
