import { chmod, copyFile, lstat, mkdir, mkdtemp, readdir, readlink, rm, stat, symlink, writeFile } from 'node:fs/promises'
import type { Stats } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { INNER_GID, INNER_UID, type HostLayout } from './bwrap-args.js'

const TOP_LEVEL = ['/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'] as const

/** How the host lays out /bin, /lib...: merged-/usr hosts have symlinks, older ones real directories. */
export async function detectHostLayout (): Promise<HostLayout> {
  const dirs: string[] = []
  const symlinks: Array<{ path: string, target: string }> = []
  for (const p of TOP_LEVEL) {
    try {
      const st = await lstat(p)
      if (st.isSymbolicLink()) symlinks.push({ path: p, target: await readlink(p) })
      else if (st.isDirectory()) dirs.push(p)
    } catch {
      // absent on this host
    }
  }
  return { dirs, symlinks }
}

/**
 * Host /etc entries that programs need and that hold no secrets (relative to /etc), copied into the
 * sandbox's /etc. Not all of /etc/ssl: /etc/ssl/private holds host keys.
 */
const COPIED_ETC_ENTRIES = [
  'ld.so.cache', 'ld.so.conf', 'ld.so.conf.d', 'ssl/openssl.cnf', 'ca-certificates', 'ca-certificates.conf', 'localtime',
  'protocols', 'services', 'mime.types', 'magic'
] as const

/**
 * Host /etc directories bound into the sandbox's /etc instead: hundreds of links each, which packages
 * change (a copy cost ~0.5 s of start-up on a slow disk, one link a millisecond), for one bind each.
 */
const BOUND_ETC_DIRS = ['ssl/certs', 'alternatives'] as const

/**
 * Bounds of the copy of the host entries: /etc is the host's to fill (a package may drop thousands of
 * files in a directory), and the copy is made at start-up, in a temporary directory.
 */
export interface EtcCopyBounds { entries: number, bytes: number, depth: number }
const ETC_COPY_BOUNDS: EtcCopyBounds = { entries: 2_000, bytes: 16 * 1024 * 1024, depth: 4 }

/** What the sandbox uid can read through a bind of the host entry: it is none of the file's owner or group (setpriv clears groups). */
const OTHERS_READ = 0o004
const OTHERS_SEARCH = 0o001

/** The sandbox's /etc: a directory bound read-only at /etc, and host directories bound on top of it at their own paths. */
export interface SandboxEtc {
  dir: string
  /** Host paths (`/etc/ssl/certs`) bound read-only at the same path, over empty directories of `dir`. */
  binds: readonly string[]
  remove: () => Promise<void>
}

/**
 * The sandbox's /etc (bwrap-args.ts): generated passwd, group, hosts, nsswitch.conf and hostname (the
 * host's passwd/group/shadow are never shown), a copy of the host entries programs need
 * (COPIED_ETC_ENTRIES), taken now, and mount points for BOUND_ETC_DIRS. Three binds instead of one
 * per entry: each bind is two mount calls in every sandboxed command's setup (18 binds cost ~3.6 ms
 * of a ~15 ms bwrap start on the bench machine, README "The sandbox's own cost").
 *
 * The copy holds what the sandbox uid could read through a bind of the entry and nothing more: a
 * file or directory that "others" cannot read (or search) is left out; symbolic links inside a
 * directory are copied as links (never followed: they resolve inside the sandbox, as through a
 * bind), while an entry that is itself a link is followed, as a bind follows it. The directory is
 * root-owned 0755 when the gateway is root, files 0644: the sandbox uid can read but not change it,
 * and every tenant sees the same. A copied entry changed after start-up shows after a restart (the
 * dynamic linker's defaults find a library its cache does not list yet; the sandbox has no network).
 */
export async function writeSandboxEtc (hostEtc = '/etc', bounds: EtcCopyBounds = ETC_COPY_BOUNDS): Promise<SandboxEtc> {
  const dir = await mkdtemp(join(tmpdir(), 'tool-gateway-etc-'))
  const remove = async (): Promise<void> => { await rm(dir, { recursive: true, force: true }) }
  try {
    await chmod(dir, 0o755)
    const files: Record<string, string> = {
      passwd: [
        'root:x:0:0:root:/root:/usr/sbin/nologin',
        `sandbox:x:${INNER_UID}:${INNER_GID}:sandbox:/tmp:/bin/sh`,
        'nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin',
        ''
      ].join('\n'),
      group: ['root:x:0:', `sandbox:x:${INNER_GID}:`, 'nogroup:x:65534:', ''].join('\n'),
      hosts: '127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n',
      'nsswitch.conf': 'passwd: files\ngroup: files\nshadow: files\nhosts: files\nnetworks: files\n',
      hostname: 'sandbox\n'
    }
    for (const [name, content] of Object.entries(files)) {
      const p = join(dir, name)
      await writeFile(p, content, { mode: 0o644 })
      await chmod(p, 0o644)
    }
    const budget = { ...bounds }
    for (const entry of COPIED_ETC_ENTRIES) {
      const st = await stat(join(hostEtc, entry)).catch(() => undefined)
      // Absent on this host (or a dangling link): left out, as --ro-bind-try did.
      if (st === undefined) continue
      await makeParent(dir, entry)
      await copyEntry(join(hostEtc, entry), join(dir, entry), st, 0, budget)
    }
    const binds: string[] = []
    for (const entry of BOUND_ETC_DIRS) {
      const st = await stat(join(hostEtc, entry)).catch(() => undefined)
      if (st?.isDirectory() !== true) continue
      await makeParent(dir, entry)
      await makeDir(join(dir, entry))
      binds.push(join(hostEtc, entry))
    }
    return { dir, binds, remove }
  } catch (err) {
    await remove()
    throw err
  }
}

/** A directory of the copy, 0755 whatever the gateway's umask (the sandbox uid searches it as "others"). */
async function makeDir (path: string, recursive = false): Promise<void> {
  await mkdir(path, { recursive })
  await chmod(path, 0o755)
}

/** The directories above `entry` (ssl/ for ssl/certs) in `dir`. */
async function makeParent (dir: string, entry: string): Promise<void> {
  const parent = dirname(join(dir, entry))
  if (parent !== dir) await makeDir(parent, true)
}

/** Copies one host entry (a regular file or a directory's tree) within the budget; what the sandbox uid could not read is left out. */
async function copyEntry (from: string, to: string, st: Stats, depth: number, budget: EtcCopyBounds): Promise<void> {
  if (budget.entries <= 0) return
  if (st.isFile()) {
    if ((st.mode & OTHERS_READ) === 0 || st.size > budget.bytes) return
    budget.entries--
    budget.bytes -= st.size
    await copyFile(from, to)
    await chmod(to, 0o644)
    return
  }
  if (!st.isDirectory() || (st.mode & (OTHERS_READ | OTHERS_SEARCH)) !== (OTHERS_READ | OTHERS_SEARCH) || depth >= budget.depth) return
  budget.entries--
  await makeDir(to)
  for (const name of await readdir(from)) {
    if (budget.entries <= 0) return
    const source = join(from, name)
    const child = await lstat(source)
    if (child.isSymbolicLink()) {
      budget.entries--
      await symlink(await readlink(source), join(to, name))
    } else {
      await copyEntry(source, join(to, name), child, depth + 1, budget)
    }
  }
}
