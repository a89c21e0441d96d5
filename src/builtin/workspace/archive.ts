/**
 * Workspace archives: checked streaming extraction of an uploaded tar (or tar.gz) into a private
 * staging directory, and a streamed tar.gz of a workspace (or a directory in it) for download.
 *
 * Upload. The format is read from the body's first bytes, whatever content type was declared: gzip's
 * magic (1f 8b) is a tar.gz, a tar header (ustar magic, or a valid v7 checksum, or the zero block of
 * an empty archive) a plain tar; anything else is a 415 saying what was expected (and naming zstd,
 * bzip2, xz or zip when it is one of those). node-tar's Parser only parses; every write is ours, and
 * every entry is checked from its header, before anything of it is written, against a model of what the archive has declared so
 * far (path -> kind). Because only this code writes into the staging directory, the model is the
 * truth about it: a parent the model calls a directory is a real directory, so plain path
 * operations there never pass through a symlink the archive made. Refused: absolute paths, `..`,
 * empty names, a path through a symlink or a file declared earlier, symlinks whose target is
 * absolute or leaves the root (lexically from the link's directory, and again at the end through
 * the archive's other links, since `a/l -> ..` plus `x -> a/l/..` escapes although each looks
 * fine), hard links to anything but a regular file extracted earlier, devices, FIFOs, unknown
 * types, setuid/setgid bits, a path changing type. Limits (bytes as the sum of entry sizes, entries
 * including implied parent directories) are checked at each header, so a 2 GB run of zeros is
 * refused before its first byte is written. Entries the file tools never write (fd-tree.ts
 * `isProtected`: `.git/hooks`, `.ssh`, `.aws`) are skipped, not written, and reported; a git
 * checkout always holds `.git/hooks/*.sample`, so refusing the whole archive would refuse every
 * repository. A stream that ends without the tar end-of-archive
 * blocks, or a gzip stream that ends early, is refused as truncated.
 *
 * Download. Entry names are the workspace's own (a download of `src` holds `src/...`), so an archive
 * of a directory uploads back (merge) to where it came from. The tree is walked by fd in a worker thread (pack-worker.ts, fd-walk.ts `walk`'s rules:
 * each entry opened beneath its directory's fd with O_NOFOLLOW), symlinks archived as symlinks and
 * never followed, other types skipped; headers are written here with node-tar's Header (and a pax
 * header for long or non-ASCII names), and the tar is pulled through gzip with backpressure, so
 * memory stays flat whatever the tree's size.
 */
import { chmod, lchown, link, lutimes, mkdir, mkdtemp, open, rm, symlink, unlink, utimes } from 'node:fs/promises'
import type { FileHandle } from 'node:fs/promises'
import path from 'node:path'
import { Readable, pipeline } from 'node:stream'
import { Worker } from 'node:worker_threads'
import { createGunzip, createGzip } from 'node:zlib'
import { Header, Pax, Parser } from 'tar'
import type { ReadEntry } from 'tar'
import { HttpError } from '../../errors.js'
import { ToolError } from '../types.js'
import type { Workspace } from '../types.js'
import { CREATE_FLAGS, errnoOf } from './fd.js'
import { PACK_WORKER_SOURCE } from './pack-worker.js'
import { isProtected, openForRead } from './fd-tree.js'
import { WALK_MAX_DEPTH } from './fd-walk.js'

/** Longest entry path or link target accepted (Linux PATH_MAX is 4096 with its NUL). */
const MAX_PATH_BYTES = 4095
/** A pax or GNU long-name header larger than this is refused (real ones hold a path or two). */
const MAX_META_BYTES = 64 * 1024
/**
 * Bytes accepted after the end-of-archive blocks: tar pads its output to a 10 KiB record, and
 * anything past that costs decompression work for nothing.
 */
const MAX_TRAILING_BYTES = 1024 * 1024
const MAX_SYMLINK_HOPS = 40
/** Bytes of the body read before its format is decided: one tar header block. */
const SNIFF_BYTES = 512
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

function badArchive (message: string): HttpError {
  return new HttpError('GW_BAD_ARCHIVE', message)
}

/** An entry name for a message: quoted, control characters escaped, long ones cut. */
function quote (name: string): string {
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
interface Plan {
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

class Extraction {
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

/**
 * A fresh staging directory for one upload: `parent` (e.g. WORKSPACES_DIR/.tg/staging) is created
 * 0700 if missing, the new directory inside it is 0700 with a random name.
 */
export async function makeStagingDir (parent: string): Promise<string> {
  await mkdir(parent, { recursive: true, mode: 0o700 })
  const dir = await mkdtemp(path.join(parent, 'up-'))
  await chmod(dir, 0o700)
  return dir
}

/** Removes a staging directory and everything in it (rm never follows the links in it). */
export async function removeStagingDir (dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true, maxRetries: 3 })
}

/** A gzip or zlib stream error: the body is not a (complete) gzip stream. */
function isZlibError (err: unknown): boolean {
  const c = errnoOf(err)
  return c !== undefined && c.startsWith('Z_')
}

/** A 512-byte block that starts a tar: ustar magic (POSIX, GNU), a valid v7 checksum, or zeros (an empty archive). */
function isTarHeader (block: Buffer): boolean {
  if (block.length >= 262 && block.toString('latin1', 257, 262) === 'ustar') return true
  if (block.length < BLOCK) return block.every((b) => b === 0)
  // v7 headers have no magic, only a checksum: the sum of the block's bytes with the checksum
  // field (148..155) counted as spaces, written in octal, ended by a NUL or a space.
  const field = block.toString('latin1', 148, 156).split('\0')[0]?.trim() ?? ''
  let sum = 0
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : block[i] as number
  if (/^[0-7]{1,7}$/.test(field)) return Number.parseInt(field, 8) === sum
  return sum === 8 * 0x20 // all zeros: the end-of-archive blocks of an empty archive
}

const EXPECTED = 'expected a tar or tar.gz archive (tar cf or tar czf) as the raw body'

/** Compressed formats and archives we recognise only to name them in the refusal. */
const OTHER_FORMATS: ReadonlyArray<[Buffer, string]> = [
  [Buffer.from([0x28, 0xb5, 0x2f, 0xfd]), 'a zstd stream: zstd-compressed archives are not supported'],
  [Buffer.from('BZh'), 'a bzip2 stream: bzip2-compressed archives are not supported'],
  [Buffer.from([0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00]), 'an xz stream: xz-compressed archives are not supported'],
  [Buffer.from('PK\x03\x04'), 'a zip archive: zip is not supported'],
  [Buffer.from('PK\x05\x06'), 'an empty zip archive: zip is not supported']
]

/**
 * How to read a body, from its first bytes (at least SNIFF_BYTES unless it is shorter): gzip or
 * plain tar; anything else is a 415 GW_UNSUPPORTED_MEDIA_TYPE that says what was expected.
 */
function archiveFormat (head: Buffer): 'gzip' | 'tar' {
  if (head.length >= 2 && head[0] === 0x1f && head[1] === 0x8b) return 'gzip'
  if (head.length > 0 && isTarHeader(head.subarray(0, BLOCK))) return 'tar'
  if (head.length === 0) throw new HttpError('GW_UNSUPPORTED_MEDIA_TYPE', `The body is empty: ${EXPECTED}`)
  const other = OTHER_FORMATS.find(([magic]) => head.subarray(0, magic.length).equals(magic))
  if (other !== undefined) throw new HttpError('GW_UNSUPPORTED_MEDIA_TYPE', `The body is ${other[1]}; ${EXPECTED}`)
  throw new HttpError('GW_UNSUPPORTED_MEDIA_TYPE', `The body is not a tar or tar.gz archive (it starts with neither gzip's bytes 1f 8b nor a tar header): ${EXPECTED}`)
}

/**
 * Extracts a tar (or tar.gz) stream into `opts.stagingDir`, checking every entry before it is
 * written (see the module comment). The format is read from the first bytes (archiveFormat).
 * Rejects with HttpError 415 GW_UNSUPPORTED_MEDIA_TYPE (neither a tar nor a gzip), 400
 * GW_BAD_ARCHIVE (refused entry, corrupt, truncated, a gzip that holds no tar), 413
 * GW_PAYLOAD_TOO_LARGE (limits), the signal's reason when
 * aborted, or the input stream's own error. On rejection the input is unpiped and paused (not
 * destroyed: the caller still answers on its connection), no write is still running, and the caller
 * deletes the staging directory.
 */
export async function extractArchive (input: Readable, opts: ExtractOptions): Promise<ExtractResult> {
  const x = new Extraction(opts)
  const parser = new Parser({ strict: true, zstd: false, brotli: false, maxMetaEntrySize: MAX_META_BYTES })
  let failure: unknown
  let sawEof = false
  let onFailure: () => void = () => {}
  let stopFeeding: () => void = () => {}
  const failed = new Promise<void>((resolve) => { onFailure = resolve })
  const live = new Set<ReadEntry>()
  const fail = (err: unknown): void => {
    if (failure !== undefined) return
    failure = err
    x.stop(err)
    // A write waiting for data the parser will never get ends now.
    for (const e of live) {
      e.on('error', () => {}) // a late write into it must not throw out of the parser
      e.destroy()
    }
    stopFeeding()
    onFailure()
  }
  if (opts.signal?.aborted === true) throw opts.signal.reason
  const onAbort = (): void => { fail(opts.signal?.reason ?? new Error('aborted')) }
  opts.signal?.addEventListener('abort', onAbort, { once: true })

  parser.on('error', (err: Error & { tarCode?: string }) => {
    // node-tar calls an archive of only the end-of-archive blocks (`tar cf - -T /dev/null`)
    // unrecognised; it is an empty archive, and a replace with it empties the workspace.
    if (err.tarCode === 'TAR_BAD_ARCHIVE' && sawEof && x.entriesSeen === 0) return
    fail(badArchive(`Not a valid tar archive: ${err.message.replace(/^TAR_[A-Z_]+: /, '')}`))
  })
  parser.on('ignoredEntry', (e: ReadEntry) => {
    fail(badArchive(e.meta
      ? `Entry ${quote(e.path)} has an extended header over ${MAX_META_BYTES} bytes`
      : `Entry ${quote(e.path)} is an unsupported entry type (${e.type})`))
  })
  parser.on('eof', () => { sawEof = true })
  const parserEnded = new Promise<void>((resolve) => parser.once('end', resolve))

  // Entries are checked as the parser meets them (in archive order) and written one after another.
  let chain: Promise<void> = Promise.resolve()
  parser.on('entry', (entry: ReadEntry) => {
    let plan: Plan | undefined
    try {
      if (failure === undefined) plan = x.plan(entry)
    } catch (err) {
      fail(err)
    }
    if (plan === undefined || plan.kind !== 'file') entry.resume() // no content we keep
    if (plan === undefined) return
    const p = plan
    live.add(entry)
    chain = chain.then(async () => {
      if (failure === undefined) await x.write(p)
    }).catch((err: unknown) => {
      fail(writeError(err, p.rel))
    }).finally(() => {
      live.delete(entry)
      entry.resume()
    })
  })

  let gunzip: ReturnType<typeof createGunzip> | undefined
  const onError = (err: Error): void => {
    fail(isZlibError(err) ? badArchive(`Not a valid gzip stream: ${err.message}`) : err)
  }
  // One listener for the input's own errors, from the first byte to the end (removed in finally).
  input.on('error', onError)
  let trailing = 0
  try {
    // The first bytes decide the format (the declared content type does not: clients send
    // octet-stream, x-gzip, a form type or nothing for the same file). Whole chunks are kept, so
    // nothing read here is lost; the input stays paused until the parser's side is wired.
    const sniffed = await new Promise<{ head: Buffer, ended: boolean } | undefined>((resolve) => {
      const chunks: Buffer[] = []
      let length = 0
      const done = (ended: boolean): void => {
        input.off('data', onHead)
        input.off('end', onEnd)
        stopFeeding = () => {}
        resolve(failure === undefined ? { head: Buffer.concat(chunks, length), ended } : undefined)
      }
      const onHead = (chunk: Buffer): void => {
        chunks.push(chunk)
        length += chunk.length
        if (length >= SNIFF_BYTES) {
          input.pause()
          done(false)
        }
      }
      const onEnd = (): void => { done(true) }
      stopFeeding = () => { done(false) }
      input.on('data', onHead)
      input.once('end', onEnd)
      input.resume()
    })
    if (sniffed === undefined) throw failure
    const format = archiveFormat(sniffed.head)

    let source: Readable = input
    if (format === 'gzip') {
      gunzip = createGunzip({ chunkSize: 64 * 1024 })
      gunzip.on('error', onError)
      if (sniffed.ended) gunzip.end(sniffed.head)
      else {
        gunzip.write(sniffed.head)
        input.pipe(gunzip) // resumes the input, or waits for the gunzip's drain
      }
      source = gunzip
    }

    // Fed by events rather than an async iterator, so that a failure (a refused entry, an abort)
    // stops the loop at once even while the input sends nothing.
    await new Promise<void>((resolve) => {
      let waiting = false
      const stop = (): void => {
        source.off('data', onData)
        source.off('end', stop)
        resolve()
      }
      const onData = (chunk: Buffer): void => {
        if (failure !== undefined) return
        if (sawEof) {
          // After the end-of-archive blocks the parser would only buffer; count and drop instead.
          trailing += chunk.length
          if (trailing > MAX_TRAILING_BYTES) fail(badArchive('More than 1 MiB of data after the end of the archive'))
          return
        }
        if (!parser.write(chunk)) {
          waiting = true
          source.pause()
          parser.once('drain', () => {
            waiting = false
            if (failure === undefined) source.resume()
          })
        }
      }
      stopFeeding = stop
      if (failure !== undefined) {
        stop()
        return
      }
      if (format === 'tar') {
        onData(sniffed.head)
        // 'end' may have been emitted since the sniffing let go of the input (a body that was
        // all in its first chunk): readableEnded says so.
        if (sniffed.ended || input.readableEnded || failure !== undefined) {
          stop()
          return
        }
      }
      source.on('data', onData)
      source.once('end', stop)
      // The plain input was paused by the sniffing (a pipe resumes itself).
      if (format === 'tar' && !waiting) source.resume()
    })
    if (failure === undefined) {
      parser.end()
      await Promise.race([parserEnded, failed])
    }
    await chain
    await x.settle()
    if (x.tailError !== undefined) fail(writeError(x.tailError, ''))
    if (failure === undefined && !sawEof) fail(badArchive('Truncated archive: the stream ended before the end-of-archive blocks'))
    if (failure !== undefined) throw failure
    return await x.finish().catch((err: unknown) => { throw writeError(err, '') })
  } finally {
    opts.signal?.removeEventListener('abort', onAbort)
    if (gunzip !== undefined) {
      input.unpipe(gunzip)
      // The gunzip keeps its listener: an error it emits while being destroyed must not go unhandled.
      gunzip.destroy()
    }
    input.off('error', onError)
    if (failure !== undefined) input.pause()
  }
}

/** A write failure caused by the archive's content is a bad archive; anything else is ours. */
function writeError (err: unknown, rel: string): unknown {
  if (err instanceof HttpError) return err
  const c = errnoOf(err)
  if (c === 'ENAMETOOLONG' || c === 'EEXIST' || c === 'ENOTDIR' || c === 'EISDIR' || c === 'ELOOP' || c === 'EINVAL') {
    return badArchive(`Entry ${quote(rel)} cannot be extracted (${c})`)
  }
  return err
}

// ---------------------------------------------------------------------------------------------
// Download

export interface PackOptions {
  signal?: AbortSignal
  /** gzip level; 6 is `gzip -6`, gzip's default. */
  level?: number
}

const BLOCK = 512
const FLUSH_BYTES = 64 * 1024
const ZEROS = Buffer.alloc(2 * BLOCK)

/**
 * A streamed tar.gz of the workspace, or of the directory `subPath` in it (the same resolver as the
 * file tools: in-tree symlinks followed beneath the root). Entry names are relative to the
 * workspace, without a `./` prefix: a subdirectory's archive starts with the directory itself
 * (`src/`, at its real place when `subPath` went through a symlink) and holds `src/...`, so it
 * extracts, or uploads with merge, back to where it came from; owners are written as 0/0 and modes without set-id or sticky
 * bits (so a download can be uploaded again as it is). Resolves once the directory is open
 * (400 GW_BAD_REQUEST when it is not a directory of the workspace); read errors after that
 * destroy the stream. Destroying the returned stream stops the walk and closes every fd.
 */
export async function packWorkspace (ws: Workspace, subPath = '.', opts: PackOptions = {}): Promise<Readable> {
  let base: FileHandle
  let top: TopDir | undefined
  try {
    const opened = await openForRead(ws, subPath, { allowDirectory: true })
    base = opened.fh
    if (!opened.st.isDirectory()) {
      await base.close()
      throw new HttpError('GW_BAD_REQUEST', `Not a directory: ${opened.rel}`)
    }
    // The directory's real place (symlinks to it resolved), so the archive extracts back there.
    if (opened.chain.length > 0) top = { name: opened.chain.join('/'), mode: opened.st.mode & 0o777, mtime: opened.st.mtime }
  } catch (err) {
    if (err instanceof ToolError) throw new HttpError('GW_BAD_REQUEST', err.message)
    throw err
  }
  const tar = Readable.from(tarBlocks(base, opts.signal, top), { objectMode: false, highWaterMark: FLUSH_BYTES })
  const gz = createGzip({ level: opts.level ?? 6, chunkSize: 64 * 1024 })
  // pipeline destroys the tar side (and so closes the fds) when the consumer goes away.
  pipeline(tar, gz, () => {})
  return gz
}

function headerBlocks (data: { path: string, type: 'File' | 'Directory' | 'SymbolicLink', mode: number, size: number, mtime: Date, linkpath?: string }): Buffer[] {
  const h = new Header({ ...data, uid: 0, gid: 0, uname: '', gname: '' })
  const out: Buffer[] = []
  if (h.encode()) {
    out.push(new Pax({ path: data.path, linkpath: data.linkpath, size: data.size, mtime: data.mtime }).encode())
  }
  out.push(h.block as Buffer)
  return out
}

function padding (size: number): Buffer[] {
  const pad = (BLOCK - (size % BLOCK)) % BLOCK
  return pad > 0 ? [ZEROS.subarray(0, pad)] : []
}

type PackRecord =
  | ['d', string, number, number]
  | ['l', string, number, number, string]
  | ['f', string, number, number, number]
  | ['c', number, number]
interface PackMessage { recs?: PackRecord[], buf?: ArrayBuffer, done?: boolean, error?: string }

/** Bytes of file content per batch from the worker, and batches it may run ahead. */
const BATCH_BYTES = 256 * 1024
const BATCHES_AHEAD = 4

/**
 * The tar byte stream of the tree below `base`: the walk and the reads run in a worker
 * (pack-worker.ts) at most BATCHES_AHEAD batches ahead of the consumer; headers are written here.
 * `base` is closed at the end, or when the consumer stops, after the worker has closed its fds.
 */
interface TopDir { name: string, mode: number, mtime: Date }

async function * tarBlocks (base: FileHandle, signal: AbortSignal | undefined, top: TopDir | undefined): AsyncGenerator<Buffer> {
  const control = new Int32Array(new SharedArrayBuffer(8))
  control[0] = BATCHES_AHEAD
  const worker = new Worker(PACK_WORKER_SOURCE, {
    eval: true,
    // Names stay within the depth an upload accepts, the prefix included.
    workerData: { baseFd: base.fd, maxDepth: WALK_MAX_DEPTH - (top === undefined ? 0 : top.name.split('/').length), batchBytes: BATCH_BYTES, control }
  })
  const queue: PackMessage[] = []
  let exited = false
  let failure: Error | undefined
  let wakeup: (() => void) | undefined
  const wake = (): void => { wakeup?.() }
  worker.on('message', (m: PackMessage) => { queue.push(m); wake() })
  worker.on('error', (err) => { failure ??= err; wake() })
  worker.on('exit', () => { exited = true; wake() })
  signal?.addEventListener('abort', wake)
  const next = async (): Promise<PackMessage> => {
    for (;;) {
      if (signal?.aborted === true) throw signal.reason
      const m = queue.shift()
      if (m !== undefined) return m
      if (failure !== undefined) throw failure
      if (exited) throw new Error('The archive worker stopped early')
      await new Promise<void>((resolve) => { wakeup = resolve })
      wakeup = undefined
    }
  }
  // The file whose content records are arriving: its size, and the bytes still to come.
  let fileSize = 0
  let remaining = 0
  // Names below a packed subdirectory carry its path in the workspace.
  const prefix = top === undefined ? '' : `${top.name}/`
  try {
    if (top !== undefined) yield Buffer.concat(headerBlocks({ path: prefix, type: 'Directory', mode: top.mode, size: 0, mtime: top.mtime }))
    for (;;) {
      const m = await next()
      if (m.error !== undefined) throw new Error(`Reading the workspace failed: ${m.error}`)
      if (m.done === true) break
      const data = Buffer.from(m.buf as ArrayBuffer)
      const out: Buffer[] = []
      for (const r of m.recs ?? []) {
        if (r[0] === 'c') {
          out.push(data.subarray(r[1], r[1] + r[2]))
          remaining -= r[2]
          if (remaining === 0) out.push(...padding(fileSize))
          continue
        }
        const mtime = new Date(r[3])
        if (r[0] === 'd') out.push(...headerBlocks({ path: `${prefix}${r[1]}/`, type: 'Directory', mode: r[2], size: 0, mtime }))
        else if (r[0] === 'l') out.push(...headerBlocks({ path: `${prefix}${r[1]}`, type: 'SymbolicLink', mode: r[2], size: 0, mtime, linkpath: r[4] }))
        else {
          out.push(...headerBlocks({ path: `${prefix}${r[1]}`, type: 'File', mode: r[2], size: r[4], mtime }))
          fileSize = remaining = r[4]
        }
      }
      yield Buffer.concat(out)
      // The consumer took the batch: the worker may read one more.
      Atomics.add(control, 0, 1)
      Atomics.notify(control, 0)
    }
    yield ZEROS.subarray(0, 2 * BLOCK)
  } finally {
    signal?.removeEventListener('abort', wake)
    Atomics.store(control, 1, 1)
    Atomics.notify(control, 0)
    // The worker closes its own fds as it unwinds; base goes only after (its number could be reused).
    if (!exited) await new Promise((resolve) => worker.once('exit', resolve))
    await base.close().catch(() => {})
  }
}
