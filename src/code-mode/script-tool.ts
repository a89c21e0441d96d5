import { randomBytes } from 'node:crypto'
import { existsSync } from 'node:fs'
import { chmod, chown, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import type { MetaCall, MetaTools } from '../routing/meta.js'
import type { ListedTool } from '../routing/router.js'
import type { CatalogEntry } from '../routing/source.js'
import type { CallContext, ToolFailureReason, ToolOutcome } from '../routing/types.js'
import { CallSocket } from './call-socket.js'
import type { InnerAnswer, InnerCall } from './call-socket.js'
import { apiTool, DEFAULT_SCRIPT_TIMEOUT_MS, RUN_TOOLS_SCRIPT, RUN_TOOLS_SCRIPT_ENTRY, scriptableTools } from './script-entry.js'
import { scriptOutcome } from './script-result.js'
import type { ScriptRun } from './script-result.js'
import { pythonApi } from './typed-api.js'

/** The client library and runners, bound read-only into each script's sandbox. */
const RUNTIME_DIR = fileURLToPath(new URL('./runtime/', import.meta.url))

/** What a script's program runs in: the call's workspace in the tenant's sandbox (the built-ins' host, builtin/scripts.ts). */
export interface ScriptWorkspace {
  /** The host uid/gid the sandbox runs as: the socket and token are theirs alone. */
  readonly owner: { uid: number, gid: number } | undefined
  /** The most a command may run here (the workspace's commandTimeoutMs ceiling). */
  readonly timeoutCeilingMs: number
  /** Runs `command` (sh -c) in the workspace's sandbox with `binds` bound read-only. */
  exec: (req: { command: string, binds: readonly string[], timeoutMs: number, signal: AbortSignal }) => Promise<ScriptRun>
}

/** Opens the call's workspace (its tenant, workspaceId or root, limits); throws a ToolError-like error when it cannot. */
export type ScriptHost = (ctx: CallContext) => Promise<ScriptWorkspace>

/** Runs one inner call through the gateway as the script's call (allow-list, tenancy, policy, approvals, journal). */
export type InnerInvoke = (call: InnerCall, parent: MetaCall, signal: AbortSignal) => Promise<InnerAnswer>

/** The listing a script's calls go through: the same as GET /tools for the call's allow-list, tenant and policy. */
export type ScriptListing = (parent: MetaCall) => Promise<readonly ListedTool[]>

export interface ScriptToolOptions {
  host: ScriptHost | undefined
  invoke: InnerInvoke
  listing: ScriptListing
  /** Counts an inner call against the tenant's rate limit; the refusal's message when it is over. */
  admit?: (parent: MetaCall) => Promise<string | undefined>
  /** CODE_MODE_MAX_CALLS. */
  maxCalls: number
  /** Inner calls at once per script. */
  concurrency?: number
  /** Where the calls' directories go (a private one under the OS temp dir by default). */
  runDir?: string
  /** The runners' folder (src/code-mode/runtime, copied into dist by `npm run build`). */
  runtimeDir?: string
}

/** Bounds of a script's socket (call-socket.ts). */
const SOCKET_LIMITS = { maxFrameBytes: 4 * 1024 * 1024, maxConnections: 4, maxUnreadBytes: 8 * 1024 * 1024 } as const
/** Time kept back from the call's own deadline, so the script's answer is made before the call's deadline ends it. */
const ANSWER_MARGIN_MS = 500

const LANGUAGES = {
  javascript: { file: 'script.js', runner: 'runner.mjs', command: (runner: string, dir: string) => `exec node ${quote(runner)} ${quote(dir)}` },
  python: { file: 'script.py', runner: 'runner.py', command: (runner: string, dir: string) => `exec python3 -I -B ${quote(runner)} ${quote(dir)}` }
} as const

/**
 * `run_tools_script` (SPEC 19, routing/meta.ts): runs the model's program in the call's workspace,
 * in the tenant's sandbox, with a client library that calls the tools over a Unix socket bound
 * into that sandbox alone (call-socket.ts). Every inner call goes through the gateway as the
 * script's call would (its allow-list, tenant, policy, approvals, rate limit, journal with the
 * parent's callId). A script has no allow-list of its own: without `allow` it is refused.
 */
export class ScriptTool implements MetaTools {
  readonly #opts: ScriptToolOptions
  readonly #runtime: string
  /** Why scripts cannot run in this build (its runners are missing), checked once. */
  readonly #missing: string | undefined
  #runDir: Promise<string> | undefined

  constructor (opts: ScriptToolOptions) {
    this.#opts = opts
    this.#runtime = opts.runtimeDir ?? RUNTIME_DIR
    const absent = Object.values(LANGUAGES).map((l) => l.runner).filter((f) => !existsSync(path.join(this.#runtime, f)))
    this.#missing = absent.length === 0
      ? undefined
      : `run_tools_script cannot run in this build: its runners (${absent.join(', ')}) are missing from ${this.#runtime} ` +
        '(a build must copy src/code-mode/runtime, as `npm run build` does)'
  }

  resolve (name: string): CatalogEntry | undefined {
    return name === RUN_TOOLS_SCRIPT ? RUN_TOOLS_SCRIPT_ENTRY : undefined
  }

  async call (_entry: CatalogEntry, args: Record<string, unknown>, req: MetaCall): Promise<ToolOutcome> {
    if (req.allow === undefined) {
      const message = 'run_tools_script calls the request\'s allow-list: call it with `allow` (the functions and mcp of the listing)'
      return { ok: false, reason: 'tool-error', message }
    }
    if (this.#missing !== undefined) return { ok: false, reason: 'tool-error', message: this.#missing }
    if (this.#opts.host === undefined) {
      return { ok: false, reason: 'tool-error', message: 'run_tools_script needs the built-in tools\' sandbox, which this gateway does not run' }
    }
    const language = args.language as keyof typeof LANGUAGES
    let workspace: ScriptWorkspace
    try {
      workspace = await this.#opts.host(req.ctx)
    } catch (err) {
      return toolFailure(err)
    }
    const requested = typeof args.timeoutMs === 'number' ? args.timeoutMs : DEFAULT_SCRIPT_TIMEOUT_MS
    const timeoutMs = Math.max(100, Math.min(requested, workspace.timeoutCeilingMs, req.ctx.timeoutMs - ANSWER_MARGIN_MS))
    const listed = scriptableTools(await this.#opts.listing(req))
    const names = scriptNames(listed)
    const dir = await mkdtemp(path.join(await this.#ensureRunDir(), 'c-'))
    const token = randomBytes(32).toString('base64url')
    let socket: CallSocket | undefined
    const started = performance.now()
    try {
      await chmod(dir, 0o711)
      await this.#writeCallFiles(dir, workspace.owner, { token, language, code: String(args.code), tools: listed })
      const abort = new AbortController()
      const signal = AbortSignal.any([req.signal, abort.signal])
      socket = await CallSocket.listen({
        path: path.join(dir, 'tools.sock'),
        token,
        owner: workspace.owner,
        maxCalls: this.#opts.maxCalls,
        concurrency: this.#opts.concurrency ?? 4,
        ...SOCKET_LIMITS,
        call: async (inner, innerSignal) =>
          await this.#innerCall({ ...inner, name: names.get(inner.name) ?? inner.name }, req, AbortSignal.any([signal, innerSignal]))
      })
      let run: ScriptRun
      try {
        const lang = LANGUAGES[language]
        run = await workspace.exec({ command: lang.command(path.join(this.#runtime, lang.runner), dir), binds: [this.#runtime, dir], timeoutMs, signal })
      } catch (err) {
        return toolFailure(err)
      }
      // Its answer may still be in the socket when the exit is seen.
      if (socket.end === undefined) await socket.drained(1000)
      abort.abort()
      return scriptOutcome({ run, socket, timeoutMs, durationMs: performance.now() - started, language })
    } finally {
      await socket?.close()
      await rm(dir, { recursive: true, force: true })
    }
  }

  async #innerCall (inner: InnerCall, req: MetaCall, signal: AbortSignal): Promise<InnerAnswer> {
    const refused = await this.#opts.admit?.(req)
    if (refused !== undefined) return { callId: '', isError: true, output: '', error: { code: 'GW_RATE_LIMITED', message: refused } }
    return await this.#opts.invoke(inner, req, signal)
  }

  /** Removes this process's directory of call directories (each call removes its own as it ends). */
  async close (): Promise<void> {
    const dir = this.#runDir === undefined ? undefined : await this.#runDir.catch(() => undefined)
    if (dir !== undefined && this.#opts.runDir === undefined) await rm(dir, { recursive: true, force: true })
  }

  /** The script, its token, the listed names and their Python stubs, readable by the sandbox uid alone where it matters. */
  async #writeCallFiles (
    dir: string,
    owner: ScriptWorkspace['owner'],
    call: { token: string, language: keyof typeof LANGUAGES, code: string, tools: readonly ListedTool[] }
  ): Promise<void> {
    const tokenFile = path.join(dir, 'token')
    await writeFile(tokenFile, call.token, { mode: 0o400 })
    if (owner !== undefined) await chown(tokenFile, owner.uid, owner.gid)
    await writeFile(path.join(dir, LANGUAGES[call.language].file), call.code, { mode: 0o444 })
    if (call.language !== 'python') return
    // The Python runner maps attribute names to the listed names, and `print(tools)` shows the stubs.
    await writeFile(path.join(dir, 'names.json'), JSON.stringify(call.tools.map((t) => t.name)), { mode: 0o444 })
    await writeFile(path.join(dir, 'api.py'), pythonApi(call.tools.map(apiTool)), { mode: 0o444 })
  }

  /** This process's directory of call directories: made once, root's, 0711 (a sandbox uid can pass through, never list). */
  async #ensureRunDir (): Promise<string> {
    this.#runDir ??= (async () => {
      if (this.#opts.runDir !== undefined) {
        await mkdir(this.#opts.runDir, { recursive: true, mode: 0o711 })
        return this.#opts.runDir
      }
      const dir = await mkdtemp(path.join(tmpdir(), 'tool-gateway-scripts-'))
      await chmod(dir, 0o711)
      return dir
    })()
    return await this.#runDir
  }
}

/**
 * The names a script may call a listed tool by, to its listed name: the listed (wire) name, its
 * natural and qualified names, and the tool's own name when no other listed tool has it
 * (`create_issue` for `user_acme_tool_create_issue`). Any other name goes to the gateway as is,
 * which refuses it as POST /invoke would (GW_NOT_ALLOWED, GW_TENANT_MISMATCH...).
 */
function scriptNames (tools: readonly ListedTool[]): Map<string, string> {
  const names = new Map<string, string>()
  const own = new Map<string, string | null>()
  for (const t of tools) {
    names.set(t.name, t.name)
    const spec = t.entry.spec.name
    own.set(spec, own.has(spec) ? null : t.name)
  }
  for (const t of tools) {
    for (const alias of [t.entry.name, t.entry.qualifiedName]) if (alias !== undefined && !names.has(alias)) names.set(alias, t.name)
  }
  for (const [spec, wire] of own) if (wire !== null && !names.has(spec)) names.set(spec, wire)
  return names
}

/** A built-in's failure (a ToolError: the workspace cannot be opened, the sandbox cannot start) as the tool error it is; anything else is a bug. */
function toolFailure (err: unknown): ToolOutcome {
  const reason = (err as { reason?: unknown } | null)?.reason
  if (err instanceof Error && typeof reason === 'string') return { ok: false, reason: reason as ToolFailureReason, message: err.message }
  throw err
}

/** A path as one sh word. */
function quote (s: string): string {
  return `'${s.replace(/'/g, "'\\''")}'`
}
