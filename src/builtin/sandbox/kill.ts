import { readdir, readFile } from 'node:fs/promises'

/** process.kill that treats "already gone" as success. */
export function signalQuietly (pid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(pid, signal)
    return true
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false
    throw err
  }
}

/** Parent pid from /proc/<pid>/stat; the comm field may contain spaces and parentheses. */
function parsePpid (stat: string): number | undefined {
  const end = stat.lastIndexOf(')')
  if (end < 0) return undefined
  const fields = stat.slice(end + 2).split(' ')
  const ppid = Number(fields[1])
  return Number.isInteger(ppid) ? ppid : undefined
}

/** Host pids whose parent is `pid` (/proc scan: /proc/<pid>/task/<tid>/children is not always compiled in). */
export async function childPids (pid: number): Promise<number[]> {
  const out: number[] = []
  let entries: string[]
  try {
    entries = await readdir('/proc')
  } catch {
    return out
  }
  await Promise.all(entries.map(async (name) => {
    if (!/^\d+$/.test(name)) return
    try {
      const ppid = parsePpid(await readFile(`/proc/${name}/stat`, 'utf8'))
      if (ppid === pid) out.push(Number(name))
    } catch {
      // exited while scanning
    }
  }))
  return out.sort((a, b) => a - b)
}
