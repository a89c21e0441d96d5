/**
 * The remote MCP transports the gateway speaks, one row per type (docs/ARCHITECTURE.md#mcp-pool):
 * the only place a transport type is looked up. Each row is a {@link TransportKind} from a file of
 * its own; a new transport is one more file and one more row here (the `satisfies` makes a type
 * in CONNECT_TYPES without a row fail to compile).
 */
import { silentLogger } from '../logger.js'
import { DEFAULT_MAX_MESSAGE_BYTES } from './response-limits.js'
import { ConnectSpecError } from './transport.js'
import type { ConnectSpec, ConnectType, CreateTransportOptions, TransportHandle, TransportKind } from './transport.js'
import { sseTransport, streamableHttpTransport } from './transport-http.js'
import { stdioTransport } from './transport-stdio.js'

const TRANSPORTS = {
  streamable_http: streamableHttpTransport,
  sse: sseTransport,
  stdio: stdioTransport
} as const satisfies Record<ConnectType, TransportKind>

const DEFAULT_STDERR_CAP = 64 * 1024

/** The row of `type`; ConnectSpecError for a type the gateway does not speak (the registry refuses those earlier). */
export function transportKind (type: ConnectType): TransportKind {
  if (!Object.hasOwn(TRANSPORTS, type)) throw new ConnectSpecError(`Unknown MCP transport type: ${String(type)}`)
  return TRANSPORTS[type]
}

/**
 * Builds the SDK client transport for `spec`. Throws ConnectSpecError for a spec that cannot
 * work (missing url or command, non-http URL); the registry validates earlier, this is the
 * last line.
 */
export function createTransport (spec: ConnectSpec, options: CreateTransportOptions = {}): TransportHandle {
  return transportKind(spec.type).create(spec, {
    ...options,
    logger: options.logger ?? silentLogger,
    label: options.label ?? spec.type,
    stderrCapBytes: options.stderrCapBytes ?? DEFAULT_STDERR_CAP,
    limits: options.limits ?? { maxMessageBytes: DEFAULT_MAX_MESSAGE_BYTES }
  })
}
