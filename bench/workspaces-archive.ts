/**
 * Workspaces: workspace archives on the bench's 50,000-file tree. Download
 * (packWorkspace, a streamed tar.gz walked by fd) against `tar czf` of the same tree, and upload
 * (extractArchive into a fresh staging directory, every entry checked) against `tar xzf` of the
 * same archive. Both sides' output is consumed the same way (the gzip bytes counted in this
 * process; the extraction written to a fresh directory on the same filesystem).
 */
import { spawn } from 'node:child_process'
import { createReadStream } from 'node:fs'
import { mkdir, rm, stat } from 'node:fs/promises'
import path from 'node:path'
import type { Readable } from 'node:stream'
import { extractArchive } from '../src/builtin/workspace/archive-extract.js'
import { packWorkspace } from '../src/builtin/workspace/archive-pack.js'
import type { Workspace } from '../src/builtin/types.js'
import { generateTree } from './fixtures/tree.js'
import { makeRow, median, round, timePair } from './stats.js'
import type { BenchContext, Row } from './types.js'

/** Interleaved runs of each side (on a loaded 2-core host one upload round with cleanup takes ~40 s). */
const REPS = 3
const TREE = { topDirs: 20, subdirs: 50, filesPerDir: 50, needleEvery: 50, seed: 42 }
const LIMITS = { readMaxChars: 12_000, commandTimeoutMs: 30_000, bashLogChars: 12_000, maxProcessOutputChars: 120_000, outputMaxChars: 100_000 }

async function drain (stream: Readable): Promise<number> {
  let bytes = 0
  for await (const chunk of stream) bytes += (chunk as Buffer).length
  return bytes
}

/** Runs a command; resolves with the bytes of its stdout (read here, like the subject's). */
async function exec (cmd: string, args: readonly string[], signal: AbortSignal): Promise<number> {
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], signal })
  let err = ''
  child.stderr.on('data', (d: Buffer) => { err += d.toString() })
  const [bytes, code] = await Promise.all([
    drain(child.stdout),
    new Promise<number | null>((resolve, reject) => { child.on('error', reject); child.on('close', resolve) })
  ])
  if (code !== 0) throw new Error(`${cmd} ${args.join(' ')} exited with ${String(code)}: ${err}`)
  return bytes
}

function msNote (xs: number[]): string {
  return `min ${round(Math.min(...xs))} ms, ${xs.length} runs`
}

export async function run (ctx: BenchContext): Promise<Row[]> {
  const { signal } = ctx
  const rows: Row[] = []
  const src = path.join(ctx.tmpDir, 'tree')
  await mkdir(src)
  const t0 = Date.now()
  const tree = await generateTree(src, TREE)
  ctx.log(`tree: ${tree.files} files in ${tree.dirs} dirs, ${(tree.bytes / 2 ** 20).toFixed(0)} MiB (${Date.now() - t0} ms)`)
  const ws: Workspace = { tenant: 'bench', workspaceId: 'tree', root: src, readRoots: [], limits: LIMITS }

  // --- download ---------------------------------------------------------------------------------
  const packed = await drain(await packWorkspace(ws))
  const tarred = await exec('tar', ['czf', '-', '-C', src, '.'], signal)
  ctx.log(`download: packWorkspace ${packed} bytes, tar czf ${tarred} bytes`)
  const down = await timePair(
    async () => await drain(await packWorkspace(ws, '.', { signal })),
    async () => await exec('tar', ['czf', '-', '-C', src, '.'], signal),
    { warmup: 1, reps: REPS, signal }
  )
  rows.push(makeRow({
    id: '14.3',
    name: 'workspace archive download (streamed tar.gz, fd walk) vs tar czf, 50,000-file tree',
    metric: 'median ms',
    value: median(down.subject),
    baseline: median(down.baseline),
    target: { on: 'ratio', op: '<=', limit: 1.3 },
    notes: `${tree.files} files, ${(tree.bytes / 2 ** 20).toFixed(0)} MiB; gzip ${(packed / 2 ** 20).toFixed(1)} MiB (tar czf: ${(tarred / 2 ** 20).toFixed(1)} MiB); ${msNote(down.subject)}`,
    detail: { subjectMin: round(Math.min(...down.subject)), baselineMin: round(Math.min(...down.baseline)), gzipBytes: packed, tarGzipBytes: tarred }
  }))

  // --- upload -----------------------------------------------------------------------------------
  // The same archive for both sides, made by the system tar (what a client would send).
  const archive = path.join(ctx.tmpDir, 'tree.tar.gz')
  await exec('sh', ['-c', 'tar czf "$1" -C "$2" .', 'sh', archive, src], signal)
  const archiveBytes = (await stat(archive)).size
  let n = 0
  const fresh = async (): Promise<string> => {
    const dir = path.join(ctx.tmpDir, `x${n++}`)
    await mkdir(dir, { mode: 0o700 })
    return dir
  }
  const dirs: string[] = []
  const subject = async (): Promise<void> => {
    const dir = await fresh()
    dirs.push(dir)
    const res = await extractArchive(createReadStream(archive), { stagingDir: dir, limits: { maxBytes: 2 ** 40, maxFiles: 1_000_000 }, signal })
    if (res.files < tree.files) throw new Error(`extracted ${res.files} entries, expected at least ${tree.files}`)
  }
  const baseline = async (): Promise<void> => {
    const dir = await fresh()
    dirs.push(dir)
    await exec('tar', ['xzf', archive, '-C', dir], signal)
  }
  // Each run extracts into a new directory; earlier ones are removed between runs, untimed.
  const cleanup = async (): Promise<void> => {
    for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true })
  }
  const upTimes = { subject: [] as number[], baseline: [] as number[] }
  const sides = [['subject', subject], ['baseline', baseline]] as const
  for (let i = 0; i < REPS; i++) {
    if (i > 0 && signal.aborted) break
    for (let j = 0; j < sides.length; j++) {
      const [name, fn] = sides[(i + j) % sides.length] as (typeof sides)[number]
      await cleanup()
      const start = performance.now()
      await fn()
      upTimes[name].push(performance.now() - start)
    }
  }
  await cleanup()
  rows.push(makeRow({
    id: '14.4',
    name: 'workspace archive upload (checked extraction to staging) vs tar xzf, 50,000-file tree',
    metric: 'median ms',
    value: median(upTimes.subject),
    baseline: median(upTimes.baseline),
    target: { on: 'ratio', op: '<=', limit: 1.5 },
    notes: `archive ${(archiveBytes / 2 ** 20).toFixed(1)} MiB from tar czf; ${msNote(upTimes.subject)}`,
    detail: { subjectMin: round(Math.min(...upTimes.subject)), baselineMin: round(Math.min(...upTimes.baseline)), archiveBytes }
  }))
  return rows
}
