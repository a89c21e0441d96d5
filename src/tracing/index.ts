/**
 * OpenTelemetry tracing (SPEC 18, src/tracing/README.md): `createTracing(env)` is {@link NO_TRACING}
 * unless an OTLP endpoint is configured, so the gateway pays nothing for it by default; the SDK
 * itself (sdk.ts) is loaded only when tracing is on.
 */
import type { SdkTracingOptions } from './sdk.js'
import { NO_TRACING } from './tracing.js'
import type { Tracing } from './tracing.js'

export { NO_TRACING }
export type { RequestSpan, Tracing } from './tracing.js'

/**
 * Tracing as the environment configures it (the standard OTEL_* variables). On only when
 * OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set (or a test passes its
 * exporter), and neither OTEL_SDK_DISABLED=true nor OTEL_TRACES_EXPORTER=none says otherwise. The
 * exporter reads the endpoint, OTEL_EXPORTER_OTLP_(TRACES_)HEADERS, _TIMEOUT and _COMPRESSION from
 * process.env itself (the SDK's own reading); OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL picks it:
 * `http/protobuf` (default) or `http/json`. A value it cannot honour (grpc, an unknown sampler)
 * is a StartupError naming the variable.
 */
export async function createTracing (env: Readonly<Record<string, string | undefined>>, opts: SdkTracingOptions = {}): Promise<Tracing> {
  const set = (name: string): boolean => (env[name] ?? '').trim() !== ''
  if ((env.OTEL_SDK_DISABLED ?? '').trim().toLowerCase() === 'true') return NO_TRACING
  if ((env.OTEL_TRACES_EXPORTER ?? '').trim().toLowerCase() === 'none') return NO_TRACING
  if (opts.exporter === undefined && !set('OTEL_EXPORTER_OTLP_ENDPOINT') && !set('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT')) return NO_TRACING
  const { sdkTracing } = await import('./sdk.js')
  return sdkTracing(env, opts)
}
