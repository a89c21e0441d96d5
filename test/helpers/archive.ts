/**
 * What the archive tests share (test/unit/builtin/workspace/archive-*.test.ts): a temp directory with a
 * staging directory and a sentinel beside it that no archive may touch, extraction from a buffer in
 * request-sized pieces, refusals checked with the sentinel, a lstat snapshot of a tree, and a tree of
 * every kind of entry a workspace holds.
 */
import assert from 'node:assert/strict'
import { createHash, randomBytes } from 'node:crypto'
import { chmod, lstat, mkdir, mkdtemp, readFile, readdir, readlink, realpath, rm, symlink, utimes, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { Readable } from 'node:stream'
import { HttpError } from '../../src/errors.js'
import type { ArchiveLimits, ExtractResult } from '../../src/builtin/workspace/archive-entries.js'
import { extractArchive } from '../../src/builtin/workspace/archive-extract.js'

export const LIMITS: ArchiveLimits = { maxBytes: 1024 * 1024 * 1024, maxFiles: 200_000 }
export const MTIME = new Date(1_700_000_000_000)

export interface Ctx { dir: string, staging: string, outside: string }

export async function setup (t: { after: (fn: () => Promise<void>) => void }): Promise<Ctx> {
  const dir = await realpath(await mkdtemp(path.join(os.tmpdir(), 'tg-archive-')))
  t.after(() => rm(dir, { recursive: true, force: true }))
  const staging = path.join(dir, 'staging')
  const outside = path.join(dir, 'outside')
  await mkdir(staging, { mode: 0o700 })
  await mkdir(outside)
  await writeFile(path.join(outside, 'sentinel'), 'SENTINEL\n')
  return { dir, staging, outside }
}

/** Nothing appeared or changed beside the staging directory. */
export async function assertOutsideUntouched (c: Ctx): Promise<void> {
  // The test's own trees may sit beside them; anything else was written by the archive.
  for (const name of await readdir(c.dir)) assert.ok(['outside', 'staging', 'ws', 'src-tree', 'sys'].includes(name), name)
  assert.deepEqual(await readdir(c.outside), ['sentinel'])
  assert.equal(await readFile(path.join(c.outside, 'sentinel'), 'utf8'), 'SENTINEL\n')
}

/** A body that arrives in pieces, as a request body does. */
export function streamOf (buf: Buffer, chunk = 16 * 1024): Readable {
  return Readable.from((function * () {
    for (let i = 0; i < buf.length; i += chunk) yield buf.subarray(i, i + chunk)
  })())
}

export async function extract (c: Ctx, buf: Buffer, opts: { limits?: Partial<ArchiveLimits> } = {}): Promise<ExtractResult> {
  return await extractArchive(streamOf(buf), { stagingDir: c.staging, limits: { ...LIMITS, ...opts.limits } })
}

type RefusalCode = 'GW_BAD_ARCHIVE' | 'GW_PAYLOAD_TOO_LARGE' | 'GW_UNSUPPORTED_MEDIA_TYPE'

export async function refused (c: Ctx, p: Promise<unknown>, code: RefusalCode, re?: RegExp): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof HttpError, `expected an HttpError, got ${String(err)}`)
    assert.equal(err.code, code, err.message)
    if (re !== undefined) assert.match(err.message, re)
    return true
  })
  await assertOutsideUntouched(c)
}

export interface Snap { type: string, mode: number, size?: number, sha?: string, target?: string, mtime?: number }

/** Everything below `root` as plain data (lstat: links are never followed). */
export async function snapshot (root: string): Promise<Record<string, Snap>> {
  const out: Record<string, Snap> = {}
  async function walkDir (dir: string, prefix: string): Promise<void> {
    for (const name of (await readdir(dir)).sort()) {
      const abs = path.join(dir, name)
      const rel = prefix === '' ? name : `${prefix}/${name}`
      const st = await lstat(abs)
      const mode = st.mode & 0o7777
      if (st.isSymbolicLink()) out[rel] = { type: 'symlink', mode: 0, target: await readlink(abs) }
      else if (st.isDirectory()) {
        out[rel] = { type: 'dir', mode }
        await walkDir(abs, rel)
      } else if (st.isFile()) {
        const sha = createHash('sha256').update(await readFile(abs)).digest('hex')
        out[rel] = { type: 'file', mode, size: st.size, sha, mtime: Math.floor(st.mtimeMs / 1000) }
      } else out[rel] = { type: 'other', mode }
    }
  }
  await walkDir(root, '')
  return out
}

export async function makeTree (root: string, outside: string): Promise<void> {
  await mkdir(path.join(root, 'src/lib'), { recursive: true })
  await mkdir(path.join(root, 'empty/nested-empty'), { recursive: true })
  await writeFile(path.join(root, 'README.md'), '# hello\n')
  await writeFile(path.join(root, 'src/lib/a.ts'), 'export const a = 1\n')
  await writeFile(path.join(root, 'run.sh'), '#!/bin/sh\necho hi\n')
  await chmod(path.join(root, 'run.sh'), 0o750)
  await writeFile(path.join(root, 'private'), 'secret-ish\n')
  await chmod(path.join(root, 'private'), 0o600)
  await writeFile(path.join(root, 'empty-file'), '')
  await writeFile(path.join(root, 'big.bin'), randomBytes(3 * 1024 * 1024 + 17))
  const long = `${'d'.repeat(90)}/${'e'.repeat(120)}`
  await mkdir(path.join(root, path.dirname(long)), { recursive: true })
  await writeFile(path.join(root, long), 'long name\n')
  await mkdir(path.join(root, 'ünïcødé ✓'))
  await writeFile(path.join(root, 'ünïcødé ✓/日本語.txt'), 'unicode\n')
  await symlink('src/lib/a.ts', path.join(root, 'link-to-a'))
  await symlink('../README.md', path.join(root, 'src/up-link'))
  await symlink('x'.repeat(150), path.join(root, 'dangling-long-target'))
  // Not followed on download: the archive holds the link, not what it points to.
  await symlink(outside, path.join(root, 'escape'))
  await chmod(path.join(root, 'src'), 0o750)
  for (const f of ['README.md', 'src/lib/a.ts', 'big.bin', long]) await utimes(path.join(root, f), MTIME, MTIME)
}
