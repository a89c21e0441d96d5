import { readdir, readFile } from 'node:fs/promises'

/**
 * How much a command has written: the sum of `wchar` over its processes. The kernel adds a reaped
 * child's counts to its parent's, so while the tree's top process lives the sum only grows, short-
 * lived children included. Reading another uid's /proc/<pid>/io needs the gateway to be root (or
 * the same uid); an unreadable entry counts 0.
 */
export async function wcharOf (pids: readonly number[]): Promise<number> {
  const counts = await Promise.all(pids.map(async (pid) => {
    try {
      const m = /^wchar: (\d+)$/m.exec(await readFile(`/proc/${pid}/io`, 'utf8'))
      return m === null ? 0 : Number(m[1])
    } catch {
      return 0
    }
  }))
  return counts.reduce((a, b) => a + b, 0)
}

/** The pids listed in a cgroup.procs file (every process of a command's group). */
export async function pidsInGroup (procsFile: string): Promise<number[]> {
  try {
    return (await readFile(procsFile, 'utf8')).split('\n').filter((l) => l !== '').map(Number).filter((n) => Number.isInteger(n) && n > 0)
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
