/**
 * Workspaces: checkpoints of the bench's 50,000-file tree (CheckpointStore called
 * directly, as the routes will). Each round changes 10 files spread over the tree (in place, as
 * an editor would), then times a checkpoint; the restore rounds change 10 other files and time
 * the restore of the newest checkpoint. The baseline is `find -printf` of every entry's inode,
 * size and times: the stat walk any change detection pays, in C, without reading a file.
 */
import { spawn } from 'node:child_process'
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { CheckpointStore } from '../src/builtin/workspace/checkpoint-store.js'
import type { Workspace } from '../src/builtin/types.js'
import { generateTree } from './fixtures/tree.js'
import { makeRow, median, round, timeMs } from './stats.js'
import type { BenchContext, Row } from './types.js'

const TREE = { topDirs: 20, subdirs: 50, filesPerDir: 50, needleEvery: 50, seed: 42 }
const LIMITS = { readMaxChars: 12_000, commandTimeoutMs: 30_000, bashLogChars: 12_000, maxProcessOutputChars: 120_000, outputMaxChars: 100_000 }
const CHANGED = 10
const REPS = 9

/** find's stat walk of the tree, its output counted here (like the subject, nothing kept). */
async function findStat (root: string, signal: AbortSignal): Promise<number> {
  const child = spawn('find', [root, '-printf', '%i %s %T@ %C@ %m %y\\n'], { stdio: ['ignore', 'pipe', 'ignore'], signal })
  let bytes = 0
  child.stdout.on('data', (d: Buffer) => { bytes += d.length })
  const code = await new Promise<number | null>((resolve, reject) => { child.on('error', reject); child.on('close', resolve) })
  if (code !== 0) throw new Error(`find exited with ${String(code)}`)
  return bytes
}

/** `count` files spread over the tree, different ones for each `round`. */
async function pickFiles (root: string, round: number, count: number): Promise<string[]> {
  const tops = (await readdir(root)).sort()
  const out: string[] = []
  for (let i = 0; i < count; i++) {
    const top = tops[(round * 7 + i * 13) % tops.length] as string
    const mods = (await readdir(path.join(root, top))).sort()
    const mod = mods[(round * 11 + i * 3) % mods.length] as string
    const files = (await readdir(path.join(root, top, mod))).sort()
    out.push(path.join(root, top, mod, files[(round * 5 + i) % files.length] as string))
  }
  return out
}

async function touch (files: readonly string[], tag: string): Promise<void> {
  for (const f of files) {
    const text = await readFile(f, 'utf8')
    await writeFile(f, `${text}// ${tag}\n`)
  }
}

export async function run (ctx: BenchContext): Promise<Row[]> {
  const root = path.join(ctx.tmpDir, 'ws')
  await mkdir(root)
  ctx.log('generating the 50,000-file tree')
  const tree = await generateTree(root, TREE)
  const store = new CheckpointStore({ dir: path.join(ctx.tmpDir, 'store') })
  const ws: Workspace = { tenant: 'bench', workspaceId: 'ckpt', root, readRoots: [], limits: LIMITS }

  let cold: Awaited<ReturnType<CheckpointStore['create']>> | undefined
  const coldMs = await timeMs(async () => { cold = await store.create(ws) })
  ctx.log(`first checkpoint: ${round(coldMs)} ms, ${cold?.files ?? 0} files`)

  const ckptMs: number[] = []
  const findMs: number[] = []
  const newBytes: number[] = []
  const hashed: number[] = []
  let last = cold
  for (let i = 0; i < REPS && !(i > 1 && ctx.signal.aborted); i++) {
    await touch(await pickFiles(root, i, CHANGED), `checkpoint round ${i}`)
    // Alternate which side goes first: drift on a shared machine hits both alike.
    if (i % 2 === 1) findMs.push(await timeMs(async () => await findStat(root, ctx.signal)))
    ckptMs.push(await timeMs(async () => { last = await store.create(ws) }))
    if (i % 2 === 0) findMs.push(await timeMs(async () => await findStat(root, ctx.signal)))
    newBytes.push(last?.work.newBytes ?? Number.NaN)
    hashed.push(last?.work.hashedFiles ?? Number.NaN)
  }

  const restoreMs: number[] = []
  const target = last?.checkpointId as string
  let wrong = 0
  for (let i = 0; i < REPS && !(i > 1 && ctx.signal.aborted); i++) {
    const files = await pickFiles(root, 100 + i, CHANGED)
    const before = await Promise.all(files.map(async (f) => await readFile(f, 'utf8')))
    await touch(files, `restore round ${i}`)
    restoreMs.push(await timeMs(async () => await store.restore(ws, target)))
    const after = await Promise.all(files.map(async (f) => await readFile(f, 'utf8')))
    if (after.some((t, j) => t !== before[j])) wrong++
  }
  await store.whenIdle(ws)

  const kib = median(newBytes) / 1024
  return [
    makeRow({
      id: '14.1',
      name: `checkpoint after ${CHANGED} files changed in a ${tree.files}-file tree vs find -printf stat walk`,
      metric: 'median ms',
      value: median(ckptMs),
      baseline: median(findMs),
      target: { on: 'value', op: '<', limit: 200 },
      notes: `${ckptMs.length} rounds, min ${round(Math.min(...ckptMs))} ms; files hashed per round: ${median(hashed)}; first (cold) checkpoint ${round(coldMs)} ms`,
      detail: { minMs: round(Math.min(...ckptMs)), coldMs: round(coldMs), hashedFiles: median(hashed), treeBytes: tree.bytes }
    }),
    makeRow({
      id: '14.1b',
      name: `new storage of that checkpoint (${CHANGED} files + the directory listings on their paths)`,
      metric: 'median KiB',
      value: round(kib),
      baseline: null,
      target: { on: 'value', op: '<', limit: 1024 },
      notes: `objects and trees added per round; the tree is ${round(tree.bytes / 2 ** 20)} MiB`
    }),
    makeRow({
      id: '14.2',
      name: `restore of that checkpoint after ${CHANGED} files changed vs find -printf stat walk`,
      metric: 'median ms',
      value: median(restoreMs),
      baseline: median(findMs),
      target: { on: 'value', op: '<', limit: 300 },
      notes: `${restoreMs.length} rounds, min ${round(Math.min(...restoreMs))} ms${wrong > 0 ? `; ${wrong} rounds did NOT restore the content` : '; content checked each round'}`,
      detail: { minMs: round(Math.min(...restoreMs)), wrongRounds: wrong }
    })
  ]
}
