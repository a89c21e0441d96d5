import { readFileSync } from 'node:fs'
import { readdir, readFile } from 'node:fs/promises'

/**
 * How much a command has written: the sum of `wchar` over its processes. The kernel adds a reaped
 * child's counts to its parent's, so while the tree's top process lives the sum only grows, short-
 * lived children included. Reading another uid's /proc/<pid>/io needs the gateway to be root (or
 * the same uid); an unreadable entry counts 0.
 *
 * Read synchronously: a procfs read takes microseconds and never waits on a disk, while the thread
 * pool it would otherwise queue on can be busy for tens of milliseconds on a loaded host, which is
 * when the quota watchdog needs the figure most.
 */
export function wcharOf (pids: readonly number[]): number {
  let sum = 0
  for (const pid of pids) {
    try {
      const m = /^wchar: (\d+)$/m.exec(readFileSync(`/proc/${pid}/io`, 'utf8'))
      if (m !== null) sum += Number(m[1])
    } catch {
      // exited meanwhile, or not readable
    }
  }
  return sum
}

/** The pids listed in a cgroup.procs file (every process of a command's group), read synchronously as above. */
export function pidsInGroup (procsFile: string): number[] {
  try {
    return readFileSync(procsFile, 'utf8').split('\n').filter((l) => l !== '').map(Number).filter((n) => Number.isInteger(n) && n > 0)
  } catch {
    return []
  }
}

/**
 * `pid` and its descendants, from one scan of /proc (no cgroup to list them). Costs one small read
 * per process on the host, so callers poll it sparingly.
 */
export async function processTree (pid: number): Promise<number[]> {
  let names: string[]
  try {
    names = await readdir('/proc')
  } catch {
    return [pid]
  }
  const children = new Map<number, number[]>()
  await Promise.all(names.map(async (name) => {
    if (!/^\d+$/.test(name)) return
    try {
      const stat = await readFile(`/proc/${name}/stat`, 'utf8')
      const end = stat.lastIndexOf(')')
      const ppid = Number(stat.slice(end + 2).split(' ')[1])
      if (!Number.isInteger(ppid)) return
      const list = children.get(ppid) ?? []
      list.push(Number(name))
      children.set(ppid, list)
    } catch {
      // exited while scanning
    }
  }))
  const out: number[] = []
  const todo = [pid]
  while (todo.length > 0 && out.length < 4096) {
    const p = todo.pop() as number
    out.push(p)
    todo.push(...(children.get(p) ?? []))
  }
  return out
}
