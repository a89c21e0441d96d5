import { test } from 'node:test'
import assert from 'node:assert/strict'
import { DiscoveryError } from '../../../src/discovery/modules.js'
import { closeService, loadLocalMcpServices } from '../../../src/local-mcp/loader.js'

test('local services connect in-process and expose apiFunctionName(service, tool)', async (t) => {
  const loaded = await loadLocalMcpServices(['test/fixtures/mcp-services/priority', 'examples/mcp-services'], { listTimeoutMs: 5000 })
  t.after(async () => { for (const s of loaded.services) await closeService(s) })
  assert.deepEqual(loaded.tools.map((x) => x.exposedName).sort(), ['svc_only', 'svc_x', 'text_slugify', 'text_stats'])
  const result = await loaded.tools.find((x) => x.exposedName === 'text_slugify')!.service.client
    .callTool({ name: 'slugify', arguments: { text: 'Héllo, Wörld!' } })
  assert.deepEqual(result.content, [{ type: 'text', text: 'hello-world' }])
})

test('two services producing the same exposed name: start-up error naming both files', async () => {
  await assert.rejects(loadLocalMcpServices(['test/fixtures/mcp-services/clash'], { listTimeoutMs: 5000 }), (err: unknown) => {
    assert.ok(err instanceof DiscoveryError)
    assert.match(err.message, /'a_b_c' produced by both .*clash\/a\.ts and .*clash\/b\.ts/)
    return true
  })
})

test('a service mapping onto a built-in name is refused', async () => {
  await assert.rejects(loadLocalMcpServices(['test/fixtures/mcp-services/reserved'], { listTimeoutMs: 5000 }), /reserved name 'read_file'/)
})

test('a directory of non-services is an error naming the file', async () => {
  await assert.rejects(loadLocalMcpServices(['test/fixtures/functions/priority'], { listTimeoutMs: 5000 }), /fns\.ts: exports no MCP service/)
})
