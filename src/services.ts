import { fileURLToPath } from 'node:url'
import { createBuiltins } from './builtin/index.js'
import type { Builtins } from './builtin/index.js'
import type { Config } from './config.js'
import { Gateway } from './gateway.js'
import { FunctionSource } from './functions/source.js'
import { loadFunctions } from './functions/loader.js'
import { LocalMcpSource } from './local-mcp/source.js'
import { loadLocalMcpServices } from './local-mcp/loader.js'
import { RemoteMcpSource } from './remote-mcp/source.js'
import type { McpConnector, ServerDirectory } from './remote-mcp/source.js'
import { ToolRouter } from './tools/router.js'
import type { ToolSource } from './tools/source.js'

/** The logger the domain uses (pino's interface, so Fastify's logger fits). */
export interface Logger {
  info: (obj: unknown, msg?: string) => void
  warn: (obj: unknown, msg?: string) => void
  error: (obj: unknown, msg?: string) => void
  debug: (obj: unknown, msg?: string) => void
}

/** Everything the HTTP layer needs, built once per process from the config. */
export interface Services {
  config: Config
  gateway: Gateway
  router: ToolRouter
  functions: FunctionSource
  localMcp: LocalMcpSource
  /** Tier 1 internals (sandbox, processes), absent when a test supplies its own built-in source. */
  builtins: Builtins | undefined
  /** Closes every resource (MCP clients, processes, Redis) within a bounded time. */
  close: () => Promise<void>
}

/** Parts tests (or embedders) may supply instead of the defaults built from the config. */
export interface ServiceOverrides {
  builtin?: ToolSource
  directory?: ServerDirectory
  connector?: McpConnector
}

const EXAMPLES = {
  functions: fileURLToPath(new URL('../examples/functions', import.meta.url)),
  mcpServices: fileURLToPath(new URL('../examples/mcp-services', import.meta.url))
}

/** Start-up discovery and wiring (SPEC 1 "scan"): throws DiscoveryError / ConfigError to stop start-up. */
export async function createServices (config: Config, logger: Logger, overrides: ServiceOverrides = {}): Promise<Services> {
  const closers: Array<() => Promise<void>> = []
  const functionDirs = [...(config.loadExamples ? [EXAMPLES.functions] : []), ...config.functionsDirs]
  const serviceDirs = [...(config.loadExamples ? [EXAMPLES.mcpServices] : []), ...config.mcpServicesDirs]

  const functions = new FunctionSource(await loadFunctions(functionDirs), { defaultTimeoutMs: config.functionTimeoutMs })
  const localMcp = new LocalMcpSource(
    await loadLocalMcpServices(serviceDirs, { listTimeoutMs: config.mcpListTimeoutMs }),
    { callTimeoutMs: config.functionTimeoutMs }
  )
  closers.push(async () => await localMcp.close())

  let builtin = overrides.builtin
  let builtins: Builtins | undefined
  if (!builtin) {
    builtins = await createBuiltins(config, logger)
    closers.push(async () => await builtins?.close())
    builtin = builtins.source
  }

  const remoteOpts = { listDeadlineMs: config.mcpListTimeoutMs, callTimeoutMs: config.mcpCallTimeoutMs }
  const sources: Partial<Record<string, ToolSource>> = {
    builtin,
    local_mcp: localMcp,
    function: functions
  }
  if (overrides.directory && overrides.connector) {
    sources.user_mcp = new RemoteMcpSource('user_mcp', overrides.directory, overrides.connector, remoteOpts)
    sources.global_mcp = new RemoteMcpSource('global_mcp', overrides.directory, overrides.connector, remoteOpts)
  }

  const router = new ToolRouter({ sources, outputMaxChars: config.outputMaxChars })
  const gateway = new Gateway(config, router)
  logger.info({ functions: functions.size, localMcpTools: localMcp.size, localMcpServices: localMcp.serviceNames }, 'tools discovered')

  return {
    config,
    gateway,
    router,
    functions,
    localMcp,
    builtins,
    close: async () => {
      for (const close of closers.reverse()) {
        await close().catch((err: unknown) => logger.error({ err }, 'error while closing'))
      }
    }
  }
}
