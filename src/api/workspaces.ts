import { Type } from '@sinclair/typebox'
import { IdString } from './common.js'

const ID_PATTERN = '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$'

/** workspaceIds and checkpointIds: the rule of context.workspaceId ('.' and '..' never match it in practice: checked again in the domain). */
const WorkspaceId = Type.String({ pattern: ID_PATTERN, description: `A workspaceId: ${ID_PATTERN}` })
const CheckpointId = Type.String({ pattern: ID_PATTERN, description: `A checkpointId: ${ID_PATTERN}` })

export const WorkspacesParams = Type.Object({ userId: IdString })
export const WorkspaceParams = Type.Object({ userId: IdString, workspaceId: WorkspaceId })
export const CheckpointParams = Type.Object({ userId: IdString, workspaceId: WorkspaceId, checkpointId: CheckpointId })
const FilePath = Type.String({
  minLength: 1,
  maxLength: 4096,
  description: 'The file\'s path in the workspace (several segments), resolved like the tools resolve it'
})
/** `files/*`: the route's wildcard, documented as `{path}`. */
export const FileParams = Type.Object({ userId: IdString, workspaceId: WorkspaceId, '*': FilePath })
export const FileParamsDoc = Type.Object({ userId: IdString, workspaceId: WorkspaceId, path: FilePath })

export const WorkspaceSummary = Type.Object({
  workspaceId: Type.String(),
  bytes: Type.Integer({ description: 'Apparent size of its regular files (a lower bound when counting a huge tree ran out of time)' }),
  files: Type.Integer({
    description: 'Entries below its root: files, directories, symlinks (what WORKSPACE_MAX_FILES limits; an upload and a checkpoint count the same way)'
  }),
  createdAt: Type.String({ format: 'date-time' }),
  lastUsedAt: Type.String({ format: 'date-time', description: 'When a tool call (or an upload) last used it' }),
  expiresAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
    description: 'When the idle sweeper deletes it (lastUsedAt + WORKSPACE_IDLE_TTL); null when workspaces are kept'
  }),
  quotaBytes: Type.Integer({ description: 'WORKSPACE_QUOTA_BYTES' }),
  processes: Type.Integer({ description: 'Running background processes (bash start)' })
})
export const WorkspaceList = Type.Object({ workspaces: Type.Array(WorkspaceSummary) })

export const UploadQuery = Type.Object({
  mode: Type.Optional(Type.Union([Type.Literal('replace'), Type.Literal('merge')], {
    default: 'replace',
    description: 'replace: the workspace becomes exactly the archive (swapped in atomically); merge: the archive\'s entries are written over the existing tree'
  }))
}, { additionalProperties: false })

/**
 * The raw archive: the route's content-type parser hands the body over as a stream, never
 * buffered. Its format is read from its bytes; the declared type does not matter (any, or none).
 */
// No `type`: validation sees the stream object, which any type would refuse; the docs still say what it is.
const ArchiveBody = Type.Unsafe<unknown>({ contentMediaType: 'application/octet-stream', description: 'The archive bytes, streamed' })
export const UploadBody = {
  content: {
    'application/x-tar': { schema: { ...ArchiveBody, description: 'A tar archive' } },
    'application/gzip': { schema: { ...ArchiveBody, description: 'A gzip-compressed tar archive (tar czf)' } },
    'application/octet-stream': {
      schema: { ...ArchiveBody, description: 'A tar or a tar.gz, told apart by its bytes (so is any other declared type, or none)' }
    }
  }
}

export const UploadResponse = Type.Object({
  workspaceId: Type.String(),
  bytes: Type.Integer({ description: 'replace: bytes of the archive\'s regular files (a hard-linked file once); merge: the workspace\'s bytes afterwards' }),
  files: Type.Integer({
    description: 'Entries (files, directories, implied parents included, symlinks), counted as the workspace listing and a checkpoint count them. replace: those extracted; merge: the workspace\'s afterwards'
  }),
  skipped: Type.Array(Type.String(), {
    maxItems: 100,
    description: 'Where archive entries were not written because the file tools never write there (`.git/hooks`, `.ssh`, `.aws`, case-folded): each path down to the protected component once (`.git/hooks`, `a/.ssh`), and the path of a hard link to such a file; the first 100'
  }),
  skippedEntries: Type.Integer({ description: 'How many archive entries were skipped (all of them)' })
})

export const ArchiveQuery = Type.Object({
  path: Type.Optional(Type.String({
    minLength: 1,
    maxLength: 4096,
    description: 'A directory of the workspace to pack instead of the whole tree; its entries keep their workspace paths (`src/...`)'
  }))
}, { additionalProperties: false })

export const ArchiveResponse = {
  description: 'A streamed tar.gz (entry names relative to the workspace, `src/...` for ?path=src, so a merge upload puts them back in place; symlinks kept as symlinks)',
  content: { 'application/gzip': { schema: { type: 'string', contentMediaType: 'application/gzip' } } }
}

export const FileResponse = {
  description: 'The file\'s raw bytes',
  content: { 'application/octet-stream': { schema: { type: 'string', contentMediaType: 'application/octet-stream' } } }
}

export const CheckpointBody = Type.Union([
  Type.Object({
    label: Type.Optional(Type.String({ maxLength: 200, description: 'A note for people (no control characters)' }))
  }, { additionalProperties: false }),
  Type.Null()
])

export const CheckpointInfo = Type.Object({
  checkpointId: Type.String(),
  createdAt: Type.String({ format: 'date-time' }),
  label: Type.Union([Type.String(), Type.Null()]),
  bytes: Type.Integer({ description: 'Total size of its regular files' }),
  files: Type.Integer({ description: 'Entries in it: files, directories, symlinks (as the workspace listing and an upload count them)' })
})
export const CheckpointList = Type.Object({ checkpoints: Type.Array(CheckpointInfo, { description: 'Newest first' }) })

/** Nothing to say yet; an empty object (or no body) keeps room for options. */
export const RestoreBody = Type.Union([Type.Object({}, { additionalProperties: false }), Type.Null()])

export const RestoreResponse = Type.Object({
  restored: Type.Literal(true),
  checkpointId: Type.String()
})

export const NoContent = Type.Null({ description: 'No content' })
