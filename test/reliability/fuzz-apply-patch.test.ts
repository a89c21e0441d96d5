/**
 * Property-based tests (fast-check) of apply_patch: random patches never write outside
 * the workspace and never leave a partial change.
 *
 * Every run starts from the same workspace tree (small text files, a CRLF file, a file without a
 * final newline, an empty and a binary file, nested folders, a symlink into the workspace, a
 * hard link and symlinks pointing out of it) next to a sentinel folder outside it. Inputs:
 * - patches rendered from a model (random add / delete / update / move operations on existing,
 *   new, nested, aliased and hostile paths; update chunks cut from the real file contents, some
 *   with deliberately wrong context). The model computes the outcome independently: either the
 *   whole patch fails, or the exact tree it leaves;
 * - the same patches with the disk failing at a random write or delete of the commit (before or
 *   after it took effect): the call fails and everything already written is rolled back;
 * - those patches with lines dropped, duplicated, swapped or garbled (no exact oracle: a success
 *   must only have changed the paths it reports, to what it reports);
 * - raw random text, bare or inside the envelope.
 * For every run: nothing outside the workspace changed (names, bytes, mtime, inode), the call
 * either succeeded or failed with a ToolError (never another exception), and a failure left the
 * workspace byte-identical (no leftover temp files either).
 */
import { test } from 'node:test'
import type { TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { link, lstat, mkdir, mkdtemp, readdir, readFile, readlink, realpath, rm, symlink, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, posix } from 'node:path'
import fc from 'fast-check'
import { parsePatch } from '../../src/builtin/apply-patch/parser.js'
import { applyPatch } from '../../src/builtin/apply-patch/execute.js'
import type { ApplyPatchResult, PatchIo } from '../../src/builtin/apply-patch/execute.js'
import { applyPatchTool } from '../../src/builtin/tools/apply-patch.js'
import { ToolError } from '../../src/builtin/types.js'
import { renameAt, writeFileAtomic } from '../../src/builtin/workspace/fd-tree.js'
import { testWorkspace } from '../helpers/workspace.js'

const TIMEOUT = { timeout: 60_000 }
/** Runs per property: the whole file stays well under a minute on a loaded CI machine. */
const RUNS = { model: 300, disk: 200, mutated: 200, random: 200 }

/**
 * The workspace before every run. No two lines (here or among the generated added lines) are
 * equal once trimmed without being equal, and none has typographic punctuation, so apply_patch's
 * looser matching passes (trimmed, punctuation-folded) can never find a match the exact pass
 * missed: the model matches exactly.
 * No line is empty (the "retry without a trailing empty line" rule never applies).
 */
const FILES: Readonly<Record<string, string | Buffer>> = {
  'a.txt': 'alpha 1\nalpha 2\nalpha 3\nalpha 4\nalpha 5\n',
  'b.md': '# Title\nintro line\n- item one\n- item two\nend of b\n',
  'src/main.ts': 'import { x } from "./util/helper"\nfunction main () {\n  const y = x + 1\n  return y\n}\nmain()\n',
  'src/util/helper.ts': 'export const x = 41\nexport const z = 7\nexport const w = x\n',
  'docs/guide/intro.md': 'Intro\nsecond\nthird\nfourth\n',
  'crlf.txt': 'one\r\ntwo\r\nthree\r\nfour\r\n',
  'nonl.txt': 'first\nsecond\nlast without newline',
  'empty.txt': '',
  'bin.dat': Buffer.from([0xff, 0xfe, 0x00, 0x01, 0x80, 0x0a, 0xc3, 0x28]),
  'spaced name.txt': 'has a space\nin its name\n',
  'ünï.txt': 'ünïcödé line\nanother line\n'
}
/** `hard.txt` is a second name of `outside/hard.txt`: it may be deleted or moved away, never written. */
const HARD_LINKED: Readonly<Record<string, string>> = { 'hard.txt': 'hard linked\nto a file outside\n' }
const DIRS: ReadonlySet<string> = new Set(['src', 'src/util', 'docs', 'docs/guide'])
/** Symlinks whose real path leaves the workspace (or loops): any path through them must be refused. */
const OUTWARD_LINKS: ReadonlySet<string> = new Set(['link-dir', 'link-file', 'up', 'dangling', 'loop'])
/** `inner -> src`: inside the workspace, so `inner/x` is `src/x`; `inner` itself is a link (refused as a target). */
const INNER_LINK = 'inner'

const utf8 = new TextDecoder('utf-8', { fatal: true })

interface Layout {
  base: string
  root: string
  outside: string
}

async function createLayout (): Promise<Layout> {
  const base = await realpath(await mkdtemp(join(tmpdir(), 'tg-fuzz-patch-')))
  const layout = { base, root: join(base, 'ws'), outside: join(base, 'outside') }
  await resetOutside(layout)
  return layout
}

/** (Re)creates the sentinel folder and removes anything else next to the workspace. */
async function resetOutside ({ base, outside }: Layout): Promise<void> {
  for (const name of await readdir(base)) if (name !== 'ws') await rm(join(base, name), { recursive: true, force: true })
  await mkdir(join(outside, 'sub'), { recursive: true })
  await writeFile(join(outside, 'secret.txt'), 'outside secret\nline 2\n')
  await writeFile(join(outside, 'sub', 'deep.txt'), 'deep outside\n')
  for (const [name, content] of Object.entries(HARD_LINKED)) await writeFile(join(outside, name), content)
}

async function resetWorkspace ({ base, root, outside }: Layout): Promise<void> {
  // rm does not follow symlinks: the outward links are removed, never their targets.
  await rm(root, { recursive: true, force: true })
  for (const dir of DIRS) await mkdir(join(root, dir), { recursive: true })
  for (const [rel, content] of Object.entries(FILES)) await writeFile(join(root, rel), content)
  await symlink(outside, join(root, 'link-dir'))
  await symlink(join(outside, 'secret.txt'), join(root, 'link-file'))
  await symlink('..', join(root, 'up'))
  await symlink(join(base, 'nowhere'), join(root, 'dangling'))
  await symlink('loop', join(root, 'loop'))
  await symlink('src', join(root, INNER_LINK))
  for (const name of Object.keys(HARD_LINKED)) await link(join(outside, name), join(root, name))
}

type Snapshot = Map<string, string>

/** Every entry under `dir` without following links: type, bytes or link target, and with `meta` mode, mtime and inode. */
async function snapshot (dir: string, meta: boolean): Promise<Snapshot> {
  const out: Snapshot = new Map()
  const describe = async (abs: string): Promise<string> => {
    const st = await lstat(abs)
    const suffix = meta ? ` mode=${st.mode} mtime=${st.mtimeMs} ino=${st.ino}` : ''
    if (st.isSymbolicLink()) return `link ${await readlink(abs)}${suffix}`
    if (st.isDirectory()) return `dir${suffix}`
    if (st.isFile()) return `file ${(await readFile(abs)).toString('base64')}${suffix}`
    return `other${suffix}`
  }
  const walk = async (abs: string, rel: string): Promise<void> => {
    for (const name of (await readdir(abs)).sort()) {
      const childAbs = join(abs, name)
      const childRel = rel === '' ? name : `${rel}/${name}`
      const what = await describe(childAbs)
      out.set(childRel, what)
      if (what.startsWith('dir')) await walk(childAbs, childRel)
    }
  }
  if (meta) out.set('.', await describe(dir))
  await walk(dir, '')
  return out
}

function sorted (s: Snapshot): Array<[string, string]> {
  return [...s.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
}

// ---------------------------------------------------------------------------------------------
// The model: operations, their rendering as patch text, and their expected outcome.

interface Chunk {
  ctx: string | undefined
  before: string[]
  removed: string[]
  added: string[]
  after: string[]
}

type Op =
  | { kind: 'add', path: string, lines: string[] }
  | { kind: 'delete', path: string }
  | { kind: 'update', path: string, moveTo: string | undefined, chunks: Chunk[] }

function render (ops: readonly Op[]): string {
  const out = ['*** Begin Patch']
  for (const op of ops) {
    if (op.kind === 'add') {
      out.push(`*** Add File: ${op.path}`, ...op.lines.map((l) => `+${l}`))
    } else if (op.kind === 'delete') {
      out.push(`*** Delete File: ${op.path}`)
    } else {
      out.push(`*** Update File: ${op.path}`)
      if (op.moveTo !== undefined) out.push(`*** Move to: ${op.moveTo}`)
      for (const c of op.chunks) {
        out.push(c.ctx === undefined ? '@@' : `@@ ${c.ctx}`)
        out.push(...c.before.map((l) => ` ${l}`), ...c.removed.map((l) => `-${l}`), ...c.added.map((l) => `+${l}`), ...c.after.map((l) => ` ${l}`))
      }
    }
  }
  out.push('*** End Patch')
  return out.join('\n')
}

/** The workspace-relative key a patch path stands for, or undefined when the tool must refuse it. */
function keyOf (root: string, input: string): string | undefined {
  const p = input.trim()
  if (p === '' || p.includes('\0') || p.length > 4096) return undefined
  if (p.split(/[\\/]/).some((c) => Buffer.byteLength(c) > 255)) return undefined
  const lexical = posix.relative(root, posix.resolve(root, p))
  if (lexical === '' || lexical === '..' || lexical.startsWith('../') || posix.isAbsolute(lexical)) return undefined
  const segs = lexical.split('/')
  const first = segs[0] as string
  if (OUTWARD_LINKS.has(first)) return undefined
  if (first === INNER_LINK) {
    if (segs.length === 1) return undefined
    segs[0] = 'src'
  }
  const folded = [lexical.split('/'), segs].map((s) => s.map((x) => x.normalize('NFC').toLowerCase()))
  for (const s of folded) {
    if (s.some((x, i) => x === '.ssh' || x === '.aws' || (x === '.git' && s[i + 1] === 'hooks'))) return undefined
  }
  return segs.join('/')
}

type ModelFiles = Map<string, Buffer>

function initialFiles (): ModelFiles {
  return new Map(Object.entries({ ...FILES, ...HARD_LINKED }).map(([k, v]) => [k, Buffer.from(v)]))
}

function isDir (files: ModelFiles, key: string): boolean {
  if (DIRS.has(key)) return true
  for (const f of files.keys()) if (f.startsWith(key + '/')) return true
  return false
}

/** A file may be written at `key`: not a folder, not a hard-linked file (even one this patch deleted), no ancestor a file. */
function writable (files: ModelFiles, key: string): boolean {
  if (isDir(files, key) || key in HARD_LINKED) return false
  const segs = key.split('/')
  for (let n = segs.length - 1; n > 0; n--) {
    const anc = segs.slice(0, n).join('/')
    if (files.has(anc)) return false
    if (isDir(files, anc)) return true
  }
  return true
}

function findExact (lines: readonly string[], pattern: readonly string[], from: number): number {
  for (let i = Math.max(0, from); i + pattern.length <= lines.length; i++) {
    if (pattern.every((p, j) => lines[i + j] === p)) return i
  }
  return -1
}

/** Codex's chunk placement with exact matching; the file's line ending and final-newline state are kept. */
function applyModelChunks (text: string, chunks: readonly Chunk[]): string | undefined {
  let lines: string[] = []
  let endsWithNewline = true
  let eol = '\n'
  if (text !== '') {
    const parts = text.split('\n')
    endsWithNewline = parts[parts.length - 1] === ''
    if (endsWithNewline) parts.pop()
    const terminated = endsWithNewline ? parts : parts.slice(0, -1)
    const crlf = terminated.filter((l) => l.endsWith('\r')).length
    eol = crlf > terminated.length - crlf ? '\r\n' : '\n'
    lines = parts.map((l, i) => (i < terminated.length && l.endsWith('\r') ? l.slice(0, -1) : l))
  }
  const reps: Array<{ start: number, length: number, lines: string[] }> = []
  let cursor = 0
  for (const c of chunks) {
    if (c.ctx !== undefined) {
      const at = findExact(lines, [c.ctx], cursor)
      if (at < 0) return undefined
      cursor = at + 1
    }
    const oldLines = [...c.before, ...c.removed, ...c.after]
    const newLines = [...c.before, ...c.added, ...c.after]
    if (oldLines.length === 0) {
      reps.push({ start: lines.length, length: 0, lines: newLines })
      continue
    }
    const at = findExact(lines, oldLines, cursor)
    if (at < 0) return undefined
    reps.push({ start: at, length: oldLines.length, lines: newLines })
    cursor = at + oldLines.length
  }
  reps.sort((a, b) => a.start - b.start)
  const out: string[] = []
  let next = 0
  for (const r of reps) {
    out.push(...lines.slice(next, r.start), ...r.lines)
    next = r.start + r.length
  }
  out.push(...lines.slice(next))
  return out.length === 0 ? '' : out.join(eol) + (endsWithNewline ? eol : '')
}

type ModelOutcome = { ok: true, files: ModelFiles } | { ok: false, why: string }

/** Applies the operations in order, all or nothing, to the model of the workspace. */
function runModel (root: string, ops: readonly Op[]): ModelOutcome {
  const files = initialFiles()
  for (const [i, op] of ops.entries()) {
    const fail = (why: string): ModelOutcome => ({ ok: false, why: `op ${i} (${op.kind} ${JSON.stringify(op.path)}): ${why}` })
    const key = keyOf(root, op.path)
    if (key === undefined) return fail('refused path')
    if (op.kind === 'add') {
      if (!writable(files, key)) return fail('not writable')
      files.set(key, Buffer.from(op.lines.map((l) => `${l}\n`).join('')))
      continue
    }
    const current = files.get(key)
    if (current === undefined) return fail('no such file')
    if (op.kind === 'delete') {
      files.delete(key)
      continue
    }
    let text: string
    try {
      text = utf8.decode(current)
    } catch {
      return fail('not UTF-8')
    }
    const updated = applyModelChunks(text, op.chunks)
    if (updated === undefined) return fail('context not found')
    const dest = op.moveTo === undefined ? key : keyOf(root, op.moveTo)
    if (dest === undefined) return fail(`refused move destination ${JSON.stringify(op.moveTo)}`)
    if (!writable(files, dest)) return fail(dest === key ? 'not writable' : 'move destination not writable')
    files.delete(key)
    files.set(dest, Buffer.from(updated))
  }
  return { ok: true, files }
}

/** The workspace snapshot the model's files give: folders, files, and the untouched links. */
function expectedSnapshot (files: ModelFiles, linksBefore: Snapshot): Snapshot {
  const out: Snapshot = new Map()
  for (const [k, v] of linksBefore) if (v.startsWith('link ')) out.set(k, v)
  for (const d of DIRS) out.set(d, 'dir')
  for (const [k, v] of files) {
    const segs = k.split('/')
    for (let n = 1; n < segs.length; n++) out.set(segs.slice(0, n).join('/'), 'dir')
    out.set(k, `file ${v.toString('base64')}`)
  }
  return out
}

// ---------------------------------------------------------------------------------------------
// Generators.

function pathPools ({ base, root, outside }: Layout): { existing: string[], all: fc.Arbitrary<string> } {
  const existing = [...Object.keys(FILES), ...Object.keys(HARD_LINKED)]
  const dirs = [...DIRS]
  const fresh = ['new.txt', 'fresh.md', 'src/added.ts', 'docs/guide/extra.md', 'Ünï-nëw.txt']
  const nested = ['deep/a/b/c.txt', 'src/util/more/x.ts', 'n1/n2/n3/n4/leaf.txt', 'a.txt/child.txt', 'bin.dat/x/y', 'src/main.ts/inner', 'new.txt/under-new']
  const aliases = [
    './a.txt', 'src/../b.md', 'src/util/../main.ts', `${root}/src/main.ts`, `${root}/new.txt`, 'link-dir/../fresh.md',
    'inner/main.ts', 'inner/util/helper.ts', 'inner/brand-new.ts', './inner/../a.txt', 'docs//guide/intro.md'
  ]
  const hostile = [
    '../x', '../outside/secret.txt', 'a/../../x', 'src/../../escaped.txt', `${base}/escaped.txt`, `${outside}/secret.txt`,
    `${outside}/planted.txt`, `${root}/../outside/secret.txt`, `${base}/ws-evil/x`, '/', 'link-dir', 'link-dir/secret.txt',
    'link-dir/planted.txt', 'link-dir/sub/deep.txt', 'link-dir/sub/new/n.txt', 'link-file', 'link-file/x', 'up',
    'up/escaped.txt', 'up/outside/secret.txt', 'dangling', 'dangling/x', 'loop', 'loop/x', INNER_LINK, 'bad\0name.txt',
    'x'.repeat(300), `${'a/'.repeat(2100)}x`, '.', '', '   ', 'src/..', '.ssh/authorized_keys', '.git/hooks/pre-commit',
    'src/.AWS/credentials', 'inner/../../escaped.txt'
  ]
  const all = fc.oneof(
    { weight: 5, arbitrary: fc.constantFrom(...existing) },
    { weight: 1, arbitrary: fc.constantFrom(...dirs) },
    { weight: 3, arbitrary: fc.constantFrom(...fresh) },
    { weight: 2, arbitrary: fc.constantFrom(...nested) },
    { weight: 2, arbitrary: fc.constantFrom(...aliases) },
    { weight: 1, arbitrary: fc.constantFrom(...hostile) }
  )
  return { existing, all }
}

/** Added lines: never equal (even trimmed) to a line of the tree, so only the exact pass can match them. */
const newLine = fc.oneof(
  { weight: 6, arbitrary: fc.nat(999).map((n) => `new-${n}`) },
  { weight: 1, arbitrary: fc.constantFrom('new *** End Patch', '*** End Patch', '*** Add File: fake.txt', '@@ not a hunk', '-new dash', 'new\ttab') }
)

const rawChunk = fc.record({
  start: fc.nat(40),
  before: fc.nat(2),
  removed: fc.nat(2),
  after: fc.nat(2),
  added: fc.array(newLine, { maxLength: 3 }),
  // Mostly right: a wrong context line makes the whole patch fail, and patches have several chunks.
  ctx: fc.oneof({ weight: 5, arbitrary: fc.constant(undefined) }, { weight: 4, arbitrary: fc.nat(40) }, { weight: 1, arbitrary: fc.constant(-1) }),
  wrongAt: fc.oneof({ weight: 12, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.nat(5) }),
  token: fc.nat(9999)
})
type RawChunk = typeof rawChunk extends fc.Arbitrary<infer T> ? T : never

function textLinesOf (root: string, path: string): string[] {
  const key = keyOf(root, path)
  const content = key === undefined ? undefined : FILES[key] ?? HARD_LINKED[key]
  if (content === undefined || typeof content !== 'string' || content === '') return []
  return content.split('\n').filter((l, i, all) => !(i === all.length - 1 && l === '')).map((l) => l.replace(/\r$/, ''))
}

/** A chunk cut from the file's initial lines (or made of wrong lines when there are none). */
function buildChunk (lines: readonly string[], r: RawChunk): Chunk & { start: number } {
  const wrong = `nomatch-${r.token}`
  const added = [...r.added]
  if (lines.length === 0) {
    const removed = r.wrongAt !== undefined ? [wrong] : []
    if (removed.length === 0 && added.length === 0) added.push('new-fill')
    return { start: 0, ctx: r.ctx === -1 ? wrong : undefined, before: [], removed, added, after: [] }
  }
  const s = r.start % lines.length
  const b = Math.min(r.before, s)
  const k = Math.min(r.removed, lines.length - s)
  const a = Math.min(r.after, lines.length - s - k)
  const before = lines.slice(s - b, s)
  const removed = lines.slice(s, s + k)
  const after = lines.slice(s + k, s + k + a)
  let ctx: string | undefined
  if (r.ctx === -1) ctx = wrong
  else if (r.ctx !== undefined && s - b > 0) ctx = lines[r.ctx % (s - b)]
  if (r.wrongAt !== undefined) {
    const old = [before, removed, after]
    const total = before.length + removed.length + after.length
    if (total === 0) removed.push(wrong)
    else {
      let at = r.wrongAt % total
      for (const part of old) {
        if (at < part.length) {
          part[at] = wrong
          break
        }
        at -= part.length
      }
    }
  }
  if (before.length + removed.length + after.length + added.length === 0) added.push('new-fill')
  return { start: s, ctx, before, removed, added, after }
}

function opArbitrary (layout: Layout): fc.Arbitrary<Op> {
  const { existing, all } = pathPools(layout)
  const updateTarget = fc.oneof(
    { weight: 8, arbitrary: fc.constantFrom(...existing, './a.txt', 'inner/main.ts', `${layout.root}/src/util/helper.ts`) },
    { weight: 1, arbitrary: all }
  )
  const add = fc.record({ path: all, lines: fc.array(newLine, { maxLength: 4 }) }).map((o): Op => ({ kind: 'add', ...o }))
  const del = fc.oneof({ weight: 2, arbitrary: fc.constantFrom(...existing) }, { weight: 1, arbitrary: all }).map((path): Op => ({ kind: 'delete', path }))
  const update = fc.record({
    path: updateTarget,
    moveTo: fc.oneof({ weight: 2, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: all }),
    chunks: fc.oneof(
      { weight: 3, arbitrary: fc.array(rawChunk, { minLength: 1, maxLength: 1 }) },
      { weight: 1, arbitrary: fc.array(rawChunk, { minLength: 2, maxLength: 3 }) }
    ),
    ordered: fc.oneof({ weight: 4, arbitrary: fc.constant(true) }, { weight: 1, arbitrary: fc.constant(false) })
  }).map(({ path, moveTo, chunks, ordered }): Op => {
    const lines = textLinesOf(layout.root, path)
    const built = chunks.map((c) => buildChunk(lines, c))
    if (ordered) built.sort((x, y) => x.start - y.start)
    return { kind: 'update', path, moveTo, chunks: built.map(({ start: _start, ...c }) => c) }
  })
  return fc.oneof({ weight: 3, arbitrary: add }, { weight: 2, arbitrary: del }, { weight: 5, arbitrary: update })
}

/**
 * A list of operations. Besides single operations, it holds pairs that turn an existing file
 * into a folder (delete it, then add a file below its name) so that case is common enough.
 */
function opsArbitrary (layout: Layout, maxLength: number): fc.Arbitrary<Op[]> {
  const fileToDir = fc.tuple(
    fc.constantFrom(...Object.keys(FILES), ...Object.keys(HARD_LINKED)),
    fc.constantFrom('child.txt', 'd/e.txt'),
    fc.array(newLine, { maxLength: 2 })
  )
    .map(([file, child, lines]): Op[] => [{ kind: 'delete', path: file }, { kind: 'add', path: `${file}/${child}`, lines }])
  const one = opArbitrary(layout).map((op) => [op])
  return fc.array(fc.oneof({ weight: 6, arbitrary: one }, { weight: 1, arbitrary: fileToDir }), { minLength: 1, maxLength })
    .map((groups) => groups.flat().slice(0, Math.max(maxLength, 1)))
}

type Mutation =
  | { kind: 'drop', at: number }
  | { kind: 'dup', at: number }
  | { kind: 'swap', at: number, with: number }
  | { kind: 'garble', at: number, line: string }

const garbleLine = fc.oneof(
  fc.string({ maxLength: 30 }),
  fc.constantFrom('', ' ', '@@', '@@ ', '*** End of File', '*** End Patch', '*** Begin Patch', '*** Move to: ../escaped.txt',
    '*** Move to: link-dir/planted.txt', '*** Add File: ../escaped.txt', '*** Delete File: link-file', '*** Update File: a.txt',
    '+', '-', ' ', '-alpha 3', ' alpha 2', '+*** End Patch', "<<'EOF'", 'EOF', '\r', '*** Frobnicate File: x')
)
const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ kind: fc.constant('drop' as const), at: fc.nat() }),
  fc.record({ kind: fc.constant('dup' as const), at: fc.nat() }),
  fc.record({ kind: fc.constant('swap' as const), at: fc.nat(), with: fc.nat() }),
  fc.record({ kind: fc.constant('garble' as const), at: fc.nat(), line: garbleLine })
)

function mutate (text: string, mutations: readonly Mutation[]): string {
  const lines = text.split('\n')
  for (const m of mutations) {
    if (lines.length === 0) break
    const at = m.at % lines.length
    if (m.kind === 'drop') lines.splice(at, 1)
    else if (m.kind === 'dup') lines.splice(at, 0, lines[at] as string)
    else if (m.kind === 'garble') lines[at] = m.line
    else {
      const other = m.with % lines.length
      const tmp = lines[at] as string
      lines[at] = lines[other] as string
      lines[other] = tmp
    }
  }
  return lines.join('\n')
}

// ---------------------------------------------------------------------------------------------
// The harness shared by the three properties.

interface Harness {
  layout: Layout
  /** Resets the workspace, applies `text`, checks confinement and the failure path, returns the outcome. */
  run: (
    text: string,
    io?: PatchIo
  ) => Promise<{ before: Snapshot, after: Snapshot, outcome: { ok: true, result: ApplyPatchResult } | { ok: false, error: ToolError } }>
}

async function harness (t: TestContext): Promise<Harness> {
  const layout = await createLayout()
  t.after(async () => await rm(layout.base, { recursive: true, force: true }))
  await resetWorkspace(layout)
  const pristine = await snapshot(layout.root, false)
  let outsideBefore = sorted(await snapshot(layout.outside, true))
  const baseNames = (await readdir(layout.base)).sort()
  const ws = testWorkspace(layout.root, { tenant: 't', workspaceId: 'fuzz' })
  const signal = new AbortController().signal
  // A refused patch leaves the workspace as it was (asserted below), so only a success needs a reset.
  let dirty = false
  return {
    layout,
    run: async (text, io) => {
      if (dirty) await resetWorkspace(layout)
      dirty = true
      const before = pristine
      let outcome: { ok: true, result: ApplyPatchResult } | { ok: false, error: ToolError }
      try {
        const result = io === undefined
          ? await applyPatchTool.run({ patch: text }, { workspace: ws, signal }) as ApplyPatchResult
          : await applyPatch(ws, text, { signal, io })
        outcome = { ok: true, result }
      } catch (err) {
        assert.ok(err instanceof ToolError, `a refusal must be a ToolError, got: ${(err as Error).stack ?? String(err)}`)
        outcome = { ok: false, error: err }
      }
      // (1) Nothing outside the workspace changed: the sentinel folder (the outward links'
      // targets) down to mtime and inode, and the names next to the workspace.
      try {
        assert.deepEqual(sorted(await snapshot(layout.outside, true)), outsideBefore, 'the sentinel folder outside the workspace changed')
        assert.deepEqual((await readdir(layout.base)).sort(), baseNames, 'something was created next to the workspace')
      } catch (err) {
        // Restored so that the runs fast-check makes while shrinking start clean: the
        // counterexample it reports is then the smallest patch that escapes.
        await resetOutside(layout)
        outsideBefore = sorted(await snapshot(layout.outside, true))
        throw err
      }
      const after = await snapshot(layout.root, false)
      // (2) A failure changes nothing: same names, same bytes, same links, no temp files.
      if (!outcome.ok) assert.deepEqual(sorted(after), sorted(before), `failed (${outcome.error.message}) but changed the workspace`)
      dirty = outcome.ok
      return { before, after, outcome }
    }
  }
}

/**
 * For a patch without an exact oracle: a success changed only the paths it reports (and the
 * folders created for them), and each reported path ends as the last operation on it says
 * (present with the added content, present, or absent).
 */
function checkReportedChanges (root: string, text: string, result: ApplyPatchResult, before: Snapshot, after: Snapshot): void {
  const parsed = parsePatch(text)
  assert.ok(parsed.ok, 'a patch that applied must parse')
  assert.equal(result.fileChanges.length, parsed.hunks.length)
  const real = (rel: string): string => keyOf(root, rel) ?? rel
  const final = new Map<string, { present: boolean, content?: string }>()
  result.fileChanges.forEach((change, i) => {
    const hunk = parsed.hunks[i]
    if (change.operation === 'delete') final.set(real(change.path), { present: false })
    else if (change.operation === 'add' && hunk?.type === 'add') final.set(real(change.path), { present: true, content: hunk.contents })
    else final.set(real(change.path), { present: true })
    if (change.movedFrom !== undefined) final.set(real(change.movedFrom), { present: false })
  })
  for (const [key, want] of final) {
    const got = after.get(key)
    if (!want.present) {
      // Gone as a file; a later operation may have made it a folder ("Delete a", "Add a/b").
      const becameDir = got === 'dir' && [...final].some(([k, v]) => v.present && k.startsWith(`${key}/`))
      assert.ok(got === undefined || becameDir, `${key} should be gone, is ${String(got).slice(0, 40)}`)
    } else if (want.content !== undefined) assert.equal(got, `file ${Buffer.from(want.content).toString('base64')}`, `${key} content`)
    else assert.ok(got?.startsWith('file '), `${key} should be a file, is ${String(got)}`)
  }
  const reported = [...final.keys()]
  for (const key of new Set([...before.keys(), ...after.keys()])) {
    if (before.get(key) === after.get(key)) continue
    const explained = final.has(key) || (after.get(key) === 'dir' && reported.some((r) => r.startsWith(`${key}/`)))
    assert.ok(explained, `${key} changed (${String(before.get(key)).slice(0, 40)} -> ${String(after.get(key)).slice(0, 40)}) but the result does not report it`)
  }
}

test('apply_patch on model patches: confined to the workspace, and all or nothing with the exact expected tree', TIMEOUT, async (t) => {
  const h = await harness(t)
  const stats = { applied: 0, refused: 0, moves: 0, hostile: 0 }
  const reasons: Record<string, number> = {}
  await fc.assert(fc.asyncProperty(opsArbitrary(h.layout, 5), async (ops) => {
    const text = render(ops)
    const expected = runModel(h.layout.root, ops)
    const { before, after, outcome } = await h.run(text)
    if (expected.ok) {
      assert.ok(outcome.ok, `the model applies this patch but the tool refused it: ${outcome.ok ? '' : outcome.error.message}\n${text}`)
      assert.equal(outcome.result.operationsApplied, ops.length)
      assert.deepEqual(sorted(after), sorted(expectedSnapshot(expected.files, before)), `unexpected tree after\n${text}`)
      stats.applied++
      if (ops.some((o) => o.kind === 'update' && o.moveTo !== undefined)) stats.moves++
    } else {
      assert.equal(outcome.ok, false, `the model refuses this patch (${expected.why}) but the tool applied it\n${text}`)
      stats.refused++
      if (expected.why.includes('refused')) stats.hostile++
      const reason = expected.why.replace(/^op \d+ \((\w+) .*\): /s, '$1: ').replace(/ ".*/s, '')
      reasons[reason] = (reasons[reason] ?? 0) + 1
    }
  }), {
    numRuns: RUNS.model,
    includeErrorInReport: true,
    // Found by this property: a file two levels below a file the patch deletes was refused (ENOTDIR).
    examples: [[[{ kind: 'delete', path: 'bin.dat' }, { kind: 'add', path: 'bin.dat/d/e.txt', lines: ['new-1'] }]]]
  })
  t.diagnostic(`model patches: ${JSON.stringify(stats)}; refusals: ${JSON.stringify(reasons)}`)
  // The generator must exercise both sides, or the properties above prove little.
  assert.ok(stats.applied >= 30, `only ${stats.applied} of ${RUNS.model} patches applied`)
  assert.ok(stats.refused >= 30, `only ${stats.refused} of ${RUNS.model} patches were refused`)
  assert.ok(stats.moves >= 3 && stats.hostile >= 3, JSON.stringify(stats))
})

test('apply_patch with the disk failing at a random write or delete of the commit: everything written is rolled back', TIMEOUT, async (t) => {
  const h = await harness(t)
  let injected = 0
  // failAt: which filesystem change of the commit fails; afterChange: it fails after taking
  // effect (as a failing chown after the rename would), else before.
  const input = fc.tuple(opsArbitrary(h.layout, 5), fc.nat(5), fc.boolean())
  await fc.assert(fc.asyncProperty(input, async ([ops, failAt, afterChange]) => {
    const expected = runModel(h.layout.root, ops)
    // Only patches that reach the commit (a refused one writes nothing to fail).
    fc.pre(expected.ok)
    let calls = 0
    let fired = false
    const failing = async <T>(change: () => Promise<T>): Promise<T> => {
      if (fired || calls++ !== failAt) return await change()
      fired = true
      if (afterChange) await change()
      throw Object.assign(new Error('ENOSPC: no space left on device'), { code: 'ENOSPC' })
    }
    const io: PatchIo = {
      renameAt: async (from, fromName, to, toName) => { await failing(async () => { await renameAt(from, fromName, to, toName) }) },
      writeFileAtomic: async (ws, input, data) => await failing(async () => await writeFileAtomic(ws, input, data))
    }
    const text = render(ops)
    // The harness asserts that a failed call left the workspace exactly as it was.
    const { before, after, outcome } = await h.run(text, io)
    if (fired) {
      injected++
      assert.equal(outcome.ok, false, `the disk failed but the patch reported success\n${text}`)
      assert.match(outcome.ok ? '' : outcome.error.message, /^Failed to apply patch: ENOSPC; every change already written was rolled back$/)
    } else {
      assert.ok(outcome.ok, `no failure was injected but the patch failed: ${outcome.ok ? '' : outcome.error.message}\n${text}`)
      if (expected.ok) assert.deepEqual(sorted(after), sorted(expectedSnapshot(expected.files, before)), `unexpected tree after\n${text}`)
    }
  }), {
    numRuns: RUNS.disk,
    includeErrorInReport: true,
    // Found by this property: the rollback restored `a.txt` while it was still the folder made
    // for `a.txt/child.txt`, failed, and the failed patch left `a.txt` deleted.
    examples: [[[
      [{ kind: 'delete', path: 'a.txt' }, { kind: 'add', path: 'a.txt/child.txt', lines: [] }, { kind: 'add', path: 'new.txt', lines: ['new-1'] }],
      2,
      false
    ]]]
  })
  t.diagnostic(`disk failures injected: ${injected} of ${RUNS.disk}`)
  assert.ok(injected >= RUNS.disk / 5, `only ${injected} of ${RUNS.disk} runs had a failure injected`)
})

test('apply_patch on mutated patches (lines dropped, duplicated, swapped, garbled): confined, all or nothing', TIMEOUT, async (t) => {
  const h = await harness(t)
  let applied = 0
  const input = fc.tuple(opsArbitrary(h.layout, 4), fc.array(mutation, { minLength: 1, maxLength: 3 }))
  await fc.assert(fc.asyncProperty(input, async ([ops, mutations]) => {
    const text = mutate(render(ops), mutations)
    const { before, after, outcome } = await h.run(text)
    if (outcome.ok) {
      applied++
      checkReportedChanges(h.layout.root, text, outcome.result, before, after)
    }
  }), { numRuns: RUNS.mutated, includeErrorInReport: true })
  t.diagnostic(`mutated patches applied: ${applied} of ${RUNS.mutated}`)
  assert.ok(applied >= 3, `only ${applied} of ${RUNS.mutated} mutated patches applied`)
})

test('apply_patch on random text: never throws anything but a ToolError, never changes a thing when it fails', TIMEOUT, async (t) => {
  const h = await harness(t)
  const markers = fc.constantFrom('*** Begin Patch', '*** End Patch', '*** Add File: r.txt', '*** Delete File: a.txt',
    '*** Update File: a.txt', '*** Move to: ../r.txt', '*** End of File', '@@', '@@ alpha 2', '-alpha 3', '+added', ' alpha 4', '')
  const text = fc.oneof(
    fc.string({ maxLength: 200 }),
    fc.string({ unit: 'binary', maxLength: 200 }),
    fc.array(fc.oneof(markers, fc.string({ maxLength: 20 })), { maxLength: 12 }).map((ls) => ['*** Begin Patch', ...ls, '*** End Patch'].join('\n'))
  )
  await fc.assert(fc.asyncProperty(text, async (patch) => {
    const { before, after, outcome } = await h.run(patch)
    if (outcome.ok) checkReportedChanges(h.layout.root, patch, outcome.result, before, after)
  }), { numRuns: RUNS.random, includeErrorInReport: true })
})
