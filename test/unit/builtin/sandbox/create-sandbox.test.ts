import { test } from 'node:test'
import assert from 'node:assert/strict'
import { chmod, mkdir, mkdtemp, readdir, readFile, realpath, rm, stat } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createSandbox, SandboxUnavailableError, NONE_WARNING } from '../../../../src/builtin/sandbox/create-sandbox.js'
import type { Logger } from '../../../../src/logger.js'
import type { Sandbox } from '../../../../src/builtin/sandbox/types.js'
import { ToolError } from '../../../../src/builtin/types.js'
import type { Workspace } from '../../../../src/builtin/types.js'

async function makeWorkspace (t: { after: (fn: () => Promise<void>) => void }): Promise<Workspace> {
  const root = await realpath(await mkdtemp(join(tmpdir(), 'tg-sandbox-')))
  t.after(async () => { await rm(root, { recursive: true, force: true }) })
  return {
    tenant: 'acme',
    workspaceId: 'default',
    root,
    readRoots: [],
    limits: { readMaxChars: 12000, commandTimeoutMs: 30000, bashLogChars: 12000, maxProcessOutputChars: 120000, outputMaxChars: 65536 }
  }
}

function recordingLogger (): Logger & { warnings: string[] } {
  const warnings: string[] = []
  return { warnings, warn: (_obj, msg) => { warnings.push(msg ?? '') }, info: () => {}, debug: () => {}, error: () => {} }
}

/** This process's descriptors above 2 without close-on-exec (fdinfo flags, octal, O_CLOEXEC = 02000000). */
async function inheritedDescriptors (): Promise<number[]> {
  const out: number[] = []
  for (const name of await readdir('/proc/self/fd')) {
    const fd = Number(name)
    if (fd <= 2) continue
    const info = await readFile(`/proc/self/fdinfo/${fd}`, 'utf8').catch(() => '')
    const flags = /^flags:\s+([0-7]+)/m.exec(info)?.[1]
    if (flags !== undefined && (parseInt(flags, 8) & 0o2000000) === 0) out.push(fd)
  }
  return out
}

async function bwrapSandbox (t: { after: (fn: () => Promise<void>) => void }): Promise<Sandbox> {
  const sb = await createSandbox({ mode: 'bwrap' })
  t.after(async () => { await sb.close() })
  return sb
}

test('SANDBOX=none is loud: warning exposed and logged', async (t) => {
  const logger = recordingLogger()
  const sb = await createSandbox({ mode: 'none', logger })
  t.after(async () => { await sb.close() })
  assert.equal(sb.mode, 'none')
  assert.equal(sb.owner, undefined)
  assert.ok(sb.warning?.startsWith(NONE_WARNING))
  assert.equal(logger.warnings.length, 1)
  assert.match(logger.warnings[0] ?? '', /UNSANDBOXED/)
  const ws = await makeWorkspace(t)
  const r = await sb.exec({ workspace: ws, command: 'echo $HOME; echo oops >&2; exit 3', cwd: ws.root, timeoutMs: 10_000, maxOutputBytes: 1000 })
  assert.deepEqual({ stdout: r.stdout, stderr: r.stderr, exitCode: r.exitCode }, { stdout: `${ws.root}\n`, stderr: 'oops\n', exitCode: 3 })
})

test('SANDBOX=bwrap with bwrap missing is a start-up error that says what to install', async () => {
  await assert.rejects(
    createSandbox({ mode: 'bwrap', bwrapPath: '/nonexistent/bwrap' }),
    (err: unknown) => err instanceof SandboxUnavailableError && /apt-get install bubblewrap/.test(err.message)
  )
})

test('SANDBOX=bwrap refuses uid 0 (process limits do not apply to root)', async () => {
  await assert.rejects(createSandbox({ mode: 'bwrap', uid: 0 }), /must not be 0/)
})

test('SANDBOX=auto falls back to none with a warning when the probe fails', async (t) => {
  const logger = recordingLogger()
  const sb = await createSandbox({ mode: 'auto', bwrapPath: '/nonexistent/bwrap', logger })
  t.after(async () => { await sb.close() })
  assert.equal(sb.mode, 'none')
  assert.equal(sb.probe.ok, false)
  assert.match(sb.probe.reason, /install bubblewrap/)
  assert.match(sb.warning ?? '', /Reason: /)
  assert.equal(logger.warnings.length, 1)
})

test('SANDBOX=auto picks bwrap when the probe passes', async (t) => {
  const sb = await createSandbox({ mode: 'auto' })
  t.after(async () => { await sb.close() })
  assert.equal(sb.mode, 'bwrap')
  assert.equal(sb.warning, undefined)
  assert.ok(sb.probe.ok)
  assert.match(sb.probe.reason, /no capabilities/)
})

test('bwrap exec: exit code, separate streams, cwd, HOME, workspace chowned to the sandbox uid', async (t) => {
  const sb = await bwrapSandbox(t)
  const ws = await makeWorkspace(t)
  await mkdir(join(ws.root, 'sub'))
  assert.deepEqual(sb.owner, { uid: 65534, gid: 65534 })
  const r = await sb.exec({
    workspace: ws,
    command: 'pwd; echo "home=$HOME tmp=$TMPDIR"; echo problem >&2; touch ../made-here; exit 7',
    cwd: join(ws.root, 'sub'),
    timeoutMs: 10_000,
    maxOutputBytes: 1000
  })
  assert.equal(r.exitCode, 7)
  assert.equal(r.stdout, `${ws.root}/sub\nhome=${ws.root} tmp=/tmp\n`)
  assert.equal(r.stderr, 'problem\n')
  assert.equal(r.timedOut, false)
  const rootStat = await stat(ws.root)
  assert.equal(rootStat.uid, 65534)
  assert.equal((await stat(join(ws.root, 'made-here'))).uid, 65534)
  const s = sb.stats()
  assert.equal(s.mode, 'bwrap')
  assert.ok(s.execs >= 1)
})

test('bwrap exec: the command holds no descriptor the sandbox opened for bwrap (info, seccomp and sync pipes)', async (t) => {
  const sb = await bwrapSandbox(t)
  const ws = await makeWorkspace(t)
  // Descriptors this process inherited without close-on-exec (a test runner's, a shell's) reach every child; the
  // gateway's entry closes them at start (server.ts). What the sandbox itself opens must never be among the command's.
  const inherited = await inheritedDescriptors()
  const r = await sb.exec({ workspace: ws, command: 'ls /proc/$$/fd', cwd: ws.root, timeoutMs: 10_000, maxOutputBytes: 1000 })
  assert.equal(r.exitCode, 0, r.stderr)
  const held = r.stdout.split('\n').filter((l) => l !== '').map(Number).filter((fd) => fd > 2 && !inherited.includes(fd))
  assert.deepEqual(held, [])
})

test('bwrap exec answers once nothing of the command runs any more, its background processes included', async (t) => {
  const sb = await bwrapSandbox(t)
  const ws = await makeWorkspace(t)
  const marker = `tg-left-running-${process.pid}-${Date.now()}`
  // A detached shell (its own session) that would sleep for minutes: the namespace's end takes it.
  const r = await sb.exec({
    workspace: ws,
    command: `setsid sh -c 'sleep 300; :' ${marker} > /dev/null 2>&1 < /dev/null & echo started`,
    cwd: ws.root,
    timeoutMs: 10_000,
    maxOutputBytes: 1000
  })
  assert.equal(r.stdout, 'started\n')
  const alive: string[] = []
  for (const pid of await readdir('/proc')) {
    if (!/^\d+$/.test(pid)) continue
    const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')
    if (cmdline.includes(marker)) alive.push(pid)
  }
  assert.deepEqual(alive, [], 'a process of the command outlived the answer')
})

test('prepareWorkspace restores owner rights on a root the manager left as root 0700', async (t) => {
  const sb = await bwrapSandbox(t)
  const ws = await makeWorkspace(t)
  await chmod(ws.root, 0o500)
  await sb.prepareWorkspace(ws)
  const st = await stat(ws.root)
  assert.equal(st.uid, 65534)
  assert.equal(st.mode & 0o700, 0o700)
})

test('bwrap exec: wall-clock timeout gives exitCode -1 and is counted', async (t) => {
  const sb = await bwrapSandbox(t)
  const ws = await makeWorkspace(t)
  const before = sb.stats().timeouts
  const r = await sb.exec({ workspace: ws, command: 'echo begun; sleep 60', cwd: ws.root, timeoutMs: 300, maxOutputBytes: 1000 })
  assert.equal(r.timedOut, true)
  assert.equal(r.exitCode, -1)
  assert.equal(r.stdout, 'begun\n')
  assert.equal(sb.stats().timeouts, before + 1)
})

test('bwrap exec: an aborted caller kills the command', async (t) => {
  const sb = await bwrapSandbox(t)
  const ws = await makeWorkspace(t)
  const ac = new AbortController()
  setTimeout(() => ac.abort(), 200).unref()
  const r = await sb.exec({ workspace: ws, command: 'sleep 60', cwd: ws.root, timeoutMs: 30_000, maxOutputBytes: 1000, signal: ac.signal })
  assert.equal(r.aborted, true)
  assert.equal(r.exitCode, -1)
  assert.equal(sb.stats().running, 0)
})

test('bwrap exec: stdin is /dev/null (a reader gets EOF at once)', async (t) => {
  const sb = await bwrapSandbox(t)
  const ws = await makeWorkspace(t)
  const r = await sb.exec({ workspace: ws, command: 'cat; echo "eof:$?"', cwd: ws.root, timeoutMs: 10_000, maxOutputBytes: 1000 })
  assert.equal(r.stdout, 'eof:0\n')
})

test('bwrap: read roots are visible read-only at their real path', async (t) => {
  const sb = await bwrapSandbox(t)
  const ws = await makeWorkspace(t)
  const rr = await realpath(await mkdtemp(join(tmpdir(), 'tg-readroot-')))
  t.after(async () => { await rm(rr, { recursive: true, force: true }) })
  await chmod(rr, 0o755)
  const { writeFile } = await import('node:fs/promises')
  await writeFile(join(rr, 'doc.txt'), 'read me\n', { mode: 0o644 })
  const r = await sb.exec({
    workspace: { ...ws, readRoots: [{ name: 'docs', path: rr }] },
    command: `cat ${rr}/doc.txt; echo x > ${rr}/doc.txt`,
    cwd: ws.root,
    timeoutMs: 10_000,
    maxOutputBytes: 1000
  })
  assert.equal(r.stdout, 'read me\n')
  assert.match(r.stderr, /Read-only file system/)
})

test('close() kills commands still running', async (t) => {
  const sb = await createSandbox({ mode: 'bwrap' })
  const ws = await makeWorkspace(t)
  await sb.prepareWorkspace(ws)
  const p = sb.spawn({ workspace: ws, command: 'echo up; sleep 120', cwd: ws.root, stdin: 'ignore' })
  // Wait until the command really runs (bwrap set up the namespace) before closing.
  await new Promise((resolve) => p.stdout.once('data', resolve))
  assert.equal(sb.stats().running, 1)
  await sb.close()
  const exit = await p.exited
  assert.equal(exit.signal, 'SIGKILL')
  assert.equal(sb.stats().running, 0)
  assert.throws(() => sb.spawn({ workspace: ws, command: 'true', cwd: ws.root, stdin: 'ignore' }), /shutting down/)
})

test('an exec cut off by close() is a clear tool error, not an exit code the command never returned', async (t) => {
  const sb = await createSandbox({ mode: 'bwrap' })
  const ws = await makeWorkspace(t)
  await sb.prepareWorkspace(ws)
  // Settled while close() still waits for the process: observe it from the start.
  const running = sb.exec({
    workspace: ws,
    command: 'echo up; sleep 120',
    cwd: ws.root,
    timeoutMs: 600_000,
    maxOutputBytes: 4096
  }).then((r) => r, (err: unknown) => err)
  while (sb.stats().running === 0) await new Promise((resolve) => setTimeout(resolve, 20))
  await new Promise((resolve) => setTimeout(resolve, 300))
  await sb.close()
  const outcome = await running
  assert.ok(outcome instanceof ToolError, `expected a ToolError, got ${JSON.stringify(outcome)}`)
  assert.match(outcome.message, /shutting down/)
})

test('terminate() sends SIGTERM to the command first (a trap can clean up)', { timeout: 30_000 }, async (t) => {
  const sb = await bwrapSandbox(t)
  const ws = await makeWorkspace(t)
  await sb.prepareWorkspace(ws)
  const p = sb.spawn({ workspace: ws, command: 'trap "echo got-term; exit 5" TERM; echo ready; while :; do sleep 0.1; done', cwd: ws.root, stdin: 'ignore' })
  let out = ''
  p.stdout.on('data', (d: Buffer) => { out += d.toString() })
  while (!out.includes('ready')) await new Promise((resolve) => setTimeout(resolve, 20))
  const exit = await p.terminate(5000)
  assert.equal(exit.exitCode, 5)
  await new Promise((resolve) => setTimeout(resolve, 50))
  assert.match(out, /got-term/)
})

test('an exec leaves no timer armed once it has returned (each used to keep two 5 s timers for their full time)', async (t) => {
  const sb = await bwrapSandbox(t)
  const ws = await makeWorkspace(t)
  await sb.exec({ workspace: ws, command: 'true', cwd: ws.root, timeoutMs: 10_000, maxOutputBytes: 1000 })
  // Every timer of the sandbox's own bounds (5 s) armed during an exec, and whether it was cleared.
  const armed = new Map<unknown, boolean>()
  const realSet = globalThis.setTimeout
  const realClear = globalThis.clearTimeout
  t.after(() => { globalThis.setTimeout = realSet; globalThis.clearTimeout = realClear })
  globalThis.setTimeout = ((fn: () => void, ms?: number) => {
    const timer = realSet(fn, ms)
    if (ms === 5000) armed.set(timer, false)
    return timer
  }) as typeof setTimeout
  globalThis.clearTimeout = ((timer: NodeJS.Timeout | undefined) => {
    if (armed.has(timer)) armed.set(timer, true)
    realClear(timer)
  }) as typeof clearTimeout
  for (let i = 0; i < 3; i++) {
    const r = await sb.exec({ workspace: ws, command: 'true', cwd: ws.root, timeoutMs: 10_000, maxOutputBytes: 1000 })
    assert.equal(r.exitCode, 0)
  }
  // exec() resolves once the namespace is gone; the bounds' timers are cleared by then.
  await new Promise((resolve) => setImmediate(resolve))
  assert.ok(armed.size >= 6, `the sandbox's bounds were armed ${armed.size} times`)
  assert.deepEqual([...armed.values()].filter((cleared) => !cleared), [])
})
