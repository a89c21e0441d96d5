// Attack tests for the rule "file tools never have more authority than the
// tenant's own bash" (docs/ARCHITECTURE.md#isolation). A hostile tenant runs, in its own sandbox through the
// gateway's `bash start`, a loop that swaps a directory (or the file itself) with a symbolic link
// using renameat2(RENAME_EXCHANGE), so that at any moment the name the tools are asked about is
// either a real entry inside the workspace or a link to a host directory, another tenant's
// workspace or /proc/self. Meanwhile each test sends a bounded number of file-tool calls to the
// real gateway process and counts escapes: any outside content (a unique random marker, host
// /etc content, the gateway's environment) in any response or copied into the workspace, and any
// change outside the workspace. Every attack must see zero escapes.
//
// Also: NUL bytes in text that apply_patch and edit treat as text are refused with a tool error.
import { test, before, after } from 'node:test'
import type { TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { chmod, mkdir, mkdtemp, open, readFile, rm, stat, writeFile } from 'node:fs/promises'
import { constants as fsConstants } from 'node:fs'
import { setPriority, tmpdir } from 'node:os'
import { join } from 'node:path'
import { startGateway } from '../../scripts/lib/gateway-process.js'
import type { GatewayProcess } from '../../scripts/lib/gateway-process.js'
import { processesMatching } from '../../scripts/lib/proc.js'
import { diffTrees, findMarkers, hammer, invoke, snapshotTree, swapLoopProgram } from '../helpers/race.js'
import type { InvokeResult, SwapPair } from '../helpers/race.js'

/** Tool calls per attack, and how many are in flight at once. */
const CALLS = 200
const CONCURRENCY = 4
/** Upper bound on a swap loop's life even if a test fails to stop it (the tests take a few seconds each). */
const LOOP_SECONDS = 60

const ATTACKER = 'mallory'
const VICTIM = 'victim'
const rand = (): string => randomBytes(12).toString('hex')
/** In the gateway's environment only: it must never reach a tenant. */
const CANARY = `tgcanary${rand()}`
/** Content of a file outside every workspace, and of a file in the victim tenant's workspace. */
const OUTSIDE_MARKER = `tgoutside${rand()}`
const VICTIM_MARKER = `tgvictim${rand()}`
const MARKERS = [CANARY, OUTSIDE_MARKER, VICTIM_MARKER]

function missingDependency (): string | undefined {
  if (process.platform !== 'linux') return 'Linux only (bubblewrap, renameat2)'
  if (process.getuid?.() !== 0) return 'the gateway must run as root to use SANDBOX=bwrap with its sandbox uid'
  for (const cmd of ['bwrap', 'perl']) {
    if (spawnSync(cmd, ['--version'], { stdio: 'ignore' }).status !== 0) return `${cmd} is not installed`
  }
  return undefined
}
const MISSING = missingDependency()

/** Skips where the attack cannot run; under CI=true that is a failure instead. */
function requireDeps (t: TestContext): boolean {
  if (MISSING === undefined) return true
  if (process.env.CI === 'true') throw new Error(`${MISSING}; required under CI=true`)
  t.skip(MISSING)
  return false
}

let base: string
let workspaces: string
let gw: GatewayProcess | undefined
let victimRoot: string
const cleanups: Array<() => unknown> = []

before(async () => {
  if (MISSING !== undefined) return
  base = await mkdtemp(join(tmpdir(), 'tg-races-'))
  workspaces = join(base, 'workspaces')
  await mkdir(workspaces)
  await chmod(base, 0o755)
  await chmod(workspaces, 0o755)
  // The gateway's own kill-on-exit is run from the file's after hook below (an `after` registered
  // from inside a hook would run as soon as that hook ends).
  gw = await startGateway({ after: (fn) => { cleanups.push(fn) } }, {
    SANDBOX: 'bwrap',
    // Uids of its own (once tenants get their own, docs/ARCHITECTURE.md#isolation): other tests' fork bombs are not this file's subject.
    // Outside the default range (Redis deployments beside it claim that whole) and the pool of gateways without Redis.
    SANDBOX_UID_RANGE: '421000-421999',
    WORKSPACES_DIR: workspaces,
    LOAD_EXAMPLES: 'false',
    RATE_LIMIT_PER_MINUTE: '1000000',
    LOG_LEVEL: 'info',
    TG_RACE_CANARY: CANARY
  })
  // If the runner kills this file (its timeout) before the after hook, the gateway and the
  // tenant's swap loops (bwrap --die-with-parent) must not outlive it.
  const child = gw.child
  process.once('exit', () => { if (child.exitCode === null) child.kill('SIGKILL') })
  // The victim's workspace, made by the gateway as any tenant's is, with a file holding its marker.
  const r = await invoke(gw, VICTIM, 'default', 'write_file', { path: 'x', content: `${VICTIM_MARKER}\n` })
  assert.equal(r.isError, false, r.text)
  victimRoot = join(workspaces, VICTIM, 'default')
  assert.equal(await readFile(join(victimRoot, 'x'), 'utf8'), `${VICTIM_MARKER}\n`)
  await writeFile(join(victimRoot, 'shadow'), `${VICTIM_MARKER}\n`)
  await writeFile(join(victimRoot, 'f'), `hello ${VICTIM_MARKER}\n`)
})

after(async () => {
  await gw?.stop()
  for (const fn of cleanups) await fn()
  if (base !== undefined) await rm(base, { recursive: true, force: true })
})

/** A directory outside every workspace (root-only: only the gateway itself could reach it). */
async function outsideDir (files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(join(base, 'outside-'))
  for (const [name, content] of Object.entries(files)) await writeFile(join(dir, name), content)
  return dir
}

function gateway (): GatewayProcess {
  assert.ok(gw !== undefined, 'the gateway did not start')
  return gw
}

function parsed (r: InvokeResult): Record<string, unknown> | undefined {
  if (r.isError) return undefined
  try {
    return JSON.parse(r.output) as Record<string, unknown>
  } catch {
    return undefined
  }
}

interface Attack {
  /** Attacker workspace id (one per attack: each has its own tree and swap loop). */
  ws: string
  /** Calls to send (default CALLS). */
  calls?: number
  /**
   * Swap loops over the same pairs (default 1). Several keep the names flipping while one is off
   * the CPU on a busy machine; only for attacks that never replace a link (see swapLoopProgram).
   */
  swappers?: number
  /** One swap loop per pair instead (each still repairs its own link): for attacks that replace links. */
  loopPerPair?: boolean
  /** Shell run in the attacker's sandbox before the loop: makes the real entries and the links. */
  setup: string
  pairs: SwapPair[]
  refill?: string
  /** One call of the attack. */
  call: (i: number) => Promise<InvokeResult>
  /** Why this response is an escape (beyond a marker in its text, which is always one), if it is. */
  escaped?: (r: InvokeResult, i: number) => string | undefined
  /** Checked after every call: an escape seen on disk (and repaired so the next one is seen too). */
  afterCall?: () => Promise<string | undefined>
  /** Trees outside the attacker's workspace that must be exactly as they were. */
  watch: string[]
}

interface AttackReport {
  planned: number
  calls: number
  escapes: number
  errors: number
  examples: string[]
  /** The swap loop was still running when the last call had answered. */
  racing: boolean
  ms: number
}

/**
 * bwrap fails to start with EAGAIN while the sandbox uid's process budget is used up (by another
 * test's fork bomb, when every tenant shares one uid): that is not this test's subject, so the
 * setup steps try again for a while rather than fail on it.
 */
async function sandboxed (g: GatewayProcess, ws: string, args: Record<string, unknown>): Promise<InvokeResult> {
  const deadline = Date.now() + 15_000
  for (;;) {
    const r = await invoke(g, ATTACKER, ws, 'bash', args)
    if (!/Resource temporarily unavailable/.test(r.text) || Date.now() > deadline) return r
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
}

/**
 * Raises the loop's scheduling priority (as root, from the host). On a machine busy with other
 * work the loop is otherwise off the CPU for most of each call, and the names barely change while
 * the gateway looks at them; the attack is the same, only run more often. Best effort.
 */
async function boost (program: string): Promise<number> {
  let boosted = 0
  for (const p of await processesMatching(`perl ${program}`)) {
    if (p.cmdline !== `perl ${program}`) continue
    try {
      setPriority(p.pid, -10)
      boosted++
    } catch {
      // Gone, or not permitted here: the attack runs at normal priority.
    }
  }
  return boosted
}

/**
 * Starts `program` (a file in the workspace) in the background and waits for its first output line. A start that bwrap
 * could not make (EAGAIN, see `sandboxed`) is tried again.
 */
async function startSwapLoop (g: GatewayProcess, ws: string, program: string): Promise<{ processId: string, boosted: number }> {
  const deadline = Date.now() + 20_000
  let last = ''
  while (Date.now() < deadline) {
    const started = await sandboxed(g, ws, { action: 'start', command: `exec perl ${program}` })
    const processId = parsed(started)?.processId
    assert.equal(typeof processId, 'string', `the swap loop did not start: ${started.text}`)
    for (;;) {
      const logs = await invoke(g, ATTACKER, ws, 'bash', { action: 'logs', processId })
      last = logs.text
      if (logs.output.includes('swapping')) return { processId: processId as string, boosted: await boost(program) }
      const status = await invoke(g, ATTACKER, ws, 'bash', { action: 'status', processId })
      if (String(parsed(status)?.status).toLowerCase() !== 'running' || Date.now() > deadline) break
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    await invoke(g, ATTACKER, ws, 'bash', { action: 'stop', processId })
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
  assert.fail(`the swap loop never reported that it runs: ${last}`)
}

/**
 * Sets the tree up, starts the swap loop in the tenant's sandbox, sends CALLS calls, stops the
 * loop, then checks every response, the watched trees and the attacker's own workspace.
 */
async function runAttack (t: TestContext, a: Attack): Promise<AttackReport> {
  const g = gateway()
  const setup = await sandboxed(g, a.ws, { action: 'exec', command: `set -e\n${a.setup}` })
  assert.equal(parsed(setup)?.exitCode, 0, `setup failed: ${setup.text}`)
  const swappers = a.swappers ?? 1
  const programs: string[] = []
  const groups = a.loopPerPair === true ? a.pairs.map((p) => [p]) : Array.from({ length: swappers }, () => a.pairs)
  for (const [k, pairs] of groups.entries()) {
    // Named per attack: boost() finds the loop's host process by its command line.
    const path = `.swap-${a.ws}-${k}.pl`
    const w = await invoke(g, ATTACKER, a.ws, 'write_file', {
      path,
      content: swapLoopProgram(pairs, { seconds: LOOP_SECONDS, refill: a.refill, repair: swappers === 1 })
    })
    assert.equal(w.isError, false, w.text)
    programs.push(path)
  }
  const before = new Map<string, Awaited<ReturnType<typeof snapshotTree>>>()
  for (const dir of a.watch) before.set(dir, await snapshotTree(dir))

  const report: AttackReport = { planned: a.calls ?? CALLS, calls: 0, escapes: 0, errors: 0, examples: [], racing: false, ms: 0 }
  const record = (why: string): void => {
    report.escapes++
    if (report.examples.length < 5) report.examples.push(why.slice(0, 400))
  }
  const processIds: string[] = []
  let boosted = 0
  const t0 = Date.now()
  try {
    for (const program of programs) {
      const loop = await startSwapLoop(g, a.ws, program)
      processIds.push(loop.processId)
      boosted += loop.boosted
    }
    await hammer(a.calls ?? CALLS, CONCURRENCY, async (i) => {
      const r = await a.call(i)
      report.calls++
      if (r.status !== 200) assert.fail(`call ${i}: HTTP ${r.status} ${r.text}`)
      if (r.isError) report.errors++
      const leaked = MARKERS.filter((m) => r.text.includes(m))
      if (leaked.length > 0) {
        record(`call ${i}: response holds ${leaked.join(', ')}: ${r.text}`)
      } else {
        const why = a.escaped?.(r, i)
        if (why !== undefined) record(`call ${i}: ${why}`)
      }
      const disk = await a.afterCall?.()
      if (disk !== undefined) record(`call ${i}: ${disk}`)
    })
    report.ms = Date.now() - t0
    report.racing = true
    for (const processId of processIds) {
      const status = await invoke(g, ATTACKER, a.ws, 'bash', { action: 'status', processId })
      if (String(parsed(status)?.status).toLowerCase() !== 'running') report.racing = false
    }
  } finally {
    for (const processId of processIds) await invoke(g, ATTACKER, a.ws, 'bash', { action: 'stop', processId })
  }
  for (const [dir, snap] of before) {
    for (const d of diffTrees(snap, await snapshotTree(dir))) record(`outside the workspace: ${d}`)
  }
  for (const m of await findMarkers(join(workspaces, ATTACKER, a.ws), MARKERS)) record(`copied into the workspace: ${m}`)
  t.diagnostic(`${a.ws}: ${report.escapes} escape(s) in ${report.calls} calls, ${report.ms} ms (${report.errors} tool errors; ${processIds.length} swap loop(s), ${boosted} boosted)`)
  return report
}

function assertNoEscape (r: AttackReport): void {
  assert.equal(r.calls, r.planned)
  assert.equal(r.escapes, 0, `${r.escapes} escape(s) in ${r.calls} calls, e.g.:\n${r.examples.join('\n')}`)
  // Otherwise part of the calls met no race and proved nothing.
  assert.ok(r.racing, 'the swap loop had stopped before the last call')
}

/**
 * An afterCall check: each file must still hold its original bytes. A file deleted or changed is
 * an escape; it is put back so the next call's escape is counted too.
 */
function guardFiles (paths: string[], originals: Buffer[]): () => Promise<string | undefined> {
  return async () => {
    const hit: string[] = []
    for (const [k, p] of paths.entries()) {
      const now = await readFile(p).catch(() => undefined)
      if (now === undefined || !now.equals(originals[k] as Buffer)) {
        hit.push(`${p} ${now === undefined ? 'deleted' : 'changed'}`)
        await writeFile(p, originals[k] as Buffer)
      }
    }
    return hit.length > 0 ? `outside file ${hit.join(', ')}` : undefined
  }
}

/**
 * Overwrites a workspace file with "inside\n". The tenant's loop keeps swapping names, so the file
 * is opened without following a final link and changed only if the descriptor is a regular file
 * on the workspace's own filesystem (a swapped parent may lead to /proc, never to another file there).
 */
async function blank (root: string, rel: string): Promise<void> {
  const rootDev = (await stat(root)).dev
  const fh = await open(join(root, rel), fsConstants.O_WRONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK).catch(() => undefined)
  if (fh === undefined) return
  try {
    const st = await fh.stat()
    if (st.isFile() && st.dev === rootDev) {
      await fh.truncate(0)
      await fh.write('inside\n', 0)
    }
  } catch {
    // Gone or swapped meanwhile: the next scan sees it again.
  } finally {
    await fh.close()
  }
}

/** `e` swaps with a link to `out`, `v` with a link to the victim tenant's workspace. */
/** A read_file answer that escaped: any content but the "inside" every planted file holds (a refusal is no escape). */
function readOutside (res: InvokeResult): string | undefined {
  const content = parsed(res)?.content
  if (content === undefined) return undefined
  return content === 'inside\n' || content === 'inside' ? undefined : `read returned outside content: ${String(content).slice(0, 200)}`
}

function outsideAndVictim (out: string): SwapPair[] {
  return [{ name: 'e', other: 'le', target: out }, { name: 'v', other: 'lv', target: victimRoot }]
}

test('read_file e/shadow while e is swapped with links to an outside dir, another tenant and /etc: never outside content', { timeout: 60_000 }, async (t) => {
  if (!requireDeps(t)) return
  const out = await outsideDir({ shadow: `${OUTSIDE_MARKER}\n` })
  const paths = ['e/shadow', 'v/shadow', 'h/shadow']
  const r = await runAttack(t, {
    ws: 'read',
    // Cheap calls; an escape needs the check to meet the directory and the open, right after it, the
    // link (63 of 400 calls escaped on 8d412a4 at load 14).
    calls: 300,
    swappers: 2,
    setup: 'for d in e v h; do mkdir $d; echo inside > $d/shadow; done',
    pairs: [...outsideAndVictim(out), { name: 'h', other: 'lh', target: '/etc' }],
    call: async (i) => await invoke(gateway(), ATTACKER, 'read', 'read_file', { path: paths[i % 3] }),
    // The only content inside is "inside": anything else (host /etc/shadow) came from outside.
    escaped: readOutside,
    watch: [out, victimRoot]
  })
  assertNoEscape(r)
})

test('read_file f, g and k while each is swapped with a link to an outside file, another tenant\'s file and /proc/self/environ: ' +
  'never outside content', { timeout: 60_000 }, async (t) => {
  if (!requireDeps(t)) return
  // The final entry itself swapped: read_file opens it as it is first (O_NOFOLLOW), and only a link found
  // there is followed, beneath the root, by the read walk.
  const out = await outsideDir({ secret: `${OUTSIDE_MARKER}\n` })
  const names = ['f', 'g', 'k']
  const r = await runAttack(t, {
    ws: 'read-leaf',
    calls: 300,
    swappers: 2,
    setup: 'for f in f g k; do echo inside > $f; done',
    pairs: [
      { name: 'f', other: 'lf', target: join(out, 'secret') },
      { name: 'g', other: 'lg', target: join(victimRoot, 'x') },
      { name: 'k', other: 'lk', target: '/proc/self/environ' }
    ],
    call: async (i) => await invoke(gateway(), ATTACKER, 'read-leaf', 'read_file', { path: names[i % 3] }),
    escaped: readOutside,
    watch: [out, victimRoot]
  })
  assertNoEscape(r)
})

test('apply_patch "Update File" on f (swapped with a link to /proc/self/environ) and p/environ (p swapped with a link to /proc/self): ' +
  'the gateway environment never reaches the workspace', { timeout: 60_000 }, async (t) => {
  if (!requireDeps(t)) return
  // A hunk without context appends at the end: the file's whole former content is written back.
  const patch = (path: string): string => `*** Begin Patch\n*** Update File: ${path}\n@@\n+appended\n*** End Patch\n`
  const r = await runAttack(t, {
    ws: 'environ',
    loopPerPair: true,
    setup: 'echo inside > f\nmkdir p\necho inside > p/environ',
    pairs: [{ name: 'f', other: 'lf', target: '/proc/self/environ' }, { name: 'p', other: 'lp', target: '/proc/self' }],
    call: async (i) => await invoke(gateway(), ATTACKER, 'environ', 'apply_patch', { patch: patch(i % 2 === 0 ? 'f' : 'p/environ') }),
    // Checked after every call, so each escape is counted (a later patch would otherwise keep
    // appending to the same leaked copy), and the copy is blanked for the next one.
    afterCall: async () => {
      const root = join(workspaces, ATTACKER, 'environ')
      const hits = await findMarkers(root, [CANARY])
      for (const hit of hits) await blank(root, hit.slice(0, hit.lastIndexOf(': ')))
      return hits.length > 0 ? `the gateway environment was copied into ${hits.join(', ')}` : undefined
    },
    watch: []
  })
  assertNoEscape(r)
})

for (const engine of ['rg', 'node'] as const) {
  test(`grep (${engine === 'rg' ? 'ripgrep' : 'Node'} engine) while e is swapped with links to an outside dir and another tenant: no outside line`, { timeout: 60_000 }, async (t) => {
    if (!requireDeps(t)) return
    if (engine === 'rg' && spawnSync('rg', ['--version'], { stdio: 'ignore' }).status !== 0) {
      if (process.env.CI === 'true') throw new Error('ripgrep is required under CI=true')
      t.skip('ripgrep is not installed')
      return
    }
    const out = await outsideDir({ shadow: `${OUTSIDE_MARKER}\n` })
    // The pattern matches the markers without spelling them (the result echoes the pattern).
    // `\b` keeps a pattern off ripgrep (rgPortable), so the Node engine searches.
    const pattern = engine === 'rg' ? 'tg(outside|victim)[0-9a-f]{24}' : '\\btg(outside|victim)[0-9a-f]{24}'
    const ws = `grep-${engine}`
    const r = await runAttack(t, {
      ws,
      // ripgrep is a process per call (~0.1-0.5 s here under load); 10-16 of 100 calls escaped on 8d412a4.
      calls: engine === 'rg' ? 60 : CALLS,
      setup: 'for d in e v; do mkdir $d; echo inside > $d/shadow; done',
      pairs: outsideAndVictim(out),
      call: async (i) => await invoke(gateway(), ATTACKER, ws, 'grep', { pattern, path: ['.', 'e', 'v'][i % 3] }),
      // Nothing inside matches: any match is outside content.
      escaped: (res) => {
        const matches = parsed(res)?.matches
        return Array.isArray(matches) && matches.length > 0 ? `grep matched outside lines: ${JSON.stringify(matches)}` : undefined
      },
      watch: [out, victimRoot]
    })
    assertNoEscape(r)
  })
}

test('glob e/* and */* while e1..e3 and v are swapped with links to an outside dir and another tenant: ' +
  'never lists outside names', { timeout: 60_000 }, async (t) => {
  if (!requireDeps(t)) return
  const out = await outsideDir({ [OUTSIDE_MARKER]: 'x\n' })
  const dirs = ['e1', 'e2', 'e3', 'v']
  // Either name of a pair may hold the real directory when the walk reads it.
  const inside = new Set(dirs.flatMap((d) => [`${d}/inside`, `l${d}/inside`]))
  // Each glob walks several swapped directories (its escape needs three lucky steps: the base
  // checked while real, read while a link, rechecked while real again).
  const patterns = ['*/*', 'e1/*', '{e2,e3,v}/*', 'v/*']
  const r = await runAttack(t, {
    ws: 'glob',
    swappers: 2,
    // 13-28 of 400 calls escaped on 8d412a4.
    calls: 300,
    setup: `for d in ${dirs.join(' ')}; do mkdir $d; echo inside > $d/inside; done`,
    pairs: [
      ...['e1', 'e2', 'e3'].map((d) => ({ name: d, other: `l${d}`, target: out })),
      { name: 'v', other: 'lv', target: victimRoot }
    ],
    call: async (i) => await invoke(gateway(), ATTACKER, 'glob', 'glob', { pattern: patterns[i % patterns.length] }),
    escaped: (res) => {
      const matches = parsed(res)?.matches
      if (!Array.isArray(matches)) return undefined
      const foreign = matches.filter((m) => !inside.has(String(m)))
      return foreign.length > 0 ? `glob listed outside names: ${foreign.join(', ')}` : undefined
    },
    watch: [out, victimRoot]
  })
  assertNoEscape(r)
})

test('apply_patch "Delete File: e/x" while e is swapped with links to an outside dir and another tenant: ' +
  'nothing outside is deleted', { timeout: 60_000 }, async (t) => {
  if (!requireDeps(t)) return
  const out = await outsideDir({ x: `${OUTSIDE_MARKER}\n` })
  const targets = [join(out, 'x'), join(victimRoot, 'x')]
  const originals = await Promise.all(targets.map(async (p) => await readFile(p)))
  const r = await runAttack(t, {
    ws: 'delete',
    // Escaped on ~15% of calls before the fix.
    calls: CALLS / 2,
    setup: 'for d in e v; do mkdir $d; echo inside > $d/x; done',
    pairs: outsideAndVictim(out),
    // The loop puts x back in the real directories, so every call has a file to delete.
    refill: 'x',
    call: async (i) => await invoke(gateway(), ATTACKER, 'delete', 'apply_patch', { patch: `*** Begin Patch\n*** Delete File: ${i % 2 === 0 ? 'e' : 'v'}/x\n*** End Patch\n` }),
    afterCall: guardFiles(targets, originals),
    watch: []
  })
  // The repairs keep the guarded files' content, not their inodes: compared by content here.
  for (const [k, p] of targets.entries()) assert.deepEqual(await readFile(p), originals[k])
  assertNoEscape(r)
})

test('write_file e/dN/x and e/xN while e is swapped with links to an outside dir and another tenant: ' +
  'nothing is created outside', { timeout: 60_000 }, async (t) => {
  if (!requireDeps(t)) return
  const out = await outsideDir({ keep: 'keep\n' })
  const r = await runAttack(t, {
    ws: 'write',
    swappers: 2,
    setup: 'mkdir e v',
    pairs: outsideAndVictim(out),
    call: async (i) => {
      const dir = ['e', 'v'][i % 2] as string
      const path = i % 4 < 2 ? `${dir}/d${i}/x` : `${dir}/x${i}`
      return await invoke(gateway(), ATTACKER, 'write', 'write_file', { path, content: `written ${i}\n` })
    },
    watch: [out, victimRoot]
  })
  assertNoEscape(r)
})

test('edit e/f while e is swapped with links to an outside dir and another tenant: no outside file changes or is copied in', { timeout: 60_000 }, async (t) => {
  if (!requireDeps(t)) return
  const out = await outsideDir({ f: `hello ${OUTSIDE_MARKER}\n` })
  const targets = [join(out, 'f'), join(victimRoot, 'f')]
  const originals = await Promise.all(targets.map(async (p) => await readFile(p)))
  const r = await runAttack(t, {
    ws: 'edit',
    // The tool writes below e, never over the link itself: no repair needed.
    swappers: 2,
    // An escape here needs the read to meet the link and four other steps the real directory
    // (11-17 of 400 calls escaped on 8d412a4).
    calls: 300,
    setup: 'for d in e v; do mkdir $d; echo "hello inside" > $d/f; done',
    pairs: outsideAndVictim(out),
    // "hello" stays unique: every edit has exactly one match, in whichever file it reads.
    call: async (i) => await invoke(gateway(), ATTACKER, 'edit', 'edit', { path: `${i % 2 === 0 ? 'e' : 'v'}/f`, old_string: 'hello', new_string: 'hello!' }),
    afterCall: guardFiles(targets, originals),
    watch: []
  })
  for (const [k, p] of targets.entries()) assert.deepEqual(await readFile(p), originals[k])
  assertNoEscape(r)
})

// NUL bytes: text that apply_patch and edit treat as text never holds one (a NUL in a file past
// the 8 KiB binary sniff, or in the patch or the edit strings, is refused, not written).

const NUL_PAST_SNIFF = `${'a'.repeat(9000)}\n\0hello\n`

async function nulWorkspace (ws: string): Promise<string> {
  const g = gateway()
  const r = await invoke(g, ATTACKER, ws, 'write_file', { path: 'plain.txt', content: 'hello\n' })
  assert.equal(r.isError, false, r.text)
  const root = join(workspaces, ATTACKER, ws)
  await writeFile(join(root, 'nul.txt'), NUL_PAST_SNIFF)
  return root
}

/** Why the response is not a clear refusal of the NUL (undefined when it is one). */
function nulNotRefused (r: InvokeResult, what: string): string | undefined {
  if (r.status !== 200) return `${what}: HTTP ${r.status} ${r.text}`
  if (!r.isError) return `${what} was accepted: ${r.text}`
  if (!/^GW_[A-Z_]+$/.test(r.error?.code ?? '') || !/NUL|binary/i.test(r.error?.message ?? '')) return `${what} failed without saying why: ${r.text}`
  return undefined
}

test('apply_patch refuses NUL bytes in the patch text and in a file it would update, and changes nothing', { timeout: 30_000 }, async (t) => {
  if (!requireDeps(t)) return
  const root = await nulWorkspace('nul-patch')
  const g = gateway()
  const cases: Array<[string, string]> = [
    ['an added file holding a NUL', '*** Begin Patch\n*** Add File: added.txt\n+a\0b\n*** End Patch\n'],
    ['an update adding a NUL', '*** Begin Patch\n*** Update File: plain.txt\n@@\n-hello\n+hel\0lo\n*** End Patch\n'],
    ['an update of a file holding a NUL past the binary sniff', '*** Begin Patch\n*** Update File: nul.txt\n@@\n+appended\n*** End Patch\n']
  ]
  const failures: string[] = []
  for (const [what, patch] of cases) {
    const why = nulNotRefused(await invoke(g, ATTACKER, 'nul-patch', 'apply_patch', { patch }), what)
    if (why !== undefined) failures.push(why)
  }
  assert.deepEqual(failures, [])
  assert.equal(await readFile(join(root, 'plain.txt'), 'utf8'), 'hello\n')
  assert.equal(await readFile(join(root, 'nul.txt'), 'utf8'), NUL_PAST_SNIFF)
  await assert.rejects(readFile(join(root, 'added.txt')), { code: 'ENOENT' })
})

test('edit refuses NUL bytes in old_string, new_string and in the file it would change, and changes nothing', { timeout: 30_000 }, async (t) => {
  if (!requireDeps(t)) return
  const root = await nulWorkspace('nul-edit')
  const g = gateway()
  const cases: Array<[string, Record<string, unknown>]> = [
    ['a NUL in new_string', { path: 'plain.txt', old_string: 'hello', new_string: 'hel\0lo' }],
    ['a NUL in old_string', { path: 'plain.txt', old_string: 'hel\0lo', new_string: 'x' }],
    ['an edit of a file holding a NUL past the binary sniff', { path: 'nul.txt', old_string: 'hello', new_string: 'howdy' }]
  ]
  const failures: string[] = []
  for (const [what, args] of cases) {
    const why = nulNotRefused(await invoke(g, ATTACKER, 'nul-edit', 'edit', args), what)
    if (why !== undefined) failures.push(why)
  }
  assert.deepEqual(failures, [])
  assert.equal(await readFile(join(root, 'plain.txt'), 'utf8'), 'hello\n')
  assert.equal(await readFile(join(root, 'nul.txt'), 'utf8'), NUL_PAST_SNIFF)
})
