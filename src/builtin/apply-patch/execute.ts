/**
 * Applying a parsed patch to a workspace, atomically.
 *
 * Codex applies hunks one by one, so a failure in the third hunk leaves the first two
 * applied. Here every hunk is first staged against an in-memory overlay of the files it
 * touches (so a later hunk sees what an earlier one did, exactly as sequential application
 * would), every path (sources and Move-to destinations) goes through the workspace
 * resolver, and every new content is computed before the first write. Only then are the
 * changes written; if a write fails midway (disk full, permissions), what was already
 * written is restored from in-memory backups.
 */
import { lstat, readFile, rmdir, stat } from 'node:fs/promises'
import { dirname, sep } from 'node:path'
import { ToolError } from '../types.js'
import type { Workspace } from '../types.js'
import { removePath, resolveWritePath, writeFileAtomic } from '../workspace/paths.js'
import type { ResolvedPath } from '../workspace/paths.js'
import { applyChunks } from './apply.js'
import { parsePatch } from './parser.js'
import type { Hunk } from './parser.js'

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

/** The result of a successful apply_patch (SPEC 4); paths are workspace-relative. */
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
  target: ResolvedPath
  /** On-disk content before the patch (the rollback backup); null when there was no file. */
  original: Buffer | null
  /** Staged state after the hunks seen so far. */
  current: FileState
  /** Hard-link count of the file on disk before the patch (0 when there was none). */
  links: number
}

const utf8 = new TextDecoder('utf-8', { fatal: true })

function countLines (data: Buffer | string): number {
  const text = typeof data === 'string' ? data : data.toString('utf8')
  if (text === '') return 0
  let n = 0
  for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', i + 1)) n++
  return text.endsWith('\n') ? n : n + 1
}

function errnoCode (err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'string' ? err.code : undefined
}

/** A failure message that never carries a host path: the resolver's ToolError text, or an errno code. */
function describe (err: unknown): string {
  if (err instanceof ToolError) return err.message
  return errnoCode(err) ?? 'unexpected error'
}

/** What is on disk at `abs`; a path under a file counts as missing (checkWritable reports it). */
async function diskState (abs: string): Promise<{ state: FileState, links: number }> {
  try {
    const st = await stat(abs)
    if (st.isDirectory()) return { state: { kind: 'dir' }, links: 0 }
    // A FIFO or device would block or stream forever; only regular files are patched.
    if (!st.isFile()) throw new ToolError('not a regular file')
    return { state: { kind: 'file', data: await readFile(abs) }, links: st.nlink }
  } catch (err) {
    const code = errnoCode(err)
    if (code === 'ENOENT' || code === 'ENOTDIR') return { state: { kind: 'missing' }, links: 0 }
    throw err
  }
}

async function exists (abs: string): Promise<boolean> {
  try {
    await lstat(abs)
    return true
  } catch (err) {
    const code = errnoCode(err)
    if (code === 'ENOENT' || code === 'ENOTDIR') return false
    throw err
  }
}

/** True when `abs` is readable and holds exactly `bytes`. */
async function holds (abs: string, bytes: Buffer): Promise<boolean> {
  try {
    return (await readFile(abs)).equals(bytes)
  } catch {
    return false
  }
}

/** The staging area: one entry per resolved path the patch touches. */
class Stage {
  readonly #ws: Workspace
  readonly #entries = new Map<string, Entry>()
  /** Directories that do not exist yet and will be created by writes (removed again on rollback). */
  readonly newDirs = new Set<string>()
  readonly changedFiles: string[] = []

  constructor (ws: Workspace) {
    this.#ws = ws
  }

  get entries (): Entry[] {
    return [...this.#entries.values()]
  }

  async open (input: string): Promise<Entry> {
    const target = await resolveWritePath(this.#ws, input)
    let entry = this.#entries.get(target.abs)
    if (entry === undefined) {
      const { state, links } = await diskState(target.abs).catch((err: unknown) => {
        throw new ToolError(`Failed to read ${target.rel}: ${describe(err)}`)
      })
      entry = { target, original: state.kind === 'file' ? state.data as Buffer : null, current: state, links }
      this.#entries.set(target.abs, entry)
    }
    return entry
  }

  touch (entry: Entry): void {
    if (!this.changedFiles.includes(entry.target.rel)) this.changedFiles.push(entry.target.rel)
  }

  /** Refuses a write whose target is (or will be) a directory or whose parent is (or will be) a file. */
  async checkWritable (entry: Entry): Promise<void> {
    const { abs, rel } = entry.target
    const prefix = abs + sep
    const isDir = entry.current.kind === 'dir' ||
      this.entries.some((e) => e.current.kind === 'file' && e.target.abs.startsWith(prefix))
    if (isDir) throw new ToolError(`Failed to write file ${rel}: path is a directory`)
    // The writer refuses these too; finding out now keeps the failure before any write.
    if (entry.links > 1) throw new ToolError(`Failed to write file ${rel}: refusing to write to a file with multiple hard links`, 'forbidden')
    const root = this.#ws.root
    for (let dir = dirname(abs); dir.startsWith(root + sep) && dir !== dirname(dir); dir = dirname(dir)) {
      const staged = this.#entries.get(dir)
      if (staged !== undefined && staged.current.kind === 'file') {
        throw new ToolError(`Failed to write file ${rel}: a parent path is a file`)
      }
      if (staged !== undefined && staged.current.kind === 'missing') {
        // A file this patch deletes, replaced by a directory the writes will create.
        this.newDirs.add(dir)
        continue
      }
      let kind: 'dir' | 'file' | 'missing'
      try {
        kind = (await stat(dir)).isDirectory() ? 'dir' : 'file'
      } catch (err) {
        // ENOTDIR: a file higher up, which the walk reaches next (a file this patch deletes, or a refusal).
        const code = errnoCode(err)
        if (code !== 'ENOENT' && code !== 'ENOTDIR') throw new ToolError(`Failed to write file ${rel}: ${describe(err)}`)
        kind = 'missing'
      }
      if (kind === 'dir') return
      if (kind === 'file') throw new ToolError(`Failed to write file ${rel}: a parent path is a file`)
      this.newDirs.add(dir)
    }
  }
}

function textOf (entry: Entry, verb: string): string {
  const state = entry.current
  if (state.kind === 'missing') throw new ToolError(`Failed to ${verb} ${entry.target.rel}: No such file or directory`)
  if (state.kind === 'dir') throw new ToolError(`Failed to ${verb} ${entry.target.rel}: path is a directory`)
  if (typeof state.data === 'string') return state.data
  try {
    return utf8.decode(state.data)
  } catch {
    // Rewriting a binary file through a text patch would corrupt it.
    throw new ToolError(`Failed to ${verb} ${entry.target.rel}: the file is not valid UTF-8 text`)
  }
}

async function stageHunk (stage: Stage, hunk: Hunk): Promise<FileChange> {
  if (hunk.type === 'add') {
    const entry = await stage.open(hunk.path)
    await stage.checkWritable(entry)
    const linesRemoved = entry.current.kind === 'file' ? countLines(entry.current.data) : 0
    entry.current = { kind: 'file', data: hunk.contents }
    stage.touch(entry)
    return { path: entry.target.rel, operation: 'add', linesAdded: hunk.lineCount, linesRemoved }
  }
  if (hunk.type === 'delete') {
    const entry = await stage.open(hunk.path)
    const state = entry.current
    if (state.kind === 'missing') throw new ToolError(`Failed to delete file ${entry.target.rel}: No such file or directory`)
    if (state.kind === 'dir') throw new ToolError(`Failed to delete file ${entry.target.rel}: path is a directory`)
    entry.current = { kind: 'missing' }
    stage.touch(entry)
    return { path: entry.target.rel, operation: 'delete', linesAdded: 0, linesRemoved: countLines(state.data) }
  }

  const source = await stage.open(hunk.path)
  const text = textOf(source, 'read file to update')
  const result = applyChunks(text, hunk.chunks, source.target.rel)
  if (!result.ok) throw new ToolError(result.message)
  const linesAdded = hunk.chunks.reduce((n, c) => n + c.added, 0)
  const linesRemoved = hunk.chunks.reduce((n, c) => n + c.removed, 0)

  const dest = hunk.movePath === undefined ? source : await stage.open(hunk.movePath)
  if (dest === source) {
    // Codex writes the destination then deletes the source, which for "Move to" the same
    // path would delete the file; a move onto itself is a plain update here.
    await stage.checkWritable(source)
    source.current = { kind: 'file', data: result.content }
    stage.touch(source)
    return { path: source.target.rel, operation: 'update', linesAdded, linesRemoved }
  }
  await stage.checkWritable(dest)
  source.current = { kind: 'missing' }
  dest.current = { kind: 'file', data: result.content }
  stage.touch(source)
  stage.touch(dest)
  return { path: dest.target.rel, operation: 'move', movedFrom: source.target.rel, linesAdded, linesRemoved }
}

function sameBytes (original: Buffer | null, data: Buffer | string): boolean {
  if (original === null) return false
  return original.equals(typeof data === 'string' ? Buffer.from(data, 'utf8') : data)
}

/** The writes a commit makes; tests replace them to simulate a disk failing midway. */
export interface PatchIo {
  writeFileAtomic: typeof writeFileAtomic
  removePath: typeof removePath
}

export interface ApplyPatchOptions {
  /** Checked once more before the first write. */
  signal?: AbortSignal
  io?: PatchIo
}

/** Writes the staged changes; on failure restores what was written and rethrows. */
async function commit (ws: Workspace, stage: Stage, io: PatchIo): Promise<void> {
  const deletes = stage.entries.filter((e) => e.current.kind === 'missing' && e.original !== null)
  const writes = stage.entries.filter((e) => e.current.kind === 'file' && !sameBytes(e.original, e.current.data))
  // Recorded before each write: a write that fails after renaming (a failing chown, say)
  // has still changed the file, so the failing entry is rolled back too.
  const attempted: Entry[] = []
  try {
    // Deletes first, so "Delete a" followed by "Add a/b" finds no file in the way.
    for (const e of deletes) {
      attempted.push(e)
      await io.removePath(ws, e.target)
    }
    for (const e of writes) {
      if (e.current.kind !== 'file') continue
      attempted.push(e)
      await io.writeFileAtomic(ws, e.target, e.current.data)
    }
  } catch (err) {
    const failed: string[] = []
    const undo = attempted.reverse()
    // Files the patch created go first, then the folders made for them, and only then are the
    // files that existed restored: one of them may have become one of those folders ("Delete a"
    // then "Add a/b"), and can only be written back once its name is free again.
    for (const e of undo) {
      if (e.original !== null) continue
      try {
        if (await exists(e.target.abs)) await io.removePath(ws, e.target)
      } catch {
        failed.push(e.target.rel)
      }
    }
    // Deepest first; rmdir only removes empty directories, so nothing else is lost.
    for (const dir of [...stage.newDirs].sort((a, b) => b.length - a.length)) {
      await rmdir(dir).catch(() => {})
    }
    for (const e of undo) {
      if (e.original === null) continue
      try {
        // The failing write has usually not reached its file (the temp file is gone): rewriting
        // a file that still holds its original needs free space a full disk does not have.
        if (!(await holds(e.target.abs, e.original))) await io.writeFileAtomic(ws, e.target, e.original)
      } catch {
        failed.push(e.target.rel)
      }
    }
    const restored = failed.length === 0
      ? 'every change already written was rolled back'
      : `rollback failed for: ${failed.join(', ')}`
    throw new ToolError(`Failed to apply patch: ${describe(err)}; ${restored}`)
  }
}

/**
 * Parses and applies a patch to the workspace. All or nothing: any parse error, path
 * refusal, missing file or unmatched chunk throws a ToolError before anything is written.
 */
export async function applyPatch (ws: Workspace, patchText: string, opts: ApplyPatchOptions = {}): Promise<ApplyPatchResult> {
  const parsed = parsePatch(patchText)
  if (!parsed.ok) throw new ToolError(parsed.message)
  if (parsed.hunks.length === 0) throw new ToolError('No files were modified.')

  const stage = new Stage(ws)
  const fileChanges: FileChange[] = []
  for (const hunk of parsed.hunks) fileChanges.push(await stageHunk(stage, hunk))

  // A call that timed out or whose caller left must not change the workspace afterwards.
  if (opts.signal?.aborted === true) throw new ToolError('apply_patch was cancelled before writing; nothing was changed', 'timeout')
  await commit(ws, stage, opts.io ?? { writeFileAtomic, removePath })

  return {
    filesChanged: stage.changedFiles.length,
    operationsApplied: parsed.hunks.length,
    changedFiles: stage.changedFiles,
    fileChanges
  }
}
