/**
 * Applying a parsed patch to a workspace, atomically.
 *
 * Codex applies hunks one by one, so a failure in the third hunk leaves the first two
 * applied. Here every hunk is first staged against an overlay of the files it touches (so a
 * later hunk sees what an earlier one did, exactly as sequential application would), every path
 * (sources and Move-to destinations) is resolved beneath the root on file descriptors
 * (`target.ts`, `workspace/fd-tree.ts`: docs/ARCHITECTURE.md#fd-layer, no path is checked and then reused by name), and
 * every new content is computed before the first write. Only then are the changes written; if a
 * write fails midway (disk full, permissions), what was already written is undone.
 *
 * Memory is bounded (a tenant cannot make the gateway hold a huge patch target): only files a hunk must read are read, each up to
 * APPLY_PATCH_MAX_FILE_BYTES and all together up to APPLY_PATCH_MAX_STAGED_BYTES. Deleted files
 * and moved-away sources are never held: the commit renames them into a per-call trash folder
 * (see `Trash`), the rollback renames them back, and a success removes the trash. An updated
 * file keeps its bytes in memory (it was read anyway, and capped) and stays in place until the
 * atomic rename of its new content; rolling it back rewrites those bytes only if it changed.
 */
import type { FileHandle } from 'node:fs/promises'
import { rmdir } from 'node:fs/promises'
import { ToolError } from '../types.js'
import type { Workspace } from '../types.js'
import { at, errnoOf } from '../workspace/fd.js'
import { locate, lstatAt, openFileIn, removeFile, renameAt, writeFileAtomic } from '../workspace/fd-tree.js'
import { applyChunks } from './apply.js'
import { parsePatch } from './parser.js'
import type { Hunk } from './parser.js'
import { resolveTarget, Trash } from './target.js'
import type { Slot, Target } from './target.js'

/** Largest file a patch reads (to update it, or to keep a file it overwrites); like edit's cap. */
const APPLY_PATCH_MAX_FILE_BYTES = 10 * 1024 * 1024
/** Most bytes of existing files one patch holds in memory, all files together. */
const APPLY_PATCH_MAX_STAGED_BYTES = 64 * 1024 * 1024

/**
 * What one hunk did. `operation` is:
 * - `add`: Add File (an existing file is overwritten, as in Codex; its lines count as removed)
 * - `update`: Update File without Move to
 * - `move`: Update File with Move to; `path` is the destination, `movedFrom` the source
 * - `delete`: Delete File
 */
export interface FileChange {
  path: string
  operation: 'add' | 'update' | 'delete' | 'move'
  linesAdded: number
  linesRemoved: number
  movedFrom?: string
}

/** The result of a successful apply_patch; paths are workspace-relative. */
export interface ApplyPatchResult {
  /** Number of distinct paths created, changed or removed (a move counts both ends). */
  filesChanged: number
  /** Number of hunks (file operations) in the patch. */
  operationsApplied: number
  /** The distinct paths, in the order the patch first touches them. */
  changedFiles: string[]
  fileChanges: FileChange[]
}

type FileState =
  | { kind: 'missing' }
  | { kind: 'dir' }
  | { kind: 'file', data: Buffer | string }

interface Entry {
  target: Target
  /** What was on disk before the patch. */
  disk: 'missing' | 'dir' | 'file'
  /**
   * The file's bytes before the patch, when a hunk read them (updates; a small file an Add or a
   * move overwrites): the rollback rewrites them. Undefined for a file never read: the commit
   * parks it in the trash before replacing or deleting it.
   */
  original: Buffer | undefined
  /** Lines of the file before the patch, when known without holding it (0 when not counted). */
  originalLines: number
  /** Staged state after the hunks seen so far. */
  current: FileState
  /** Hard-link count of the file on disk before the patch (0 when there was none). */
  links: number
  /** Size of the file on disk before the patch (0 when there was none), for the quota's delta. */
  diskSize: number
}

const utf8 = new TextDecoder('utf-8', { fatal: true })

function countLines (data: Buffer | string): number {
  const text = typeof data === 'string' ? data : data.toString('utf8')
  if (text === '') return 0
  let n = 0
  for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', i + 1)) n++
  return text.endsWith('\n') ? n : n + 1
}

/** A failure message that never carries a host path: the resolver's ToolError text, or an errno code. */
function describe (err: unknown): string {
  if (err instanceof ToolError) return err.message
  return errnoOf(err) ?? 'unexpected error'
}

/** Reads an open regular file's `size` bytes, refusing more than `max` (it may grow under us). */
async function readAll (fh: FileHandle, size: number, max: number): Promise<Buffer | undefined> {
  const buf = Buffer.allocUnsafe(Math.min(size, max) + 1)
  let got = 0
  while (got < buf.length) {
    const { bytesRead } = await fh.read(buf, got, buf.length - got, got)
    if (bytesRead === 0) break
    got += bytesRead
  }
  return got > max ? undefined : buf.subarray(0, got)
}

/** Counts a file's lines through a small buffer, never holding the file. */
async function streamLines (fh: FileHandle): Promise<number> {
  const buf = Buffer.allocUnsafe(64 * 1024)
  let n = 0
  let last = -1
  let pos = 0
  for (;;) {
    const { bytesRead } = await fh.read(buf, 0, buf.length, pos)
    if (bytesRead === 0) break
    pos += bytesRead
    for (let i = buf.indexOf(0x0a); i >= 0 && i < bytesRead; i = buf.indexOf(0x0a, i + 1)) n++
    last = buf[bytesRead - 1] as number
  }
  return last === -1 || last === 0x0a ? n : n + 1
}

/** What a hunk needs of a file it touches first. */
type Need =
  /** Its text (Update File): read it, within the caps, or fail. */
  | 'text'
  /** Replaced by new content (Add File, Move to): kept in memory when small, else parked in the trash. */
  | 'replace'
  /** Deleted: never held; its lines are counted through a small buffer when it is small. */
  | 'delete'

/** The staging area: one entry per real path the patch touches. */
class Stage {
  readonly #ws: Workspace
  readonly #entries = new Map<string, Entry>()
  /** Directories that do not exist yet and will be created by writes (removed again on rollback). */
  readonly newDirs = new Set<string>()
  readonly changedFiles: string[] = []
  /** Bytes of existing files held in memory (APPLY_PATCH_MAX_STAGED_BYTES). */
  #held = 0
  /** Bytes read to count lines of files not held (bounded the same way: a patch's reading is finite). */
  #counted = 0

  constructor (ws: Workspace) {
    this.#ws = ws
  }

  get entries (): Entry[] {
    return [...this.#entries.values()]
  }

  async open (input: string, need: Need): Promise<Entry> {
    const target = await resolveTarget(this.#ws, input)
    try {
      let entry = this.#entries.get(target.key)
      if (entry !== undefined) return entry
      const st = target.st
      let disk: Entry['disk'] = 'missing'
      if (st?.isDirectory() === true) disk = 'dir'
      else if (st?.isFile() === true) disk = 'file'
      // A FIFO or device would block or stream forever; only regular files are patched.
      else if (st !== undefined) throw new ToolError(`Failed to read ${target.rel}: not a regular file`)
      entry = {
        target,
        disk,
        original: undefined,
        originalLines: 0,
        current: { kind: disk === 'dir' ? 'dir' : 'missing' },
        links: st?.nlink ?? 0,
        diskSize: disk === 'file' ? (st?.size ?? 0) : 0
      }
      if (disk === 'file' && target.dir !== undefined) await this.#load(entry, target.dir, need)
      this.#entries.set(target.key, entry)
      return entry
    } finally {
      await target.dir?.close().catch(() => {})
    }
  }

  async #load (entry: Entry, dir: FileHandle, need: Need): Promise<void> {
    const { rel, chain } = entry.target
    const name = chain[chain.length - 1] as string
    // Checked on the fd: whatever the name is now, we read the regular file it opened.
    const opened = await openFileIn(dir, name)
    if (opened === undefined) throw new ToolError(`Failed to read ${rel}: not a regular file`)
    const { fh, st } = opened
    try {
      entry.links = st.nlink
      const fits = st.size <= APPLY_PATCH_MAX_FILE_BYTES && this.#held + st.size <= APPLY_PATCH_MAX_STAGED_BYTES
      if (need === 'text' || (need === 'replace' && fits)) {
        if (st.size > APPLY_PATCH_MAX_FILE_BYTES) {
          throw new ToolError(`File is too large to patch (${st.size} bytes, max ${APPLY_PATCH_MAX_FILE_BYTES}): ${rel}`)
        }
        if (this.#held + st.size > APPLY_PATCH_MAX_STAGED_BYTES) {
          throw new ToolError(`Patch reads too much: ${rel} would bring the files held to ${this.#held + st.size} bytes, max ${APPLY_PATCH_MAX_STAGED_BYTES}`)
        }
        const data = await readAll(fh, st.size, APPLY_PATCH_MAX_FILE_BYTES)
        if (data === undefined) throw new ToolError(`File is too large to patch (more than ${APPLY_PATCH_MAX_FILE_BYTES} bytes): ${rel}`)
        this.#held += data.length
        entry.original = data
        entry.originalLines = countLines(data)
        entry.current = { kind: 'file', data }
        return
      }
      // Not held. Its lines are counted when that costs little; a larger file reports 0.
      if (st.size <= APPLY_PATCH_MAX_FILE_BYTES && this.#counted + st.size <= APPLY_PATCH_MAX_STAGED_BYTES) {
        this.#counted += st.size
        entry.originalLines = await streamLines(fh)
      }
      // Present, content not loaded: only a Delete or a replacement can follow from here.
      entry.current = { kind: 'file', data: UNREAD }
    } finally {
      await fh.close().catch(() => {})
    }
  }

  touch (entry: Entry): void {
    if (!this.changedFiles.includes(entry.target.rel)) this.changedFiles.push(entry.target.rel)
  }

  /** Refuses a write whose target is (or will be) a directory or whose parent is (or will be) a file. */
  checkWritable (entry: Entry): void {
    const { key, rel, chain, parents } = entry.target
    const prefix = key + '/'
    const isDir = entry.current.kind === 'dir' ||
      this.entries.some((e) => e.current.kind === 'file' && e.target.key.startsWith(prefix))
    if (isDir) throw new ToolError(`Failed to write file ${rel}: path is a directory`)
    // The writer refuses these too; finding out now keeps the failure before any write.
    if (entry.links > 1) throw new ToolError(`Failed to write file ${rel}: refusing to write to a file with multiple hard links`, 'forbidden')
    for (let i = chain.length - 2; i >= 0; i--) {
      const dirKey = chain.slice(0, i + 1).join('/')
      const staged = this.#entries.get(dirKey)
      if (staged !== undefined && staged.current.kind === 'file') {
        throw new ToolError(`Failed to write file ${rel}: a parent path is a file`)
      }
      if (staged !== undefined && staged.current.kind === 'missing') {
        // A file this patch deletes (or one that never was), replaced by a directory the writes will create.
        this.newDirs.add(dirKey)
        continue
      }
      const kind = parents[i]
      if (kind === 'dir') return
      if (kind === 'file') throw new ToolError(`Failed to write file ${rel}: a parent path is a file`)
      this.newDirs.add(dirKey)
    }
  }
}

/** Marks a file whose content was not read (it is replaced or deleted, never patched). */
const UNREAD = Buffer.alloc(0)

function textOf (entry: Entry, verb: string): string {
  const state = entry.current
  if (state.kind === 'missing') throw new ToolError(`Failed to ${verb} ${entry.target.rel}: No such file or directory`)
  if (state.kind === 'dir') throw new ToolError(`Failed to ${verb} ${entry.target.rel}: path is a directory`)
  // (An unread file is only ever opened for 'replace' or 'delete'; its next state is set by that hunk.)
  if (state.data === UNREAD) throw new ToolError(`Failed to ${verb} ${entry.target.rel}: the file was not read`)
  let text: string
  if (typeof state.data === 'string') {
    text = state.data
  } else {
    try {
      text = utf8.decode(state.data)
    } catch {
      // Rewriting a binary file through a text patch would corrupt it.
      throw new ToolError(`Failed to ${verb} ${entry.target.rel}: the file is not valid UTF-8 text`)
    }
  }
  if (text.includes('\0')) throw new ToolError(`Failed to ${verb} ${entry.target.rel}: the file contains NUL bytes (binary data is not patched)`)
  return text
}

function linesOf (entry: Entry): number {
  const state = entry.current
  if (state.kind !== 'file') return 0
  return state.data === UNREAD ? entry.originalLines : countLines(state.data)
}

async function stageHunk (stage: Stage, hunk: Hunk): Promise<FileChange> {
  if (hunk.type === 'add') {
    const entry = await stage.open(hunk.path, 'replace')
    stage.checkWritable(entry)
    const linesRemoved = linesOf(entry)
    entry.current = { kind: 'file', data: hunk.contents }
    stage.touch(entry)
    return { path: entry.target.rel, operation: 'add', linesAdded: hunk.lineCount, linesRemoved }
  }
  if (hunk.type === 'delete') {
    const entry = await stage.open(hunk.path, 'delete')
    const state = entry.current
    if (state.kind === 'missing') throw new ToolError(`Failed to delete file ${entry.target.rel}: No such file or directory`)
    if (state.kind === 'dir') throw new ToolError(`Failed to delete file ${entry.target.rel}: path is a directory`)
    const linesRemoved = linesOf(entry)
    entry.current = { kind: 'missing' }
    stage.touch(entry)
    return { path: entry.target.rel, operation: 'delete', linesAdded: 0, linesRemoved }
  }

  const source = await stage.open(hunk.path, 'text')
  const text = textOf(source, 'read file to update')
  const result = applyChunks(text, hunk.chunks, source.target.rel)
  if (!result.ok) throw new ToolError(result.message)
  const linesAdded = hunk.chunks.reduce((n, c) => n + c.added, 0)
  const linesRemoved = hunk.chunks.reduce((n, c) => n + c.removed, 0)

  const dest = hunk.movePath === undefined ? source : await stage.open(hunk.movePath, 'replace')
  if (dest === source) {
    // Codex writes the destination then deletes the source, which for "Move to" the same
    // path would delete the file; a move onto itself is a plain update here.
    stage.checkWritable(source)
    source.current = { kind: 'file', data: result.content }
    stage.touch(source)
    return { path: source.target.rel, operation: 'update', linesAdded, linesRemoved }
  }
  stage.checkWritable(dest)
  source.current = { kind: 'missing' }
  dest.current = { kind: 'file', data: result.content }
  stage.touch(source)
  stage.touch(dest)
  return { path: dest.target.rel, operation: 'move', movedFrom: source.target.rel, linesAdded, linesRemoved }
}

function sameBytes (original: Buffer | undefined, data: Buffer | string): boolean {
  if (original === undefined) return false
  return original.equals(typeof data === 'string' ? Buffer.from(data, 'utf8') : data)
}

/**
 * The filesystem changes a commit makes (and its rollback undoes); tests replace them to
 * simulate a disk failing midway. `writeFileAtomic` writes a file by its real path below the
 * root (fd-tree.ts resolves it again, on fds); `renameAt` parks a file in the trash and brings it back.
 */
export interface PatchIo {
  writeFileAtomic: (ws: Workspace, input: string, data: string | Buffer) => Promise<unknown>
  renameAt: typeof renameAt
}

export interface ApplyPatchOptions {
  /** Checked once more before the first write. */
  signal?: AbortSignal
  io?: PatchIo
  /**
   * Called with the whole patch's change (bytes and entries, net of deletes) once everything is
   * staged and before the first write; throwing refuses the patch with nothing written (the quota).
   */
  beforeWrite?: (change: { deltaBytes: number, deltaFiles: number }) => Promise<void>
}

/** What committing the stage changes: bytes of regular files and entries (files and new folders). */
function stagedChange (stage: Stage): { deltaBytes: number, deltaFiles: number } {
  let deltaBytes = 0
  let deltaFiles = stage.newDirs.size
  for (const e of stage.entries) {
    const before = e.disk === 'file' ? e.diskSize : 0
    const state = e.current
    const after = state.kind !== 'file' ? 0 : state.data === UNREAD ? e.diskSize : Buffer.byteLength(state.data)
    deltaBytes += after - before
    if (e.disk !== 'file' && state.kind === 'file') deltaFiles++
    if (e.disk === 'file' && state.kind !== 'file') deltaFiles--
  }
  return { deltaBytes, deltaFiles }
}

/** One change the commit started, recorded before it was attempted. */
type Step =
  | { kind: 'park', entry: Entry, slot: Slot }
  | { kind: 'write', entry: Entry }

/** Runs `use` on the entry's (parent fd, name), resolved again beneath the root. */
async function withLocation<T> (ws: Workspace, key: string, use: (dir: FileHandle, name: string) => Promise<T>): Promise<T> {
  const loc = await locate(ws, key, 'write')
  try {
    if (loc.name === '') throw new ToolError(`Path is a directory: ${key}`)
    return await use(loc.parent, loc.name)
  } finally {
    await loc.close()
  }
}

/** True when the file at `key` is a regular file holding exactly `bytes`. */
async function holds (ws: Workspace, key: string, bytes: Buffer): Promise<boolean> {
  try {
    return await withLocation(ws, key, async (dir, name) => {
      const opened = await openFileIn(dir, name)
      if (opened === undefined) return false
      try {
        if (opened.st.size !== bytes.length) return false
        const data = await readAll(opened.fh, opened.st.size, bytes.length)
        return data !== undefined && data.equals(bytes)
      } finally {
        await opened.fh.close().catch(() => {})
      }
    })
  } catch {
    return false
  }
}

async function exists (ws: Workspace, key: string): Promise<boolean> {
  try {
    return await withLocation(ws, key, async (dir, name) => (await lstatAt(dir, name)) !== undefined)
  } catch {
    return false
  }
}

/** Writes the staged changes; on failure restores what was written and rethrows. */
async function commit (ws: Workspace, stage: Stage, io: PatchIo, trash: Trash): Promise<void> {
  const deletes = stage.entries.filter((e) => e.current.kind === 'missing' && e.disk === 'file')
  const writes = stage.entries.filter((e) => e.current.kind === 'file' && !sameBytes(e.original, e.current.data))
  // Recorded before each change: one that fails after taking effect (a failing chown after the
  // rename, say) has still changed the file, so the failing entry is rolled back too.
  const steps: Step[] = []
  const park = async (e: Entry): Promise<void> => {
    const slot = await trash.reserve()
    steps.push({ kind: 'park', entry: e, slot })
    await withLocation(ws, e.target.key, async (dir, name) => { await trash.put(dir, name, slot, io.renameAt) })
  }
  try {
    // Deletes first, so "Delete a" followed by "Add a/b" finds no file in the way.
    for (const e of deletes) await park(e)
    for (const e of writes) {
      if (e.current.kind !== 'file') continue
      // A file replaced without being read: parked, so the rollback has it back whole.
      if (e.disk === 'file' && e.original === undefined) await park(e)
      steps.push({ kind: 'write', entry: e })
      await io.writeFileAtomic(ws, e.target.key, e.current.data)
    }
  } catch (err) {
    const failed: string[] = []
    const undo = steps.reverse()
    // Files the patch created go first, then the folders made for them, and only then are the
    // files that existed restored: one of them may have become one of those folders ("Delete a"
    // then "Add a/b"), and can only be put back once its name is free again.
    for (const step of undo) {
      if (step.kind !== 'write' || step.entry.disk === 'file') continue
      try {
        if (await exists(ws, step.entry.target.key)) await removeFile(ws, step.entry.target.key)
      } catch {
        failed.push(step.entry.target.rel)
      }
    }
    // Deepest first; rmdir only removes empty directories, so nothing else is lost.
    for (const dir of [...stage.newDirs].sort((a, b) => b.split('/').length - a.split('/').length)) {
      await withLocation(ws, dir, async (parent, name) => { await rmdir(at(parent, name)) }).catch(() => {})
    }
    for (const step of undo) {
      const e = step.entry
      try {
        if (step.kind === 'park') {
          if (await trash.holds(step.slot)) {
            await withLocation(ws, e.target.key, async (dir, name) => { await io.renameAt(step.slot.bin.fh, step.slot.name, dir, name) })
          }
        } else if (e.original !== undefined) {
          // The failing write has usually not reached its file (the temp file is gone): rewriting
          // a file that still holds its original needs free space a full disk does not have.
          if (!(await holds(ws, e.target.key, e.original))) await io.writeFileAtomic(ws, e.target.key, e.original)
        }
      } catch {
        if (!failed.includes(e.target.rel)) failed.push(e.target.rel)
      }
    }
    const restored = failed.length === 0
      ? 'every change already written was rolled back'
      : `rollback failed for: ${failed.join(', ')}`
    // A file that could not be put back stays in the trash rather than being lost.
    if (failed.length === 0) await trash.dispose()
    else await trash.abandon()
    throw new ToolError(`Failed to apply patch: ${describe(err)}; ${restored}`)
  }
  await trash.dispose()
}

const DEFAULT_IO: PatchIo = {
  writeFileAtomic: async (ws, input, data) => await writeFileAtomic(ws, input, data),
  renameAt
}

/**
 * Parses and applies a patch to the workspace. All or nothing: any parse error, path
 * refusal, missing file or unmatched chunk throws a ToolError before anything is written.
 */
export async function applyPatch (ws: Workspace, patchText: string, opts: ApplyPatchOptions = {}): Promise<ApplyPatchResult> {
  // The patch is text, and so is every file it updates: a NUL byte means binary data.
  if (patchText.includes('\0')) throw new ToolError('invalid patch: the patch contains a NUL byte (apply_patch works on text only)', 'invalid-arguments')
  const parsed = parsePatch(patchText)
  if (!parsed.ok) throw new ToolError(parsed.message)
  if (parsed.hunks.length === 0) throw new ToolError('No files were modified.')

  const stage = new Stage(ws)
  const fileChanges: FileChange[] = []
  for (const hunk of parsed.hunks) fileChanges.push(await stageHunk(stage, hunk))

  // A call that timed out or whose caller left must not change the workspace afterwards.
  if (opts.signal?.aborted === true) throw new ToolError('apply_patch was cancelled before writing; nothing was changed', 'timeout')
  await opts.beforeWrite?.(stagedChange(stage))
  await commit(ws, stage, opts.io ?? DEFAULT_IO, new Trash(ws))

  return {
    filesChanged: stage.changedFiles.length,
    operationsApplied: parsed.hunks.length,
    changedFiles: stage.changedFiles,
    fileChanges
  }
}
