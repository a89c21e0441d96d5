/**
 * An uploaded archive, read as a stream: its format decided from its first bytes, gunzipped when it is
 * a tar.gz, parsed by node-tar, and its entries handed in archive order to archive-entries.ts, which
 * checks each and writes it into the upload's private staging directory.
 *
 * The format is read from the body's first bytes, whatever content type was declared: gzip's magic
 * (1f 8b) is a tar.gz, a tar header (ustar magic, or a valid v7 checksum, or the zero block of an
 * empty archive) a plain tar; anything else is a 415 saying what was expected (and naming zstd,
 * bzip2, xz or zip when it is one of those). A stream that ends without the tar end-of-archive
 * blocks, or a gzip stream that ends early, is refused as truncated.
 */
import { chmod, mkdir, mkdtemp, rm } from 'node:fs/promises'
import path from 'node:path'
import type { Readable } from 'node:stream'
import { createGunzip } from 'node:zlib'
import { Parser } from 'tar'
import type { ReadEntry } from 'tar'
import { HttpError } from '../../errors.js'
import { badArchive, Extraction, quote } from './archive-entries.js'
import type { ExtractOptions, ExtractResult, Plan } from './archive-entries.js'
import { errnoOf } from './fd.js'

/** A pax or GNU long-name header larger than this is refused (real ones hold a path or two). */
const MAX_META_BYTES = 64 * 1024
/**
 * Bytes accepted after the end-of-archive blocks: tar pads its output to a 10 KiB record, and
 * anything past that costs decompression work for nothing.
 */
const MAX_TRAILING_BYTES = 1024 * 1024
/** tar's block: a header is one. */
const BLOCK = 512
/** Bytes of the body read before its format is decided: one tar header block. */
const SNIFF_BYTES = BLOCK

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
 * written (see archive-entries.ts). The format is read from the first bytes (archiveFormat).
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
