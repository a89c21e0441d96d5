// Every repo path a document names in backticks exists, so the recipes of docs/ARCHITECTURE.md
// (#add-a-builtin, #add-a-tier) and the README keep pointing at real files when code moves.
// Run by `npm run lint`; exits 1 on a path that names nothing.
//
// What counts as a repo path, in a `code span` outside fenced blocks (commands there are not pointers),
// when it names a folder or a file with an extension the repository's tracked files have (.ts, .md ...):
//  - it starts with a top-level folder or file of the repository (src/, routes/, test/, .ci/, openapi.yaml ...):
//    that path must exist, as a file or a folder (`src/services.ts:237`: the line is ignored), unless git
//    ignores it (an output such as `bench/results/latest.json`);
//  - or it has no top-level prefix but ends in such an extension (`workspace/fd-tree.ts`, `breaker.ts`):
//    some tracked file must end with it, at a folder boundary (the text around it says which folder).
// Skipped: URLs, globs (`*`), placeholders (`{userId}`, `<name>`), anything with a space, paths inside a
// workspace (written without backticks in the README, since the repo has .py files too), and names from outside the repo
// (`@fastify/*`, `.git/hooks`, `WORKSPACES_DIR/...`).
// Usage: node scripts/check-doc-paths.mjs [root] (root defaults to the working directory).
import { execFileSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'

/** The documents checked, relative to the root. */
export function documents (root) {
  const docs = existsSync(join(root, 'docs')) ? readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`) : []
  return ['README.md', 'RELIABILITY.md', ...docs].filter((f) => existsSync(join(root, f)))
}

const PATH_SHAPE = /^[\w.@-]+(\/[\w.@-]+)*\/?$/

const extensionOf = (path) => /\.([\w-]+)$/.exec(path.split('/').pop())?.[1]

/**
 * The code spans of a Markdown text that name repo paths, as `{ path, line, kind }`. `tops` is the set of
 * top-level names of the repository (folders and files), `extensions` the extensions of its files.
 */
export function repoPathsIn (text, tops, extensions) {
  const out = []
  const lines = text.split('\n')
  let fenced = false
  lines.forEach((line, i) => {
    if (/^\s*(```|~~~)/.test(line)) { fenced = !fenced; return }
    if (fenced) return
    for (const m of line.matchAll(/(`+)([^`]+?)\1(?!`)/g)) {
      // `src/services.ts:237`, `src/x.ts#L4`: the file is the pointer.
      const token = m[2].trim().replace(/(:\d+(-\d+)?(,\d+)*|#[\w-]+)$/, '')
      if (!PATH_SHAPE.test(token)) continue
      const ext = extensionOf(token)
      if (ext !== undefined && !extensions.has(ext)) continue
      const first = token.split('/')[0]
      if (tops.has(first) && (token.includes('/') || ext !== undefined)) {
        out.push({ path: token, line: i + 1, kind: 'exact' })
      } else if (ext !== undefined && !token.startsWith('.') && !token.startsWith('@')) {
        out.push({ path: token, line: i + 1, kind: 'suffix' })
      }
    }
  })
  return out
}

/** Tracked files (git), or every file under the root outside node_modules and .git when it is no checkout. */
function trackedFiles (root) {
  try {
    return execFileSync('git', ['ls-files'], { cwd: root, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 }).split('\n').filter(Boolean)
  } catch {
    const out = []
    const walk = (dir, prefix) => {
      for (const e of readdirSync(dir, { withFileTypes: true })) {
        if (e.name === 'node_modules' || e.name === '.git') continue
        if (e.isDirectory()) walk(join(dir, e.name), `${prefix}${e.name}/`)
        else out.push(`${prefix}${e.name}`)
      }
    }
    walk(root, '')
    return out
  }
}

/** Whether git ignores the path: something a command writes (bench results, the built console), not a pointer. */
function ignoredByGit (root, path) {
  try {
    execFileSync('git', ['check-ignore', '-q', '--no-index', path], { cwd: root, stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}

/** The problems of the documents under root: one line per path that names nothing. */
export function checkDocPaths (root) {
  const files = trackedFiles(root)
  const tops = new Set(files.map((f) => f.split('/')[0]))
  const extensions = new Set(files.map(extensionOf).filter((e) => e !== undefined))
  const problems = []
  for (const doc of documents(root)) {
    for (const { path, line, kind } of repoPathsIn(readFileSync(join(root, doc), 'utf8'), tops, extensions)) {
      const found = kind === 'exact'
        ? existsSync(join(root, path)) || ignoredByGit(root, path)
        : files.some((f) => f === path || f.endsWith(`/${path}`))
      if (!found) {
        problems.push(kind === 'exact'
          ? `${doc}:${line}: \`${path}\` does not exist`
          : `${doc}:${line}: \`${path}\` is no tracked file's path or its end`)
      }
    }
  }
  return problems
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const root = resolve(process.argv[2] ?? '.')
  const problems = checkDocPaths(root)
  for (const p of problems) console.error(`check-doc-paths: ${p}`)
  if (problems.length > 0) process.exit(1)
  console.log(`check-doc-paths: ${documents(root).length} documents, every repo path exists`)
}
