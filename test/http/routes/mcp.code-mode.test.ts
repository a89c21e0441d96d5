/**
 * Code mode at /mcp (SPEC 19, README "Code mode"), in both protocol revisions: a legacy client (SDK
 * v1) and a 2026-07-28 client (SDK v2) list `/mcp?...&mode=code` (run_tools_script alone, its
 * description the typed API of the URL's allow-list) and call it; the script's inner calls go to
 * the tenant's MCP server (an SDK fixture on loopback) under the URL's allow-list, and a tool
 * outside it fails inside the script. Real sandbox (bwrap).
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client'
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { startStreamableHttpFixture } from '../../../scripts/lib/mcp-fixtures/index.js'
import { buildTestApp, listenOnLoopback } from '../../helpers/app.js'
import { MODERN } from '../../helpers/mcp-raw.js'
import { toolServer, TRACKER } from '../../helpers/search-tools.js'

const ACME = 'k-acme-mcp-code-0123'
const skip = process.getuid?.() !== 0 && 'needs root (the sandbox runs each tenant as its own uid)'

const SCRIPT = `
const issue = await tools.create_issue({ owner: 'o', repo: 'r', title: 't' })
let outside
try { await tools.bash({ command: 'id' }) } catch (err) { outside = err.code }
return { issue, outside }
`

test('/mcp?mode=code in both revisions: run_tools_script is listed alone with the typed API, and a script calls the URL\'s tools',
  { skip, timeout: 90_000 }, async (t) => {
    const app = await buildTestApp(t, { env: { EGRESS_ALLOW: '127.0.0.1/32', API_KEYS: `${ACME}:acme`, SANDBOX: 'bwrap' } })
    const closers: Array<() => Promise<void>> = []
    t.after(async () => { for (const close of closers.reverse()) await close() })
    const base = await listenOnLoopback(app)
    const headers = { authorization: `Bearer ${ACME}` }
    const server = await startStreamableHttpFixture({ factory: toolServer(TRACKER) })
    closers.push(async () => await server.close())
    const put = await fetch(`${base}/users/acme/mcp/servers/tracker`, {
      method: 'PUT', headers: { ...headers, 'content-type': 'application/json' }, body: JSON.stringify({ type: 'streamable_http', url: server.url })
    })
    assert.equal(put.status, 201, await put.text())
    const url = new URL(`${base}/mcp?mcp=tracker&userId=acme&mode=code`)

    const legacy = new LegacyClient({ name: 'code-v1', version: '1.0.0' })
    await legacy.connect(new LegacyTransport(url, { requestInit: { headers } }))
    closers.push(async () => { await legacy.close() })
    const modern = new Client({ name: 'code-v2', version: '1.0.0' }, { versionNegotiation: { mode: { pin: MODERN } } })
    await modern.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers } }))
    closers.push(async () => { await modern.close() })

    for (const client of [legacy, modern] as Array<Pick<Client, 'listTools' | 'callTool'>>) {
      const listed = await client.listTools()
      assert.deepEqual(listed.tools.map((x) => x.name), ['run_tools_script'])
      assert.match(listed.tools[0]?.description ?? '', /user_acme_tool_create_issue\(args: \{ owner: string, repo: string, title: string, body\?: string \}\)/)
      const result = await client.callTool({ name: 'run_tools_script', arguments: { language: 'javascript', code: SCRIPT } })
      const text = (result.content as Array<{ type: string, text: string }>)[0]?.text ?? ''
      assert.notEqual(result.isError, true, text)
      assert.deepEqual(JSON.parse(text), { issue: 'ran create_issue {"owner":"o","repo":"r","title":"t"}', outside: 'GW_NOT_ALLOWED' })
    }
  })
