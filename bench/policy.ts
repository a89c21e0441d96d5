/**
 * Row 16 (policies): the cost of a tool policy on a warm GET /tools. One gateway, two tenants
 * listing the same tools (the eight built-ins and the example functions): one under a policy of
 * 50 patterns (49 deny patterns that match none of them, and allowOnly ['*']), one under none.
 * Sequential warm requests, interleaved between the two; p99 and p50 of each.
 */
import { closeHttp, gatewayEnv, http, httpOk, startGateway } from './fixtures/procs.js'
import { makeRow, percentile, round, timeInterleaved } from './stats.js'
import type { BenchContext, Row } from './types.js'

const REPS = 3000
const FUNCTIONS = '@builtin,calculate,current_time,json_query'

export async function run (ctx: BenchContext): Promise<Row[]> {
  ctx.defer(closeHttp)
  const gw = await startGateway(ctx, gatewayEnv(ctx, { LOAD_EXAMPLES: 'true', RATE_LIMIT_PER_MINUTE: '100000000' }))
  const deny = Array.from({ length: 49 }, (_, i) => i % 2 === 0 ? `nomatch_${i}_*` : `*_absent${i}`)
  await httpOk('PUT', `${gw.url}/users/bench-policy/policy`, { deny, allowOnly: ['*'] })
  const url = (userId: string): string => `${gw.url}/tools?userId=${userId}&functions=${FUNCTIONS}`
  const sizes: Record<string, number> = {}
  for (const user of ['bench-policy', 'bench-none']) {
    const r = await http('GET', url(user))
    const tools = (JSON.parse(r.body) as { tools: unknown[] }).tools.length
    if (r.status !== 200 || tools !== 11) throw new Error(`GET /tools for ${user} -> ${r.status}, ${tools} tools`)
    sizes[user] = r.body.length
  }
  const list = (user: string) => async (): Promise<void> => {
    const r = await http('GET', url(user))
    if (r.status !== 200 || r.body.length !== sizes[user]) throw new Error(`GET /tools for ${user} -> ${r.status}`)
  }
  ctx.log(`${REPS} warm listings each, interleaved`)
  const t = await timeInterleaved({ policy: list('bench-policy'), none: list('bench-none') }, { warmup: 200, reps: REPS, signal: ctx.signal })
  return [makeRow({
    id: '16.3',
    name: 'warm GET /tools (11 tools) under a 50-pattern policy vs no policy',
    metric: 'p99 ms',
    value: percentile(t.policy, 99),
    baseline: percentile(t.none, 99),
    target: null,
    notes: `sequential, ${t.policy.length} interleaved requests each; p50 ${round(percentile(t.policy, 50))} vs ${round(percentile(t.none, 50))} ms; "unchanged within noise" is judged on the ratio`,
    detail: { p50Policy: percentile(t.policy, 50), p50None: percentile(t.none, 50) }
  })]
}
