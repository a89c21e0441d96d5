/**
 * @modelcontextprotocol/server-everything as an external, real MCP server, through the pool:
 * over stdio (its default transport) and over streamable HTTP (`streamableHttp` argument, port
 * from PORT, endpoint /mcp). Note: its HTTP mode listens on all interfaces (express default, no
 * host option); the test only ever talks to it on 127.0.0.1.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import type { ChildProcess } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { createServer } from 'node:net'
import type { AddressInfo } from 'node:net'
import { fileURLToPath } from 'node:url'
import { setTimeout as sleep } from 'node:timers/promises'
import { McpClientPool } from '../../../src/remote-mcp/pool.js'
import { flattenCallToolResult } from '../../../src/mcp/flatten.js'
import type { ConnectSpec, HttpTransportKind } from '../../../src/remote-mcp/transport.js'

const EVERYTHING_BIN = fileURLToPath(import.meta.resolve('@modelcontextprotocol/server-everything/dist/index.js'))

function makePool (
  t: { after: (fn: () => Promise<void>) => void },
  httpTransport: HttpTransportKind = (process.env.MCP_HTTP_TRANSPORT as HttpTransportKind | undefined) ?? 'sdk'
): McpClientPool {
  const pool = new McpClientPool({
    httpTransport,
    connectTimeoutMs: 30_000,
    listTimeoutMs: 15_000,
    callTimeoutMs: 15_000,
    idleMs: 60_000,
    maxClients: 4,
    toolsTtlMs: 60_000,
    clientInfo: { name: 'tool-gateway-test', version: '0.0.0' }
  })
  t.after(async () => { await pool.close() })
  return pool
}

async function exercise (pool: McpClientPool, key: string, spec: ConnectSpec): Promise<void> {
  const tools = await pool.listTools(key, spec)
  const names = tools.map((x) => x.name)
  assert.ok(names.includes('echo'), `echo in ${names.join(', ')}`)
  assert.ok(names.includes('get-tiny-image'))

  const echo = flattenCallToolResult(await pool.callTool(key, spec, 'echo', { message: 'hello gateway' }))
  assert.equal(echo.isError, false)
  assert.match(echo.text, /hello gateway/)

  const image = flattenCallToolResult(await pool.callTool(key, spec, 'get-tiny-image', {}))
  assert.equal(image.isError, false)
  assert.match(image.text, /\[image image\/png \d+ bytes\]/)
  assert.doesNotMatch(image.text, /iVBOR/, 'no base64 reaches the model')
  const raw = image.trace.content.find((c) => (c as { type?: string }).type === 'image') as { data: string } | undefined
  const bytes = Buffer.from(raw?.data ?? '', 'base64').length
  assert.ok(image.text.includes(`[image image/png ${bytes} bytes]`))
}

/** Child processes of this test process running server-everything (zombies included), from /proc. */
function everythingChildren (): number {
  let n = 0
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8')
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      if (ppid === process.pid && readFileSync(`/proc/${name}/cmdline`, 'utf8').includes('server-everything')) n++
    } catch {
      // The process ended while we were reading.
    }
  }
  return n
}

async function freePort (): Promise<number> {
  const probe = createServer()
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve))
  const { port } = probe.address() as AddressInfo
  await new Promise<void>((resolve) => probe.close(() => resolve()))
  return port
}

async function startEverythingHttp (): Promise<{ url: string, child: ChildProcess }> {
  // The free-port probe and the server's bind can race with another process; retry a few times.
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort()
    const child = spawn(process.execPath, [EVERYTHING_BIN, 'streamableHttp'], {
      env: { PATH: process.env.PATH ?? '', PORT: String(port) },
      stdio: ['ignore', 'ignore', 'pipe']
    })
    const ready = await new Promise<boolean>((resolve) => {
      let out = ''
      child.stderr?.setEncoding('utf8')
      child.stderr?.on('data', (chunk: string) => {
        out += chunk
        if (out.includes('listening on port')) resolve(true)
      })
      child.once('exit', () => resolve(false))
    })
    if (ready) return { url: `http://127.0.0.1:${port}/mcp`, child }
  }
  throw new Error('server-everything did not start')
}

test('server-everything over stdio: list, echo, image placeholder; the child is gone after close', async (t) => {
  const pool = makePool(t)
  const spec: ConnectSpec = { type: 'stdio', command: process.execPath, args: [EVERYTHING_BIN, 'stdio'] }
  await exercise(pool, 'everything', spec)
  assert.equal(pool.stats().clients.everything?.connected, true)
  assert.equal(everythingChildren(), 1)
  await pool.close()
  assert.equal(pool.stats().totalClients, 0)
  for (let i = 0; i < 400 && everythingChildren() > 0; i++) await sleep(25)
  assert.equal(everythingChildren(), 0, 'the stdio child was reaped')
})

// Both client transports (MCP_HTTP_TRANSPORT=sdk|lean) against the reference server.
for (const httpTransport of ['sdk', 'lean'] as const) {
  test(`server-everything over streamable HTTP (${httpTransport} transport): list, echo, image placeholder`, async (t) => {
    const { url, child } = await startEverythingHttp()
    t.after(async () => {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve))
        child.kill('SIGKILL')
        await Promise.race([exited, sleep(5000)])
      }
    })
    const pool = makePool(t, httpTransport)
    await exercise(pool, 'user_42_service_everything', { type: 'streamable_http', url })
  })
}
