/**
 * Uploaded archives (src/builtin/workspace/archive-extract.ts, archive-entries.ts): checked streaming
 * extraction into a staging directory. Hostile archives are built here from raw node-tar Headers (a tar
 * library would refuse to write most of them); every refusal must leave nothing outside the staging
 * directory (a sentinel directory beside it is compared after each). Normal archives come from
 * node-tar and from the system tar.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdir, readFile, readdir, readlink, rm, stat, symlink, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { Readable } from 'node:stream'
import { buffer as collect } from 'node:stream/consumers'
import { gzipSync } from 'node:zlib'
import { Header, Pax, create as tarCreate } from 'tar'
import { HttpError } from '../../../../src/errors.js'
import { extractArchive, makeStagingDir, removeStagingDir } from '../../../../src/builtin/workspace/archive-extract.js'
import { assertOutsideUntouched, extract, LIMITS, makeTree, MTIME, refused, setup, snapshot, streamOf } from '../../../helpers/archive.js'

interface RawEntry {
  path: string
  type?: string
  mode?: number
  data?: string | Buffer
  /** Declared size when it differs from the data (a body that never comes). */
  size?: number
  linkpath?: string
}

/** A tar built block by block, so it can say anything a hostile client could. */
function rawTar (entries: RawEntry[], opts: { end?: boolean } = {}): Buffer {
  const out: Buffer[] = []
  for (const e of entries) {
    const data = typeof e.data === 'string' ? Buffer.from(e.data) : e.data ?? Buffer.alloc(0)
    const type = (e.type ?? 'File') as 'File'
    const h = new Header({ path: e.path, type, mode: e.mode ?? 0o644, size: e.size ?? data.length, linkpath: e.linkpath, mtime: MTIME, uid: 0, gid: 0 })
    if (h.encode()) out.push(new Pax({ path: e.path, linkpath: e.linkpath }).encode())
    out.push(h.block as Buffer, data, Buffer.alloc((512 - (data.length % 512)) % 512))
  }
  if (opts.end !== false) out.push(Buffer.alloc(1024))
  return Buffer.concat(out)
}

// ------------------------------------------------------------------------------------------
// Hostile entries

test('an absolute path is refused and nothing is written where it points', async (t) => {
  const c = await setup(t)
  await refused(c, extract(c, rawTar([{ path: path.join(c.outside, 'pwned'), data: 'x' }])), 'GW_BAD_ARCHIVE', /absolute/)
})

test('a ".." segment is refused, also one that would stay inside', async (t) => {
  const c = await setup(t)
  await refused(c, extract(c, rawTar([{ path: '../outside/pwned', data: 'x' }])), 'GW_BAD_ARCHIVE', /'\.\.'.*outside\/pwned/)
  await refused(c, extract(c, rawTar([{ path: 'a/../../outside/pwned', data: 'x' }])), 'GW_BAD_ARCHIVE', /'\.\.'/)
  await refused(c, extract(c, rawTar([{ path: 'a/../b', data: 'x' }])), 'GW_BAD_ARCHIVE', /'\.\.'/)
})

test('an empty name is refused', async (t) => {
  const c = await setup(t)
  await refused(c, extract(c, rawTar([{ path: '', data: 'x' }])), 'GW_BAD_ARCHIVE')
  await refused(c, extract(c, rawTar([{ path: '.', type: 'File', data: 'x' }])), 'GW_BAD_ARCHIVE', /empty name/)
  await refused(c, extract(c, rawTar([{ path: './/.', type: 'SymbolicLink', linkpath: 'x' }])), 'GW_BAD_ARCHIVE', /empty name/)
})

test('a symlink followed by an entry written through it is refused before the write', async (t) => {
  const c = await setup(t)
  // The link itself points inside; the entry through it is refused all the same.
  await refused(c, extract(c, rawTar([
    { path: 'sub', type: 'Directory', mode: 0o755 },
    { path: 'l', type: 'SymbolicLink', linkpath: 'sub' },
    { path: 'l/pwned', data: 'x' }
  ])), 'GW_BAD_ARCHIVE', /"l\/pwned" goes through the symlink "l"/)
  await assert.rejects(stat(path.join(c.staging, 'sub', 'pwned')))
})

test('symlinks with an absolute target or one leaving the root are refused', async (t) => {
  const c = await setup(t)
  await refused(c, extract(c, rawTar([{ path: 'l', type: 'SymbolicLink', linkpath: c.outside }])), 'GW_BAD_ARCHIVE', /absolute target/)
  await refused(c, extract(c, rawTar([{ path: 'l', type: 'SymbolicLink', linkpath: '../outside' }])), 'GW_BAD_ARCHIVE', /outside the archive's root/)
  await refused(c, extract(c, rawTar([{ path: 'a/b/l', type: 'SymbolicLink', linkpath: '../../../outside/sentinel' }])), 'GW_BAD_ARCHIVE', /outside/)
  // Inside, even up to the root itself, is fine.
  await rm(c.staging, { recursive: true }); await mkdir(c.staging, { mode: 0o700 })
  await extract(c, rawTar([{ path: 'a/b/l', type: 'SymbolicLink', linkpath: '../../x' }, { path: 'a/up', type: 'SymbolicLink', linkpath: '..' }]))
  assert.equal(await readlink(path.join(c.staging, 'a/b/l')), '../../x')
})

test('a symlink that leaves the root only through another symlink is refused, in either order', async (t) => {
  const c = await setup(t)
  // a/up -> .. is the root; esc -> a/up/.. looks like "a" lexically, but the kernel goes a/up/.. = above the root.
  const up = { path: 'a/up', type: 'SymbolicLink', linkpath: '..' }
  const esc = { path: 'esc', type: 'SymbolicLink', linkpath: 'a/up/../outside' }
  await refused(c, extract(c, rawTar([{ path: 'a', type: 'Directory' }, up, esc])), 'GW_BAD_ARCHIVE', /"esc" points outside .* through other symlinks/)
  await rm(c.staging, { recursive: true }); await mkdir(c.staging, { mode: 0o700 })
  await refused(c, extract(c, rawTar([{ path: 'a', type: 'Directory' }, esc, up])), 'GW_BAD_ARCHIVE', /through other symlinks/)
})

test('hard links must point to a regular file extracted earlier', async (t) => {
  const c = await setup(t)
  await refused(c, extract(c, rawTar([{ path: 'h', type: 'Link', linkpath: path.join(c.outside, 'sentinel') }])), 'GW_BAD_ARCHIVE', /absolute/)
  await refused(c, extract(c, rawTar([{ path: 'h', type: 'Link', linkpath: '../outside/sentinel' }])), 'GW_BAD_ARCHIVE', /'\.\.'/)
  await refused(c, extract(c, rawTar([{ path: 'h', type: 'Link', linkpath: 'later' }, { path: 'later', data: 'x' }])), 'GW_BAD_ARCHIVE', /earlier in the archive/)
  await refused(c, extract(c, rawTar([{ path: 'd', type: 'Directory' }, { path: 'h', type: 'Link', linkpath: 'd' }])), 'GW_BAD_ARCHIVE', /regular file/)
  await refused(c, extract(c, rawTar([{ path: 'l', type: 'SymbolicLink', linkpath: 'x' }, { path: 'h', type: 'Link', linkpath: 'l' }])), 'GW_BAD_ARCHIVE', /regular file/)
  // A link through a symlink to an outside file: the symlink is refused first, the link never runs.
  await refused(c, extract(c, rawTar([{ path: 'h', type: 'Link', linkpath: 'h' }])), 'GW_BAD_ARCHIVE', /regular file/)
  const s = await stat(path.join(c.outside, 'sentinel'))
  assert.equal(s.nlink, 1, 'the sentinel got no hard link')

  await rm(c.staging, { recursive: true }); await mkdir(c.staging, { mode: 0o700 })
  const res = await extract(c, rawTar([{ path: 'f', data: 'shared\n' }, { path: 'd/g', type: 'Link', linkpath: 'f' }]))
  const [f, g] = await Promise.all([stat(path.join(c.staging, 'f')), stat(path.join(c.staging, 'd/g'))])
  assert.equal(f.ino, g.ino)
  assert.deepEqual(res, { bytes: 7, files: 3, skipped: [], skippedEntries: 0 }) // f, d (implied), d/g; the shared bytes once
})

test('devices, FIFOs and unknown entry types are refused', async (t) => {
  const c = await setup(t)
  await refused(c, extract(c, rawTar([{ path: 'null', type: 'CharacterDevice' }])), 'GW_BAD_ARCHIVE', /"null" is a device/)
  await refused(c, extract(c, rawTar([{ path: 'sda', type: 'BlockDevice' }])), 'GW_BAD_ARCHIVE', /device/)
  await refused(c, extract(c, rawTar([{ path: 'fifo', type: 'FIFO' }])), 'GW_BAD_ARCHIVE', /FIFO/)
  await refused(c, extract(c, rawTar([{ path: 'sparse', type: 'SparseFile', data: 'x' }])), 'GW_BAD_ARCHIVE', /"sparse" is an unsupported entry type/)
  await refused(c, extract(c, rawTar([{ path: 'dump', type: 'GNUDumpDir', data: 'x' }])), 'GW_BAD_ARCHIVE', /unsupported/)
  assert.deepEqual(await readdir(c.staging), [])
})

test('setuid and setgid bits are refused, not stripped; sticky bits are dropped', async (t) => {
  const c = await setup(t)
  await refused(c, extract(c, rawTar([{ path: 'su', mode: 0o4755, data: '#!/bin/sh\n' }])), 'GW_BAD_ARCHIVE', /"su" has the setuid or setgid bit/)
  await refused(c, extract(c, rawTar([{ path: 'sg', type: 'Directory', mode: 0o2775 }])), 'GW_BAD_ARCHIVE', /setgid/)
  assert.deepEqual(await readdir(c.staging), [])
  await extract(c, rawTar([{ path: 'sticky', mode: 0o1755, data: 'x' }, { path: 'ro', mode: 0o400, data: 'y' }]))
  assert.equal((await stat(path.join(c.staging, 'sticky'))).mode & 0o7777, 0o755)
  assert.equal((await stat(path.join(c.staging, 'ro'))).mode & 0o7777, 0o400)
})

test('an entry that changes a path\'s type is refused; repeating one of the same type replaces it', async (t) => {
  const c = await setup(t)
  await refused(c, extract(c, rawTar([{ path: 'x', type: 'Directory' }, { path: 'x', data: 'file over dir' }])), 'GW_BAD_ARCHIVE', /"x" would replace a directory with a file/)
  await rm(c.staging, { recursive: true }); await mkdir(c.staging, { mode: 0o700 })
  await refused(c, extract(c, rawTar([{ path: 'x', data: 'f' }, { path: 'x', type: 'Directory' }])), 'GW_BAD_ARCHIVE', /replace a file with a directory/)
  await rm(c.staging, { recursive: true }); await mkdir(c.staging, { mode: 0o700 })
  await refused(c, extract(c, rawTar([{ path: 'x', data: 'f' }, { path: 'x/y', data: 'below a file' }])), 'GW_BAD_ARCHIVE', /below the file "x"/)
  await rm(c.staging, { recursive: true }); await mkdir(c.staging, { mode: 0o700 })
  await refused(c, extract(c, rawTar([{ path: 'x', type: 'SymbolicLink', linkpath: 'y' }, { path: 'x', data: 'over a link' }])), 'GW_BAD_ARCHIVE', /replace a symlink/)

  await rm(c.staging, { recursive: true }); await mkdir(c.staging, { mode: 0o700 })
  await extract(c, rawTar([
    { path: 'f', data: 'first' }, { path: 'f', data: 'second' },
    { path: 'd', type: 'Directory', mode: 0o755 }, { path: 'd/a', data: 'a' }, { path: 'd', type: 'Directory', mode: 0o750 }
  ]))
  assert.equal(await readFile(path.join(c.staging, 'f'), 'utf8'), 'second')
  assert.equal(await readFile(path.join(c.staging, 'd/a'), 'utf8'), 'a')
  assert.equal((await stat(path.join(c.staging, 'd'))).mode & 0o777, 0o750)
})

// ------------------------------------------------------------------------------------------
// Limits

test('more entries than maxFiles is a 413 before the entry past the limit is written', async (t) => {
  const c = await setup(t)
  const entries = Array.from({ length: 1000 }, (_, i) => ({ path: `f${i}`, data: 'x' }))
  await refused(c, extract(c, gzipSync(rawTar(entries)), { limits: { maxFiles: 100 } }), 'GW_PAYLOAD_TOO_LARGE', /more than 100 entries \(at "f100"\)/)
  assert.ok((await readdir(c.staging)).length <= 100)
  // Implied parent directories count too.
  await rm(c.staging, { recursive: true }); await mkdir(c.staging, { mode: 0o700 })
  await refused(c, extract(c, rawTar([{ path: 'a/b/c/d/e', data: 'x' }]), { limits: { maxFiles: 4 } }), 'GW_PAYLOAD_TOO_LARGE')
})

test('a highly compressible 2 GiB entry is refused at its header, before its body is read', async (t) => {
  const c = await setup(t)
  const size = 2 * 1024 * 1024 * 1024
  const header = rawTar([{ path: 'small', data: 'ok' }, { path: 'bomb', size }], { end: false })
  let produced = 0
  // The header, then zeros for as long as anyone reads: a gzip of it would be ~2 MiB.
  const body = Readable.from((function * () {
    yield header
    const zeros = Buffer.alloc(1024 * 1024)
    for (let sent = 0; sent < size; sent += zeros.length) { produced += zeros.length; yield zeros }
  })()).pipe((await import('node:zlib')).createGzip({ level: 1 }))
  const started = Date.now()
  await refused(c, extractArchive(body, { stagingDir: c.staging, limits: { maxBytes: 100 * 1024 * 1024, maxFiles: 10 } }), 'GW_PAYLOAD_TOO_LARGE', /more than 104857600 bytes \(at "bomb"/)
  body.destroy()
  assert.ok(produced < 64 * 1024 * 1024, `read ${produced} bytes of the bomb`)
  assert.ok(Date.now() - started < 5000)
  assert.deepEqual(await readdir(c.staging), ['small'])
  // The sum of entries counts, not only one entry.
  await rm(c.staging, { recursive: true }); await mkdir(c.staging, { mode: 0o700 })
  const kib = Buffer.alloc(1024, 'a')
  await refused(c, extract(c, rawTar([{ path: 'a', data: kib }, { path: 'b', data: kib }, { path: 'c', data: kib }]), { limits: { maxBytes: 2048 } }), 'GW_PAYLOAD_TOO_LARGE', /at "c"/)
  assert.deepEqual((await readdir(c.staging)).sort(), ['a', 'b'])
})

// ------------------------------------------------------------------------------------------
// Corrupt, truncated, not a tar

test('a truncated gzip is refused', async (t) => {
  const c = await setup(t)
  const gz = gzipSync(rawTar([{ path: 'a', data: randomBytes(64 * 1024) }, { path: 'b', data: 'b' }]))
  await refused(c, extract(c, gz.subarray(0, gz.length - 100)), 'GW_BAD_ARCHIVE', /gzip|truncated|Truncated/i)
  // Cut after the whole tar but before gzip's trailer: the tar is complete, the gzip is not.
  await rm(c.staging, { recursive: true }); await mkdir(c.staging, { mode: 0o700 })
  await refused(c, extract(c, gz.subarray(0, gz.length - 4)), 'GW_BAD_ARCHIVE', /gzip/)
})

test('a truncated archive in pieces of any size is refused, never left pending', async (t) => {
  // A write waiting for the next chunk of an entry that the failure destroyed used to wait forever
  // (minipass never settles a next() asked after destroy): the request then never got an answer.
  const c = await setup(t)
  const gz = gzipSync(rawTar([{ path: 'a', data: randomBytes(64 * 1024) }, { path: 'b', data: 'b' }]))
  let seed = 7
  const nextSize = (): number => { seed = (seed * 1103515245 + 12345) % 2147483648; return 1 + (seed % 8192) }
  for (let round = 0; round < 40; round++) {
    const cut = gz.subarray(0, round % 2 === 0 ? gz.length - 100 : gz.length - 4)
    let off = 0
    const input = new Readable({
      read () {
        if (off >= cut.length) { this.push(null); return }
        const n = nextSize()
        this.push(cut.subarray(off, off + n))
        off += n
      }
    })
    const settled = extractArchive(input, { stagingDir: c.staging, limits: LIMITS }).then(() => 'resolved', (err: unknown) => err)
    let timer: NodeJS.Timeout | undefined
    const outcome = await Promise.race([settled, new Promise((resolve) => { timer = setTimeout(() => resolve('pending'), 10_000) })])
    clearTimeout(timer)
    assert.ok(outcome instanceof HttpError, `round ${round}: ${String(outcome)}`)
    assert.equal(outcome.code, 'GW_BAD_ARCHIVE')
    await rm(c.staging, { recursive: true }); await mkdir(c.staging, { mode: 0o700 })
  }
  await assertOutsideUntouched(c)
})

test('a truncated tar is refused: inside an entry, and at an entry boundary without the end blocks', async (t) => {
  const c = await setup(t)
  const tar = rawTar([{ path: 'a', data: Buffer.alloc(10_000, 'a') }, { path: 'b', data: 'b' }])
  await refused(c, extract(c, tar.subarray(0, 5000)), 'GW_BAD_ARCHIVE', /Truncated/)
  await rm(c.staging, { recursive: true }); await mkdir(c.staging, { mode: 0o700 })
  await refused(c, extract(c, rawTar([{ path: 'a', data: 'a' }], { end: false })), 'GW_BAD_ARCHIVE', /end-of-archive/)
})

test('a gzip that is not a tar, a corrupt gzip, and a tar header with a bad checksum are refused as bad archives', async (t) => {
  const c = await setup(t)
  await refused(c, extract(c, gzipSync(Buffer.from('just some text, not a tar\n'.repeat(1000)))), 'GW_BAD_ARCHIVE', /Not a valid tar/)
  await refused(c, extract(c, Buffer.concat([Buffer.from([0x1f, 0x8b]), randomBytes(4096)])), 'GW_BAD_ARCHIVE', /gzip/)
  const tar = rawTar([{ path: 'a', data: 'a' }])
  tar[0] = 'b'.charCodeAt(0) // the name changes, the checksum does not
  await refused(c, extract(c, tar), 'GW_BAD_ARCHIVE', /Not a valid tar/)
  assert.deepEqual(await readdir(c.staging), [])
})

test('the format is read from the bytes: gzip, ustar, GNU, v7 and an empty tar are taken as they come', async (t) => {
  const c = await setup(t)
  const fresh = async (): Promise<void> => { await rm(c.staging, { recursive: true }); await mkdir(c.staging, { mode: 0o700 }) }
  assert.equal((await extract(c, gzipSync(rawTar([{ path: 'a', data: 'gz' }])))).files, 1)
  assert.equal(await readFile(path.join(c.staging, 'a'), 'utf8'), 'gz')
  await fresh()
  assert.equal((await extract(c, rawTar([{ path: 'a', data: 'ustar' }]))).files, 1)
  const src = path.join(c.dir, 'src-tree')
  await mkdir(path.join(src, 'd'), { recursive: true })
  await writeFile(path.join(src, 'd/f'), 'system tar\n')
  for (const format of ['gnu', 'v7', 'posix']) {
    await fresh()
    const r = spawnSync('tar', ['cf', '-', '-C', src, `--format=${format}`, 'd'])
    assert.equal(r.status, 0, r.stderr.toString())
    await extract(c, r.stdout)
    assert.equal(await readFile(path.join(c.staging, 'd/f'), 'utf8'), 'system tar\n', format)
  }
  // tar cf of nothing: only the end-of-archive blocks, padded to a record.
  await fresh()
  assert.deepEqual(await extract(c, Buffer.alloc(10240)), { bytes: 0, files: 0, skipped: [], skippedEntries: 0 })
  // In small pieces: the first bytes arrive over several chunks.
  await fresh()
  await extractArchive(streamOf(gzipSync(rawTar([{ path: 'b', data: 'slow' }])), 1), { stagingDir: c.staging, limits: LIMITS })
  assert.equal(await readFile(path.join(c.staging, 'b'), 'utf8'), 'slow')
  await fresh()
  await extractArchive(streamOf(rawTar([{ path: 'b', data: 'slow tar' }]), 7), { stagingDir: c.staging, limits: LIMITS })
  assert.equal(await readFile(path.join(c.staging, 'b'), 'utf8'), 'slow tar')
  await rm(src, { recursive: true })
})

test('a body that is neither a tar nor a tar.gz is a 415 that says what was expected', async (t) => {
  const c = await setup(t)
  await refused(c, extract(c, Buffer.from('just some text, not a tar\n'.repeat(100))), 'GW_UNSUPPORTED_MEDIA_TYPE', /not a tar or tar\.gz archive/)
  await refused(c, extract(c, Buffer.from('tiny')), 'GW_UNSUPPORTED_MEDIA_TYPE', /tar or tar\.gz/)
  await refused(c, extract(c, Buffer.alloc(0)), 'GW_UNSUPPORTED_MEDIA_TYPE', /empty/)
  await refused(c, extract(c, Buffer.concat([Buffer.from([0x28, 0xb5, 0x2f, 0xfd]), Buffer.alloc(1024, 7)])), 'GW_UNSUPPORTED_MEDIA_TYPE', /zstd.*tar czf/)
  await refused(c, extract(c, Buffer.concat([Buffer.from('BZh9'), Buffer.alloc(1024, 7)])), 'GW_UNSUPPORTED_MEDIA_TYPE', /bzip2/)
  await refused(c, extract(c, Buffer.concat([Buffer.from([0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00]), Buffer.alloc(1024, 7)])), 'GW_UNSUPPORTED_MEDIA_TYPE', /xz/)
  await refused(c, extract(c, Buffer.concat([Buffer.from('PK\x03\x04'), Buffer.alloc(1024, 7)])), 'GW_UNSUPPORTED_MEDIA_TYPE', /zip/)
  assert.deepEqual(await readdir(c.staging), [])
})

test('entries the file tools never write (.git/hooks, .ssh, .aws, case-folded) are skipped and reported', async (t) => {
  const c = await setup(t)
  const res = await extract(c, rawTar([
    { path: '.git/', type: 'Directory', mode: 0o755 },
    { path: '.git/config', data: '[core]\n' },
    { path: '.git/hooks/', type: 'Directory', mode: 0o755 },
    { path: '.git/hooks/pre-commit', mode: 0o755, data: '#!/bin/sh\necho pwned\n' },
    { path: '.git/hooks/post-checkout', mode: 0o755, data: '#!/bin/sh\necho pwned\n' },
    { path: '.ssh/authorized_keys', data: 'ssh-ed25519 AAAA attacker\n' },
    { path: 'sub/.AWS/credentials', data: 'x' },
    { path: '.Git/HOOKS/x', data: 'x' },
    // A hard link to a skipped file has nothing to link to: skipped too.
    { path: 'keys', type: 'Link', linkpath: '.ssh/authorized_keys' },
    // A link may point there (a file tool's write through it is refused, as for any link).
    { path: 'hooks-link', type: 'SymbolicLink', linkpath: '.git/hooks' },
    { path: 'ok.txt', data: 'ok' }
  ]))
  assert.deepEqual(Object.keys(await snapshot(c.staging)), ['.git', '.git/config', 'hooks-link', 'ok.txt'])
  assert.deepEqual(res, { bytes: 7 + 2, files: 4, skipped: ['.git/hooks', '.ssh', 'sub/.AWS', '.Git/HOOKS', 'keys'], skippedEntries: 7 })
  await assertOutsideUntouched(c)
})

test('the report of skipped entries is bounded: the first 100 places, and the count of all', async (t) => {
  const c = await setup(t)
  const entries = Array.from({ length: 300 }, (_, i) => ({ path: `d${i}/.ssh/id`, data: 'k' }))
  const res = await extract(c, rawTar([...entries, { path: 'ok', data: 'ok' }]))
  assert.equal(res.skipped.length, 100)
  assert.equal(res.skipped[99], 'd99/.ssh')
  assert.equal(res.skippedEntries, 300)
  assert.deepEqual(await readdir(c.staging), ['ok'])
})

test('data after the end of the archive: record padding is fine, a long tail is refused', async (t) => {
  const c = await setup(t)
  const tar = rawTar([{ path: 'a', data: 'a' }])
  await extract(c, Buffer.concat([tar, Buffer.alloc(10240 - tar.length)]))
  await rm(c.staging, { recursive: true }); await mkdir(c.staging, { mode: 0o700 })
  await refused(c, extract(c, gzipSync(Buffer.concat([tar, Buffer.alloc(8 * 1024 * 1024)]))), 'GW_BAD_ARCHIVE', /after the end/)
})

// ------------------------------------------------------------------------------------------
// Normal archives

test('archives made by the system tar upload: tar czf with ./ names, and a plain tar', async (t) => {
  const c = await setup(t)
  const src = path.join(c.dir, 'src-tree')
  await mkdir(src)
  await makeTree(src, c.outside)
  await rm(path.join(src, 'escape'))
  const gz = spawnSync('tar', ['czf', '-', '-C', src, '.'], { maxBuffer: 64 * 1024 * 1024 })
  assert.equal(gz.status, 0)
  await extract(c, gz.stdout)
  const want = await snapshot(src)
  assert.deepEqual(await snapshot(c.staging), want)
  await rm(c.staging, { recursive: true }); await mkdir(c.staging, { mode: 0o700 })
  const plain = spawnSync('tar', ['cf', '-', '-C', src, '--format=gnu', '.'], { maxBuffer: 64 * 1024 * 1024 })
  await extract(c, plain.stdout)
  assert.deepEqual(await snapshot(c.staging), want)
  // node-tar's own output too (portable pax).
  await rm(c.staging, { recursive: true }); await mkdir(c.staging, { mode: 0o700 })
  const nt = await collect(tarCreate({ cwd: src, gzip: true, portable: true }, ['.']) as unknown as Readable)
  await extract(c, nt)
  assert.deepEqual(await snapshot(c.staging), want)
  await rm(src, { recursive: true })
  await rm(c.staging, { recursive: true }); await mkdir(c.staging, { mode: 0o700 })
})

test('staging directories are private and removed whole, links in them not followed', async (t) => {
  const c = await setup(t)
  const parent = path.join(c.staging, '.tg', 'staging')
  const dir = await makeStagingDir(parent)
  assert.equal((await stat(parent)).mode & 0o777, 0o700)
  assert.equal((await stat(dir)).mode & 0o777, 0o700)
  assert.notEqual(await makeStagingDir(parent), dir)
  const tar = rawTar([{ path: 'out', type: 'SymbolicLink', linkpath: '.' }, { path: 'd/f', data: 'x' }])
  await extractArchive(streamOf(tar), { stagingDir: dir, limits: LIMITS })
  await symlink(c.outside, path.join(dir, 'd', 'outside-link'))
  await removeStagingDir(dir)
  await assert.rejects(stat(dir))
  await assertOutsideUntouched(c)
})

test('an aborted upload rejects with the signal\'s reason and writes nothing more', async (t) => {
  const c = await setup(t)
  const ac = new AbortController()
  const body = new Readable({ read () {} })
  // A file whose body stops halfway: the write waiting for the rest must end too.
  body.push(rawTar([{ path: 'a', data: 'a' }, { path: 'big', data: Buffer.alloc(1024 * 1024, 'b') }], { end: false }).subarray(0, 300 * 1024))
  const p = extractArchive(body, { stagingDir: c.staging, limits: LIMITS, signal: ac.signal })
  setTimeout(() => ac.abort(new Error('client went away')), 50)
  await assert.rejects(p, /client went away/)
  await assertOutsideUntouched(c)
  assert.ok((await stat(path.join(c.staging, 'big'))).size < 1024 * 1024)
})
