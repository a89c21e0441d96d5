/**
 * The entries of an uploaded archive, checked and written one at a time into the upload's private
 * staging directory (archive-extract.ts reads the stream and hands them over in archive order).
 *
 * node-tar's Parser only parses; every write is ours, and every entry is checked from its header,
 * before anything of it is written, against a model of what the archive has declared so far (path
 * -> kind). Because only this code writes into the staging directory, the model is the truth about
 * it: a parent the model calls a directory is a real directory, so plain path operations there never
 * pass through a symlink the archive made. Refused: absolute paths, `..`, empty names, a path through
 * a symlink or a file declared earlier, symlinks whose target is absolute or leaves the root
 * (lexically from the link's directory, and again at the end through the archive's other links,
 * since `a/l -> ..` plus `x -> a/l/..` escapes although each looks fine), hard links to anything but
 * a regular file extracted earlier, devices, FIFOs, unknown types, setuid/setgid bits, a path
 * changing type. Limits (bytes as the sum of entry sizes, entries including implied parent
 * directories) are checked at each header, so a 2 GB run of zeros is refused before its first byte
 * is written. Entries the file tools never write (fd-tree.ts `isProtected`: `.git/hooks`, `.ssh`,
 * `.aws`) are skipped, not written, and reported; a git checkout always holds `.git/hooks/*.sample`,
 * so refusing the whole archive would refuse every repository.
 */
import { chmod, lchown, link, lutimes, mkdir, open, symlink, unlink, utimes } from 'node:fs/promises'
import type { FileHandle } from 'node:fs/promises'
import path from 'node:path'
import type { ReadEntry } from 'tar'
import { HttpError } from '../../errors.js'
import { CREATE_FLAGS } from './fd.js'
import { isProtected } from './fd-tree.js'
import { WALK_MAX_DEPTH } from './fd-walk.js'

/** Longest entry path or link target accepted (Linux PATH_MAX is 4096 with its NUL). */
const MAX_PATH_BYTES = 4095
const MAX_SYMLINK_HOPS = 40
/** Places of skipped entries listed in an upload's answer (all are counted). */
const MAX_SKIPPED_LISTED = 100
/** Files whose metadata calls may still run while later entries are written. */
const MAX_TAILS = 64
const SETID_BITS = 0o6000

export interface ArchiveLimits {
  /** Sum of the entries' sizes (as their headers declare them). */
  maxBytes: number
  /** Entries: files, directories (also parents the archive implies), symlinks, hard links. */
  maxFiles: number
}

export interface ExtractOptions {
  /**
   * An empty directory the caller created for this upload only, private to the gateway (0700,
   * outside every workspace; see makeStagingDir). On rejection its content is undefined: the
   * caller deletes it (removeStagingDir).
   */
  stagingDir: string
  limits: ArchiveLimits
  signal?: AbortSignal
  /** When set, everything extracted is chowned to it (the sandbox's uid/gid). */
  owner?: { uid: number, gid: number }
}

export interface ExtractResult {
  /** Bytes of the regular files extracted (a hard-linked file counted once). */
  bytes: number
  /**
   * Entries in the staging directory: files, directories (implied parents too), symlinks, hard
   * links; what usage.ts counts in a workspace and WORKSPACE_MAX_FILES limits.
   */
  files: number
  /**
   * Where entries were skipped because the file tools never write there (`.git/hooks`, `.ssh`,
   * `.aws`): the path down to the protected component, each once, in archive order, at most
   * MAX_SKIPPED_LISTED; a hard link to such a file is named by its own path.
   */
  skipped: string[]
  /** How many entries were skipped (all of them, listed or not). */
  skippedEntries: number
}

type Kind = 'file' | 'dir' | 'symlink'

interface Node {
  kind: Kind
  /** Files: shared by hard links to the same content, so bytes are counted once. */
  blob?: { size: number }
  /** Symlinks: the target as written. */
  target?: string
  /** Directories: metadata applied once everything below is written. */
  mode?: number
  mtime?: Date
}

export function badArchive (message: string): HttpError {
  return new HttpError('GW_BAD_ARCHIVE', message)
}

/** An entry name for a message: quoted, control characters escaped, long ones cut. */
export function quote (name: string): string {
  const q = JSON.stringify(name)
  return q.length > 200 ? `${q.slice(0, 197)}..."` : q
}

/**
 * The path down to the component that makes `segs` protected (`a/.ssh` for `a/.ssh/id`). The
 * decision is isProtected's on the whole path; this only names the place for the report, with
 * the same rule asked about each component and each pair of components.
 */
function protectedPlace (segs: readonly string[]): string {
  for (let i = 0; i < segs.length; i++) {
    if (isProtected(segs.slice(i, i + 1))) return segs.slice(0, i + 1).join('/')
    if (i + 1 < segs.length && isProtected(segs.slice(i, i + 2))) return segs.slice(0, i + 2).join('/')
  }
  return segs.join('/')
}

/**
 * The segments of an entry path below the root, or a refusal. `./a//b/` is `a/b`; the root itself
 * (`./`, as `tar -C dir .` writes it) is [].
 */
function segmentsOf (raw: string, what: string): string[] {
  if (raw.includes('\0')) throw badArchive(`${what} with a NUL byte: ${quote(raw)}`)
  if (raw.startsWith('/')) throw badArchive(`${what} is absolute: ${quote(raw)}`)
  if (Buffer.byteLength(raw) > MAX_PATH_BYTES) throw badArchive(`${what} is too long: ${quote(raw)}`)
  const segs = raw.split('/').filter((s) => s !== '' && s !== '.')
  if (segs.includes('..')) throw badArchive(`${what} has a '..' segment: ${quote(raw)}`)
  if (segs.length > WALK_MAX_DEPTH) throw badArchive(`${what} is nested too deep: ${quote(raw)}`)
  return segs
}

/** Kinds of tar entries we write; everything else (devices, FIFOs, vendor types) is refused. */
const ENTRY_KINDS: ReadonlyMap<string, Kind | 'hardlink'> = new Map([
  ['File', 'file'],
  ['OldFile', 'file'],
  ['ContiguousFile', 'file'],
  ['Directory', 'dir'],
  ['SymbolicLink', 'symlink'],
  ['Link', 'hardlink']
])

/** What one entry will do, decided from its header alone. */
export interface Plan {
  entry: ReadEntry
  kind: Kind | 'hardlink'
  rel: string
  /** Implied parent directories to create first, outermost first. */
  parents: string[]
  /** An entry of the same kind is there already (files and links: replaced; dirs: kept). */
  replace: boolean
  mode: number
  mtime: Date | undefined
  target?: string
  node?: Node
}

export class Extraction {
  readonly model = new Map<string, Node>()
  bytesSeen = 0
  entriesSeen = 0
  readonly skipped = new Set<string>()
  skippedEntries = 0
  /**
   * Why the extraction stopped, once it has. A write waiting for an entry's next chunk is woken by
   * stop(): minipass's async iterator never settles a next() asked after the entry was destroyed,
   * so destroying the entry alone could leave that write, and the whole extraction, pending
   * forever. (One waiter at a time: entries are written one after another. Not a race against a
   * long-lived promise, which would keep every chunk it ever raced alive until the end.)
   */
  #stopped: { err: unknown } | undefined
  #waiter: ((err: unknown) => void) | undefined
  constructor (private readonly opts: ExtractOptions) {}

  stop (err: unknown): void {
    this.#stopped ??= { err }
    this.#waiter?.(err)
  }

  /** The entry's next chunk, or a rejection as soon as the extraction stops. */
  async nextChunk (chunks: AsyncIterator<Buffer>): Promise<IteratorResult<Buffer>> {
    if (this.#stopped !== undefined) throw this.#stopped.err
    return await new Promise<IteratorResult<Buffer>>((resolve, reject) => {
      this.#waiter = reject
      chunks.next().then(resolve, reject).finally(() => { this.#waiter = undefined })
    })
  }

  abs (rel: string): string {
    return path.join(this.opts.stagingDir, rel)
  }

  /** Every check of one entry, in archive order, before anything of it is written. */
  plan (entry: ReadEntry): Plan | undefined {
    const name = entry.path
    const kind = ENTRY_KINDS.get(entry.type)
    if (kind === undefined) {
      const what = entry.type === 'CharacterDevice' || entry.type === 'BlockDevice'
        ? 'a device'
        : entry.type === 'FIFO' ? 'a FIFO' : `an unsupported entry type (${entry.type})`
      throw badArchive(`Entry ${quote(name)} is ${what}`)
    }
    const mode = (entry.mode ?? 0o644) & 0o7777
    if ((mode & SETID_BITS) !== 0) throw badArchive(`Entry ${quote(name)} has the setuid or setgid bit`)
    const segs = segmentsOf(name, 'Entry path')
    if (segs.length === 0) {
      if (kind === 'dir') return undefined // the root itself: the caller owns its mode
      throw badArchive(`Entry has an empty name: ${quote(name)}`)
    }
    const rel = segs.join('/')

    // Never writable for the file tools, so not for an archive either (docs/ARCHITECTURE.md#workspaces);
    // a hard link to such a file would have nothing to link to. Skipped entries still count against
    // the limits (their bytes are read and dropped), and nothing of them, parents included, is made.
    let skip: string | undefined
    if (isProtected(segs)) skip = protectedPlace(segs)
    else if (kind === 'hardlink' && isProtected(segmentsOf(entry.linkpath ?? '', `Hard link ${quote(name)}: target`))) skip = rel

    // Parents: each must be a directory declared earlier, or missing (then implied; never for a
    // skipped entry).
    const parents: string[] = []
    for (let i = 1; i < (skip === undefined ? segs.length : 0); i++) {
      const p = segs.slice(0, i).join('/')
      const node = this.model.get(p)
      if (node === undefined) parents.push(p)
      else if (node.kind === 'symlink') throw badArchive(`Entry ${quote(name)} goes through the symlink ${quote(p)}`)
      else if (node.kind !== 'dir') throw badArchive(`Entry ${quote(name)} is below the file ${quote(p)}`)
    }

    this.entriesSeen += 1 + parents.length
    this.bytesSeen += entry.size
    if (this.entriesSeen > this.opts.limits.maxFiles) {
      throw new HttpError('GW_PAYLOAD_TOO_LARGE', `The archive holds more than ${this.opts.limits.maxFiles} entries (at ${quote(name)})`)
    }
    if (this.bytesSeen > this.opts.limits.maxBytes) {
      throw new HttpError('GW_PAYLOAD_TOO_LARGE', `The archive holds more than ${this.opts.limits.maxBytes} bytes (at ${quote(name)}, ${entry.size} bytes)`)
    }
    if (skip !== undefined) {
      this.skippedEntries++
      if (this.skipped.size < MAX_SKIPPED_LISTED) this.skipped.add(skip)
      return undefined
    }

    const existing = this.model.get(rel)
    const asKind: Kind = kind === 'hardlink' ? 'file' : kind
    if (existing !== undefined && existing.kind !== asKind) {
      throw badArchive(`Entry ${quote(name)} would replace a ${existing.kind === 'dir' ? 'directory' : existing.kind} with a ${asKind === 'dir' ? 'directory' : asKind}`)
    }

    const plan: Plan = { entry, kind, rel, parents, replace: existing !== undefined, mode, mtime: entry.mtime }
    if (kind === 'symlink') {
      const target = entry.linkpath ?? ''
      if (target === '') throw badArchive(`Symlink ${quote(name)} has an empty target`)
      if (target.includes('\0')) throw badArchive(`Symlink ${quote(name)} has a NUL byte in its target`)
      if (target.startsWith('/')) throw badArchive(`Symlink ${quote(name)} has an absolute target ${quote(target)}`)
      if (Buffer.byteLength(target) > MAX_PATH_BYTES) throw badArchive(`Symlink ${quote(name)} has a target too long`)
      const stack = segs.slice(0, -1)
      for (const s of target.split('/')) {
        if (s === '' || s === '.') continue
        if (s !== '..') stack.push(s)
        else if (stack.pop() === undefined) throw badArchive(`Symlink ${quote(name)} points outside the archive's root: ${quote(target)}`)
      }
      plan.target = target
    } else if (kind === 'hardlink') {
      const target = segmentsOf(entry.linkpath ?? '', `Hard link ${quote(name)}: target`).join('/')
      const node = this.model.get(target)
      if (node === undefined || node.kind !== 'file' || target === rel) {
        throw badArchive(`Hard link ${quote(name)} must point to a regular file earlier in the archive, not ${quote(entry.linkpath ?? '')}`)
      }
      plan.target = target
      plan.node = { kind: 'file', blob: node.blob }
    }

    for (const p of parents) this.model.set(p, { kind: 'dir' })
    if (kind === 'dir') {
      const node = existing ?? { kind: 'dir' }
      node.mode = mode & 0o777
      node.mtime = entry.mtime
      this.model.set(rel, node)
    } else if (kind === 'file') {
      this.model.set(rel, { kind: 'file', blob: { size: entry.size } })
    } else if (kind === 'symlink') {
      this.model.set(rel, { kind: 'symlink', target: plan.target })
    } else {
      this.model.set(rel, plan.node as Node)
    }
    return plan
  }

  /** Writes one planned entry (entries are written one at a time, in archive order). */
  async write (plan: Plan): Promise<void> {
    const { owner } = this.opts
    for (const p of plan.parents) await this.mkdir(p)
    const dest = this.abs(plan.rel)
    if (plan.kind === 'dir') {
      if (!plan.replace) await this.mkdir(plan.rel)
      return
    }
    if (plan.replace) await unlink(dest)
    if (plan.kind === 'symlink') {
      await symlink(plan.target as string, dest)
      if (owner !== undefined) await lchown(dest, owner.uid, owner.gid)
      if (plan.mtime !== undefined) await lutimes(dest, plan.mtime, plan.mtime)
      return
    }
    if (plan.kind === 'hardlink') {
      // link(2) never follows a symlink, and the target is a file the model knows.
      await link(this.abs(plan.target as string), dest)
      return
    }
    const fh = await open(dest, CREATE_FLAGS, 0o600)
    let handedOver = false
    try {
      let written = 0
      const chunks = (plan.entry as AsyncIterable<Buffer>)[Symbol.asyncIterator]()
      for (;;) {
        const next = await this.nextChunk(chunks)
        if (next.done === true) break
        const chunk = next.value
        let off = 0
        while (off < chunk.length) {
          const { bytesWritten } = await fh.write(chunk, off, chunk.length - off)
          off += bytesWritten
        }
        written += chunk.length
      }
      if (written !== plan.entry.size) throw badArchive(`Entry ${quote(plan.rel)} is truncated`)
      // The file's metadata is set on its fd while the next entries are written: on a tree of
      // small files these calls are half of the time, and nothing later depends on them.
      handedOver = true
      await this.detach(this.finishFile(fh, plan))
    } finally {
      if (!handedOver) await fh.close()
    }
  }

  /** Owner, mode (sticky and set-id bits never reach a file; set-id ones are refused) and mtime, then close. */
  private async finishFile (fh: FileHandle, plan: Plan): Promise<void> {
    const { owner } = this.opts
    try {
      if (owner !== undefined) await fh.chown(owner.uid, owner.gid)
      await fh.chmod(plan.mode & 0o777)
      if (plan.mtime !== undefined) await fh.utimes(plan.mtime, plan.mtime)
    } finally {
      await fh.close()
    }
  }

  private readonly tails = new Set<Promise<void>>()
  tailError: unknown

  private async detach (p: Promise<void>): Promise<void> {
    const tracked: Promise<void> = p.catch((err: unknown) => { this.tailError ??= err }).finally(() => { this.tails.delete(tracked) })
    this.tails.add(tracked)
    // Bounded: each holds an open file.
    if (this.tails.size >= MAX_TAILS) await Promise.race(this.tails)
  }

  /** Waits for every detached metadata call (before success, and before a rejection). */
  async settle (): Promise<void> {
    while (this.tails.size > 0) await Promise.allSettled([...this.tails])
  }

  private async mkdir (rel: string): Promise<void> {
    // 0700 while children are written; the archive's mode is applied at the end.
    await mkdir(this.abs(rel), { mode: 0o700 })
  }

  /**
   * After the last entry: no symlink may leave the root through the archive's other symlinks, and
   * directories get their modes and mtimes, deepest first (writing children changes a mtime).
   */
  async finish (): Promise<ExtractResult> {
    for (const [rel, node] of this.model) {
      if (node.kind === 'symlink' && this.escapes(rel, node.target as string)) {
        throw badArchive(`Symlink ${quote(rel)} points outside the archive's root through other symlinks: ${quote(node.target as string)}`)
      }
    }
    const { owner } = this.opts
    const dirs = [...this.model].filter(([, n]) => n.kind === 'dir')
    dirs.sort((a, b) => b[0].split('/').length - a[0].split('/').length)
    for (const [rel, node] of dirs) {
      const dest = this.abs(rel)
      if (owner !== undefined) await lchown(dest, owner.uid, owner.gid)
      await chmod(dest, node.mode ?? 0o755)
      if (node.mtime !== undefined) await utimes(dest, node.mtime, node.mtime)
    }
    const blobs = new Set<{ size: number }>()
    for (const node of this.model.values()) if (node.blob !== undefined) blobs.add(node.blob)
    let bytes = 0
    for (const b of blobs) bytes += b.size
    return { bytes, files: this.model.size, skipped: [...this.skipped], skippedEntries: this.skippedEntries }
  }

  /** Resolves a link target as the kernel would, through the links of the model, beneath the root. */
  private escapes (rel: string, target: string): boolean {
    const stack = rel.split('/').slice(0, -1)
    let todo = target.split('/')
    let hops = 0
    while (todo.length > 0) {
      const s = todo.shift() as string
      if (s === '' || s === '.') continue
      if (s === '..') {
        if (stack.pop() === undefined) return true
        continue
      }
      stack.push(s)
      const node = this.model.get(stack.join('/'))
      if (node?.kind === 'symlink') {
        // A loop can reach nothing; the kernel gives ELOOP.
        if (++hops > MAX_SYMLINK_HOPS) return false
        stack.pop()
        todo = [...(node.target as string).split('/'), ...todo]
      }
    }
    return false
  }
}
