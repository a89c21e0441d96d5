import { spawnSync } from 'node:child_process'
import { chmod, mkdir, mkdtemp, realpath, rm, symlink, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import type { Workspace } from '../../src/builtin/types.js'
import type { BuiltinTool } from '../../src/builtin/tool.js'

// The tree the glob and grep tests search: odd names, binary and over-size files, symlinks,
// .git and node_modules, in a directory ripgrep (run as another uid in bwrap) can reach.

const LIMITS = { readMaxChars: 12000, commandTimeoutMs: 30000, bashLogChars: 12000, maxProcessOutputChars: 120000, outputMaxChars: 100000 }
export const HAS_RG = spawnSync('rg', ['--version']).status === 0

/** A fresh search tree under a temporary directory, removed after the test; `run` calls a tool on it. */
export async function searchTree (t: { after: (fn: () => Promise<void>) => void }) {
  const dir = await realpath(await mkdtemp(path.join(os.tmpdir(), 'tg-gg-')))
  t.after(() => rm(dir, { recursive: true, force: true }))
  // ripgrep runs in a bwrap sandbox as an unprivileged uid: it must be able to reach the root.
  await chmod(dir, 0o755)
  const root = path.join(dir, 'root')
  const files: Record<string, string | Buffer> = {
    'a.ts': 'export const a = 1\n// TODO: a\n',
    'b.js': 'const b = "TODO later"\r\nfoo(1)\r\n',
    'src/c.ts': 'import x from "y"\nfunction todo () {}\n',
    'src/deep/d.ts': 'TODO deep\nnot here\nTODO again',
    'src/deep/e.tsx': 'Todo mixed case\n',
    'a/x.txt': 'TODO in a/\n',
    'a.txt': 'TODO in a.txt\n',
    '.hidden/h.ts': 'TODO hidden\n',
    '.env': 'SECRET=1 TODO\n',
    '.git/config': 'TODO git\n',
    'node_modules/m/index.js': 'TODO module\n',
    'bin.dat': Buffer.concat([Buffer.from('TODO bin\n'), Buffer.from([0, 1, 2])]),
    'late-nul.txt': Buffer.concat([Buffer.from('TODO before\n'), Buffer.alloc(9000, 0x61), Buffer.from([0]), Buffer.from('\nTODO after\n')]),
    'bad-utf8.txt': Buffer.concat([Buffer.from('TODO ok line\nTODO bad '), Buffer.from([0xff, 0xfe]), Buffer.from('\n')]),
    'bom.txt': '\uFEFFTODO bom\n',
    'long.txt': `TODO ${'z'.repeat(1000)}\n`,
    'uni.txt': 'café TODO ünïcode\n',
    'big.txt': Buffer.alloc(10 * 1024 * 1024 + 1, 0x54),
    'exact.txt': Buffer.concat([Buffer.from('TODO exact\n'), Buffer.alloc(10 * 1024 * 1024 - 11, 0x0a)]),
    'empty.txt': ''
  }
  for (const [rel, content] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(root, rel)), { recursive: true })
    await writeFile(path.join(root, rel), content)
  }
  await symlink('a.ts', path.join(root, 'link-to-a.ts'))
  await symlink('src', path.join(root, 'link-dir'))
  const ws: Workspace = { tenant: 't', workspaceId: 'default', root, readRoots: [], limits: LIMITS }
  const run = (tool: BuiltinTool, args: Record<string, unknown>) =>
    tool.run(args, { workspace: ws, signal: new AbortController().signal }) as Promise<Record<string, unknown>>
  return { dir, root, ws, run }
}
/** A tree whose names exercise the bytewise path order, with more files than the Node engine reads ahead. */
export async function wideTree (root: string): Promise<void> {
  const names = ['a', 'a.b', 'a-b', 'a_b', 'B', 'b', 'é', 'z\u00ff', '\u{1F600}', '\uE000', '10', '9', '.dot']
  let n = 0
  for (const d of names) {
    for (const sub of ['', 'x/', 'x.y/']) {
      for (const f of names) {
        const rel = `w/${d}/${sub}${f}.txt`
        await mkdir(path.dirname(path.join(root, rel)), { recursive: true })
        n++
        await writeFile(path.join(root, rel), n % 3 === 0 ? `hit ${n}\nmiss\nhit again ${n}\n` : `miss ${n}\n`)
      }
    }
  }
}
