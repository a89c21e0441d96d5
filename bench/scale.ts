/**
 * Row 6: 10,000 tenants x 3 streamable-HTTP servers registered through the REST API in a
 * real Redis (127.0.0.1:6379, or REDIS_URL; a unique REDIS_KEY_PREFIX whose keys are deleted
 * after). The servers point at 3 shared fixture servers in one child process.
 * - 6.1 the gateway's JS heap after a full GC (read through its inspector) before (started, warmed
 *   up) and after 30,000 servers are registered, then after a sample of tenants is listed (every
 *   listed tenant has its own pooled clients); RSS beside it in the notes (a high-water mark);
 * - 6.2 GET /tools for a random tenant (its first listing: the gateway connects its 3 servers)
 *   and 6.3 the same tenants listed again (warm); 6.2d first listings of other tenants whose 3
 *   servers (3 more fixture servers) do not declare tools.listChanged, so no GET stream is opened;
 * - 6.4 registry write throughput: PUT /users/{u}/mcp/servers/{s} with 32 in flight, vs GET
 *   /healthz at the same concurrency (the HTTP floor of the same gateway).
 */
import { randomBytes } from 'node:crypto'
import { Redis } from 'ioredis'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { Agent } from 'undici'
import { connectLeanClient } from './fixtures/mcp-client.js'
import { closeHttp, cpuMs, gatewayEnv, heapAfterGcMiB, http, httpOk, leanTransportUrl, pool, rssMiB, startGateway, startMcpServers } from './fixtures/procs.js'
import { makeRow, median, percentile, round, timeMs } from './stats.js'
import type { BenchContext, Row } from './types.js'

const TENANTS = 10_000
const PER_TENANT = 3
const WRITERS = 32
const SAMPLE = 200
const WARM_TENANTS = 400
/** Tenants that warm the fixture servers of 6.2d up before its measured listings. */
const STATIC_WARM = 300
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'

const uid = (i: number): string => `t${String(i).padStart(5, '0')}`
const SERVER_IDS = ['a', 'b', 'c']

async function deleteKeys (redis: Redis, prefix: string): Promise<number> {
  let cursor = '0'
  let n = 0
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000)
    cursor = next
    if (keys.length > 0) n += await redis.del(...keys)
  } while (cursor !== '0')
  return n
}

export async function run (ctx: BenchContext): Promise<Row[]> {
  ctx.defer(closeHttp)
  const prefix = `tg-bench-${randomBytes(6).toString('hex')}:`
  const redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1, connectTimeout: 2000 })
  redis.on('error', () => {})
  await redis.connect()
  ctx.defer(async () => {
    const n = await deleteKeys(redis, prefix)
    ctx.log(`deleted ${n} Redis keys under ${prefix}`)
    redis.disconnect()
  })

  const { urls, child: fixtures } = await startMcpServers(ctx, PER_TENANT, 'fixture')
  const { urls: staticUrls, child: staticFixtures } = await startMcpServers(ctx, PER_TENANT, 'static')
  const gw = await startGateway(ctx, gatewayEnv(ctx, { REDIS_URL, REDIS_KEY_PREFIX: prefix, EGRESS_ALLOW: '127.0.0.1/32' }), 'gateway', { inspect: true })
  const put = async (t: number, s: number, to = urls): Promise<void> => {
    await httpOk('PUT', `${gw.url}/users/${uid(t)}/mcp/servers/${SERVER_IDS[s] as string}`, { type: 'streamable_http', url: to[s] })
  }
  const remove = async (t: number, s: number): Promise<void> => {
    await httpOk('DELETE', `${gw.url}/users/${uid(t)}/mcp/servers/${SERVER_IDS[s] as string}`, undefined, [200, 204])
  }
  const toolsUrl = (t: number): string => `${gw.url}/tools?userId=${uid(t)}&mcp=${SERVER_IDS.join(',')}`
  const list = async (t: number): Promise<void> => {
    const r = await http('GET', toolsUrl(t))
    if (r.status !== 200) throw new Error(`GET /tools ${uid(t)} -> ${r.status}: ${r.body.slice(0, 300)}`)
    const tools = (JSON.parse(r.body) as { tools: unknown[] }).tools.length
    if (tools !== 27) throw new Error(`GET /tools ${uid(t)} listed ${tools} tools, expected 27: ${r.body.slice(0, 300)}`)
  }

  // Warm-up of every path measured, on tenants outside the measured range, then RSS "before".
  for (let w = 0; w < 20; w++) {
    for (let s = 0; s < PER_TENANT; s++) await put(TENANTS + w, s)
    await list(TENANTS + w)
    await list(TENANTS + w)
  }
  await pool(400, WRITERS, async () => { await httpOk('GET', `${gw.url}/healthz`) })
  const rssBefore = await rssMiB(gw.pid)
  const heapBefore = await heapAfterGcMiB(gw)

  // Registry writes, with GET /healthz at the same concurrency before and after as the floor.
  const floor = async (): Promise<number> => {
    const n = 3000
    const ms = await timeMs(() => pool(n, WRITERS, async () => { await httpOk('GET', `${gw.url}/healthz`) }))
    return n / (ms / 1000)
  }
  const floorBefore = await floor()
  let written = 0
  const writeMs = await timeMs(() => pool(TENANTS * PER_TENANT, WRITERS, async (i) => {
    if (ctx.signal.aborted) return
    await put(Math.floor(i / PER_TENANT), i % PER_TENANT)
    written++
  }))
  const floorAfter = await floor()
  const putsPerSec = written / (writeMs / 1000)
  const rssRegistered = await rssMiB(gw.pid)
  const heapRegistered = await heapAfterGcMiB(gw)
  const hashes = await redis.scard(`${prefix}{reg}:users`).catch(() => -1)
  ctx.log(`${written} PUTs in ${round(writeMs / 1000)} s = ${round(putsPerSec)}/s (healthz ${round(floorBefore)} / ${round(floorAfter)} req/s); ` +
    `${hashes} tenant hashes in Redis; RSS ${round(rssBefore)} -> ${round(rssRegistered)} MiB, heap after GC ${round(heapBefore)} -> ${round(heapRegistered)} MiB`)
  if (written < TENANTS * PER_TENANT) throw new Error(`only ${written} of ${TENANTS * PER_TENANT} servers registered before the budget ran out`)

  // The JIT's warm-up of first listings: each runs the connect path once per server, and the JIT
  // takes hundreds of them to settle (measured on this machine: gateway CPU per first listing ~11
  // ms over the first 200 tenants, ~7 ms after 400). More tenants outside the measured range,
  // each deleted after its listings so its pooled clients close: the pool starts the measured
  // listings with the 20 tenants above, and nothing is evicted (MCP_MAX_CLIENTS) while 6.2 runs.
  for (let w = 20; w < WARM_TENANTS; w++) {
    for (let s = 0; s < PER_TENANT; s++) await put(TENANTS + w, s)
    await list(TENANTS + w)
    await list(TENANTS + w)
    for (let s = 0; s < PER_TENANT; s++) await remove(TENANTS + w, s)
  }

  // Random tenants (without repetition), listed for the first time, then again.
  const sample: number[] = []
  const seen = new Set<number>()
  while (sample.length < SAMPLE) {
    const t = Math.floor(Math.random() * TENANTS)
    if (!seen.has(t)) { seen.add(t); sample.push(t) }
  }
  // The floor of a first listing (6.2c): the same 3 sessions opened and listed from this process
  // by the SDK Client over the gateway's own lean transport (kept open, as the pool keeps them),
  // without the gateway: what the fixture servers and one client hop cost. Warmed like the gateway.
  const transportUrl = await leanTransportUrl()
  const floorAgent = new Agent({ pipelining: 1, connections: 1024, keepAliveTimeout: 4000 })
  const floorClients: Client[] = []
  ctx.defer(async () => {
    await Promise.all(floorClients.map(async (c) => { await c.close().catch(() => {}) }))
    await floorAgent.close()
  })
  const floorListing = async (keep: boolean): Promise<void> => {
    await Promise.all(urls.map(async (u) => {
      const client = await connectLeanClient(transportUrl, u, floorAgent)
      const { tools } = await client.listTools()
      if (tools.length !== 9) throw new Error(`floor listed ${tools.length} tools, expected 9`)
      if (keep) floorClients.push(client)
      else await client.close()
    }))
  }
  for (let w = 0; w < WARM_TENANTS; w++) await floorListing(false)

  // CPU of the gateway and of the fixture servers during the first listings: where the time goes.
  // The floor's listings are interleaved; the fixture servers' CPU is split by side.
  const firstMs: number[] = []
  const floorMs: number[] = []
  let gwCpuSum = 0
  let fixCpuSum = 0
  let fixFloorCpuSum = 0
  let floorCpuSum = 0
  for (const t of sample) {
    const [g0, f0] = [await cpuMs(gw.pid), await cpuMs(fixtures.pid)]
    firstMs.push(await timeMs(() => list(t)))
    const [g1, f1] = [await cpuMs(gw.pid), await cpuMs(fixtures.pid)]
    gwCpuSum += g1 - g0
    fixCpuSum += f1 - f0
    const self0 = process.cpuUsage()
    floorMs.push(await timeMs(() => floorListing(true)))
    const self = process.cpuUsage(self0)
    floorCpuSum += (self.user + self.system) / 1000
    fixFloorCpuSum += await cpuMs(fixtures.pid) - f1
  }
  const gwFirstCpu = gwCpuSum / SAMPLE
  const fixFirstCpu = fixCpuSum / SAMPLE
  // Warm: interleaved with GET /healthz, the floor of any request on this (noisy) machine.
  const warmMs: number[] = []
  const healthMs: number[] = []
  for (let r = 0; r < 3; r++) {
    for (const t of sample) {
      warmMs.push(await timeMs(() => list(t)))
      healthMs.push(await timeMs(() => httpOk('GET', `${gw.url}/healthz`)))
    }
  }
  const rssAfter = await rssMiB(gw.pid)
  const heapAfter = await heapAfterGcMiB(gw)
  ctx.log(`first listing p50 ${round(median(firstMs))} p99 ${round(percentile(firstMs, 99))} ms; warm p50 ${round(median(warmMs))} p99 ${round(percentile(warmMs, 99))} ms; RSS ${round(rssAfter)} MiB`)

  // 6.2d: first listings of tenants whose servers do not declare tools.listChanged, after 6.1b's
  // RSS. The sample's tenants are deleted first (their 600 clients close), so the pool stays under
  // MCP_MAX_CLIENTS; STATIC_WARM tenants warm the other fixture process up as 6.2's was (each
  // deleted after), then SAMPLE measured ones.
  await pool(SAMPLE * PER_TENANT, WRITERS, async (i) => { await remove(sample[Math.floor(i / PER_TENANT)] as number, i % PER_TENANT) })
  const staticBase = TENANTS + WARM_TENANTS
  await pool((STATIC_WARM + SAMPLE) * PER_TENANT, WRITERS, async (i) => { await put(staticBase + Math.floor(i / PER_TENANT), i % PER_TENANT, staticUrls) })
  for (let w = 0; w < STATIC_WARM; w++) {
    await list(staticBase + w)
    await list(staticBase + w)
    for (let s = 0; s < PER_TENANT; s++) await remove(staticBase + w, s)
  }
  const staticMs: number[] = []
  let staticGwCpu = 0
  let staticFixCpu = 0
  for (let i = 0; i < SAMPLE; i++) {
    const [g0, f0] = [await cpuMs(gw.pid), await cpuMs(staticFixtures.pid)]
    staticMs.push(await timeMs(() => list(staticBase + STATIC_WARM + i)))
    staticGwCpu += await cpuMs(gw.pid) - g0
    staticFixCpu += await cpuMs(staticFixtures.pid) - f0
  }
  ctx.log(`first listing without listChanged p50 ${round(median(staticMs))} p99 ${round(percentile(staticMs, 99))} ms; CPU gateway ${round(staticGwCpu / SAMPLE)} ms`)

  return [
    makeRow({
      id: '6.1',
      name: `gateway JS heap retained (after a full GC) once ${TENANTS.toLocaleString('en')} tenants x ${PER_TENANT} servers are registered in Redis, vs before`,
      metric: 'MiB',
      value: heapRegistered,
      baseline: heapBefore,
      target: { on: 'delta', op: '<', limit: 50 },
      notes: `retained ${round(heapRegistered - heapBefore)} MiB (started and warmed up before; the heap read through the gateway's inspector); ` +
        `RSS grew ${round(rssRegistered - rssBefore)} MiB (${round(rssBefore)} -> ${round(rssRegistered)}): the young generation and freed pages V8 keeps ` +
        'mapped after a burst of requests (Node 24 sizes it larger than Node 20), a high-water mark, not data kept',
      detail: {
        rssBefore: round(rssBefore),
        rssRegistered: round(rssRegistered),
        rssAfter: round(rssAfter),
        heapBefore: round(heapBefore),
        heapRegistered: round(heapRegistered),
        heapAfter: round(heapAfter)
      }
    }),
    makeRow({
      id: '6.1b',
      name: `the same after listing ${SAMPLE} of those tenants (${SAMPLE * PER_TENANT} pooled MCP clients)`,
      metric: 'MiB',
      value: heapAfter,
      baseline: heapBefore,
      target: null,
      notes: `retained ${round(heapAfter - heapBefore)} MiB, ${round(heapAfter - heapRegistered)} MiB of it after the registrations (the 200 listings and the warm-up of 6.2 before them: ` +
        `${WARM_TENANTS - 20} more tenants connected and closed): ~${round((heapAfter - heapRegistered) * 1024 / (SAMPLE * PER_TENANT))} KiB per pooled client; ` +
        `RSS ${round(rssAfter)} MiB (grew ${round(rssAfter - rssBefore)}); the pool holds up to MCP_MAX_CLIENTS (default 1000)`
    }),
    makeRow({
      id: '6.2',
      name: 'GET /tools for a random tenant (first listing: connects its 3 servers)',
      metric: 'p99 ms',
      value: percentile(firstMs, 99),
      baseline: null,
      target: { on: 'value', op: '<', limit: 20 },
      notes: `p50 ${round(median(firstMs))} ms; ${SAMPLE} random tenants of ${TENANTS.toLocaleString('en')}, sequential; CPU per listing: gateway ${round(gwFirstCpu)} ms, fixture servers ${round(fixFirstCpu)} ms (3 sessions); its floor (6.2c): p99 ${round(percentile(floorMs, 99))}, p50 ${round(median(floorMs))} ms`,
      detail: { gatewayCpuMsPerListing: round(gwFirstCpu), fixtureCpuMsPerListing: round(fixFirstCpu) }
    }),
    makeRow({
      id: '6.2b',
      name: 'the same first listings: gateway CPU per listing (3 connects: initialize, initialized with the GET stream beside it, tools/list)',
      metric: 'CPU ms',
      value: gwFirstCpu,
      baseline: fixFirstCpu,
      target: { on: 'value', op: '<=', limit: 10 },
      notes: `baseline: the 3 fixture servers' own CPU for the same sessions (SDK McpServer over streamable HTTP); p50 ${round(median(firstMs))} ms`
    }),
    makeRow({
      id: '6.2c',
      name: 'the floor of 6.2: the same 3 sessions opened and listed by the SDK Client over the lean transport, no gateway, interleaved',
      metric: 'p99 ms',
      value: percentile(floorMs, 99),
      baseline: null,
      target: null,
      notes: `p50 ${round(median(floorMs))} ms; client CPU ${round(floorCpuSum / SAMPLE)} ms per 3 sessions, fixture servers ${round(fixFloorCpuSum / SAMPLE)} ms; what the servers and one client cost, without the gateway's HTTP hop, registry, pool and listing`
    }),
    makeRow({
      id: '6.2d',
      name: 'the same first listing for tenants whose 3 servers do not declare tools.listChanged (no GET stream: 3 exchanges per connect)',
      metric: 'p99 ms',
      value: percentile(staticMs, 99),
      baseline: null,
      target: null,
      notes: `p50 ${round(median(staticMs))} ms; ${SAMPLE} tenants listed after 6.3 (the sample's clients closed first, ${STATIC_WARM} warm-up tenants); CPU per listing: gateway ${round(staticGwCpu / SAMPLE)} ms, fixture servers ${round(staticFixCpu / SAMPLE)} ms (3 sessions; 6.2: ${round(gwFirstCpu)} and ${round(fixFirstCpu)} ms)`,
      detail: { gatewayCpuMsPerListing: round(staticGwCpu / SAMPLE), fixtureCpuMsPerListing: round(staticFixCpu / SAMPLE) }
    }),
    makeRow({
      id: '6.3',
      name: 'GET /tools for the same random tenants again (warm) vs GET /healthz',
      metric: 'p99 ms',
      value: percentile(warmMs, 99),
      baseline: percentile(healthMs, 99),
      target: { on: 'value', op: '<', limit: 10 },
      notes: `p50 ${round(median(warmMs))} ms (healthz ${round(median(healthMs))}); ${warmMs.length} calls, sequential, interleaved with healthz`
    }),
    makeRow({
      id: '6.4',
      name: `registry writes: PUT /users/{u}/mcp/servers/{s} into Redis, ${WRITERS} in flight, vs GET /healthz`,
      metric: 'req/s',
      value: putsPerSec,
      baseline: (floorBefore + floorAfter) / 2,
      target: null,
      notes: `${written} PUTs in ${round(writeMs / 1000)} s; healthz measured before and after (${round(floorBefore)}, ${round(floorAfter)} req/s)`
    })
  ]
}
