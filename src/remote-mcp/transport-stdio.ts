/**
 * The stdio transport (docs/ARCHITECTURE.md#mcp-pool): the server is a child process the gateway
 * spawns (no shell) with a minimal environment, its stderr capped in the logs, its messages
 * bounded by the SDK's line buffer.
 */
import type { Readable } from 'node:stream'
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/client/stdio'
import type { Logger } from '../logger.js'
import { ConnectSpecError } from './transport.js'
import type { ConnectSpec, TransportHandle, TransportKind } from './transport.js'

/**
 * stdio servers are spoken to in the legacy era (`initialize`). The SDK's `auto` negotiation
 * probes a stdio server on a throw-away sibling process (the same command spawned once more,
 * sent `server/discover`, then killed), so every connect would spawn the server twice (src/remote-mcp/README.md,
 * "Protocol eras"). A 2026-07-28 stdio server still answers `initialize` (the SDK's servers serve both eras).
 */
const STDIO_ERA = 'legacy'

export const stdioTransport: TransportKind = {
  create: (spec, context) => createStdio(spec, context.logger, context.label, context.stderrCapBytes, context.limits.maxMessageBytes),
  // `npx -y pkg` may download the server before it answers initialize.
  slowFirstStart: true,
  // No partial responses: a child that exited before answering never ran the rest of the request.
  closedMeansUnanswered: true,
  onTransportError: () => 'log',
  era: STDIO_ERA
}

function createStdio (spec: ConnectSpec, logger: Logger, label: string, capBytes: number, maxMessageBytes: number): TransportHandle {
  if (spec.command === undefined || spec.command === '') throw new ConnectSpecError('A stdio MCP server needs a command')
  const transport = new StdioClientTransport({
    command: spec.command,
    args: spec.args ?? [],
    // Only the SDK's minimal allow-list (HOME, PATH, ...) plus the server's own config: the
    // gateway's env holds SECRETS_KEY, API keys and Redis credentials.
    env: { ...getDefaultEnvironment(), ...(spec.env ?? {}) },
    // Piped, never inherited: a chatty or hostile child must not write into the gateway's logs
    // unbounded, and an unread pipe would block the child once the kernel buffer fills.
    stderr: 'pipe',
    // One line (message) at most this long: past it the SDK drops the buffer and closes the
    // connection (the child is stopped, its calls fail, the next call starts it again).
    maxBufferSize: maxMessageBytes,
    ...(spec.cwd !== undefined ? { cwd: spec.cwd } : {})
  })
  const stderr = transport.stderr as Readable | null
  if (stderr !== null) drainStderr(stderr, logger, label, capBytes)
  return { transport, type: 'stdio', pid: () => transport.pid, abortListenerCount: () => 0 }
}

/** Logs a child's stderr line by line up to `capBytes`, then keeps draining silently. */
function drainStderr (stream: Readable, logger: Logger, label: string, capBytes: number): void {
  let logged = 0
  let pending = ''
  let capped = false
  const emit = (line: string): void => {
    if (line === '') return
    if (logged >= capBytes) {
      if (!capped) {
        capped = true
        logger.warn({ mcpClient: label, capBytes }, 'stdio MCP server stderr exceeds the cap; further output dropped')
      }
      return
    }
    const room = capBytes - logged
    const text = line.length > room ? line.slice(0, room) : line
    logged += text.length
    logger.info({ mcpClient: label, stderr: text }, 'stdio MCP server stderr')
  }
  stream.setEncoding('utf8')
  stream.on('data', (chunk: string) => {
    if (capped) return
    pending += chunk
    let nl = pending.indexOf('\n')
    while (nl !== -1) {
      emit(pending.slice(0, nl).replace(/\r$/, ''))
      pending = pending.slice(nl + 1)
      nl = pending.indexOf('\n')
    }
    // A child that never writes a newline must not grow this buffer without bound.
    if (pending.length > capBytes) {
      emit(pending)
      pending = ''
    }
  })
  stream.on('end', () => { emit(pending); pending = '' })
  stream.on('error', () => {})
}
