import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import type { Static } from '@sinclair/typebox'
import { Readable } from 'node:stream'
import { errorResponses } from '../src/api/common.js'
import { attachmentDisposition } from '../src/api/content-disposition.js'
import {
  ArchiveQuery, ArchiveResponse, CheckpointBody, CheckpointList, CheckpointInfo, CheckpointParams, FileParams, FileParamsDoc,
  FileResponse, NoContent, RestoreBody, RestoreResponse, UploadBody, UploadQuery, UploadResponse, WorkspaceList, WorkspaceParams, WorkspacesParams
} from '../src/api/workspaces.js'
import { HttpError } from '../src/errors.js'
import { abortOnClientGone } from '../plugins/client-gone.js'

/**
 * Workspaces as a managed resource: list, upload, download, one file, delete, checkpoints. Who may
 * act on which tenant's workspaces is decided by the workspace facade.
 */
async function workspaceRoutes (app: FastifyInstance): Promise<void> {
  const workspaces = app.services.workspaces
  const stallMs = app.services.config.requestTimeoutMs
  const tags = ['workspaces']

  // Tenancy before the body: a caller acting for another tenant is refused before a byte of its
  // upload is read (the facade checks again on every operation).
  app.addHook('onRequest', async (request) => {
    const { userId } = request.params as { userId?: unknown }
    if (typeof userId === 'string') workspaces.authorize(request.caller, userId)
  })

  app.get<{ Params: Static<typeof WorkspacesParams> }>('/users/:userId/workspaces', {
    schema: {
      operationId: 'listWorkspaces',
      summary: "A tenant's workspaces",
      tags,
      params: WorkspacesParams,
      response: { 200: WorkspaceList, ...errorResponses(400, 401, 403, 429) }
    }
  }, async (request) => ({ workspaces: await workspaces.list(request.caller, request.params.userId) }))

  // The upload in a context of its own, whose one parser takes every content type (or none): the
  // format is read from the body's bytes (archive-extract.ts), since clients send octet-stream, x-gzip, a
  // form type or nothing for the same file. The body is handed over as the raw request stream:
  // never buffered, and not bound by BODY_LIMIT_BYTES (the workspace quota bounds it, checked entry
  // by entry while streaming). The other routes keep the JSON parser.
  await app.register(async (upload) => {
    upload.removeAllContentTypeParsers()
    upload.addContentTypeParser('*', (_request, payload, done) => { done(null, payload) })
    upload.put<{ Params: Static<typeof WorkspaceParams>, Querystring: Static<typeof UploadQuery> }>('/users/:userId/workspaces/:workspaceId', {
      schema: {
        operationId: 'uploadWorkspace',
        summary: "Upload a workspace's content (tar or tar.gz)",
        description: 'The body is a tar or a tar.gz, streamed, recognised by its bytes whatever the content type (application/x-tar, application/gzip, application/octet-stream, or none); a body that is neither is a 415 GW_UNSUPPORTED_MEDIA_TYPE saying what was expected. Every entry is checked before it is written (no absolute paths, no `..`, no link leaving the workspace, no device, FIFO or setuid/setgid bit): a refused, corrupt or truncated archive is a 400 GW_BAD_ARCHIVE and changes nothing. Entries under `.git/hooks`, `.ssh` or `.aws`, which the file tools never write, are skipped and reported in `skipped`. Past WORKSPACE_QUOTA_BYTES or WORKSPACE_MAX_FILES (merge: counting what is there already) it is a 413. replace (default) stops the workspace\'s background processes and swaps the extracted tree in atomically; merge writes its entries over the existing tree. 201 when the workspace was created.',
        tags,
        params: WorkspaceParams,
        querystring: UploadQuery,
        body: UploadBody,
        response: { 200: UploadResponse, 201: UploadResponse, ...errorResponses(400, 401, 403, 408, 409, 413, 415, 429) }
      }
    }, async (request, reply) => {
      // No body at all (no content type, no length) reaches here without the parser: an empty stream.
      const body = request.body instanceof Readable ? request.body : Readable.from([])
      const { userId, workspaceId } = request.params
      // The body-timeout plugin stops watching once the route runs (the body is a stream here): a
      // stalled upload is cut off after REQUEST_TIMEOUT_MS without a byte instead.
      let stalled = false
      const stall = new AbortController()
      // (An injected request, in tests, has no socket to time.)
      const timed = typeof request.raw.setTimeout === 'function'
      if (timed) {
        request.raw.setTimeout(stallMs, () => {
          stalled = true
          stall.abort(new Error('upload stalled'))
        })
      }
      const signal = AbortSignal.any([abortOnClientGone(reply), stall.signal])
      try {
        const result = await workspaces.upload(request.caller, userId, workspaceId, body, {
          merge: request.query.mode === 'merge',
          signal
        })
        const { bytes, files, skipped, skippedEntries } = result
        request.log.info({ tenant: userId, workspaceId, mode: request.query.mode ?? 'replace', bytes, files, skippedEntries }, 'workspace uploaded')
        return await reply.code(result.created ? 201 : 200).send({ workspaceId, bytes, files, skipped, skippedEntries })
      } catch (err) {
        // curl -F sends a form: say how to send the file itself.
        if (err instanceof HttpError && err.code === 'GW_UNSUPPORTED_MEDIA_TYPE' && /^multipart\/form-data/i.test(request.headers['content-type'] ?? '')) {
          reply.header('connection', 'close')
          throw new HttpError('GW_UNSUPPORTED_MEDIA_TYPE', `${err.message}, not a multipart form: send the file itself (curl --data-binary @project.tar.gz)`)
        }
        // The rest of a refused body is not read: the connection cannot carry another request.
        if (!body.readableEnded) reply.header('connection', 'close')
        if (stalled) throw new HttpError('GW_REQUEST_TIMEOUT', `The upload stalled: no data for ${stallMs} ms`)
        // The client went away or its body broke off: the request's fault, not a gateway bug.
        if (!(err instanceof HttpError) && (signal.aborted || body.errored !== null || body.destroyed)) {
          throw new HttpError('GW_BAD_REQUEST', 'The upload was interrupted before the archive ended')
        }
        throw err
      } finally {
        if (timed) request.raw.setTimeout(0)
      }
    })
  })

  app.get<{ Params: Static<typeof WorkspaceParams>, Querystring: Static<typeof ArchiveQuery> }>('/users/:userId/workspaces/:workspaceId/archive', {
    schema: {
      operationId: 'downloadWorkspace',
      summary: 'Download a workspace (or one of its directories) as a streamed tar.gz',
      tags,
      params: WorkspaceParams,
      querystring: ArchiveQuery,
      response: { 200: ArchiveResponse, ...errorResponses(400, 401, 403, 404, 429) }
    }
  }, async (request, reply) => {
    const { userId, workspaceId } = request.params
    const stream = await workspaces.archive(request.caller, userId, workspaceId, request.query.path, abortOnClientGone(reply))
    return await reply
      .type('application/gzip')
      .header('content-disposition', `attachment; filename="${workspaceId}.tar.gz"`)
      .send(stream)
  })

  app.get<{ Params: Static<typeof FileParams> }>('/users/:userId/workspaces/:workspaceId/files/*', {
    config: {
      // The docs name the wildcard `{path}`: /users/{userId}/workspaces/{workspaceId}/files/{path}.
      swaggerTransform: ({ schema, url }) => ({ schema: { ...schema, params: FileParamsDoc }, url: url.replace(/\/\*$/, '/:path') })
    },
    schema: {
      operationId: 'getWorkspaceFile',
      summary: "One file's raw bytes",
      description: 'The path is resolved like the tools resolve it: in-workspace symlinks are followed beneath the root, anything leaving it is a 400.',
      tags,
      params: FileParams,
      response: { 200: FileResponse, ...errorResponses(400, 401, 403, 404, 429) }
    }
  }, async (request, reply) => {
    const { userId, workspaceId } = request.params
    const { fh, size } = await workspaces.file(request.caller, userId, workspaceId, request.params['*'])
    // The tenant's bytes under the gateway's origin: never rendered or sniffed (an .html file is
    // not a page of the gateway), always saved, under the file's own name (RFC 6266).
    reply.type('application/octet-stream').header('content-length', size)
      .header('x-content-type-options', 'nosniff')
      .header('content-disposition', attachmentDisposition(request.params['*']))
    if (size === 0) {
      await fh.close()
      return await reply.send(Buffer.alloc(0))
    }
    // Exactly the size announced, even if the file grows meanwhile; the stream closes the fd.
    return await reply.send(fh.createReadStream({ start: 0, end: size - 1 }))
  })

  app.delete<{ Params: Static<typeof WorkspaceParams> }>('/users/:userId/workspaces/:workspaceId', {
    schema: {
      operationId: 'deleteWorkspace',
      summary: 'Delete a workspace',
      description: 'Stops its background processes, waits for a tool call writing to it, then removes it and its checkpoints.',
      tags,
      params: WorkspaceParams,
      response: { 204: NoContent, ...errorResponses(400, 401, 403, 404, 429) }
    }
  }, async (request, reply) => {
    await workspaces.delete(request.caller, request.params.userId, request.params.workspaceId)
    request.log.info({ tenant: request.params.userId, workspaceId: request.params.workspaceId }, 'workspace deleted')
    return await reply.code(204).send()
  })

  app.post<{ Params: Static<typeof WorkspaceParams>, Body: Static<typeof CheckpointBody> }>('/users/:userId/workspaces/:workspaceId/checkpoints', {
    schema: {
      operationId: 'createCheckpoint',
      summary: 'Take a checkpoint of a workspace',
      description: 'Unchanged files are shared with earlier checkpoints, so a checkpoint costs what changed. CHECKPOINTS_PER_WORKSPACE are kept, the oldest dropped first.',
      tags,
      params: WorkspaceParams,
      body: CheckpointBody,
      response: { 201: CheckpointInfo, ...errorResponses(400, 401, 403, 404, 413, 415, 429) }
    }
  }, async (request, reply) => {
    const { userId, workspaceId } = request.params
    const info = await workspaces.createCheckpoint(request.caller, userId, workspaceId, request.body?.label)
    return await reply.code(201).send(info)
  })

  app.get<{ Params: Static<typeof WorkspaceParams> }>('/users/:userId/workspaces/:workspaceId/checkpoints', {
    schema: {
      operationId: 'listCheckpoints',
      summary: "A workspace's checkpoints, newest first",
      tags,
      params: WorkspaceParams,
      response: { 200: CheckpointList, ...errorResponses(400, 401, 403, 404, 429) }
    }
  }, async (request) => ({ checkpoints: await workspaces.listCheckpoints(request.caller, request.params.userId, request.params.workspaceId) }))

  app.post<{ Params: Static<typeof CheckpointParams> }>('/users/:userId/workspaces/:workspaceId/checkpoints/:checkpointId/restore', {
    schema: {
      operationId: 'restoreCheckpoint',
      summary: 'Restore a checkpoint',
      description: 'The workspace\'s files become exactly the checkpoint\'s: added files removed, changed and deleted ones restored, modes kept. No body (or {}).',
      tags,
      params: CheckpointParams,
      body: RestoreBody,
      response: { 200: RestoreResponse, ...errorResponses(400, 401, 403, 404, 409, 413, 415, 429) }
    }
  }, async (request) => {
    const { userId, workspaceId, checkpointId } = request.params
    return await workspaces.restoreCheckpoint(request.caller, userId, workspaceId, checkpointId)
  })

  app.delete<{ Params: Static<typeof CheckpointParams> }>('/users/:userId/workspaces/:workspaceId/checkpoints/:checkpointId', {
    schema: {
      operationId: 'deleteCheckpoint',
      summary: 'Delete a checkpoint',
      tags,
      params: CheckpointParams,
      response: { 204: NoContent, ...errorResponses(400, 401, 403, 404, 429) }
    }
  }, async (request, reply) => {
    const { userId, workspaceId, checkpointId } = request.params
    await workspaces.deleteCheckpoint(request.caller, userId, workspaceId, checkpointId)
    return await reply.code(204).send()
  })
}

// Encapsulated: the upload's catch-all content-type parser stays with it (a child context). fp adds the name and the
// dependencies, checked at boot: rate limiting, metrics and the docs hook routes as they are added.
export default fp(workspaceRoutes, {
  name: 'routes-workspaces',
  dependencies: ['gateway-services', 'gateway-errors', 'gateway-docs', 'gateway-auth', 'gateway-rate-limit'],
  encapsulate: true
})
