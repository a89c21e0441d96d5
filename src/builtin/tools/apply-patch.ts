import { applyPatch } from '../apply-patch/execute.js'
import { ToolError } from '../types.js'
import type { BuiltinTool } from '../tool.js'
import { withQuota } from '../workspace/usage.js'

const DESCRIPTION = [
  'Apply a patch to files in the workspace. The patch is all or nothing: if any part fails, no file is changed.',
  'Format:',
  '*** Begin Patch',
  '*** Add File: <path>        (every following line starts with + and is the new content)',
  '*** Delete File: <path>',
  '*** Update File: <path>',
  '*** Move to: <new path>     (optional, right after Update File)',
  '@@ <a line to locate, e.g. a function signature>   (optional text; "@@" alone is fine)',
  ' context line (starts with a space)',
  '-removed line',
  '+added line',
  '*** End of File             (optional: the chunk must match at the end of the file)',
  '*** End Patch',
  'Paths are relative to the workspace. Give about 3 lines of context before and after each change.',
  'Text only (no NUL bytes); a file to update may be at most 10 MiB, and one patch may read at most 64 MiB of existing files.'
].join('\n')

/** The `apply_patch` built-in: the Codex patch format, applied atomically: a patch that fails anywhere changes nothing. */
export const applyPatchTool: BuiltinTool = {
  name: 'apply_patch',
  description: DESCRIPTION,
  inputSchema: {
    type: 'object',
    properties: {
      patch: {
        type: 'string',
        description: 'Patch text with the "*** Begin Patch" / "*** End Patch" envelope'
      }
    },
    required: ['patch']
  },
  mutates: () => true,
  run: async (args, ctx) => {
    const patch = args['patch']
    if (typeof patch !== 'string') throw new ToolError('patch must be a string', 'invalid-arguments')
    return await withQuota(ctx.usage, ctx.workspace, async (quota) => await applyPatch(ctx.workspace, patch, { signal: ctx.signal, ...quota }))
  }
}
