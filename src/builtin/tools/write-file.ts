import { ToolError } from '../types.js'
import type { BuiltinTool } from '../tool.js'
import { writeFileAtomic } from '../workspace/fd-tree.js'
import { withQuota } from '../workspace/usage.js'
import { objectSchema, optStr, str } from './args.js'

const MODES = ['create', 'overwrite', 'append'] as const
type WriteMode = typeof MODES[number]

export interface WriteFileResult {
  path: string
  mode: WriteMode
  created: boolean
  appended: boolean
  bytesWritten: number
}

// AI4J also returns resolvedPath; we do not: it is a host path and must not reach the model.
export const writeFileTool: BuiltinTool = {
  name: 'write_file',
  description: 'Write a UTF-8 text file in the workspace. mode "create" fails if the file exists, "overwrite" (default) replaces it, ' +
    '"append" adds to the end. Parent directories are created. Read-only roots, .git/hooks, .ssh and .aws are not writable.',
  inputSchema: objectSchema({
    path: { type: 'string', description: 'File path relative to the workspace root.' },
    content: { type: 'string', description: 'Text to write.' },
    mode: { type: 'string', enum: [...MODES], description: 'create | overwrite | append. Default overwrite.' }
  }, ['path', 'content']),
  mutates: () => true,
  async run (args, ctx): Promise<WriteFileResult> {
    const input = str(args, 'path')
    const content = str(args, 'content')
    const modeArg = optStr(args, 'mode') ?? 'overwrite'
    if (!(MODES as readonly string[]).includes(modeArg)) {
      throw new ToolError(`mode must be one of ${MODES.join(', ')}`, 'invalid-arguments')
    }
    const mode = modeArg as WriteMode
    // Refused before anything is written when it would pass the workspace's quota.
    const { created, bytesWritten, rel } = await withQuota(ctx.usage, ctx.workspace, async (quota) => await writeFileAtomic(ctx.workspace, input, content, {
      append: mode === 'append',
      exclusive: mode === 'create',
      signal: ctx.signal,
      ...quota
    }))
    return { path: rel, mode, created, appended: mode === 'append', bytesWritten }
  }
}
