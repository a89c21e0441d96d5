/**
 * Row 3: POST /invoke of the `echo` tool of the stdio MCP fixture server through the real
 * gateway process (a global stdio server: the gateway spawns and pools the child) vs the same
 * stdio server exposed over streamable HTTP by supergateway (`--stateful`: one child per session,
 * as the gateway keeps one) and called with the SDK client. Both children are the same command.
 */
import path from 'node:path'
import { stdioFixture } from '../scripts/lib/mcp-fixtures/index.js'
import { callEcho, closedLoop, connectClient } from './fixtures/mcp-client.js'
import { closeHttp, freePort, gatewayEnv, http, httpOk, load, loadInterleaved, REPO_ROOT, spawnChild, startGateway, waitReady } from './fixtures/procs.js'
import { makeRow, median, percentile, round, timePair } from './stats.js'
import type { BenchContext, Row } from './types.js'

const C = 8
const SECONDS = 3
const ROUNDS = 2

export async function run (ctx: BenchContext): Promise<Row[]> {
  ctx.defer(closeHttp)
  const fixture = stdioFixture('stdio-server.ts', ['sio'])
  const command = [fixture.command, ...fixture.args].join(' ')
  if (/\s/.test([fixture.command, ...fixture.args].join(''))) throw new Error('a path with spaces: cannot build the supergateway --stdio command line')

  const sgPort = await freePort()
  const sg = spawnChild(ctx, {
    name: 'supergateway',
    command: process.execPath,
    args: [path.join(REPO_ROOT, 'node_modules/supergateway/dist/index.js'), '--stdio', command, '--outputTransport', 'streamableHttp', '--stateful',
      '--port', String(sgPort), '--logLevel', 'none', '--healthEndpoint', '/healthz']
  })
  await waitReady(sg, `http://127.0.0.1:${sgPort}/healthz`)

  const gw = await startGateway(ctx, gatewayEnv(ctx, { MCP_CONNECT_TIMEOUT_MS: '30000', MCP_LIST_TIMEOUT_MS: '30000' }))
  await httpOk('PUT', `${gw.url}/mcp/servers/sio`, { type: 'stdio', command: fixture.command, args: fixture.args })
  const body = { name: 'sio__echo', arguments: { text: 'hello' } }
  const viaGateway = async (): Promise<void> => {
    const r = await http('POST', `${gw.url}/invoke`, body)
    if (r.status !== 200 || !r.body.includes('"output":"sio:hello"')) throw new Error(`gateway answered ${r.status}: ${r.body.slice(0, 300)}`)
  }
  await viaGateway()
  const client = await connectClient(ctx, `http://127.0.0.1:${sgPort}/mcp`)
  const viaSupergateway = async (): Promise<void> => { await callEcho(client, 'hello') }
  await viaSupergateway()

  const c1 = await timePair(viaGateway, viaSupergateway, { warmup: 100, reps: 800, signal: ctx.signal })
  ctx.log(`c=1: gateway p50 ${round(median(c1.subject))} ms, supergateway ${round(median(c1.baseline))} ms (n=${c1.subject.length})`)

  const res = await loadInterleaved(ctx, {
    gateway: async (seconds) => await load({ url: `${gw.url}/invoke`, method: 'POST', body: JSON.stringify(body), connections: C, seconds }),
    supergateway: async (seconds) => await closedLoop(viaSupergateway, C, seconds)
  }, { warmupSeconds: 1, seconds: SECONDS, rounds: ROUNDS })

  return [
    makeRow({
      id: '3.1',
      name: 'POST /invoke of a stdio MCP echo vs supergateway (stdio -> streamable HTTP, stateful) + SDK client: latency',
      metric: 'p50 ms',
      value: median(c1.subject),
      baseline: median(c1.baseline),
      target: { on: 'ratio', op: '<=', limit: 1.0 },
      notes: `concurrency 1; p99 ${round(percentile(c1.subject, 99))} vs ${round(percentile(c1.baseline, 99))} ms; n=${c1.subject.length} interleaved`,
      detail: { p99: round(percentile(c1.subject, 99)), baselineP99: round(percentile(c1.baseline, 99)) }
    }),
    makeRow({
      id: '3.2',
      name: `the same at concurrency ${C}: throughput`,
      metric: 'req/s',
      value: median(res.gateway.map((r) => r.rps)),
      baseline: median(res.supergateway.map((r) => r.rps)),
      target: null,
      notes: `autocannon ${C} connections vs ${C} SDK callTool loops, median of ${res.gateway.length} interleaved ${SECONDS} s rounds`
    })
  ]
}
