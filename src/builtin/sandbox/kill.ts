import { readdir, readFile, readlink } from 'node:fs/promises'
import { setTimeout as sleep } from 'node:timers/promises'

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

/** Alive = exists, is not a zombie, and (when known) is still in the given pid namespace (not a reused pid). */
async function isAlive (pid: number, pidNs: number | undefined): Promise<boolean> {
  let stat: string
  try {
    stat = await readFile(`/proc/${pid}/stat`, 'utf8')
  } catch {
    return false
  }
  const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3)
  if (state === 'Z' || state === 'X') return false
  if (pidNs === undefined) return true
  try {
    return (await readlink(`/proc/${pid}/ns/pid`)) === `pid:[${pidNs}]`
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== 'ENOENT'
  }
}

/**
 * Waits until the init of a sandbox's pid namespace is dead or a zombie. The kernel kills and reaps
 * every other process of the namespace before its init can become a zombie, so afterwards nothing the
 * command started (setsid'd orphans included) is left. Bounded: gives up after `maxMs`.
 */
export async function waitForNamespaceEnd (initPid: number, pidNs: number | undefined, maxMs: number): Promise<boolean> {
  const deadline = Date.now() + maxMs
  let delay = 1
  while (await isAlive(initPid, pidNs)) {
    if (Date.now() >= deadline) return false
    await sleep(delay)
    delay = Math.min(delay * 2, 25)
  }
  return true
}
