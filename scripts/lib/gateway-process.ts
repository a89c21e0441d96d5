import { spawn } from 'node:child_process'
import type { ChildProcess } from 'node:child_process'
import { testUidRange } from './uid-range.js'

export interface GatewayProcess {
  url: string
  port: number
  child: ChildProcess
  logs: () => string
  /** SIGTERM, then SIGKILL after `graceMs`; resolves with the exit code. */
  stop: (graceMs?: number) => Promise<number | null>
}

/** Where to register clean-up: a node:test TestContext, or anything with the same `after`. */
export interface CleanupScope {
  after: (fn: () => unknown) => void
}

/**
 * Starts the real server (`src/server.ts`, as `npm start` does) on a free port and waits for
 * it to listen. Killed after the test (or when `scope` cleans up) in any case.
 */
export async function startGateway (t: CleanupScope, env: Record<string, string>): Promise<GatewayProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/server.ts'], {
    env: { ...process.env, PORT: '0', LOG_LEVEL: 'info', API_KEYS: '', API_KEYS_FILE: '', REDIS_URL: '', ...env, ...testUidRange(env) },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  let logs = ''
  child.stdout?.on('data', (chunk: Buffer) => { logs += chunk.toString() })
  child.stderr?.on('data', (chunk: Buffer) => { logs += chunk.toString() })
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  t.after(() => { if (child.exitCode === null) child.kill('SIGKILL') })
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the gateway did not start:\n${logs}`)), 60_000)
    const onData = (): void => {
      const m = /listening on http:\/\/[\d.]+:(\d+)/.exec(logs)
      if (m) { clearTimeout(timer); resolve(Number(m[1])) }
    }
    child.stdout?.on('data', onData)
    exited.then((code) => { clearTimeout(timer); reject(new Error(`the gateway exited with ${code}:\n${logs}`)) }, () => {})
  })
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    child,
    logs: () => logs,
    stop: async (graceMs = 10_000) => {
      if (child.exitCode !== null) return child.exitCode
      child.kill('SIGTERM')
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs)
      const code = await exited
      clearTimeout(timer)
      return code
    }
  }
}
