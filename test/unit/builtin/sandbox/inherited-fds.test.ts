import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import type { Readable } from 'node:stream'
import { fileURLToPath } from 'node:url'

const MODULE = fileURLToPath(new URL('../../../../src/builtin/sandbox/inherited-fds.ts', import.meta.url))

/**
 * A real child process holding two of our sockets as fds 40 and 41 without close-on-exec (bash's
 * redirections, as a supervisor's would be; Node marks the low descriptors it finds at start-up
 * close-on-exec, not these). The child closes what it inherited, keeping 41, then runs on until
 * its stdin ends. The parent ends that stdin once its end of fd 40 ended (or after 5 s, when it
 * did not): so whether 40 ended, and whether 41 had not, are both seen while the child still runs.
 */
async function child (): Promise<{ closed: number[], ended40: boolean, ended41: boolean }> {
  const script = `
    const { closeInheritedDescriptors } = await import(${JSON.stringify(MODULE)})
    process.stdout.write(JSON.stringify(closeInheritedDescriptors([41])) + '\\n')
    process.stdin.resume()
    await new Promise((resolve) => process.stdin.once('end', resolve))
  `
  const proc = spawn('bash', ['-c', 'exec "$0" "$@" 40>&3 41>&4 3>&- 4>&-', process.execPath, '--import', 'tsx', '--input-type=module', '-e', script], {
    stdio: ['pipe', 'pipe', 'inherit', 'pipe', 'pipe']
  })
  let ended40 = false
  let ended41 = false
  let seen: { ended40: boolean, ended41: boolean } | undefined
  const release = (): void => {
    seen ??= { ended40, ended41 }
    proc.stdin?.end()
  }
  const fallback = setTimeout(release, 5000)
  const s40 = proc.stdio[3] as Readable
  const s41 = proc.stdio[4] as Readable
  s40.resume()
  s41.resume()
  s40.on('end', () => { ended40 = true; release() })
  s41.on('end', () => { ended41 = true })
  let out = ''
  proc.stdout?.on('data', (d: Buffer) => { out += d.toString() })
  const code = await new Promise<number | null>((resolve, reject) => { proc.once('error', reject); proc.once('exit', resolve) })
  clearTimeout(fallback)
  assert.equal(code, 0, out)
  return { closed: JSON.parse(out.split('\n')[0] as string) as number[], ...(seen as { ended40: boolean, ended41: boolean }) }
}

test('descriptors inherited without close-on-exec are closed at once; the ones to keep stay', async () => {
  const r = await child()
  assert.ok(r.closed.includes(40), `closed ${JSON.stringify(r.closed)}`)
  assert.ok(!r.closed.includes(41))
  assert.ok(r.closed.every((fd) => fd > 2))
  assert.equal(r.ended40, true, 'the child still held our first socket (its fd 40)')
  assert.equal(r.ended41, false, 'the child closed our second socket (its fd 41) although told to keep it')
})
