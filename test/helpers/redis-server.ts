/**
 * A private redis-server for tests that kill and restart it (never the shared one on 6379): on
 * a free loopback port, with an append-only file fsynced on every write, so a SIGKILLed server
 * restarted on the same port and directory comes back with every acknowledged write.
 */
import { spawn, spawnSync } from 'node:child_process'
import type { ChildProcess } from 'node:child_process'
import { createServer } from 'node:net'
import type { AddressInfo } from 'node:net'
import type { TestContext } from 'node:test'
import type { CleanupScope } from '../../scripts/lib/gateway-process.js'

/**
 * True when redis-server can be run here. Otherwise the test is skipped, except under CI=true
 * where that fails it.
 */
export function requireRedisServer (t: TestContext): boolean {
  if (spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).error === undefined) return true
  if (process.env.CI === 'true') throw new Error('redis-server is required under CI=true')
  t.skip('redis-server is not installed')
  return false
}

/** A loopback port that was free a moment ago. */
export async function freePort (): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}

/** Starts redis-server on `port` with its data in `dir`; killed after the test whatever happens. */
export async function startRedisServer (t: CleanupScope, port: number, dir: string): Promise<ChildProcess> {
  const child = spawn('redis-server', [
    '--port', String(port), '--bind', '127.0.0.1', '--save', '', '--daemonize', 'no',
    // Every write reaches the file before the reply, so a SIGKILL right after a PUT loses nothing.
    '--appendonly', 'yes', '--appendfsync', 'always', '--dir', dir
  ], { stdio: ['ignore', 'pipe', 'pipe'] })
  t.after(() => { if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL') })
  let out = ''
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`redis-server did not start:\n${out}`)), 10_000)
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString()
      if (out.includes('Ready to accept connections')) {
        clearTimeout(timer)
        resolve()
      }
    })
    child.once('exit', (code) => {
      clearTimeout(timer)
      reject(new Error(`redis-server exited with ${String(code)}:\n${out}`))
    })
  })
  child.stdout?.resume()
  child.stderr?.resume()
  return child
}

/** SIGKILL, and wait until it is gone (the port is free again). */
export async function killRedisServer (child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  child.kill('SIGKILL')
  await exited
}
