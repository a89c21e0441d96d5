/**
 * Reads the process table from /proc (Linux), for tests that prove nothing is left behind:
 * no orphan, no zombie, no leaked file descriptor, no memory growth.
 */
import { readdir, readFile, readlink } from 'node:fs/promises'
import { setTimeout as sleep } from 'node:timers/promises'

/** One process as /proc shows it. */
export interface ProcInfo {
  pid: number
  ppid: number
  /** One-letter state; `Z` is a zombie (exited, not reaped). */
  state: string
  uid: number
  /** argv joined by spaces ('' for kernel threads and zombies). */
  cmdline: string
}

/** Reads one process; undefined when it ended while we looked. */
export async function procInfo (pid: number): Promise<ProcInfo | undefined> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8')
    // comm may hold spaces and parentheses: the fields after it start past the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    const status = await readFile(`/proc/${pid}/status`, 'utf8')
    const uid = Number(/^Uid:\s+(\d+)/m.exec(status)?.[1] ?? -1)
    const cmdline = (await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).split('\0').filter(Boolean).join(' ')
    return { pid, ppid: Number(fields[1]), state: fields[0] ?? '?', uid, cmdline }
  } catch {
    return undefined
  }
}

/** Every process on the machine (except the caller). */
export async function allProcesses (): Promise<ProcInfo[]> {
  const pids = (await readdir('/proc')).filter((name) => /^\d+$/.test(name)).map(Number).filter((pid) => pid !== process.pid)
  const infos = await Promise.all(pids.map(procInfo))
  return infos.filter((p): p is ProcInfo => p !== undefined)
}

/** Live (non-zombie) processes whose command line contains `needle`. */
export async function processesMatching (needle: string): Promise<ProcInfo[]> {
  return (await allProcesses()).filter((p) => p.state !== 'Z' && p.cmdline.includes(needle))
}

/** Every descendant of `pid` (children, their children...), zombies included: a zombie is a leak too. */
export async function descendantsOf (pid: number): Promise<ProcInfo[]> {
  const all = await allProcesses()
  const byParent = new Map<number, ProcInfo[]>()
  for (const p of all) byParent.set(p.ppid, [...(byParent.get(p.ppid) ?? []), p])
  const out: ProcInfo[] = []
  const queue = [pid]
  while (queue.length > 0) {
    for (const child of byParent.get(queue.shift() as number) ?? []) {
      out.push(child)
      queue.push(child.pid)
    }
  }
  return out
}

/** Open file descriptors of `pid`, by kind: socket, pipe, anon_inode, file. */
export async function openFds (pid: number): Promise<{ total: number, byKind: Record<string, number> }> {
  const byKind: Record<string, number> = {}
  const fds = await readdir(`/proc/${pid}/fd`)
  for (const fd of fds) {
    const target = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => 'gone')
    const kind = /^(socket|pipe|anon_inode):/.exec(target)?.[1] ?? (target === 'gone' ? 'gone' : 'file')
    byKind[kind] = (byKind[kind] ?? 0) + 1
  }
  return { total: fds.length, byKind }
}

/** Resident set size of `pid` in bytes. */
export async function rssBytes (pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8')
  return Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? 0) * 1024
}

/** Polls `check` every 100 ms until it holds; fails with `what` after `timeoutMs`. */
export async function waitUntil (what: string, check: () => Promise<boolean> | boolean, timeoutMs = 20_000): Promise<void> {
  const until = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await sleep(100)
  }
}
