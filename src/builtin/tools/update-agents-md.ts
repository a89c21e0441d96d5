import { ToolError } from '../types.js'
import type { Workspace } from '../types.js'
import type { BuiltinTool } from '../tool.js'
import { openForRead, writeFileAtomic } from '../workspace/fd-tree.js'
import { withQuota } from '../workspace/usage.js'
import { objectSchema, optStr, str } from './args.js'

/** Same cap as Codex's project-doc limit. */
const AGENTS_MD_MAX_BYTES = 32 * 1024

const ACTIONS = ['read', 'write', 'append'] as const

async function exists (ws: Workspace, rel: string): Promise<boolean> {
  try {
    await (await openForRead(ws, rel)).fh.close()
    return true
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

/** The file's text (at most the cap), undefined when it does not exist; `size` is its full size. */
async function readCapped (ws: Workspace, rel: string): Promise<{ text: string, size: number } | undefined> {
  let opened
  try {
    opened = await openForRead(ws, rel)
  } catch (err) {
    if (err instanceof ToolError && err.message.startsWith('File does not exist')) return undefined
    throw err
  }
  const { fh, st } = opened
  try {
    const buf = Buffer.alloc(Math.min(st.size, AGENTS_MD_MAX_BYTES))
    const { bytesRead } = await fh.read(buf, 0, buf.length, 0)
    return { text: buf.subarray(0, bytesRead).toString('utf8'), size: st.size }
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
      const current = await readCapped(ws, rel)
      return { action, path: rel, exists: current !== undefined, content: current?.text ?? '' }
    }
    let next: string
    if (action === 'write') {
      const content = optStr(args, 'content')
      if (content === undefined) throw new ToolError('content is required for action write', 'invalid-arguments')
      next = content
    } else {
      const text = optStr(args, 'text')
      if (text === undefined) throw new ToolError('text is required for action append', 'invalid-arguments')
      const existing = await readCapped(ws, rel)
      if (existing !== undefined && existing.size > AGENTS_MD_MAX_BYTES) {
        throw new ToolError(`${rel} is already over the ${AGENTS_MD_MAX_BYTES}-byte cap`)
      }
      const current = existing?.text ?? ''
      const sep = current.length > 0 && !current.endsWith('\n') ? '\n' : ''
      next = current + sep + text
    }
    const size = Buffer.byteLength(next)
    if (size > AGENTS_MD_MAX_BYTES) {
      throw new ToolError(`AGENTS.md would be ${size} bytes, over the ${AGENTS_MD_MAX_BYTES}-byte cap; shorten it`)
    }
    const { created, bytesWritten, rel: written } = await withQuota(
      ctx.usage,
      ws,
      async (quota) => await writeFileAtomic(ws, rel, next, { ...quota, signal: ctx.signal })
    )
    return { action, path: written, created, bytesWritten }
  }
}
