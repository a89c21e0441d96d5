import { test } from 'node:test'
import assert from 'node:assert/strict'
import { chmod, lstat, mkdir, mkdtemp, readdir, readFile, readlink, rm, stat, symlink, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { writeSandboxEtc } from '../../../../src/builtin/sandbox/system-files.js'

/** A host /etc of our own: the copy is judged on files whose modes and links the test chose. */
async function fakeHostEtc (t: { after: (fn: () => Promise<void>) => void }): Promise<string> {
  const host = await mkdtemp(join(tmpdir(), 'tg-host-etc-'))
  t.after(async () => { await rm(host, { recursive: true, force: true }) })
  await writeFile(join(host, 'ld.so.cache'), 'CACHE')
  await chmod(join(host, 'ld.so.cache'), 0o644)
  // Readable by its owner only: the sandbox uid could not read it through a bind, so it must not get a copy.
  await writeFile(join(host, 'services'), 'PRIVATE-SERVICES')
  await chmod(join(host, 'services'), 0o600)
  await mkdir(join(host, 'ld.so.conf.d'))
  await writeFile(join(host, 'ld.so.conf.d', 'x86.conf'), '/usr/lib/x86')
  await chmod(join(host, 'ld.so.conf.d', 'x86.conf'), 0o644)
  // A link inside a copied directory stays a link: its target is never read into the copy.
  await writeFile(join(host, 'shadow'), 'root:$6$HASH')
  await chmod(join(host, 'shadow'), 0o644)
  await symlink(join(host, 'shadow'), join(host, 'ld.so.conf.d', 'evil.conf'))
  // An entry that is itself a link is followed, as a bind follows it.
  await writeFile(join(host, 'zone'), 'UTC-ZONE')
  await chmod(join(host, 'zone'), 0o644)
  await symlink(join(host, 'zone'), join(host, 'localtime'))
  await mkdir(join(host, 'ssl', 'certs'), { recursive: true })
  await writeFile(join(host, 'ssl', 'certs', 'ca.pem'), 'CERT')
  await mkdir(join(host, 'ssl', 'private'))
  await writeFile(join(host, 'ssl', 'private', 'host.key'), 'KEY')
  await writeFile(join(host, 'ssl', 'openssl.cnf'), 'CNF')
  await chmod(join(host, 'ssl', 'openssl.cnf'), 0o644)
  return host
}

test('the sandbox /etc: generated files, readable host entries copied, links kept as links, big link farms bound', async (t) => {
  const host = await fakeHostEtc(t)
  const etc = await writeSandboxEtc(host)
  t.after(etc.remove)
  assert.match(await readFile(join(etc.dir, 'passwd'), 'utf8'), /^sandbox:x:1000:1000:/m)
  assert.equal(await readFile(join(etc.dir, 'ld.so.cache'), 'utf8'), 'CACHE')
  assert.equal(await readFile(join(etc.dir, 'ld.so.conf.d', 'x86.conf'), 'utf8'), '/usr/lib/x86')
  assert.equal(await readFile(join(etc.dir, 'localtime'), 'utf8'), 'UTC-ZONE')
  assert.ok((await lstat(join(etc.dir, 'localtime'))).isFile(), 'a top-level link is copied as its target')
  assert.equal(await readFile(join(etc.dir, 'ssl', 'openssl.cnf'), 'utf8'), 'CNF')
  const link = join(etc.dir, 'ld.so.conf.d', 'evil.conf')
  assert.ok((await lstat(link)).isSymbolicLink())
  assert.equal(await readlink(link), join(host, 'shadow'))
  // What the sandbox uid could not read is not there at all; neither is anything not listed.
  await assert.rejects(stat(join(etc.dir, 'services')), { code: 'ENOENT' })
  await assert.rejects(stat(join(etc.dir, 'shadow')), { code: 'ENOENT' })
  await assert.rejects(stat(join(etc.dir, 'ssl', 'private')), { code: 'ENOENT' })
  // ssl/certs is a mount point (empty) for a bind of the host's; alternatives is absent on this host: no bind.
  assert.deepEqual(await readdir(join(etc.dir, 'ssl', 'certs')), [])
  assert.deepEqual(etc.binds, [join(host, 'ssl', 'certs')])
  for (const p of ['', 'ssl', 'ssl/certs', 'ld.so.conf.d']) assert.equal((await stat(join(etc.dir, p))).mode & 0o777, 0o755, p)
  for (const p of ['passwd', 'ld.so.cache', 'ld.so.conf.d/x86.conf']) assert.equal((await stat(join(etc.dir, p))).mode & 0o777, 0o644, p)
  await etc.remove()
  await assert.rejects(stat(etc.dir), { code: 'ENOENT' })
})

test('the sandbox /etc: the copy stops at its bounds (entries, bytes, depth)', async (t) => {
  const host = await mkdtemp(join(tmpdir(), 'tg-host-etc-'))
  t.after(async () => { await rm(host, { recursive: true, force: true }) })
  const many = join(host, 'ca-certificates')
  await mkdir(join(many, 'a', 'b', 'c'), { recursive: true })
  for (let i = 0; i < 30; i++) await symlink(`/usr/share/x/${i}`, join(many, `l${i}`))
  await writeFile(join(host, 'mime.types'), 'x'.repeat(2000))
  await chmod(join(host, 'mime.types'), 0o644)
  await chmod(many, 0o755)
  const etc = await writeSandboxEtc(host, { entries: 12, bytes: 1000, depth: 2 })
  t.after(etc.remove)
  const copied = await readdir(join(etc.dir, 'ca-certificates'))
  assert.ok(copied.length > 0 && copied.length < 12, `copied ${copied.length}`)
  await assert.rejects(stat(join(etc.dir, 'mime.types')), { code: 'ENOENT' }, 'a file over the byte budget is left out')
  await assert.rejects(stat(join(etc.dir, 'ca-certificates', 'a', 'b')), { code: 'ENOENT' }, 'deeper than the bound')
})
