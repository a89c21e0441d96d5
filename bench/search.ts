/**
 * Row 7: tool search (issue 32, SPEC 17), over the evaluation set of bench/fixtures/search/
 * (published definitions of real MCP servers, near-duplicates written for the eval, and
 * synthetic padding to 1,000 tools), served by bench/fixtures/search-servers.ts on loopback and
 * registered through the REST API for two tenants: `evalreal` (the set: 350 tools) and
 * `evalpad` (the same servers plus padding: 1,000 tools).
 * - 7.1 GET /tools/search over 1,000 tools, warm, sequential, rotating the eval queries: p99
 *   (p50 in notes), interleaved with GET /healthz;
 * - 7.2 building the index of the 1,000 tools, in process (the engine of src/search/); 7.2b
 *   the first search of an allow-list not searched before, minus the warm p50, over HTTP;
 * - 7.3 heap per indexed tool, in process (informational);
 * - 7.4 recall@5 and 7.5 MRR over the top 10 of queries.json on the real set, the misses logged;
 * - 7.6 the same two on the padded set (informational);
 * - 7.7 recall@5 and 7.8 MRR over the top 10 of queries-holdout.json on the real set, the misses
 *   logged: written blind to the engine, then used as the validation set its settings were chosen on
 *   (a change was kept only when it lowered neither 7.4 nor 7.7), so it no longer measures generalisation;
 * - 7.9 recall@5 and 7.10 MRR over the top 10 of queries-test.json on the real set: a third set,
 *   written blind to the engine once the held-out one came into use for tuning. Only the number of
 *   its misses is logged, never the queries, so that the set stays out of tuning.
 * A query counts as found at rank r when the first of its expected tools (any of them: they are
 * equally right) is the r-th answer.
 */
import path from 'node:path'
import { performance } from 'node:perf_hooks'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { encodeUserToolName, qualifiedName, toWireName } from '../src/naming/names.js'
import { ToolIndex, toolDocument } from '../src/search/index.js'
import { closeHttp, gatewayEnv, http, httpOk, REPO_ROOT, spawnChild, startGateway, TSX_IMPORT, waitLine } from './fixtures/procs.js'
import { loadEvalSet, paddedServers, toolKey } from './fixtures/search/eval-set.js'
import type { EvalQuery, EvalServer, EvalTool } from './fixtures/search/eval-set.js'
import { makeRow, median, percentile, round, timeInterleaved, timeMs } from './stats.js'
import type { BenchContext, Row } from './types.js'

const PADDED_TOOLS = 1000
const REAL = 'evalreal'
const PADDED = 'evalpad'
const COLD_REPS = 7

interface SearchAnswer { tools: Array<{ name: string }>, scores: number[], total: number, unavailable: unknown[] }

/** Starts the fixture servers (the padded set, which holds the real one); returns each server's URL. */
async function startSearchServers (ctx: BenchContext): Promise<Record<string, string>> {
  const child = spawnChild(ctx, {
    name: 'search-servers',
    command: process.execPath,
    args: ['--import', TSX_IMPORT, path.join(REPO_ROOT, 'bench/fixtures/search-servers.ts'), String(PADDED_TOOLS)],
    stdout: 'capture'
  })
  const m = await waitLine(child, /^READY (.*)$/m)
  return (JSON.parse(m[1] as string) as { servers: Record<string, string> }).servers
}

/**
 * Exposed name -> `serverId/tool` for a tenant, from GET /catalog: a tool shared by several
 * servers (create_issue) keeps its natural name on one of them and the qualified name on the
 * others, and the catalog says which server each exposed name belongs to.
 */
async function nameMap (gwUrl: string, userId: string, servers: readonly EvalServer[]): Promise<Map<string, string>> {
  const catalog = await httpOk('GET', `${gwUrl}/catalog?userId=${userId}`) as { tools: Array<{ name: string, source: string }> }
  const byId = new Map(servers.map((s) => [s.id, s]))
  const map = new Map<string, string>()
  for (const row of catalog.tools) {
    const server = byId.get(row.source)
    const names = (t: EvalTool): string[] =>
      [encodeUserToolName(userId, t.name), qualifiedName(row.source, t.name), encodeUserToolName(userId, qualifiedName(row.source, t.name))]
    const tool = server?.tools.find((t) => names(t).some((n) => toWireName(n) === row.name))
    if (tool !== undefined) map.set(row.name, toolKey(row.source, tool.name))
  }
  return map
}

interface Quality { recall5: number, allIn5: number, mrr10: number, misses: string[], unmapped: number, n: number }

/** recall@5 (limit=5) and MRR over the top 10 (limit=10) of every query, through the route. */
type Search = (q: string, limit: number) => Promise<SearchAnswer>

async function quality (search: Search, names: Map<string, string>, queries: readonly EvalQuery[]): Promise<Quality> {
  let found5 = 0
  let allIn5 = 0
  let rr = 0
  let unmapped = 0
  const misses: string[] = []
  const keysOf = (a: SearchAnswer): string[] => a.tools.map((t) => {
    const key = names.get(t.name)
    if (key === undefined) unmapped++
    return key ?? `?${t.name}`
  })
  for (const q of queries) {
    const top5 = keysOf(await search(q.query, 5))
    const top10 = keysOf(await search(q.query, 10))
    if (top5.some((k) => q.expected.includes(k))) found5++
    else misses.push(`"${q.query}" expected ${q.expected.join(' | ')}; got ${top5.join(', ') || '(nothing)'}`)
    if (q.expected.every((k) => top5.includes(k))) allIn5++
    const rank = top10.findIndex((k) => q.expected.includes(k))
    if (rank >= 0) rr += 1 / (rank + 1)
  }
  const n = queries.length
  return { recall5: found5 / n, allIn5: allIn5 / n, mrr10: rr / n, misses, unmapped, n }
}

const gc = (): void => {
  setFlagsFromString('--expose-gc')
  ;(runInNewContext('gc') as () => void)()
}

/** In process: index build time (median of 15) and heap per indexed tool (5 indexes kept alive). */
function inProcess (servers: readonly EvalServer[]): { buildMs: number[], bytesPerTool: number } {
  const docs = servers.flatMap((s) => s.tools.map((t) => toolDocument(t, s.id)))
  const buildMs: number[] = []
  for (let i = 0; i < 20; i++) {
    const t0 = performance.now()
    ToolIndex.buildNow(docs)
    if (i >= 5) buildMs.push(performance.now() - t0)
  }
  gc()
  const before = process.memoryUsage().heapUsed
  const kept = Array.from({ length: 5 }, () => ToolIndex.buildNow(docs))
  gc()
  const after = process.memoryUsage().heapUsed
  const bytesPerTool = (after - before) / (kept.length * docs.length)
  if (kept.some((k) => k.size !== docs.length)) throw new Error('an index lost documents')
  return { buildMs, bytesPerTool }
}

export async function run (ctx: BenchContext): Promise<Row[]> {
  ctx.defer(closeHttp)
  const set = loadEvalSet()
  const padded = paddedServers(PADDED_TOOLS)
  const local = inProcess(padded)

  const urls = await startSearchServers(ctx)
  const gw = await startGateway(ctx, gatewayEnv(ctx, { EGRESS_ALLOW: '127.0.0.1/32' }))
  for (const [userId, servers] of [[REAL, set.servers], [PADDED, padded]] as const) {
    for (const s of servers) await httpOk('PUT', `${gw.url}/users/${userId}/mcp/servers/${s.id}`, { type: 'streamable_http', url: urls[s.id] })
  }
  const ids = (servers: readonly EvalServer[]): string => servers.map((s) => s.id).join(',')
  const listed = async (userId: string, servers: readonly EvalServer[]): Promise<string[]> => {
    const r = await httpOk('GET', `${gw.url}/tools?userId=${userId}&mcp=${ids(servers)}&format=mcp`) as { tools: Array<{ name: string }>, unavailable: unknown[] }
    if (r.unavailable.length > 0) throw new Error(`unavailable servers: ${JSON.stringify(r.unavailable).slice(0, 300)}`)
    return r.tools.map((t) => t.name)
  }
  const realCount = set.servers.reduce((n, s) => n + s.tools.length, 0)
  let listings: string[][] = []
  const first = await timeMs(async () => { listings = [await listed(REAL, set.servers), await listed(PADDED, padded)] })
  ctx.log(`listed ${realCount} + ${PADDED_TOOLS} tools of ${set.servers.length} + ${padded.length} servers in ${round(first)} ms`)
  const realMap = await nameMap(gw.url, REAL, set.servers)
  const padMap = await nameMap(gw.url, PADDED, padded)
  // Every listed name must map to its own tool of the set, or the quality rows would count right answers as wrong.
  const checkMap = (names: readonly string[] | undefined, map: Map<string, string>, want: number): void => {
    const keys = new Set(names?.map((n) => map.get(n)))
    if (names?.length !== want || keys.size !== want || keys.has(undefined)) {
      throw new Error(`listed ${names?.length} tools, ${keys.size} mapped to the set through GET /catalog (want ${want})`)
    }
  }
  checkMap(listings[0], realMap, realCount)
  checkMap(listings[1], padMap, PADDED_TOOLS)

  const searchUrl = (userId: string, allow: string, q: string, limit: number, format = 'mcp'): string =>
    `${gw.url}/tools/search?userId=${userId}&mcp=${allow}&limit=${limit}&format=${format}&q=${encodeURIComponent(q)}`
  const probe = await http('GET', searchUrl(REAL, ids(set.servers), 'create issue', 5))
  if (probe.status !== 200) {
    ctx.log(`GET /tools/search -> ${probe.status}: ${probe.body.slice(0, 200)}; the HTTP rows stay unmeasured`)
    return rows(local, undefined, `GET /tools/search answered ${probe.status} on this build`)
  }
  const search = (userId: string, allow: string, total: number): Search => async (q, limit) => {
    const a = await httpOk('GET', searchUrl(userId, allow, q, limit)) as SearchAnswer
    if (a.unavailable.length > 0) throw new Error(`search: unavailable servers ${JSON.stringify(a.unavailable).slice(0, 300)}`)
    if (a.total !== total) throw new Error(`search over ${a.total} tools, expected ${total}`)
    if (a.tools.length !== a.scores.length || a.tools.length > limit) throw new Error(`search answered ${a.tools.length} tools, ${a.scores.length} scores for limit ${limit}`)
    return a
  }

  const realQ = await quality(search(REAL, ids(set.servers), realCount), realMap, set.queries)
  for (const m of realQ.misses) ctx.log(`miss: ${m}`)
  const padQ = await quality(search(PADDED, ids(padded), PADDED_TOOLS), padMap, set.queries)
  ctx.log(`real set: recall@5 ${round(realQ.recall5)}, MRR@10 ${round(realQ.mrr10)}; padded: recall@5 ${round(padQ.recall5)}, MRR@10 ${round(padQ.mrr10)} (${padQ.misses.length} misses)`)
  const holdQ = await quality(search(REAL, ids(set.servers), realCount), realMap, set.holdout)
  for (const m of holdQ.misses) ctx.log(`held-out miss: ${m}`)
  ctx.log(`held-out: recall@5 ${round(holdQ.recall5)}, MRR@10 ${round(holdQ.mrr10)} (${holdQ.misses.length} misses of ${holdQ.n})`)
  // The test set's misses stay unlogged (the count only): logging them would let them be tuned to.
  const testQ = await quality(search(REAL, ids(set.servers), realCount), realMap, set.test)
  ctx.log(`test set: recall@5 ${round(testQ.recall5)}, MRR@10 ${round(testQ.mrr10)} (${testQ.misses.length} misses of ${testQ.n}, not listed)`)
  const unmapped = realQ.unmapped + padQ.unmapped + holdQ.unmapped + testQ.unmapped
  if (unmapped > 0) ctx.log(`${unmapped} answered names were not found in GET /catalog (counted as wrong)`)

  // 7.1: warm, rotating the eval queries, in the order of the file.
  let next = 0
  const allPadded = ids(padded)
  const warmSearch = async (): Promise<void> => {
    const q = set.queries[next++ % set.queries.length] as EvalQuery
    const r = await http('GET', searchUrl(PADDED, allPadded, q.query, 5, 'openai'))
    if (r.status !== 200) throw new Error(`GET /tools/search -> ${r.status}: ${r.body.slice(0, 300)}`)
  }
  const healthz = async (): Promise<void> => {
    const r = await http('GET', `${gw.url}/healthz`)
    if (r.status !== 200) throw new Error(`healthz ${r.status}`)
  }
  const warm = await timeInterleaved({ search: warmSearch, healthz }, { warmup: 2 * set.queries.length, reps: 2000, signal: ctx.signal })
  ctx.log(`warm: p50 ${round(median(warm.search))} p99 ${round(percentile(warm.search, 99))} ms; healthz p50 ${round(median(warm.healthz))} ms`)

  // 7.2b: an allow-list not searched before (the padded set less one server) has no index yet.
  const cold: number[] = []
  for (let k = 0; k < COLD_REPS && !ctx.signal.aborted; k++) {
    const allow = padded.filter((_, i) => i !== k)
    const cold1 = search(PADDED, ids(allow), PADDED_TOOLS - (padded[k]?.tools.length ?? 0))
    cold.push(await timeMs(() => cold1('create issue', 5)))
  }
  ctx.log(`cold: ${cold.map((x) => round(x)).join(' ')} ms`)
  return rows(local, { warm, cold, realQ, padQ, holdQ, testQ }, '')
}

interface Measured {
  warm: { search: number[], healthz: number[] }
  cold: number[]
  realQ: Quality
  padQ: Quality
  holdQ: Quality
  testQ: Quality
}

function rows (local: ReturnType<typeof inProcess>, m: Measured | undefined, why: string): Row[] {
  const n = loadEvalSet().queries.length
  const q = (x: Quality): string => `${x.n} queries; all expected tools in the top 5: ${round(x.allIn5)}; MRR@10 ${round(x.mrr10)}`
  return [
    makeRow({
      id: '7.1',
      name: `GET /tools/search over ${PADDED_TOOLS} tools (limit=5, format=openai), warm, sequential, rotating ${n} queries: p99`,
      metric: 'p99 ms',
      value: m ? percentile(m.warm.search, 99) : null,
      baseline: m ? percentile(m.warm.healthz, 99) : null,
      target: { on: 'value', op: '<', limit: 5 },
      notes: m ? `p50 ${round(median(m.warm.search))} ms; baseline GET /healthz (p50 ${round(median(m.warm.healthz))}); n=${m.warm.search.length} interleaved` : why
    }),
    makeRow({
      id: '7.2',
      name: `index build of ${PADDED_TOOLS} tools, in process (src/search ToolIndex.buildNow)`,
      metric: 'median ms',
      value: median(local.buildMs),
      baseline: null,
      target: { on: 'value', op: '<', limit: 50 },
      notes: `max ${round(Math.max(...local.buildMs))} ms; n=${local.buildMs.length} after 5 untimed`
    }),
    makeRow({
      id: '7.2b',
      name: 'first search of an allow-list not searched before (the padded set less one server) vs the warm p50 of 7.1, over HTTP',
      metric: 'median ms',
      value: m ? median(m.cold) : null,
      baseline: m ? median(m.warm.search) : null,
      target: null,
      notes: m ? `max ${round(Math.max(...m.cold))} ms; n=${m.cold.length}; includes assembling the listing of that allow-list` : why
    }),
    makeRow({
      id: '7.3',
      name: `heap per indexed tool (${PADDED_TOOLS} tools, 5 indexes kept, heapUsed after GC)`,
      metric: 'bytes',
      value: local.bytesPerTool,
      baseline: null,
      target: null,
      notes: 'in process; the documents themselves are built before and not counted'
    }),
    makeRow({
      id: '7.4',
      name: 'recall@5 on the eval set (350 tools): a query is found when one of its expected tools is in the top 5',
      metric: 'fraction',
      value: m ? m.realQ.recall5 : null,
      baseline: null,
      target: { on: 'value', op: '>=', limit: 0.9 },
      notes: m ? `${q(m.realQ)}; misses logged` : why
    }),
    makeRow({
      id: '7.5',
      name: 'MRR over the top 10 on the eval set (350 tools)',
      metric: 'MRR@10',
      value: m ? m.realQ.mrr10 : null,
      baseline: null,
      target: null,
      notes: m ? `${m.realQ.n} queries; rank of the first expected tool` : why
    }),
    makeRow({
      id: '7.6',
      name: `recall@5 on the eval set padded to ${PADDED_TOOLS} tools`,
      metric: 'fraction',
      value: m ? m.padQ.recall5 : null,
      baseline: null,
      target: null,
      notes: m ? q(m.padQ) : why
    }),
    makeRow({
      id: '7.7',
      name: 'recall@5 on the held-out queries (queries-holdout.json, the validation set the engine was tuned on), eval set (350 tools)',
      metric: 'fraction',
      value: m ? m.holdQ.recall5 : null,
      baseline: null,
      target: { on: 'value', op: '>=', limit: 0.9 },
      notes: m ? `${q(m.holdQ)}; misses logged as held-out misses` : why
    }),
    makeRow({
      id: '7.8',
      name: 'MRR over the top 10 on the held-out queries, eval set (350 tools)',
      metric: 'MRR@10',
      value: m ? m.holdQ.mrr10 : null,
      baseline: null,
      target: null,
      notes: m ? `${m.holdQ.n} queries; rank of the first expected tool` : why
    }),
    makeRow({
      id: '7.9',
      name: 'recall@5 on the test queries (queries-test.json, written blind to the engine), eval set (350 tools)',
      metric: 'fraction',
      value: m ? m.testQ.recall5 : null,
      baseline: null,
      target: { on: 'value', op: '>=', limit: 0.9 },
      notes: m ? `${q(m.testQ)}; ${m.testQ.misses.length} misses, not listed so that the set stays out of tuning` : why
    }),
    makeRow({
      id: '7.10',
      name: 'MRR over the top 10 on the test queries, eval set (350 tools)',
      metric: 'MRR@10',
      value: m ? m.testQ.mrr10 : null,
      baseline: null,
      target: null,
      notes: m ? `${m.testQ.n} queries; rank of the first expected tool` : why
    })
  ]
}
