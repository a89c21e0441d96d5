import { collectDefaultMetrics, Counter, Gauge, Registry } from 'prom-client'
import type { Metric } from 'prom-client'
import { HTTP_ERROR_CODES, TOOL_ERROR_CODES } from './errors.js'
import type { GatewayStatus, ServiceCounters } from './status.js'
import type { CallEvent } from './routing/call-events.js'
import { TIERS } from './routing/types.js'

/**
 * What the metrics read from the domain at scrape time. Every part is optional so a test
 * app (or an embedder) without built-ins still exposes the rest.
 */
export interface MetricSources {
  status: () => Pick<GatewayStatus, 'globalClients' | 'userClients' | 'connectedClients'> & Partial<Pick<GatewayStatus, 'remoteMcp'>>
  counters: Readonly<ServiceCounters>
  sandbox?: (() => { execs: number, timeouts: number, running: number }) | undefined
  processes?: (() => { spawned: number, running: number }) | undefined
  /** In-flight invocations on this instance, summed over tenants (never per tenant). */
  invocationsInFlight?: (() => number) | undefined
  /** Errors of the rate limiter's Redis connection so far. */
  rateLimitRedisErrors?: (() => number) | undefined
  /** The invocation journal's counts (written, dropped, queued now). */
  journal?: (() => { written: number, dropped: number, queued: number }) | undefined
}

/** One tool call as the HTTP layer saw it. */
export interface InvocationRecord {
  /** The HTTP route pattern: `/invoke`, `/invoke/batch` or `/mcp` (tools/call). */
  endpoint: string
  /** The tier that served the call; undefined when the call never reached a tool. */
  route: string | undefined
  /** `ok`, the tool error code (isError results), or the GW_ code of a refused call. */
  outcome: string
  /** Time spent in the tool (result.durationMs); undefined for refused calls. */
  durationMs: number | undefined
}

export interface GatewayMetrics {
  readonly contentType: string
  recordInvocation: (record: InvocationRecord) => void
  /** One answered call from the gateway's outcome observer, counted under its endpoint (a held call's decision, via `approval`, is not). */
  recordCall: (call: CallEvent) => void
  /** The same number as the x-gateway-overhead-ms header of the response. */
  recordOverhead: (endpoint: string, overheadMs: number) => void
  /** The Prometheus text exposition: the gateway's metrics and the process defaults. */
  render: () => Promise<string>
}

// Label values come from fixed sets only: an unexpected value becomes `other`, so no caller
// input (tool names, userIds, arbitrary paths) can grow the series count.
const KNOWN_TIERS = new Set<string>(TIERS)
const KNOWN_OUTCOMES = new Set<string>(['ok', 'input_required', ...Object.keys(HTTP_ERROR_CODES), ...Object.values(TOOL_ERROR_CODES)])
const KNOWN_ENDPOINTS = new Set(['/invoke', '/invoke/batch', '/mcp', 'script'])
/** The metrics' endpoint label of a call: the route it came through, or `script` for a code-mode script's inner call. */
const ENDPOINT_OF = { invoke: '/invoke', batch: '/invoke/batch', mcp: '/mcp', script: 'script' } as const

/** Tool calls run from milliseconds (built-ins) up to INVOKE_TIMEOUT_MS (11 minutes). */
const INVOKE_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 660]
/** The gateway's own time per request: sub-millisecond when healthy. */
const OVERHEAD_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1]

// Process metrics (CPU, memory, event loop, GC) describe the process, not an app: collected
// once per process, so building many apps (tests) does not stack GC observers and monitors.
let processRegistry: Registry | undefined
function processMetrics (): Registry {
  if (processRegistry === undefined) {
    processRegistry = new Registry()
    collectDefaultMetrics({ register: processRegistry })
  }
  return processRegistry
}

/** A counter that mirrors a monotonic number kept elsewhere (read at scrape time). */
function mirroredCounter (registry: Registry, name: string, help: string, read: () => number | undefined, labels: Record<string, string> = {}): Counter {
  let seen = 0
  return new Counter({
    name,
    help,
    registers: [registry],
    collect () {
      const now = read()
      if (now === undefined) return
      if (now > seen) this.inc(labels, now - seen)
      seen = Math.max(seen, now)
    }
  })
}

/** prom-client's metric JSON, which its Registry renders (the part of its Metric interface a registry reads). */
interface MetricJson {
  name: string
  help: string
  type: 'counter' | 'histogram'
  values: Array<{ labels: Record<string, string | number>, value: number, metricName?: string }>
  aggregator: 'sum'
}

/**
 * A counter or histogram fed on every request: plain numbers per label set, turned into
 * prom-client's metric JSON only at scrape time. prom-client's own `inc`/`observe` validate and
 * hash the labels and look the bucket up by a float-to-string key on every call, a few
 * microseconds per request across the three per-request metrics. Label sets come from closed sets.
 */
class RequestMetric<L extends string> {
  readonly name: string
  readonly help: string
  readonly type: 'counter' | 'histogram'
  readonly aggregator = 'sum' as const
  readonly #labelNames: readonly L[]
  readonly #bounds: readonly number[]
  readonly #series = new Map<string, RequestSeries<L>>()

  constructor (opts: { name: string, help: string, labelNames: readonly L[], buckets?: readonly number[] }) {
    this.name = opts.name
    this.help = opts.help
    this.type = opts.buckets === undefined ? 'counter' : 'histogram'
    this.#labelNames = opts.labelNames
    this.#bounds = opts.buckets ?? []
  }

  /** The series of one label set, made on first use (`labels` is read only then). */
  series (key: string, labels: Record<L, string>): RequestSeries<L> {
    let series = this.#series.get(key)
    if (series === undefined) {
      series = { labels: { ...labels }, count: 0, sum: 0, buckets: new Float64Array(this.#bounds.length) }
      this.#series.set(key, series)
    }
    return series
  }

  /** One observation (a histogram) or one more (a counter: `value` ignored). */
  observe (series: RequestSeries<L>, value: number): void {
    series.count++
    if (this.type === 'counter') return
    series.sum += value
    const bounds = this.#bounds
    for (let i = 0; i < bounds.length; i++) {
      if (value <= (bounds[i] as number)) {
        (series.buckets[i] as number)++
        break
      }
    }
  }

  get (): MetricJson {
    const values: MetricJson['values'] = []
    for (const s of this.#series.values()) {
      const labels: Record<string, string | number> = {}
      for (const name of this.#labelNames) labels[name] = s.labels[name]
      if (this.type === 'counter') {
        values.push({ labels, value: s.count })
        continue
      }
      // As prom-client writes a histogram: cumulative buckets with `le` first, then +Inf, sum and count.
      let acc = 0
      for (let i = 0; i < this.#bounds.length; i++) {
        acc += s.buckets[i] as number
        values.push({ labels: { le: this.#bounds[i] as number, ...labels }, value: acc, metricName: `${this.name}_bucket` })
      }
      values.push({ labels: { le: '+Inf', ...labels }, value: s.count, metricName: `${this.name}_bucket` })
      values.push({ labels, value: s.sum, metricName: `${this.name}_sum` })
      values.push({ labels, value: s.count, metricName: `${this.name}_count` })
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator }
  }
}

interface RequestSeries<L extends string> {
  labels: Record<L, string>
  count: number
  sum: number
  /** Observations per bucket (not cumulative); beyond the last bound only in count. */
  buckets: Float64Array
}

/**
 * The gateway's Prometheus metrics (no Fastify here: the plugin feeds and serves them).
 * Labels are bounded on purpose: no userId, tool name or argument ever becomes a label.
 */
export function createMetrics (sources: MetricSources): GatewayMetrics {
  // Started with the app, not at the first scrape: GC and event-loop observers only see what
  // happens after they are registered, and start-up is when a gateway allocates the most.
  processMetrics()
  const registry = new Registry()

  const invocations = new RequestMetric({
    name: 'gateway_invocations_total',
    help: 'Tool calls by endpoint, serving tier (route; none = refused before a tool) and outcome (ok, input_required, the tool error code, or the GW_ code of a refused call)',
    labelNames: ['endpoint', 'route', 'outcome'] as const
  })
  const invokeDuration = new RequestMetric({
    name: 'gateway_invoke_duration_seconds',
    help: 'Time spent in the tool per call, by serving tier',
    labelNames: ['route'] as const,
    buckets: INVOKE_BUCKETS
  })
  const overhead = new RequestMetric({
    name: 'gateway_overhead_seconds',
    help: 'Time in the gateway outside tools per request (the x-gateway-overhead-ms header), by route pattern',
    labelNames: ['endpoint'] as const,
    buckets: OVERHEAD_BUCKETS
  })
  const guardrails = new RequestMetric({
    name: 'gateway_guardrail_checks_total',
    help: 'Guardrail checks of the tenants\' policies (SPEC 18), by check, side (arguments, result) and outcome (passed, redacted, blocked, flagged)',
    labelNames: ['check', 'on', 'outcome'] as const
  })
  for (const metric of [invocations, invokeDuration, overhead, guardrails]) registry.registerMetric(metric as unknown as Metric)

  const gauge = (name: string, help: string, read: () => Array<[Record<string, string>, number]>, labelNames: string[] = []): Gauge =>
    new Gauge({
      name,
      help,
      labelNames,
      registers: [registry],
      collect () {
        for (const [labels, value] of read()) this.set(labels, value)
      }
    })

  gauge('gateway_mcp_clients', 'Remote MCP clients in the pools, by pool', () => {
    const s = sources.status()
    return [[{ pool: 'global' }, s.globalClients], [{ pool: 'tenant' }, s.userClients]]
  }, ['pool'])
  gauge('gateway_mcp_clients_connected', 'Remote MCP clients with an open connection', () => [[{}, sources.status().connectedClients]])
  mirroredCounter(
    registry,
    'gateway_mcp_connect_failures_total',
    'Remote MCP list or call operations that could not connect to the server',
    () => sources.counters.mcpConnectFailures
  )
  mirroredCounter(
    registry,
    'gateway_mcp_retries_total',
    'Remote MCP tools/call retried once on a fresh connection (read-only or idempotent tools whose call failed in transport before any answer)',
    () => sources.status().remoteMcp?.retries
  )
  mirroredCounter(
    registry,
    'gateway_mcp_breaker_open_total',
    'Times a remote MCP server\'s circuit breaker opened (or reopened after a failed half-open probe)',
    () => sources.status().remoteMcp?.breakerOpens
  )
  // Tenants may register many servers: tenant breakers are only counted per state; a serverId
  // label is given to global servers alone (the operator's, a bounded set).
  gauge('gateway_mcp_breakers', 'Remote MCP circuit breakers that are open or half-open now, by pool and state', () => {
    const counts = new Map<string, number>()
    for (const pool of ['global', 'tenant']) for (const state of ['open', 'half_open']) counts.set(`${pool} ${state}`, 0)
    for (const b of sources.status().remoteMcp?.breakers ?? []) {
      const k = `${b.pool} ${b.state === 'half-open' ? 'half_open' : b.state}`
      if (counts.has(k)) counts.set(k, (counts.get(k) ?? 0) + 1)
    }
    return [...counts].map(([k, n]) => {
      const [pool = '', state = ''] = k.split(' ')
      return [{ pool, state }, n]
    })
  }, ['pool', 'state'])
  const breakerState = new Gauge({
    name: 'gateway_mcp_breaker_state',
    help: 'Circuit breaker of each global remote MCP server that is open, half-open or counting failures (0 closed, 1 half-open, 2 open); tenant servers are only counted in gateway_mcp_breakers',
    labelNames: ['server'] as const,
    registers: [],
    collect () {
      // A breaker that closed is dropped, not left at its last value.
      this.reset()
      for (const b of sources.status().remoteMcp?.breakers ?? []) {
        if (b.pool === 'global') this.set({ server: b.server }, b.state === 'open' ? 2 : b.state === 'half-open' ? 1 : 0)
      }
    }
  })
  registry.registerMetric(breakerState)
  mirroredCounter(
    registry,
    'gateway_registry_unavailable_total',
    'Registry operations that failed because the backend (Redis) was unreachable',
    () => sources.counters.registryUnavailable
  )
  mirroredCounter(
    registry,
    'gateway_rate_limit_redis_errors_total',
    'Errors of the rate limiter\'s Redis connection; while they occur requests are not rate limited',
    () => sources.rateLimitRedisErrors?.() ?? 0
  )

  const sandbox = sources.sandbox
  const processes = sources.processes
  if (sandbox !== undefined) {
    mirroredCounter(registry, 'gateway_sandbox_execs_total', 'bash commands run to completion in the sandbox', () => sandbox().execs)
    mirroredCounter(registry, 'gateway_sandbox_timeouts_total', 'Sandboxed bash commands killed at their timeout', () => sandbox().timeouts)
    gauge('gateway_sandbox_running', 'Sandboxed processes alive now (commands and background processes)', () => [[{}, sandbox().running]])
  }
  if (processes !== undefined) {
    mirroredCounter(registry, 'gateway_background_processes_started_total', 'Background processes started (bash action start)', () => processes().spawned)
    gauge('gateway_background_processes_running', 'Background processes running now', () => [[{}, processes().running]])
  }
  const journal = sources.journal
  if (journal !== undefined) {
    mirroredCounter(registry, 'gateway_journal_written_total', 'Invocation journal entries written to its store (Redis or memory)', () => journal().written)
    mirroredCounter(
      registry,
      'gateway_journal_dropped_total',
      'Invocation journal entries given up: the write queue was full, or the store (Redis) was unreachable or failed; the calls themselves were unaffected',
      () => journal().dropped
    )
    gauge('gateway_journal_queue', 'Invocation journal entries waiting to be written', () => [[{}, journal().queued]])
  }
  const inFlight = sources.invocationsInFlight
  if (inFlight !== undefined) {
    gauge('gateway_invocations_in_flight', 'Tool invocations in progress on this instance (all tenants)', () => [[{}, inFlight()]])
  }

  // The invocation series by endpoint, route and outcome, looked up level by level: a key string
  // joined per call (and hashed whole by the Map) cost more than the rest of the count.
  const invocationSeries = new Map<string, Map<string, Map<string, RequestSeries<'endpoint' | 'route' | 'outcome'>>>>()
  const invocationSeriesOf = (endpoint: string, route: string, outcome: string): RequestSeries<'endpoint' | 'route' | 'outcome'> => {
    let byRoute = invocationSeries.get(endpoint)
    if (byRoute === undefined) invocationSeries.set(endpoint, byRoute = new Map())
    let byOutcome = byRoute.get(route)
    if (byOutcome === undefined) byRoute.set(route, byOutcome = new Map())
    let series = byOutcome.get(outcome)
    if (series === undefined) {
      series = invocations.series(`${endpoint} ${route} ${outcome}`, { endpoint, route, outcome })
      byOutcome.set(outcome, series)
    }
    return series
  }

  const count = (rawEndpoint: string, rawRoute: string | undefined, rawOutcome: string, durationMs: number | undefined): void => {
    const route = rawRoute !== undefined && KNOWN_TIERS.has(rawRoute) ? rawRoute : 'none'
    const endpoint = KNOWN_ENDPOINTS.has(rawEndpoint) ? rawEndpoint : 'other'
    const outcome = KNOWN_OUTCOMES.has(rawOutcome) ? rawOutcome : 'other'
    invocations.observe(invocationSeriesOf(endpoint, route, outcome), 1)
    if (durationMs !== undefined && route !== 'none') {
      invokeDuration.observe(invokeDuration.series(route, { route }), durationMs / 1000)
    }
  }

  return {
    contentType: registry.contentType,
    recordInvocation (r) {
      count(r.endpoint, r.route, r.outcome, r.durationMs)
    },
    recordCall (call) {
      if (call.via === 'approval') return
      const endpoint = ENDPOINT_OF[call.via]
      const o = call.outcome
      if (!o.ok) {
        count(endpoint, undefined, o.error.code, undefined)
      } else if (call.end === 'held' && call.via !== 'mcp') {
        // POST /invoke's 202 and a batch's pending entry: not ok, nothing ran. Over /mcp the held
        // call is a tools/call result like any other (its tier, GW_APPROVAL_PENDING).
        count(endpoint, undefined, 'GW_APPROVAL_PENDING', undefined)
      } else {
        const r = o.result
        // A round whose MCP server asked for input is neither ok nor an error.
        count(endpoint, r.route, r.status === 'input_required' ? 'input_required' : r.isError ? (r.error?.code ?? 'other') : 'ok', r.durationMs)
        for (const g of r.guardrails ?? []) {
          guardrails.observe(guardrails.series(`${g.check}|${g.on}|${g.outcome}`, { check: g.check, on: g.on, outcome: g.outcome }), 1)
        }
      }
    },
    recordOverhead (endpoint, overheadMs) {
      overhead.observe(overhead.series(endpoint, { endpoint }), overheadMs / 1000)
    },
    render: async () => await Registry.merge([processMetrics(), registry]).metrics()
  }
}
