import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js'
import type { Tool } from '@modelcontextprotocol/sdk/types.js'
import { isReservedToolName } from '../naming/builtin-names.js'
import { DiscoveryError, importModule, listModuleFiles } from '../discovery/modules.js'
import { apiFunctionName, parseUserToolName } from '../naming/names.js'
import { VERSION } from '../version.js'
import type { LocalMcpServiceModule, McpServerLike } from './define.js'

const SERVICE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/

export interface LocalMcpService {
  name: string
  file: string
  client: Client
  server: McpServerLike
  tools: Tool[]
}

export interface LocalMcpTool {
  /** apiFunctionName(service, tool). */
  exposedName: string
  service: LocalMcpService
  tool: Tool
}

function looksLikeService (value: unknown): value is LocalMcpServiceModule {
  if (value === null || typeof value !== 'object') return false
  const v = value as Record<string, unknown>
  return typeof v.name === 'string' && (typeof v.server === 'function' || (typeof v.server === 'object' && v.server !== null))
}

/**
 * Discovers local MCP services (tier 3: docs/ARCHITECTURE.md#tiers), connects each in-process and lists its tools
 * once. Two tools producing the same exposed name, a name that would be a built-in, or a
 * broken module stop start-up with every problem named.
 */
export async function loadLocalMcpServices (
  dirs: readonly string[],
  opts: { listTimeoutMs: number }
): Promise<{ services: LocalMcpService[], tools: LocalMcpTool[] }> {
  const { files, problems } = await listModuleFiles(dirs)
  const services: LocalMcpService[] = []
  const tools: LocalMcpTool[] = []
  const serviceNames = new Map<string, string>()
  const exposed = new Map<string, string>()
  for (const file of files) {
    const imported = await importModule(file)
    if (!imported.ok) {
      problems.push(imported.problem)
      continue
    }
    const candidates = [...new Set(Object.values(imported.module).filter(looksLikeService))]
    if (candidates.length === 0) {
      problems.push(`${file}: exports no MCP service ({ name, server })`)
      continue
    }
    for (const def of candidates) {
      if (!SERVICE_NAME.test(def.name)) {
        problems.push(`${file}: service name '${def.name}' must be 1-64 chars of letters, digits, '-', '_' or '.'`)
        continue
      }
      const previous = serviceNames.get(def.name)
      if (previous !== undefined) {
        problems.push(`duplicate MCP service name '${def.name}' in ${previous} and ${file}`)
        continue
      }
      serviceNames.set(def.name, file)
      let service: LocalMcpService
      try {
        service = await connectService(def, file, opts.listTimeoutMs)
      } catch (err) {
        problems.push(`${file}: service '${def.name}' failed to start (${(err as Error).message})`)
        continue
      }
      services.push(service)
      for (const tool of service.tools) {
        const name = apiFunctionName(service.name, tool.name)
        const clash = exposed.get(name)
        if (clash !== undefined) {
          problems.push(`local MCP tool name '${name}' produced by both ${clash} and ${file} (${service.name}/${tool.name})`)
          continue
        }
        if (isReservedToolName(name) || parseUserToolName(name)) {
          problems.push(`${file}: tool '${tool.name}' of service '${service.name}' maps to the reserved name '${name}'`)
          continue
        }
        exposed.set(name, file)
        tools.push({ exposedName: name, service, tool })
      }
    }
  }
  if (problems.length > 0) {
    await Promise.allSettled(services.map(async (s) => await closeService(s)))
    throw new DiscoveryError('Local MCP services could not be loaded', problems)
  }
  return { services, tools }
}

async function connectService (def: LocalMcpServiceModule, file: string, timeoutMs: number): Promise<LocalMcpService> {
  const server = typeof def.server === 'function' ? await def.server() : def.server
  if (typeof server?.connect !== 'function') throw new Error('server is not an MCP server (no connect())')
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair()
  await server.connect(serverSide)
  const client = new Client({ name: 'tool-gateway', version: VERSION })
  await client.connect(clientSide, { timeout: timeoutMs })
  const tools: Tool[] = []
  let cursor: string | undefined
  do {
    const page = await client.listTools(cursor ? { cursor } : undefined, { timeout: timeoutMs })
    tools.push(...page.tools)
    cursor = page.nextCursor
  } while (cursor)
  return { name: def.name, file, client, server, tools }
}

export async function closeService (service: LocalMcpService): Promise<void> {
  await service.client.close().catch(() => {})
  await service.server.close().catch(() => {})
}
