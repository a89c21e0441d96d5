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
