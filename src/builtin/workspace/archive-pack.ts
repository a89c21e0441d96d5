/**
 * A workspace download: a streamed tar.gz of a workspace, or of a directory in it.
 *
 * Entry names are the workspace's own (a download of `src` holds `src/...`), so an archive of a
 * directory uploads back (merge) to where it came from. The tree is walked by fd in a worker thread
 * (pack-worker.ts, fd-walk.ts `walk`'s rules: each entry opened beneath its directory's fd with
 * O_NOFOLLOW), symlinks archived as symlinks and never followed, other types skipped; headers are
 * written here with node-tar's Header (and a pax header for long or non-ASCII names), and the tar is
 * pulled through gzip with backpressure, so memory stays flat whatever the tree's size.
 */
import type { FileHandle } from 'node:fs/promises'
import { Readable, pipeline } from 'node:stream'
import { Worker } from 'node:worker_threads'
import { createGzip } from 'node:zlib'
import { Header, Pax } from 'tar'
import { HttpError } from '../../errors.js'
import { ToolError } from '../types.js'
import type { Workspace } from '../types.js'
import { openForRead } from './fd-tree.js'
import { WALK_MAX_DEPTH } from './fd-walk.js'
import { PACK_WORKER_SOURCE } from './pack-worker.js'

export interface PackOptions {
  signal?: AbortSignal
  /** gzip level; 6 is `gzip -6`, gzip's default. */
  level?: number
}

/** tar's block: headers and file contents are padded to it. */
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

interface HeaderData {
  path: string
  type: 'File' | 'Directory' | 'SymbolicLink'
  mode: number
  size: number
  mtime: Date
  linkpath?: string
}

function headerBlocks (data: HeaderData): Buffer[] {
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
