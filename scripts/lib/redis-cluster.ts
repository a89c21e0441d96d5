import { spawn, execFile } from 'node:child_process'
import type { ChildProcess } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { promisify } from 'node:util'

const run = promisify(execFile)

/** A real local Redis Cluster of `masters` redis-server processes (no replicas), on loopback. */
export interface RedisClusterHandle {
  /** `127.0.0.1:port` of every master: REDIS_CLUSTER_NODES is `nodes.join(',')`. */
  nodes: string[]
  /** Kills the servers and removes their directory. Safe to call twice. */
  stop: () => Promise<void>
}

/** Where to register clean-up: a node:test TestContext, or anything with the same `after`. */
export interface CleanupScope {
  after: (fn: () => unknown) => void
}

async function portFree (port: number): Promise<boolean> {
  return await new Promise((resolve) => {
    const server = net.createServer()
    server.once('error', () => resolve(false))
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)))
  })
}

/**
 * `count` ports whose cluster bus ports (port + 10000) are free too. Random within 20000-45000
 * so parallel test files rarely try the same ones; each is checked by listening on it.
 */
async function freeClusterPorts (count: number): Promise<number[]> {
  const ports: number[] = []
  for (let attempt = 0; ports.length < count && attempt < 500; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 25_000)
    if (ports.includes(port) || ports.includes(port + 10_000) || ports.includes(port - 10_000)) continue
    if (await portFree(port) && await portFree(port + 10_000)) ports.push(port)
  }
  if (ports.length < count) throw new Error('no free ports for a local Redis Cluster')
  return ports
}

async function cli (port: number, ...args: string[]): Promise<string> {
  const { stdout } = await run('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args], { timeout: 10_000 })
  return stdout
}

async function waitFor (what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (await check().catch(() => false)) return
    if (Date.now() > deadline) throw new Error(`local Redis Cluster: ${what} within ${timeoutMs} ms`)
    await sleep(100)
  }
}

/**
 * Starts `masters` (default 3) `redis-server --cluster-enabled yes` processes on free loopback
 * ports, joins them with `redis-cli --cluster create --cluster-yes` (the slots split evenly) and
 * waits until every node reports `cluster_state:ok`. Nothing is written to disk but the nodes'
 * cluster config files in a temp dir. Needs redis-server and redis-cli on PATH (.ci/run installs
 * them). Stopped after the test when `t` is given, and when this process exits in any case.
 */
export async function startRedisCluster (t?: CleanupScope, opts: { masters?: number } = {}): Promise<RedisClusterHandle> {
  const masters = opts.masters ?? 3
  const dir = await mkdtemp(path.join(os.tmpdir(), 'tg-redis-cluster-'))
  const ports = await freeClusterPorts(masters)
  const children: ChildProcess[] = []
  let logs = ''
  const killAll = (): void => { for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL') }
  process.once('exit', killAll)
  let stopped = false
  const stop = async (): Promise<void> => {
    if (stopped) return
    stopped = true
    process.removeListener('exit', killAll)
    await Promise.all(children.map(async (c) => {
      if (c.exitCode !== null || c.signalCode !== null) return
      const exited = new Promise((resolve) => c.once('exit', resolve))
      c.kill('SIGKILL')
      await exited
    }))
    await rm(dir, { recursive: true, force: true })
  }
  t?.after(stop)
  try {
    for (const port of ports) {
      const child = spawn('redis-server', [
        '--port', String(port),
        '--bind', '127.0.0.1',
        '--cluster-enabled', 'yes',
        '--cluster-config-file', `nodes-${port}.conf`,
        '--cluster-node-timeout', '5000',
        '--dir', dir,
        '--save', '',
        '--appendonly', 'no',
        '--protected-mode', 'no'
      ], { stdio: ['ignore', 'pipe', 'pipe'] })
      child.stdout?.on('data', (b: Buffer) => { logs = (logs + b.toString()).slice(-8000) })
      child.stderr?.on('data', (b: Buffer) => { logs = (logs + b.toString()).slice(-8000) })
      children.push(child)
    }
    for (const port of ports) await waitFor(`redis-server on ${port} answers PING\n${logs}`, async () => (await cli(port, 'PING')).trim() === 'PONG', 10_000)
    await run('redis-cli', ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '0', '--cluster-yes'], { timeout: 30_000 })
    for (const port of ports) {
      await waitFor(`node ${port} reports cluster_state:ok`, async () => (await cli(port, 'CLUSTER', 'INFO')).includes('cluster_state:ok'), 20_000)
    }
    return { nodes: ports.map((p) => `127.0.0.1:${p}`), stop }
  } catch (err) {
    await stop()
    throw err
  }
}
