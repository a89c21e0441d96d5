/**
 * Stdio MCP fixture on the SDK v2 (`serveStdio`): serves both protocol eras, the opening
 * exchange choosing (`initialize` for the legacy ones, a 2026-07-28 request with its `_meta`
 * envelope otherwise). Tool `echo {text}` -> `"{marker}:{text}"`. With FIXTURE_LOG set (through
 * the server config's env), every line read from stdin is appended to that file, so a test can
 * see which era a client spoke.
 *
 * Run: `node --import tsx scripts/lib/mcp-fixtures/stdio-modern.ts [marker]`. Exits when stdin ends.
 */
import { appendFileSync } from 'node:fs'
import { McpServer, fromJsonSchema } from '@modelcontextprotocol/server'
import { serveStdio } from '@modelcontextprotocol/server/stdio'

const marker = process.argv[2] ?? 'stdio-modern'
const log = process.env.FIXTURE_LOG
if (log !== undefined) process.stdin.on('data', (chunk: Buffer) => { appendFileSync(log, chunk) })
process.stdin.on('end', () => process.exit(0))

type JsonSchema = Parameters<typeof fromJsonSchema>[0]
const TEXT = { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] } as unknown as JsonSchema

serveStdio(() => {
  const server = new McpServer({ name: `fixture-${marker}`, version: '1.0.0' }, { capabilities: { tools: {} } })
  server.registerTool('echo', { description: 'Echoes text', inputSchema: fromJsonSchema<{ text: string }>(TEXT) },
    async ({ text }) => ({ content: [{ type: 'text', text: `${marker}:${text}` }] }))
  return server
})
