import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

// `npm start` exactly as a user or a process supervisor runs it: npm, then the script's shell,
// then the server. A supervisor sends SIGTERM to the pid it started, which is npm's.

interface Started { npm: ChildProcess, port: number, logs: () => string }

async function npmStart (t: { after: (fn: () => Promise<void> | void) => void }): Promise<Started> {
  const workspaces = await mkdtemp(join(tmpdir(), 'tg-npm-start-'))
  const npm = spawn('npm', ['start', '--silent'], {
    env: { ...process.env, PORT: '0', LOG_LEVEL: 'info', API_KEYS: '', API_KEYS_FILE: '', REDIS_URL: '', WORKSPACES_DIR: workspaces },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true // its own process group, so cleanup can reach an orphaned server too
  })
  t.after(async () => {
    try { process.kill(-(npm.pid ?? 0), 'SIGKILL') } catch {}
    await rm(workspaces, { recursive: true, force: true })
  })
  let logs = ''
  npm.stderr.on('data', (chunk: Buffer) => { logs += chunk.toString() })
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${logs}`)), 60_000)
    npm.stdout.on('data', (chunk: Buffer) => {
      logs += chunk.toString()
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(logs)
      if (m !== null) { clearTimeout(timer); resolve(Number(m[1])) }
    })
    npm.on('exit', (code) => { clearTimeout(timer); reject(new Error(`npm start exited ${code}:\n${logs}`)) })
  })
  return { npm, port, logs: () => logs }
}

async function answers (port: number): Promise<boolean> {
  try {
    const res = await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(2000) })
    return res.ok
  } catch {
    return false
  }
}

test('SIGTERM to the pid of `npm start` closes the gateway gracefully (the signal reaches the server through npm)', async (t) => {
  const { npm, port, logs } = await npmStart(t)
  assert.equal(await answers(port), true)
  const exited = once(npm, 'exit')
  npm.kill('SIGTERM')
  await exited
  // The server logs its graceful close, and nothing listens on its port any more. Before the
  // server was exec'd, npm's shell died with the signal and left the server running, orphaned.
  let stillUp = true
  for (let i = 0; i < 100 && stillUp; i++) {
    stillUp = await answers(port)
    if (stillUp) await new Promise((resolve) => setTimeout(resolve, 100))
  }
  assert.equal(stillUp, false, `the gateway still answers on ${port} after SIGTERM to npm:\n${logs()}`)
  assert.match(logs(), /"signal":"SIGTERM"/)
  assert.match(logs(), /"msg":"closed"/)
})

test('process and GC metrics count from start-up, not from the first scrape', async (t) => {
  const { port } = await npmStart(t)
  const res = await fetch(`http://127.0.0.1:${port}/metrics`)
  assert.equal(res.status, 200)
  const text = await res.text()
  // Start-up (tool discovery, Ajv compilation, loading the sandbox) runs the collector many times;
  // a GC observer registered only at the first scrape has seen none of it.
  const gcCounts = [...text.matchAll(/^nodejs_gc_duration_seconds_count\{[^}]*\} (\d+)/gm)].map((m) => Number(m[1]))
  assert.ok(gcCounts.length > 0, 'no nodejs_gc_duration_seconds_count series')
  const total = gcCounts.reduce((a, b) => a + b, 0)
  assert.ok(total > 0, `the first scrape reports ${total} garbage collections since start`)
})

test('SIGTERM to the pid of `npm run example:mcp-server` stops the example server (exec\'d like npm start)', async (t) => {
  const npm = spawn('npm', ['run', '--silent', 'example:mcp-server'], {
    env: { ...process.env, PORT: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true
  })
  t.after(() => { try { process.kill(-(npm.pid ?? 0), 'SIGKILL') } catch {} })
  let out = ''
  npm.stderr.on('data', (chunk: Buffer) => { out += chunk.toString() })
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`example server did not start:\n${out}`)), 60_000)
    npm.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString()
      const m = /on http:\/\/127\.0\.0\.1:(\d+)\/mcp/.exec(out)
      if (m !== null) { clearTimeout(timer); resolve(Number(m[1])) }
    })
    npm.on('exit', (code) => { clearTimeout(timer); reject(new Error(`npm exited ${code}:\n${out}`)) })
  })
  const up = async (): Promise<boolean> => {
    try {
      await fetch(`http://127.0.0.1:${port}/mcp`, { signal: AbortSignal.timeout(2000) })
      return true
    } catch {
      return false
    }
  }
  assert.equal(await up(), true)
  const exited = once(npm, 'exit')
  npm.kill('SIGTERM')
  await exited
  let stillUp = true
  for (let i = 0; i < 100 && stillUp; i++) {
    stillUp = await up()
    if (stillUp) await new Promise((resolve) => setTimeout(resolve, 100))
  }
  assert.equal(stillUp, false, `the example server still answers on ${port} after SIGTERM to npm:\n${out}`)
})
