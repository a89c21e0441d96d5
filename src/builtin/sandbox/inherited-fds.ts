import { closeSync, readdirSync, readFileSync } from 'node:fs'

/** O_CLOEXEC in /proc/self/fdinfo's octal `flags:` line. */
const O_CLOEXEC = 0o2000000

/**
 * Descriptors the gateway's parent left open without close-on-exec (a supervisor's pipe, a
 * shell's or a test runner's fd) are inherited by every child process, and bwrap passes every
 * descriptor above 2 through to the command: a tenant's command would hold them. The process
 * entry closes them before anything else runs; Node's own descriptors are all close-on-exec and
 * stay, and so does `keep` (Node's IPC channel, NODE_CHANNEL_FD). Returns the descriptors closed.
 */
export function closeInheritedDescriptors (keep: readonly number[] = []): number[] {
  const closed: number[] = []
  let names: string[]
  try {
    names = readdirSync('/proc/self/fd')
  } catch {
    return closed // no /proc: nothing to judge by
  }
  for (const name of names) {
    const fd = Number(name)
    if (!Number.isInteger(fd) || fd <= 2 || keep.includes(fd)) continue
    let info: string
    try {
      // The directory listing's own descriptor is gone by now.
      info = readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8')
    } catch {
      continue
    }
    const flags = /^flags:\s+([0-7]+)/m.exec(info)?.[1]
    if (flags === undefined || (parseInt(flags, 8) & O_CLOEXEC) !== 0) continue
    try {
      closeSync(fd)
      closed.push(fd)
    } catch {}
  }
  return closed
}
