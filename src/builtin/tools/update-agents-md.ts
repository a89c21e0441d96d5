import { constants as fsConstants } from 'node:fs'
import { lstat, open } from 'node:fs/promises'
import { ToolError } from '../types.js'
import type { BuiltinTool, Workspace } from '../types.js'
import { fsError, resolveReadPath, resolveWritePath, writeFileAtomic } from '../workspace/paths.js'
import { objectSchema, optStr, str } from './schemas.js'

/** Same cap as Codex's project-doc limit. */
export const AGENTS_MD_MAX_BYTES = 32 * 1024

const ACTIONS = ['read', 'write', 'append'] as const

async function exists (ws: Workspace, rel: string): Promise<boolean> {
  try {
    const r = await resolveReadPath(ws, rel)
    return (await lstat(r.abs)).isFile()
  } catch {
    return false
  }
}

/** `AGENTS.md` at the root, else `.agents/AGENTS.md` when only that exists. */
async function locate (ws: Workspace): Promise<string> {
  if (await exists(ws, 'AGENTS.md')) return 'AGENTS.md'
  if (await exists(ws, '.agents/AGENTS.md')) return '.agents/AGENTS.md'
  return 'AGENTS.md'
}

async function readCapped (abs: string, rel: string): Promise<string | undefined> {
  let fh
  try {
    fh = await open(abs, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw fsError(err, rel)
  }
  try {
    const st = await fh.stat()
    if (!st.isFile()) throw new ToolError(`Not a regular file: ${rel}`)
    const buf = Buffer.alloc(Math.min(st.size, AGENTS_MD_MAX_BYTES))
    const { bytesRead } = await fh.read(buf, 0, buf.length, 0)
    return buf.subarray(0, bytesRead).toString('utf8')
  } finally {
    await fh.close()
  }
}

export const updateAgentsMdTool: BuiltinTool = {
  name: 'update_agents_md',
  description: 'Read, overwrite or append to the workspace\'s AGENTS.md (project instructions for agents). ' +
    `The file is AGENTS.md at the workspace root, or .agents/AGENTS.md if only that exists. Capped at ${AGENTS_MD_MAX_BYTES / 1024} KiB.`,
  inputSchema: objectSchema({
    action: { type: 'string', enum: [...ACTIONS], description: 'read | write (replace the whole file with content) | append (add text at the end).' },
    content: { type: 'string', description: 'New full content (action write).' },
    text: { type: 'string', description: 'Text to append (action append); a newline separator is added when needed.' }
  }, ['action']),
  mutates: (args) => args.action === 'write' || args.action === 'append',
  async run (args, ctx) {
    const ws = ctx.workspace
    const action = str(args, 'action')
    if (!(ACTIONS as readonly string[]).includes(action)) {
      throw new ToolError(`action must be one of ${ACTIONS.join(', ')}`, 'invalid-arguments')
    }
    const rel = await locate(ws)
    if (action === 'read') {
      const r = await resolveReadPath(ws, rel)
      const content = await readCapped(r.abs, r.rel)
      return { action, path: r.rel, exists: content !== undefined, content: content ?? '' }
    }
    const target = await resolveWritePath(ws, rel)
    let next: string
    if (action === 'write') {
      const content = optStr(args, 'content')
      if (content === undefined) throw new ToolError('content is required for action write', 'invalid-arguments')
      next = content
    } else {
      const text = optStr(args, 'text')
      if (text === undefined) throw new ToolError('text is required for action append', 'invalid-arguments')
      const st = await lstat(target.abs).catch(() => undefined)
      if (st !== undefined && st.size > AGENTS_MD_MAX_BYTES) {
        throw new ToolError(`${target.rel} is already over the ${AGENTS_MD_MAX_BYTES}-byte cap`)
      }
      const current = (await readCapped(target.abs, target.rel)) ?? ''
      const sep = current.length > 0 && !current.endsWith('\n') ? '\n' : ''
      next = current + sep + text
    }
    const size = Buffer.byteLength(next)
    if (size > AGENTS_MD_MAX_BYTES) {
      throw new ToolError(`AGENTS.md would be ${size} bytes, over the ${AGENTS_MD_MAX_BYTES}-byte cap; shorten it`)
    }
    const { created, bytesWritten } = await writeFileAtomic(ws, target, next)
    return { action, path: target.rel, created, bytesWritten }
  }
}
