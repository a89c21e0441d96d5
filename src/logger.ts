import { pino } from 'pino'
import type { DestinationStream } from 'pino'

/**
 * The logger every domain module takes: the subset of pino's interface the gateway uses, so
 * Fastify's request logger, a pino instance or a test's recorder all fit.
 */
export interface Logger {
  debug: (obj: Record<string, unknown>, msg?: string) => void
  info: (obj: Record<string, unknown>, msg?: string) => void
  warn: (obj: Record<string, unknown>, msg?: string) => void
  error: (obj: Record<string, unknown>, msg?: string) => void
}

/** A logger that drops everything: the default where logging is optional. */
export const silentLogger: Logger = { debug () {}, info () {}, warn () {}, error () {} }

/** What redacted values are replaced with in log lines. */
export const LOG_CENSOR = '[redacted]'

/** Header names redacted under a top-level `req.headers` (API keys, the cluster token). */
const REQ_HEADERS = ['authorization', 'x-api-key', 'x-gateway-cluster-token'] as const
/** Keys redacted in any top-level value of a line (`*.secretsKey`, `*.apiKeys`). */
const NESTED_KEYS = ['secretsKey', 'apiKeys'] as const

function isObject (v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object'
}

/** A shallow copy that keeps the prototype and non-enumerable own properties (an Error stays an Error for its serializer). */
function copyOf<T extends object> (v: T): T {
  const descriptors: Record<string, PropertyDescriptor> = Object.getOwnPropertyDescriptors(v)
  // In Node 24 (V8 13) an Error's own `stack` is an accessor that reads the error it was made
  // for: copied as it is, it reads the copy and gives undefined. The copy gets the value.
  const stack = descriptors.stack
  if (stack?.get !== undefined) {
    descriptors.stack = { value: (v as { stack?: unknown }).stack, writable: true, enumerable: stack.enumerable ?? false, configurable: true }
  }
  return Object.defineProperties(Object.create(Object.getPrototypeOf(v) as object | null) as T, descriptors)
}

/** `headers` with `names` censored, or undefined when none of them is present. */
function censoredHeaders (headers: unknown, names: readonly string[]): Record<string, unknown> | undefined {
  if (!isObject(headers)) return undefined
  let out: Record<string, unknown> | undefined
  for (const name of names) {
    if (headers[name] === undefined) continue
    out ??= copyOf(headers)
    out[name] = LOG_CENSOR
  }
  return out
}

/** One top-level value with `headers.authorization`, `secretsKey` and `apiKeys` censored, or undefined when it has none. */
function censoredValue (value: unknown, headerNames: readonly string[]): Record<string, unknown> | undefined {
  if (!isObject(value)) return undefined
  let out: Record<string, unknown> | undefined
  const headers = censoredHeaders(value.headers, headerNames)
  if (headers !== undefined) {
    out = copyOf(value)
    out.headers = headers
  }
  for (const key of NESTED_KEYS) {
    if (value[key] === undefined) continue
    out ??= copyOf(value)
    out[key] = LOG_CENSOR
  }
  return out
}

/**
 * Redacts credentials from a log line's object (a pino `formatters.log` / `formatters.bindings`):
 * `req.headers` authorization, x-api-key and x-gateway-cluster-token, `headers.authorization`,
 * and in any top-level value `headers.authorization`, `secretsKey` and `apiKeys`. The line is
 * returned as it is when none is present (almost every line): pino's own `redact` option copied
 * every value of every line through its redactor, a visible part of the CPU per request. Only
 * the values that carry a credential are copied, never the caller's objects changed.
 */
export function redactLogLine (line: Record<string, unknown>): Record<string, unknown> {
  let out: Record<string, unknown> | undefined
  const top = censoredHeaders(line.headers, ['authorization'])
  if (top !== undefined) {
    out = { ...line, headers: top }
  }
  for (const key in line) {
    const value = censoredValue((out ?? line)[key], key === 'req' ? REQ_HEADERS : ['authorization'])
    if (value === undefined) continue
    out ??= { ...line }
    out[key] = value
  }
  return out ?? line
}

/** Bytes of log lines gathered into one write of stdout. */
const LOG_BATCH_BYTES = 4096
/** The longest a log line waits in memory before it is written. */
const LOG_FLUSH_MS = 200

/**
 * The gateway's log output: stdout, its lines gathered into writes of LOG_BATCH_BYTES (about 15
 * request lines), written at the latest LOG_FLUSH_MS after they were logged, and all at once,
 * synchronously, when the process exits (a crash that closeWithGrace reports included). One write
 * per line was the largest cost of a request after the response's own write (the kernel's: 26 of
 * ~100 us per POST /invoke in a profile). What a SIGKILL finds waiting (at most 200 ms of lines) is lost.
 */
export function stdoutLogStream (): DestinationStream {
  const boom = pino.destination({ dest: 1, sync: true, minLength: LOG_BATCH_BYTES })
  // Flushed only when something was logged since: an idle gateway makes no write at all.
  let waiting = false
  setInterval(() => {
    if (!waiting) return
    waiting = false
    boom.flush()
  }, LOG_FLUSH_MS).unref()
  process.once('exit', () => {
    try {
      boom.flushSync()
    } catch {
      // stdout is gone (a closed pipe): nothing can be written any more.
    }
  })
  return {
    write (line: string) {
      waiting = true
      boom.write(line)
    }
  }
}
