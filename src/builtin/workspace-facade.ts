import type { Readable } from 'node:stream'
import type { FileHandle } from 'node:fs/promises'
import { HttpError } from '../errors.js'
import { actingUserId } from '../routing/tenancy.js'
import type { Caller } from '../routing/types.js'
import type { CheckpointInfo } from './workspace/checkpoint-store.js'
import type { UploadResult, WorkspaceLifecycle, WorkspaceSummary } from './workspace/lifecycle.js'

/**
 * The workspace use cases, one method per HTTP operation (the /users/{userId}/workspaces routes),
 * with the tenancy rule applied here rather than in the routes: a tenant key acts on its own
 * userId's workspaces only (GW_TENANT_MISMATCH otherwise), an admin key on any tenant's.
 */
export class WorkspaceFacade {
  readonly #lifecycle: WorkspaceLifecycle | undefined

  /** Without a lifecycle (a test that supplies its own built-in source) every operation is a 404. */
  constructor (lifecycle: WorkspaceLifecycle | undefined) {
    this.#lifecycle = lifecycle
  }

  /**
   * The tenancy check alone, for the HTTP layer to make before it reads an upload's body: a caller
   * that may not act for `userId` is refused (GW_TENANT_MISMATCH) before any byte is read.
   */
  authorize (caller: Caller, userId: string): void {
    actingUserId(caller, userId)
  }

  #on (caller: Caller, userId: string): { lc: WorkspaceLifecycle, tenant: string } {
    const tenant = actingUserId(caller, userId) ?? userId
    if (this.#lifecycle === undefined) throw new HttpError('GW_NOT_FOUND', 'Workspaces are not available on this server')
    return { lc: this.#lifecycle, tenant }
  }

  async list (caller: Caller, userId: string): Promise<WorkspaceSummary[]> {
    const { lc, tenant } = this.#on(caller, userId)
    return await lc.list(tenant)
  }

  /** Replaces (or with `merge`, extends) the workspace's content with a tar or tar.gz stream (the format read from its bytes). */
  async upload (caller: Caller, userId: string, workspaceId: string, body: Readable, opts: { merge: boolean, signal?: AbortSignal }): Promise<UploadResult> {
    const { lc, tenant } = this.#on(caller, userId)
    return await lc.upload(tenant, workspaceId, body, {
      mode: opts.merge ? 'merge' : 'replace',
      ...(opts.signal !== undefined ? { signal: opts.signal } : {})
    })
  }

  async archive (caller: Caller, userId: string, workspaceId: string, subPath: string | undefined, signal?: AbortSignal): Promise<Readable> {
    const { lc, tenant } = this.#on(caller, userId)
    return await lc.archive(tenant, workspaceId, subPath, signal)
  }

  async file (caller: Caller, userId: string, workspaceId: string, filePath: string): Promise<{ fh: FileHandle, size: number, rel: string }> {
    const { lc, tenant } = this.#on(caller, userId)
    return await lc.file(tenant, workspaceId, filePath)
  }

  async delete (caller: Caller, userId: string, workspaceId: string): Promise<void> {
    const { lc, tenant } = this.#on(caller, userId)
    await lc.delete(tenant, workspaceId)
  }

  async createCheckpoint (caller: Caller, userId: string, workspaceId: string, label: string | undefined): Promise<CheckpointInfo> {
    const { lc, tenant } = this.#on(caller, userId)
    return await lc.createCheckpoint(tenant, workspaceId, label)
  }

  async listCheckpoints (caller: Caller, userId: string, workspaceId: string): Promise<CheckpointInfo[]> {
    const { lc, tenant } = this.#on(caller, userId)
    return await lc.listCheckpoints(tenant, workspaceId)
  }

  async restoreCheckpoint (caller: Caller, userId: string, workspaceId: string, checkpointId: string): Promise<{ restored: true, checkpointId: string }> {
    const { lc, tenant } = this.#on(caller, userId)
    return await lc.restoreCheckpoint(tenant, workspaceId, checkpointId)
  }

  async deleteCheckpoint (caller: Caller, userId: string, workspaceId: string, checkpointId: string): Promise<void> {
    const { lc, tenant } = this.#on(caller, userId)
    await lc.deleteCheckpoint(tenant, workspaceId, checkpointId)
  }
}
