/**
 * The MCP Inspector 2 CLI (@modelcontextprotocol/inspector 2.12.0, SDK v2, Node >= 22.19) against
 * the gateway's /mcp, in both protocol eras (`--protocol-era legacy | modern`): what a developer
 * with the Inspector sees. Runs the CLI as a child process under this Node. It needs a newer Node
 * than the project's oldest supported one, so it is not a dependency: .ci/run installs it outside
 * the repository and names its entry in MCP_INSPECTOR_CLI (to run this file by hand:
 * `npm install --prefix /tmp/insp @modelcontextprotocol/inspector@2.12.0` and point
 * MCP_INSPECTOR_CLI at its clients/launcher/build/index.js). Skipped without it or on an older
 * Node, except under CI=true, where that is a failure.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { TestContext } from 'node:test'
import { buildApp } from '../../../src/app.js'
import { loadConfig } from '../../../src/config.js'
import { TEST_QUOTA } from '../../helpers/app.js'

const INSPECTOR = process.env.MCP_INSPECTOR_CLI ?? ''
const [major, minor] = process.versions.node.split('.').map(Number) as [number, number]
const why = major < 22 || (major === 22 && minor < 19)
  ? `the Inspector needs Node >= 22.19 (this is ${process.version})`
  : !existsSync(INSPECTOR) ? `MCP_INSPECTOR_CLI does not name the Inspector's CLI (${INSPECTOR === '' ? 'unset' : INSPECTOR}): .ci/run installs it` : undefined
const skip = why !== undefined && process.env.CI !== 'true' ? why : false
const ACME = 'acme-key-0123456789'

interface Run { code: number, stdout: string, stderr: string }

async function startGateway (t: TestContext): Promise<{ base: string, home: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'tg-inspector-'))
  const config = loadConfig({ SANDBOX: 'none', ...TEST_QUOTA, LOG_LEVEL: 'silent', WORKSPACES_DIR: join(dir, 'ws'), API_KEYS: `${ACME}:acme` })
  const app = await buildApp(config, { logger: false })
  t.after(async () => {
    await app.close()
    await rm(dir, { recursive: true, force: true })
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const address = app.server.address()
  assert.ok(address !== null && typeof address === 'object')
  return { base: `http://127.0.0.1:${address.port}`, home: dir }
}

/** The Inspector CLI with `args`, its catalog and home in the test's own directory. */
async function inspector (home: string, args: string[]): Promise<Run> {
  return await new Promise((resolve) => {
    execFile(process.execPath, [INSPECTOR, '--cli', ...args], {
      timeout: 60_000,
      env: { ...process.env, HOME: home, MCP_CATALOG_PATH: join(home, 'mcp.json'), NO_COLOR: '1' }
    }, (err, stdout, stderr) => {
      const code = err === null ? 0 : typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : 1
      resolve({ code, stdout, stderr })
    })
  })
}

for (const era of ['legacy', 'modern'] as const) {
  test(`the MCP Inspector 2 CLI (--protocol-era ${era}) lists and calls the gateway's tools with a tenant key`, { skip }, async (t) => {
    if (why !== undefined) assert.fail(why)
    const { base, home } = await startGateway(t)
    const url = `${base}/mcp?functions=calculate,current_time`
    const common = [url, '--transport', 'http', '--protocol-era', era, '--header', `Authorization: Bearer ${ACME}`]

    const listed = await inspector(home, [...common, '--method', 'tools/list'])
    assert.equal(listed.code, 0, listed.stderr)
    const tools = (JSON.parse(listed.stdout) as { tools: Array<{ name: string }> }).tools.map((x) => x.name)
    assert.deepEqual(tools.sort(), ['calculate', 'current_time'])

    const called = await inspector(home, [...common, '--method', 'tools/call', '--tool-name', 'calculate', '--tool-arg', 'expression=6*7'])
    assert.equal(called.code, 0, called.stderr)
    const result = JSON.parse(called.stdout) as { content: Array<{ text: string }>, isError: boolean, _meta?: Record<string, { name?: string }> }
    assert.deepEqual(result.content.map((c) => c.text), ['{"expression":"6*7","result":42}'])
    assert.equal(result.isError, false)
    // Only the 2026-07-28 revision stamps the server's identity on every result.
    assert.equal(result._meta?.['io.modelcontextprotocol/serverInfo']?.name, era === 'modern' ? 'tool-gateway' : undefined)

    // A tool outside the URL's allow-list is not listed, so the CLI (which looks a tool up before calling it) refuses it.
    const refused = await inspector(home, [...common, '--method', 'tools/call', '--tool-name', 'read_file', '--tool-arg', 'path=x'])
    assert.notEqual(refused.code, 0)
    assert.match(refused.stdout + refused.stderr, /read_file' not found/)

    // Without the key: the gateway's 401, which the CLI reads as "authorization required" (it would start
    // OAuth on a terminal), and nothing is listed.
    const anonymous = await inspector(home, [url, '--transport', 'http', '--protocol-era', era, '--method', 'tools/list'])
    assert.notEqual(anonymous.code, 0)
    assert.match(anonymous.stdout + anonymous.stderr, /auth_required/)
    assert.doesNotMatch(anonymous.stdout, /calculate/)
  })
}
