import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Client, InMemoryTransport } from '@modelcontextprotocol/client'
import type { JSONRPCMessage } from '@modelcontextprotocol/client'
import { GatewayClient } from '../../../src/remote-mcp/gateway-client.js'

/**
 * A legacy MCP server written by hand on an in-memory link, so that a tools/call can be answered
 * with anything at all (the SDK's own servers check their results before sending them).
 */
async function connect (ClientClass: typeof Client, answer: (args: Record<string, unknown>) => unknown): Promise<Client> {
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair()
  serverSide.onmessage = (message: JSONRPCMessage) => {
    const m = message as { id?: number, method?: string, params?: { arguments?: Record<string, unknown> } }
    if (m.id === undefined || m.method === undefined) return
    const reply = (body: Record<string, unknown>): void => { serverSide.send({ jsonrpc: '2.0', id: m.id, ...body } as JSONRPCMessage).catch(() => {}) }
    if (m.method === 'initialize') {
      reply({ result: { protocolVersion: '2025-11-25', capabilities: { tools: {} }, serverInfo: { name: 'raw', version: '1' } } })
    } else if (m.method === 'tools/call') {
      reply({ result: answer(m.params?.arguments ?? {}) })
    } else {
      reply({ error: { code: -32601, message: 'Method not found' } })
    }
  }
  await serverSide.start()
  const client = new ClientClass({ name: 'test', version: '1' }, { versionNegotiation: { mode: 'legacy' } })
  await client.connect(clientSide)
  return client
}

const GOOD = { content: [{ type: 'text', text: 'hi', extra: 1 }], structuredContent: { a: 1 }, isError: false, unknownField: 'kept?' }
const BAD = { content: 'not a list' }

test('a tools/call result is validated as the SDK Client validates it: the same value, the same refusal', async (t) => {
  const plain = await connect(Client, (args) => args.bad === true ? BAD : GOOD)
  const ours = await connect(GatewayClient, (args) => args.bad === true ? BAD : GOOD)
  t.after(async () => { await plain.close(); await ours.close() })
  assert.equal(ours.getNegotiatedProtocolVersion(), '2025-11-25')

  assert.deepEqual(await ours.callTool({ name: 'x', arguments: {} }), await plain.callTool({ name: 'x', arguments: {} }))
  const refusal = async (c: Client): Promise<unknown> => await c.callTool({ name: 'x', arguments: { bad: true } }).then(() => 'resolved', (err: Error) => `${err.name}: ${err.message}`)
  const theirs = await refusal(plain)
  assert.match(String(theirs), /content/)
  assert.equal(await refusal(ours), theirs)
})

test('the result validator of tools/call is made once, not probed with an empty result on every call as the SDK Client does', async (t) => {
  const count = async (ClientClass: typeof Client): Promise<number> => {
    const client = await connect(ClientClass, () => GOOD)
    t.after(async () => { await client.close() })
    // The SDK's codec (module state, shared by every Client of the era): its probes are validateResult(method, undefined).
    const codec = (client as unknown as { _wireCodec: () => { validateResult: (m: string, v: unknown) => unknown } })._wireCodec()
    const original = codec.validateResult
    let probes = 0
    codec.validateResult = (m, v) => { if (v === undefined) probes++; return original.call(codec, m, v) }
    try {
      for (let i = 0; i < 5; i++) await client.callTool({ name: 'x', arguments: {} })
    } finally {
      codec.validateResult = original
    }
    return probes
  }
  // Pinned to the installed SDK: its Client probes once per call (if it stops, this keeps telling).
  assert.equal(await count(Client), 5)
  assert.equal(await count(GatewayClient), 0)
})
