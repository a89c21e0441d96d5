/**
 * OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG as the SDK's own samplers. `@opentelemetry/sdk-trace`
 * does not read them itself (the environment is read by the SDK setup packages, which bring far
 * more than tracing), so this is the specification's table; its default is `parentbased_always_on`.
 */
import { AlwaysOffSampler, AlwaysOnSampler, ParentBasedSampler, TraceIdRatioBasedSampler } from '@opentelemetry/sdk-trace'
import type { Sampler } from '@opentelemetry/sdk-trace'
import { StartupError } from '../errors.js'

/** The sampler the environment names; a StartupError for a name or ratio it cannot be. */
export function samplerFromEnv (env: Readonly<Record<string, string | undefined>>): Sampler {
  const name = (env.OTEL_TRACES_SAMPLER ?? '').trim().toLowerCase() || 'parentbased_always_on'
  const ratio = (): number => {
    const raw = env.OTEL_TRACES_SAMPLER_ARG
    if (raw === undefined || raw.trim() === '') return 1
    const n = Number(raw)
    if (!Number.isFinite(n) || n < 0 || n > 1) throw new StartupError(`OTEL_TRACES_SAMPLER_ARG must be a ratio between 0 and 1, not '${raw}'`)
    return n
  }
  switch (name) {
    case 'always_on': return new AlwaysOnSampler()
    case 'always_off': return new AlwaysOffSampler()
    case 'traceidratio': return new TraceIdRatioBasedSampler(ratio())
    case 'parentbased_always_on': return new ParentBasedSampler({ root: new AlwaysOnSampler() })
    case 'parentbased_always_off': return new ParentBasedSampler({ root: new AlwaysOffSampler() })
    case 'parentbased_traceidratio': return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio()) })
    default:
      throw new StartupError(`OTEL_TRACES_SAMPLER '${name}' is not supported (always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio)`)
  }
}
