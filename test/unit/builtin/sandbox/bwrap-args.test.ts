import { test } from 'node:test'
import assert from 'node:assert/strict'
import { buildBwrapArgs, buildPrlimitArgs } from '../../../../src/builtin/sandbox/bwrap-args.js'

test('bwrap argv: namespaces, no root bind, size before tmpfs, cleared env, workspace rw after /tmp', () => {
  const a = buildBwrapArgs({
    workspaceRoot: '/tmp/ws',
    readRoots: ['/opt/skills'],
    cwd: '/tmp/ws/sub',
    command: 'echo hi',
    etc: { dir: '/tmp/etc', binds: ['/etc/ssl/certs'] },
    layout: { dirs: [], symlinks: [{ path: '/bin', target: 'usr/bin' }] },
    tmpSizeBytes: 1234
  })
  const s = a.join(' ')
  for (const flag of ['--unshare-all', '--unshare-user', '--disable-userns', '--die-with-parent', '--new-session', '--clearenv']) {
    assert.ok(a.includes(flag), flag)
  }
  assert.match(s, /--cap-drop ALL/)
  assert.match(s, /--uid 1000 --gid 1000/)
  assert.doesNotMatch(s, /--ro-bind \/ \//)
  assert.doesNotMatch(s, /--bind \/etc /)
  // One bind for the sandbox's /etc, then the host directories bound over its mount points; no other /etc source.
  assert.match(s, /--ro-bind \/tmp\/etc \/etc --ro-bind-try \/etc\/ssl\/certs \/etc\/ssl\/certs /)
  assert.deepEqual(a.filter((x) => x.startsWith('/etc')), ['/etc', '/etc/ssl/certs', '/etc/ssl/certs'])
  assert.match(s, /--size 1234 --tmpfs \/tmp/)
  assert.match(s, /--ro-bind \/opt\/skills \/opt\/skills/)
  assert.ok(a.indexOf('--tmpfs') < a.indexOf('--bind'), 'workspace bound after the private /tmp')
  assert.match(s, /--remount-ro \/ /)
  assert.ok(a.indexOf('--clearenv') < a.indexOf('--setenv'))
  assert.deepEqual(a.slice(-4), ['--', '/bin/sh', '-c', 'echo hi'])
  assert.match(s, /--setenv HOME \/tmp\/ws/)
  assert.match(s, /--chdir \/tmp\/ws\/sub/)
  const p = buildPrlimitArgs({ cpuSeconds: 5, fileSizeBytes: 10, maxProcesses: 20, openFiles: 30, memoryBytes: 0, tmpSizeBytes: 1 }, ['bwrap'])
  assert.deepEqual(p, ['--cpu=5', '--fsize=10', '--nproc=20', '--nofile=30', '--core=0', '--', 'bwrap'])
})
