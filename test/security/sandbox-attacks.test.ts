// Escape attempts against the REAL bubblewrap sandbox. Every test asserts an outcome that an
// unsandboxed (or badly sandboxed) run would violate, so each one can fail.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { chmod, mkdir, mkdtemp, readFile, realpath, rm, stat, writeFile } from 'node:fs/promises'
import { existsSync } from 'node:fs'
import { createServer, type Server } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import { createSandbox } from '../../src/builtin/sandbox/create-sandbox.js'
import type { ExecResult, Sandbox } from '../../src/builtin/sandbox/types.js'
import type { Workspace } from '../../src/builtin/types.js'
import { ProcessManager } from '../../src/builtin/processes/process-manager.js'
import { allProcesses } from '../../scripts/lib/proc.js'

// A uid no other test file uses, so the fork bomb's RLIMIT_NPROC budget (counted per host uid) is its own.
const UID = 61_234
const SECRET = `tg-secret-${randomBytes(8).toString('hex')}`
process.env.TG_ATTACK_TEST_SECRET = SECRET

let sandbox: Sandbox
let base: string
let ws: Workspace
let sibling: string
let readRoot: string

before(async () => {
  sandbox = await createSandbox({
    mode: 'bwrap',
    uid: UID,
    gid: UID,
    limits: { maxProcesses: 64, fileSizeBytes: 1024 * 1024, tmpSizeBytes: 4 * 1024 * 1024, memoryBytes: 512 * 1024 * 1024, cpuSeconds: 20 }
  })
  base = await realpath(await mkdtemp(join(tmpdir(), 'tg-attacks-')))
  const root = join(base, 'tenant-a', 'default')
  sibling = join(base, 'tenant-b', 'default')
  readRoot = join(base, 'skills')
  await mkdir(root, { recursive: true })
  await mkdir(sibling, { recursive: true })
  await mkdir(readRoot, { recursive: true })
  await writeFile(join(sibling, 'secret.txt'), SECRET)
  await writeFile(join(readRoot, 'skill.md'), 'original\n')
  // mkdtemp makes 0700 dirs; the sandbox uid must be able to traverse to its workspace and the read root.
  for (const d of [base, join(base, 'tenant-a'), join(base, 'tenant-b'), readRoot]) await chmod(d, 0o755)
  ws = {
    tenant: 'tenant-a',
    workspaceId: 'default',
    root,
    readRoots: [{ name: 'skills', path: readRoot }],
    limits: { readMaxChars: 12000, commandTimeoutMs: 30000, bashLogChars: 12000, maxProcessOutputChars: 120000, outputMaxChars: 65536 }
  }
})

after(async () => {
  await sandbox.close()
  await rm(base, { recursive: true, force: true })
  delete process.env.TG_ATTACK_TEST_SECRET
})

async function run (command: string, timeoutMs = 20_000): Promise<ExecResult> {
  return await sandbox.exec({ workspace: ws, command, cwd: ws.root, timeoutMs, maxOutputBytes: 65536 })
}

/** Host processes (outside any namespace view) whose whole argv is `cmd` (not a shell or bwrap mentioning it). */
async function hostProcessesWith (cmd: string): Promise<number[]> {
  return (await allProcesses()).filter((p) => p.state !== 'Z' && p.cmdline === cmd).map((p) => p.pid)
}

async function hostProcessesOfUid (uid: number): Promise<number[]> {
  return (await allProcesses()).filter((p) => p.state !== 'Z' && p.uid === uid).map((p) => p.pid)
}

test('the probe passed and commands run as a non-root uid inside and outside', async () => {
  assert.equal(sandbox.mode, 'bwrap')
  assert.ok(sandbox.probe.ok, sandbox.probe.reason)
  const r = await run('id -u; id -g; cat /proc/self/status | grep -E "^(CapEff|NoNewPrivs)"')
  assert.equal(r.exitCode, 0, r.stderr)
  const [uid, gid] = r.stdout.split('\n')
  assert.notEqual(uid, '0')
  assert.notEqual(gid, '0')
  assert.match(r.stdout, /CapEff:\s+0+\n/)
  // Host side: files the command creates belong to the sandbox uid, not root.
  await run('echo x > owned-by-sandbox')
  assert.equal((await stat(join(ws.root, 'owned-by-sandbox'))).uid, UID)
})

test('the gateway environment is not visible: env, /proc/1/environ, /proc/$PPID/environ, /proc/<gateway pid>/environ', async () => {
  assert.equal(process.env.TG_ATTACK_TEST_SECRET, SECRET)
  const r = await run(`env; cat /proc/1/environ; cat /proc/$PPID/environ; cat /proc/${process.pid}/environ; cat /proc/*/environ`)
  assert.ok(!r.stdout.includes(SECRET) && !r.stderr.includes(SECRET), 'secret leaked into the sandbox')
  assert.ok(!r.stdout.includes('TG_ATTACK_TEST_SECRET'))
  assert.match(r.stdout, /^HOME=/m)
})

test('host pids are hidden: only the sandbox\'s own processes are in /proc', async () => {
  const r = await run('ls /proc | grep -E "^[0-9]+$" | wc -l; test -e /proc/' + process.pid + '/cmdline && cat /proc/' + process.pid + '/cmdline')
  const count = Number(r.stdout.split('\n')[0])
  assert.ok(count > 0 && count < 10, `saw ${count} pids`)
  assert.ok(!r.stdout.includes('node'), 'the gateway process is visible')
})

test('another workspace cannot be read by relative or absolute path', async () => {
  const r = await run(`cat ../../tenant-b/default/secret.txt; cat ${sibling}/secret.txt; ls ${base}; ls ..`)
  assert.ok(!r.stdout.includes(SECRET))
  assert.ok(!r.stdout.includes('tenant-b'), 'the other tenant\'s directory is listed')
  assert.match(r.stderr, /No such file or directory/)
})

test('host files outside the curated system are absent: /etc/shadow, /root, the project', async () => {
  const r = await run('cat /etc/shadow; ls /root; ls /work; ls /etc/ssl/private; head -c 100 /etc/passwd; touch /etc/x /etc/ssl/certs/x; ls /etc')
  assert.match(r.stderr, /\/etc\/shadow: No such file or directory/)
  // /etc is the gateway's copy and binds, read-only: no tenant can leave a file there for the next one.
  assert.match(r.stderr, /touch: cannot touch '\/etc\/x': Read-only file system/)
  assert.match(r.stderr, /touch: cannot touch '\/etc\/ssl\/certs\/x': (?:Read-only file system|No such file or directory)/)
  assert.match(r.stdout, /^ld\.so\.cache$/m)
  assert.match(r.stderr, /\/etc\/ssl\/private': No such file or directory/)
  assert.ok(!r.stdout.includes('root:x:0:0:root:/root:/bin/bash'), 'the host passwd is visible')
  assert.ok(!existsSync('/etc/shadow') || !r.stdout.includes('root:$'))
})

test('no network: bash /dev/tcp, python and node cannot reach a loopback port the host listens on, nor Redis', async (t) => {
  // A listener on the HOST loopback: reachable unless the sandbox has its own network namespace.
  let accepted = 0
  const server: Server = createServer((s) => { accepted++; s.end('HELLO-FROM-HOST\n') })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => { server.close() })
  const port = (server.address() as { port: number }).port
  const cmds = [
    `bash -c 'exec 3<>/dev/tcp/127.0.0.1/${port} && cat <&3' && echo BASH-CONNECTED`,
    'bash -c \'exec 3<>/dev/tcp/127.0.0.1/6379 && echo PING >&3 && head -c 10 <&3\' && echo REDIS-CONNECTED'
  ]
  if (existsSync('/usr/bin/python3')) {
    cmds.push(`python3 -c "import socket; s=socket.create_connection(('127.0.0.1', ${port}), 2); print('PY-CONNECTED', s.recv(64))"`)
    cmds.push('python3 -c "import socket; socket.create_connection((\'1.1.1.1\', 53), 2); print(\'PY-EXTERNAL\')"')
  }
  if (existsSync('/usr/bin/node')) {
    cmds.push(`node -e "require('net').connect(${port}, '127.0.0.1').on('data', d => console.log('NODE-CONNECTED', String(d))).on('error', e => { console.error(e.code); process.exit(1) })"`)
  }
  const r = await run(cmds.join('; '))
  assert.ok(!/CONNECTED|HELLO-FROM-HOST|PY-EXTERNAL|PONG/.test(r.stdout), r.stdout)
  assert.equal(accepted, 0)
  assert.match(r.stderr, /Connection refused|ECONNREFUSED/)
})

test('read-only binds stay read-only: remount rw fails and the read root and /usr are not writable', async () => {
  const before = await readFile(join(readRoot, 'skill.md'), 'utf8')
  const r = await run([
    `mount -o remount,rw ${readRoot} && echo REMOUNTED`,
    'mount -o remount,rw /usr && echo REMOUNTED-USR',
    `echo pwned > ${readRoot}/skill.md`,
    `echo pwned > ${readRoot}/new.md`,
    'echo pwned > /usr/pwned-by-sandbox',
    'echo pwned > /pwned-root',
    'unshare -Ur true && echo NESTED-USERNS'
  ].join('; '))
  assert.ok(!/REMOUNTED|NESTED-USERNS/.test(r.stdout), r.stdout)
  assert.equal(await readFile(join(readRoot, 'skill.md'), 'utf8'), before)
  assert.ok(!existsSync(join(readRoot, 'new.md')))
  assert.ok(!existsSync('/usr/pwned-by-sandbox'))
  assert.match(r.stderr, /Read-only file system/)
})

test('a fork bomb is bounded by the process limit, the call returns and nothing is left behind', async () => {
  const r = await run('bomb() { bomb | bomb & }; bomb; sleep 2; echo BOMB-DONE', 6000)
  // Either the bomb hit RLIMIT_NPROC (fork: Resource temporarily unavailable) or the wall clock ended it.
  assert.ok(r.timedOut || /Resource temporarily unavailable|retry|fork/i.test(r.stderr), r.stderr.slice(0, 500))
  assert.deepEqual(await hostProcessesOfUid(UID), [])
  // And the sandbox still works afterwards.
  const ok = await run('echo alive')
  assert.equal(ok.stdout, 'alive\n')
})

test('disk hogs are capped: file size limit in the workspace, size-capped /tmp and /dev/shm, read-only /', async () => {
  const r = await run('yes > big; echo "ws:$?"; yes > /tmp/big; echo "tmp:$?"; yes > /dev/shm/big; echo "shm:$?"; yes > /big; echo "root:$?"; ls -l /tmp/big')
  assert.match(r.stdout, /ws:1\d\d|ws:[1-9]/)
  const size = (await stat(join(ws.root, 'big'))).size
  assert.ok(size <= 1024 * 1024, `workspace file grew to ${size}`)
  assert.doesNotMatch(r.stdout, /tmp:0|shm:0|root:0/)
  await rm(join(ws.root, 'big'), { force: true })
})

test('a memory hog fails at the data limit', { skip: !existsSync('/usr/bin/python3') && 'python3 not installed' }, async () => {
  const r = await run('python3 -c "b = bytearray(1024 * 1024 * 1024); print(\'ALLOCATED\')"')
  assert.ok(!r.stdout.includes('ALLOCATED'))
  assert.match(r.stderr, /MemoryError/)
})

test('runaway output is capped while reading and the command is killed', async () => {
  const r = await run('yes')
  assert.ok(r.stdout.length < 70_000, `kept ${r.stdout.length} chars`)
  assert.match(r.stdout, /\[\.\.\. truncated \d+ bytes \.\.\.\]/)
  assert.equal(r.outputLimitExceeded, true)
  assert.equal(r.exitCode, -1)
})

test('orphans die with the sandbox: setsid nohup after exec returns, and after a timeout', async () => {
  const m1 = `${3000 + Math.floor(Math.random() * 900)}.5`
  const r1 = await run(`setsid nohup sleep ${m1} >/dev/null 2>&1 & sleep 0.2; echo started`)
  assert.equal(r1.exitCode, 0)
  assert.equal(r1.stdout, 'started\n')
  assert.deepEqual(await hostProcessesWith(`sleep ${m1}`), [])

  const m2 = `${4000 + Math.floor(Math.random() * 900)}.5`
  const r2 = await run(`setsid nohup sleep ${m2} >/dev/null 2>&1 & sleep 300`, 700)
  assert.equal(r2.timedOut, true)
  assert.deepEqual(await hostProcessesWith(`sleep ${m2}`), [])
  assert.deepEqual(await hostProcessesOfUid(UID), [])
})

test('a stopped background process takes its setsid orphans with it', async (t) => {
  const pm = new ProcessManager({ sandbox, reapIntervalMs: 0, stopGraceMs: 300 })
  t.after(async () => { await pm.killAll() })
  const marker = `${5000 + Math.floor(Math.random() * 900)}.5`
  const s = await pm.start(ws, { command: `setsid nohup sleep ${marker} >/dev/null 2>&1 & echo spawned; sleep 300`, cwd: ws.root, workingDirectory: '.' })
  for (let i = 0; i < 500 && (await hostProcessesWith(`sleep ${marker}`)).length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 20))
  assert.equal((await hostProcessesWith(`sleep ${marker}`)).length, 1, 'the orphan should be running before stop')
  const stopped = await pm.stop(ws, s.processId)
  assert.equal(stopped.status, 'STOPPED')
  assert.deepEqual(await hostProcessesWith(`sleep ${marker}`), [])
})

test('no controlling terminal to inject into: the command runs in its own session (TIOCSTI)', async () => {
  // --new-session: the command is a session leader with no controlling tty, so TIOCSTI on /dev/tty
  // has no target. The gateway's session must differ from the command's.
  const mySid = (await readFile('/proc/self/stat', 'utf8')).split(') ')[1]?.split(' ')[3]
  const r = await run('ps -o sid=,pid= -p $$; cat /proc/$$/stat | cut -d" " -f6,7; exec 3</dev/tty && echo HAVE-TTY')
  assert.ok(!r.stdout.includes('HAVE-TTY'), 'the command has a controlling terminal')
  assert.match(r.stderr, /tty|No such device/i)
  const fields = r.stdout.trim().split('\n').pop()?.split(' ') ?? []
  // Field 7 (tty_nr) is 0: no controlling terminal. The session id is the sandbox's, not ours.
  assert.equal(fields[1], '0')
  assert.notEqual(fields[0], mySid)
})
