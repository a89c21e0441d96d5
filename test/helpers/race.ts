// Helpers for the symlink-race attack tests (test/security/symlink-races.test.ts): a hostile
// tenant's swap loop run through the gateway's own `bash start`, a bounded hammer of tool calls,
// and exact checks of what reached (or changed) places outside the tenant's workspace.
import { lstat, open, readdir, readFile, readlink } from 'node:fs/promises'
import { constants as fsConstants } from 'node:fs'
import { createHash } from 'node:crypto'
import { join } from 'node:path'
import type { GatewayProcess } from '../../scripts/lib/gateway-process.js'

export interface InvokeResult {
  status: number
  /** The raw response body: every escape check reads all of it, not only `output`. */
  text: string
  isError: boolean
  output: string
  error: { code: string, message: string } | null
}

export async function invoke (
  gw: GatewayProcess,
  userId: string,
  workspaceId: string,
  name: string,
  args: Record<string, unknown>
): Promise<InvokeResult> {
  let res: Response
  try {
    res = await fetch(`${gw.url}/invoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name, arguments: args, userId, context: { workspaceId } })
    })
  } catch (err) {
    // The gateway crashed or hung up: that is a finding too, with its last words.
    const exit = gw.child.exitCode === null && gw.child.signalCode === null ? 'still running' : `exited (${gw.child.exitCode ?? gw.child.signalCode})`
    throw new Error(`${name} call failed (${(err as Error).message}: ${String((err as Error).cause)}; gateway ${exit}); gateway log tail:\n${gw.logs().slice(-3000)}`)
  }
  const text = await res.text()
  let body: { isError?: boolean, output?: string, error?: { code: string, message: string } | null } = {}
  try {
    body = JSON.parse(text)
  } catch {
    // Left empty: the status and raw text tell the test what happened.
  }
  return { status: res.status, text, isError: body.isError === true, output: body.output ?? '', error: body.error ?? null }
}

/** renameat2's syscall number: the attack exchanges two names atomically (RENAME_EXCHANGE). */
export function renameat2Number (): number {
  if (process.arch === 'x64') return 316
  if (process.arch === 'arm64') return 276
  throw new Error(`renameat2 syscall number unknown for ${process.arch}`)
}

export interface SwapPair {
  /** The name the gateway is asked about: at any moment it is the real entry or the link. */
  name: string
  /** The other name, where the link starts. */
  other: string
  /** Where the link points: a host path outside the workspace (resolved by whoever follows it). */
  target: string
}

/**
 * A Perl program that exchanges each pair's two names in a tight loop with
 * renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) until `seconds` pass (a bound even if the
 * test fails to stop it). Only this loop moves the entries, so it always knows which name holds
 * the link and which the real entry:
 * - a link that a tool replaced (a write renamed over it) is made again, and what replaced it is
 *   moved aside as `<name>.displaced.<n>` (kept: it may hold what leaked); `repair: false` turns
 *   this off, for several loops over the same pairs (then none knows where the link is);
 * - with `refill`, the real directory keeps a file of that name, so a delete attack has a target
 *   on every call.
 */
export function swapLoopProgram (pairs: SwapPair[], opts: { seconds: number, refill?: string, repair?: boolean }): string {
  const q = (v: string): string => `"${v.replace(/[\\"$@]/g, (c) => `\\${c}`)}"`
  const list = pairs.map((p) => `[${q(p.name)}, ${q(p.other)}, ${q(p.target)}]`).join(', ')
  return [
    'use strict; use warnings;',
    `my $nr = ${renameat2Number()};`,
    `my @pairs = (${list});`,
    '# Which name holds the real entry right now; the other holds the link.',
    'my @real = map { $_->[0] } @pairs;',
    `my $refill = ${opts.refill === undefined ? 'undef' : q(opts.refill)};`,
    `alarm ${opts.seconds};`,
    'my $moved = 0; my $round = 0;',
    'for my $p (@pairs) { symlink($p->[2], $p->[1]) or die "symlink $p->[1]: $!" unless -l $p->[1] }',
    '$| = 1; print "swapping\\n";',
    'while (1) {',
    '  for my $i (0 .. $#pairs) {',
    '    my ($a, $b) = @{$pairs[$i]};',
    '    if (syscall($nr, -100, $a, -100, $b, 2) == 0) { $real[$i] = $real[$i] eq $a ? $b : $a }',
    '  }',
    '  # Repairs every 64 rounds: each check is a syscall that would slow the swapping down.',
    `  next if ${opts.repair === false ? '1' : '++$round % 64'};`,
    '  for my $i (0 .. $#pairs) {',
    '    my ($a, $b, $target) = @{$pairs[$i]};',
    '    my $link = $real[$i] eq $a ? $b : $a;',
    '    if (!-l $link) { rename($link, "$link.displaced." . $moved++); symlink($target, $link) }',
    '    if (defined $refill && !-e "$real[$i]/$refill") {',
    '      if (open(my $f, ">", "$real[$i]/$refill")) { print $f "inside\\n"; close $f }',
    '    }',
    '  }',
    '}'
  ].join('\n') + '\n'
}

/** Runs `fn(i)` for i in [0, n) with at most `concurrency` in flight. */
export async function hammer (n: number, concurrency: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0
  const worker = async (): Promise<void> => {
    while (next < n) await fn(next++)
  }
  await Promise.all(Array.from({ length: concurrency }, worker))
}

export interface TreeEntry { type: 'file' | 'dir' | 'link' | 'other', digest: string, ino: number }

/**
 * Everything under `dir` (never following a symlink): type, inode and content digest per
 * relative path. Comparing two snapshots shows any file created, deleted, replaced or changed.
 */
export async function snapshotTree (dir: string): Promise<Map<string, TreeEntry>> {
  const out = new Map<string, TreeEntry>()
  const walk = async (abs: string, rel: string): Promise<void> => {
    for (const name of await readdir(abs)) {
      const a = join(abs, name)
      const r = rel === '' ? name : `${rel}/${name}`
      const st = await lstat(a)
      if (st.isSymbolicLink()) {
        out.set(r, { type: 'link', digest: await readlink(a), ino: st.ino })
      } else if (st.isDirectory()) {
        out.set(r, { type: 'dir', digest: '', ino: st.ino })
        await walk(a, r)
      } else if (st.isFile()) {
        out.set(r, { type: 'file', digest: createHash('sha256').update(await readFile(a)).digest('hex'), ino: st.ino })
      } else {
        out.set(r, { type: 'other', digest: '', ino: st.ino })
      }
    }
  }
  await walk(dir, '')
  return out
}

/** Human-readable differences between two snapshots (empty when nothing changed). */
export function diffTrees (before: Map<string, TreeEntry>, after: Map<string, TreeEntry>): string[] {
  const diffs: string[] = []
  for (const [p, e] of before) {
    const now = after.get(p)
    if (now === undefined) diffs.push(`removed ${p}`)
    else if (now.type !== e.type || now.digest !== e.digest || now.ino !== e.ino) diffs.push(`changed ${p}`)
  }
  for (const p of after.keys()) if (!before.has(p)) diffs.push(`created ${p}`)
  return diffs
}

/**
 * Files under `dir` (symlinks not followed, so only what really lies in the tree) whose bytes or
 * name hold one of `markers`, as "path: marker". Nothing off `dir`'s filesystem is read: every
 * entry's lstat and every opened file's fstat must show the same device, and files are opened
 * with O_NOFOLLOW|O_NONBLOCK. That keeps a scan made while the tenant's loop still swaps names
 * from wandering into /proc (a directory swapped for /proc/self between lstat and readdir); such a
 * live scan is exact only when the links point off the workspace's filesystem.
 */
export async function findMarkers (dir: string, markers: string[]): Promise<string[]> {
  const found: string[] = []
  const needles = markers.map((m) => Buffer.from(m))
  const dev = (await lstat(dir)).dev
  const readSameDev = async (abs: string): Promise<Buffer | undefined> => {
    const fh = await open(abs, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK).catch(() => undefined)
    if (fh === undefined) return undefined
    try {
      const st = await fh.stat()
      return st.isFile() && st.dev === dev ? await fh.readFile() : undefined
    } catch {
      return undefined
    } finally {
      await fh.close()
    }
  }
  const walk = async (abs: string, rel: string): Promise<void> => {
    let names: string[]
    try {
      names = await readdir(abs)
    } catch {
      return
    }
    for (const name of names) {
      const a = join(abs, name)
      const r = rel === '' ? name : `${rel}/${name}`
      const st = await lstat(a).catch(() => undefined)
      if (st === undefined || st.dev !== dev) continue
      for (const m of markers) if (r.includes(m)) found.push(`${r}: ${m} (in its name)`)
      if (st.isDirectory()) {
        await walk(a, r)
      } else if (st.isFile()) {
        const buf = await readSameDev(a)
        if (buf !== undefined) needles.forEach((n, i) => { if (buf.includes(n)) found.push(`${r}: ${markers[i] as string}`) })
      }
    }
  }
  await walk(dir, '')
  return found
}
