import { chmod, lstat, mkdtemp, readlink, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
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
 * Writes the synthetic /etc files into a fresh directory the sandbox uid can read but not
 * change (root-owned 0755 when the gateway is root). The host's passwd/group/shadow are never shown.
 */
export async function writeSyntheticEtc (): Promise<{ dir: string, remove: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'tool-gateway-etc-'))
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
  return { dir, remove: async () => { await rm(dir, { recursive: true, force: true }) } }
}
