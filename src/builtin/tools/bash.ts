import { realpath, stat } from 'node:fs/promises'
import { relative, resolve, sep } from 'node:path'
import { DEFAULT_WRITE_TIMEOUT_MS, ProcessManager, ProcessService } from '../processes/index.js'
import type { Sandbox } from '../sandbox/index.js'
import { ToolError, type Workspace } from '../types.js'
import type { BuiltinTool } from '../tool.js'
import type { QuotaWatch, UsageFigure, WorkspaceUsage } from '../workspace/usage.js'

export const BASH_ACTIONS = ['exec', 'start', 'status', 'logs', 'write', 'stop', 'list'] as const

/** Hard ceiling for exec timeouts whatever the limits say (docs/ARCHITECTURE.md#limits). */
const MAX_COMMAND_TIMEOUT_MS = 600_000
/** Per-stream capture bounds for exec (AI4J keeps 10 MiB; the workspace's output cap is usually lower). */
const MIN_OUTPUT_BYTES = 1024
const MAX_OUTPUT_BYTES = 10 * 1024 * 1024
const MAX_PATH_CHARS = 4096

/**
 * Actions serialised with the workspace's other writes. `write` is not one: it only feeds a
 * process's stdin, the process manager allows one pending write per process, and a write
 * waiting on a process that does not read must not hold up every edit of the workspace.
 */
const MUTATING: ReadonlySet<string> = new Set(['exec', 'start', 'stop'])

const TIMEOUT_HINT =
  'For long-running commands use action=start, then logs/status/write/stop with the returned processId.'

const BASH_INPUT_SCHEMA = {
  type: 'object',
  properties: {
    action: {
      type: 'string',
      enum: [...BASH_ACTIONS],
      description: 'exec runs a command and waits; start runs it in the background; status, logs, write, stop and list manage background processes.'
    },
    command: { type: 'string', description: 'Shell command (sh -c) for exec and start.' },
    cwd: { type: 'string', description: 'Working directory relative to the workspace root (default: the root).' },
    timeoutMs: { type: 'integer', minimum: 1, description: `exec timeout in milliseconds (default and maximum: the workspace limit, at most 600000); for write, how long the process may take to read the input (default ${DEFAULT_WRITE_TIMEOUT_MS}, same maximum).` },
    processId: { type: 'string', description: 'Background process id (proc_...) for status, logs, write and stop.' },
    offset: { type: 'integer', minimum: 0, description: 'logs: absolute character offset to read from (use nextOffset of the previous call).' },
    limit: { type: 'integer', minimum: 1, description: 'logs: maximum characters to return.' },
    input: {
      type: 'string',
      description: 'write: text sent to the process stdin as is (no newline added). One write per process at a time; it fails with the bytes written so far if the process does not read it within timeoutMs.'
    }
  },
  required: ['action']
} as const

export interface BashToolDeps {
  sandbox: Sandbox
  /** The cluster-wide service; a bare manager is served as one instance. */
  processes: ProcessService | ProcessManager
}

function optString (args: Record<string, unknown>, name: string): string | undefined {
  const v = args[name]
  if (v === undefined || v === null) return undefined
  if (typeof v !== 'string') throw new ToolError(`${name} must be a string`, 'invalid-arguments')
  return v
}

function optInt (args: Record<string, unknown>, name: string, min: number): number | undefined {
  const v = args[name]
  if (v === undefined || v === null) return undefined
  if (typeof v !== 'number' || !Number.isFinite(v)) throw new ToolError(`${name} must be a number`, 'invalid-arguments')
  return Math.max(min, Math.floor(v))
}

function requireString (args: Record<string, unknown>, name: string, action: string): string {
  const v = optString(args, name)
  if (v === undefined || v.trim() === '') throw new ToolError(`${name} is required for action ${action}`, 'invalid-arguments')
  return v
}

function inside (root: string, p: string): boolean {
  return p === root || p.startsWith(root.endsWith(sep) ? root : root + sep)
}

/** The working directory: inside the workspace after following symlinks, and a directory. */
async function resolveCwd (ws: Workspace, cwd: string | undefined): Promise<{ abs: string, rel: string }> {
  const raw = cwd === undefined || cwd.trim() === '' ? '.' : cwd
  if (raw.includes('\0')) throw new ToolError('cwd must not contain NUL bytes', 'invalid-arguments')
  if (raw.length > MAX_PATH_CHARS) throw new ToolError('cwd is too long', 'invalid-arguments')
  const lexical = resolve(ws.root, raw)
  if (!inside(ws.root, lexical)) throw new ToolError(`Path escapes workspace root: ${raw}`, 'forbidden')
  let real: string
  try {
    real = await realpath(lexical)
  } catch {
    throw new ToolError(`Working directory does not exist: ${raw}`)
  }
  if (!inside(ws.root, real)) throw new ToolError(`Path escapes workspace root: ${raw}`, 'forbidden')
  if (!(await stat(real)).isDirectory()) throw new ToolError(`Working directory is not a directory: ${raw}`)
  const rel = relative(ws.root, real).split(sep).join('/')
  return { abs: real, rel: rel === '' ? '.' : rel }
}

/** How long the measure after a command may hold its result back (50,000 files take ~0.6 s). */
const AFTER_COMMAND_MEASURE_MS = 250

/** What a write past a quota image says (ENOSPC, EDQUOT), in the command's own stderr. */
const NO_SPACE = /No space left on device|Disk quota exceeded/

/** Exit status of a process killed by SIGXFSZ (a write past RLIMIT_FSIZE), as the shell reports it. */
const SIGXFSZ_EXIT = 128 + 25

/**
 * What the result says about the quota, if anything: the watchdog stopped the command; or the
 * command grew the workspace to its quota (writes past it failed: "File size limit exceeded");
 * or only the per-file limit was hit (a file, maybe in /tmp, larger than the room left).
 */
function quotaNote (
  usage: WorkspaceUsage,
  before: UsageFigure,
  after: UsageFigure,
  tripped: UsageFigure | undefined,
  exitCode: number,
  room: number,
  sandboxFileSize: number,
  full: boolean
): string | undefined {
  const limits = `the quota is ${usage.quotaBytes} bytes and ${usage.maxFiles} files`
  if (full) {
    return `The workspace reached its quota (WORKSPACE_QUOTA_EXCEEDED): ${after.bytes} bytes and ${after.files} files in use, ${limits}; writes past it fail with "No space left on device". Delete files to make room.`
  }
  if (tripped !== undefined) {
    return `Command was stopped: the workspace passed its quota (WORKSPACE_QUOTA_EXCEEDED): ${tripped.bytes} bytes and ${tripped.files} files in use, ${limits}. Delete files to make room.`
  }
  const grew = after.bytes > before.bytes || after.files > before.files
  if (grew && (after.bytes >= usage.quotaBytes || after.files >= usage.maxFiles)) {
    return `The workspace reached its quota (WORKSPACE_QUOTA_EXCEEDED): ${after.bytes} bytes and ${after.files} files in use, ${limits}; writes past it fail. Delete files to make room.`
  }
  if (exitCode === SIGXFSZ_EXIT && room < sandboxFileSize) {
    return `File size limit exceeded: in this command no file may grow past ${room} bytes, the room left in the workspace's quota.`
  }
  return undefined
}

/** `bash` with AI4J's actions and result shapes; every command runs in the sandbox. */
export function createBashTool ({ sandbox, processes: given }: BashToolDeps): BuiltinTool {
  const processes = given instanceof ProcessManager ? new ProcessService({ local: given }) : given
  return {
    name: 'bash',
    description:
      'Run shell commands in the workspace (sandboxed: no network, workspace read-write, read roots read-only). ' +
      'action=exec waits for the result; for long-running commands use action=start and then logs/status/write/stop/list.',
    inputSchema: BASH_INPUT_SCHEMA as unknown as Record<string, unknown>,
    mutates: (args) => {
      const a = typeof args.action === 'string' ? args.action.trim() : ''
      return a === '' || MUTATING.has(a)
    },
    run: async (args, ctx) => {
      const ws = ctx.workspace
      const rawAction = optString(args, 'action') ?? ''
      const action = rawAction.trim() === '' ? 'exec' : rawAction.trim()
      switch (action) {
        case 'exec': {
          const command = requireString(args, 'command', 'exec')
          const cwd = await resolveCwd(ws, optString(args, 'cwd'))
          const ceiling = Math.min(ws.limits.commandTimeoutMs, MAX_COMMAND_TIMEOUT_MS)
          const timeoutMs = Math.min(optInt(args, 'timeoutMs', 1) ?? ceiling, ceiling)
          const maxOutputBytes = Math.min(MAX_OUTPUT_BYTES, Math.max(MIN_OUTPUT_BYTES, ws.limits.outputMaxChars))
          // The quota: no file may grow past the room left (RLIMIT_FSIZE), and a watchdog stops the
          // command once the workspace passes it (many files, several writers).
          const usage = ctx.usage
          // On a quota image the file system refuses every write past the quota: no polling.
          const byFs = usage?.enforcedByFs(ws) === true
          const before = usage !== undefined ? await usage.current(ws) : undefined
          const room = usage !== undefined && before !== undefined && !byFs ? Math.max(0, usage.quotaBytes - before.bytes) : undefined
          let watch: QuotaWatch | undefined
          const r = await sandbox.exec({
            workspace: ws,
            command,
            cwd: cwd.abs,
            timeoutMs,
            maxOutputBytes,
            signal: ctx.signal,
            ...(room !== undefined ? { fileSizeBytes: room } : {}),
            ...(usage !== undefined && !byFs
              ? { onSpawn: (proc) => { watch = usage.watch(ws, { kill: () => proc.kill(), written: proc.written }, before); return () => watch?.stop() } }
              : {})
          })
          // What the command wrote is counted from the tree: measured again after each command. A
          // huge tree does not hold the result back: past the budget the walk finishes in the background.
          const after = usage !== undefined ? await usage.measure(ws, AFTER_COMMAND_MEASURE_MS) : undefined
          let stderr = r.stderr
          const note = (line: string): void => { stderr = stderr === '' || stderr.endsWith('\n') ? stderr + line : `${stderr}\n${line}` }
          if (r.timedOut) note(`Command timed out after ${timeoutMs} ms and was killed. ${TIMEOUT_HINT}`)
          if (r.outputLimitExceeded) note('Command produced too much output and was killed.')
          const quota = usage !== undefined && before !== undefined && after !== undefined
            ? quotaNote(
              usage,
              before,
              after,
              watch?.tripped,
              r.exitCode,
              room ?? 0,
              sandbox.limits.fileSizeBytes,
              byFs && await usage.fsFull(ws) && (after.bytes > before.bytes || after.files > before.files || NO_SPACE.test(r.stderr))
            )
            : undefined
          if (quota !== undefined) note(quota)
          return {
            command,
            workingDirectory: cwd.rel,
            stdout: r.stdout,
            stderr,
            exitCode: r.exitCode,
            timedOut: r.timedOut,
            ...(quota !== undefined && quota.includes('WORKSPACE_QUOTA_EXCEEDED') ? { quotaExceeded: true } : {})
          }
        }
        case 'start': {
          const command = requireString(args, 'command', 'start')
          const cwd = await resolveCwd(ws, optString(args, 'cwd'))
          return await processes.start(ws, { command, cwd: cwd.abs, workingDirectory: cwd.rel, ...(ctx.usage !== undefined ? { usage: ctx.usage } : {}) })
        }
        case 'status':
          return await processes.status(ws, requireString(args, 'processId', 'status'))
        case 'logs':
          return await processes.logs(ws, requireString(args, 'processId', 'logs'), optInt(args, 'offset', 0), optInt(args, 'limit', 1))
        case 'write': {
          const id = requireString(args, 'processId', 'write')
          const input = optString(args, 'input')
          if (input === undefined) throw new ToolError('input is required for action write', 'invalid-arguments')
          const ceiling = Math.min(ws.limits.commandTimeoutMs, MAX_COMMAND_TIMEOUT_MS)
          const timeoutMs = Math.min(optInt(args, 'timeoutMs', 1) ?? DEFAULT_WRITE_TIMEOUT_MS, ceiling)
          return await processes.write(ws, id, input, { timeoutMs, signal: ctx.signal })
        }
        case 'stop':
          return await processes.stop(ws, requireString(args, 'processId', 'stop'))
        case 'list':
          return await processes.list(ws)
        default:
          throw new ToolError(`Unsupported bash action: ${rawAction}`, 'invalid-arguments')
      }
    }
  }
}
