/**
 * Tracing on: the OpenTelemetry trace SDK (src/tracing/README.md). Instance-scoped: nothing is
 * registered globally (no global tracer provider, context manager or propagator), so two gateways
 * in one process (tests, embedders) never see each other's spans, and a library's own
 * instrumentation is not switched on behind the operator's back.
 */
import type { IncomingHttpHeaders } from 'node:http'
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api'
import type { Context, Span, TextMapGetter, TextMapSetter, Tracer } from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { W3CTraceContextPropagator } from '@opentelemetry/core'
import { BatchSpanProcessor, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace'
import type { Sampler, SpanExporter, SpanProcessor } from '@opentelemetry/sdk-trace'
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources'
import { OTLPTraceExporter as OtlpHttpJsonExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { OTLPTraceExporter as OtlpProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto'
import { StartupError } from '../errors.js'
import { VERSION } from '../version.js'
import { samplerFromEnv } from './sampler.js'
import { outcomeCode } from './tracing.js'
import type { RequestSpan, TracedCall, TracedOutcome, Tracing, UpstreamTarget } from './tracing.js'

type Env = Readonly<Record<string, string | undefined>>

const HEADER_GETTER: TextMapGetter<IncomingHttpHeaders> = {
  keys: (carrier) => Object.keys(carrier),
  get: (carrier, key) => carrier[key]
}
const RECORD_SETTER: TextMapSetter<Record<string, unknown>> = {
  set: (carrier, key, value) => { carrier[key] = value }
}

/** The server span of one request and the context it is active in. */
class SdkRequestSpan implements RequestSpan {
  #ended = false
  constructor (readonly span: Span, readonly context: Context) {}

  end (statusCode: number | undefined): void {
    if (this.#ended) return
    this.#ended = true
    if (statusCode !== undefined) {
      this.span.setAttribute('http.response.status_code', statusCode)
      if (statusCode >= 500) {
        this.span.setAttribute('error.type', String(statusCode))
        this.span.setStatus({ code: SpanStatusCode.ERROR })
      }
    } else {
      // The client went away before an answer.
      this.span.setAttribute('error.type', 'aborted')
    }
    this.span.end()
  }
}

/** What the SDK tracing is built with beyond the environment (tests: an in-memory exporter, exported at once). */
export interface SdkTracingOptions {
  exporter?: SpanExporter
}

/** Tracing on (index.ts createTracing decided): the sampler, processor and exporter the environment names. */
export function sdkTracing (env: Env, opts: SdkTracingOptions): Tracing {
  const sampler = samplerFromEnv(env)
  const exporter = opts.exporter ?? otlpExporter(env)
  return new SdkTracing(processorFor(exporter, env, opts.exporter === undefined), sampler)
}

function otlpExporter (env: Env): SpanExporter {
  const protocol = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL ?? '').trim() || 'http/protobuf'
  if (protocol === 'http/protobuf') return new OtlpProtobufExporter()
  if (protocol === 'http/json') return new OtlpHttpJsonExporter()
  throw new StartupError(`OTEL_EXPORTER_OTLP_PROTOCOL '${protocol}' is not supported: http/protobuf (default) or http/json`)
}

class SdkTracing implements Tracing {
  readonly enabled = true
  readonly #provider: TracerProvider
  readonly #tracer: Tracer
  readonly #contexts = new AsyncLocalStorageContextManager()
  readonly #propagator = new W3CTraceContextPropagator()

  constructor (processor: SpanProcessor, sampler: Sampler) {
    const resource = defaultResource()
      .merge(resourceFromAttributes({ 'service.name': 'tool-gateway', 'service.version': VERSION }))
      // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win over the defaults above.
      .merge(detectResources({ detectors: [envDetector] }))
    this.#provider = new TracerProvider({ resource, spanProcessors: [processor], sampler })
    this.#tracer = this.#provider.getTracer('tool-gateway', VERSION)
    this.#contexts.enable()
  }

  startRequest (method: string, route: string | undefined, headers: IncomingHttpHeaders): RequestSpan {
    const parent = this.#propagator.extract(ROOT_CONTEXT, headers, HEADER_GETTER)
    // Only the route's pattern, never the path: a path holds ids, and a task handle in one is a bearer capability.
    const attributes: Record<string, string> = { 'http.request.method': method }
    if (route !== undefined) attributes['http.route'] = route
    const span = this.#tracer.startSpan(route === undefined ? method : `${method} ${route}`, { kind: SpanKind.SERVER, attributes }, parent)
    return new SdkRequestSpan(span, trace.setSpan(parent, span))
  }

  within<T>(request: RequestSpan, fn: () => T): T {
    return request instanceof SdkRequestSpan ? this.#contexts.with(request.context, fn) : fn()
  }

  async toolCall<T extends TracedOutcome>(call: TracedCall, run: () => Promise<T>): Promise<T> {
    const parent = this.#contexts.active()
    const span = this.#tracer.startSpan(`execute_tool ${call.name}`, {
      kind: SpanKind.INTERNAL,
      attributes: { 'gen_ai.operation.name': 'execute_tool', 'gateway.tool.name': call.name, 'gateway.call_id': call.callId, 'gateway.via': call.via }
    }, parent)
    try {
      const outcome = await this.#contexts.with(trace.setSpan(parent, span), run)
      const code = outcomeCode(outcome)
      span.setAttribute('gateway.outcome', code)
      if (code !== 'ok' && code !== 'input_required' && code !== 'GW_APPROVAL_PENDING') span.setStatus({ code: SpanStatusCode.ERROR })
      return outcome
    } catch (err) {
      // A bug (expected failures are outcomes): its kind only, never its message.
      span.setAttribute('gateway.outcome', 'GW_INTERNAL')
      span.setAttribute('error.type', errorType(err))
      span.setStatus({ code: SpanStatusCode.ERROR })
      throw err
    } finally {
      if (call.route !== undefined) span.setAttribute('gateway.tier', call.route)
      if (call.userId !== undefined) span.setAttribute('gateway.tenant', call.userId)
      span.end()
    }
  }

  async upstream<T>(target: UpstreamTarget, params: Record<string, unknown> | undefined, run: () => Promise<T>): Promise<T> {
    const parent = this.#contexts.active()
    const attributes: Record<string, string> = { 'mcp.method.name': target.method, 'gateway.server_id': target.serverId }
    if (target.target !== undefined) attributes['gen_ai.tool.name'] = target.target
    const name = target.target === undefined ? target.method : `${target.method} ${target.target}`
    const span = this.#tracer.startSpan(name, { kind: SpanKind.CLIENT, attributes }, parent)
    const ctx = trace.setSpan(parent, span)
    if (params !== undefined) {
      // The W3C trace context in the request's _meta (traceparent, tracestate), beside what is there.
      const meta: Record<string, unknown> = { ...(params._meta as Record<string, unknown> | undefined) }
      this.#propagator.inject(ctx, meta, RECORD_SETTER)
      params._meta = meta
    }
    try {
      return await this.#contexts.with(ctx, run)
    } catch (err) {
      span.setAttribute('error.type', errorType(err))
      span.setStatus({ code: SpanStatusCode.ERROR })
      throw err
    } finally {
      span.end()
    }
  }

  inject (headers: Record<string, string>): void {
    this.#propagator.inject(this.#contexts.active(), headers, RECORD_SETTER)
  }

  async shutdown (): Promise<void> {
    try {
      await this.#provider.shutdown()
    } finally {
      this.#contexts.disable()
    }
  }
}

/** An error's stable code (GW_..., UND_ERR_...) or its class name: never its message. */
function errorType (err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code
  if (typeof code === 'string' && /^[A-Za-z0-9_.-]{1,64}$/.test(code)) return code
  return err instanceof Error ? err.name : 'unknown'
}

/** The span processor: batched to the exporter (OTEL_BSP_* honoured), or each span at once for a test's exporter. */
function processorFor (exporter: SpanExporter, env: Env, batched: boolean): SpanProcessor {
  if (!batched) return new SimpleSpanProcessor({ exporter })
  const num = (name: string): number | undefined => {
    const raw = env[name]
    const n = raw === undefined || raw.trim() === '' ? NaN : Number(raw)
    return Number.isFinite(n) && n >= 0 ? n : undefined
  }
  const options = {
    exporter,
    scheduledDelayMillis: num('OTEL_BSP_SCHEDULE_DELAY'),
    exportTimeoutMillis: num('OTEL_BSP_EXPORT_TIMEOUT'),
    maxQueueSize: num('OTEL_BSP_MAX_QUEUE_SIZE'),
    maxExportBatchSize: num('OTEL_BSP_MAX_EXPORT_BATCH_SIZE')
  }
  return new BatchSpanProcessor(Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) as typeof options & { exporter: SpanExporter })
}
