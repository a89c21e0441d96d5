import { test } from 'node:test'
import type { TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { cp, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

/**
 * The recipe of docs/ARCHITECTURE.md#add-a-tier, followed step by step on a copy of the repository:
 * a sixth tier, `sixth`, between `function` and `global_mcp`, with in-process tools of its own. The
 * router reads what it needs from the tier's TIER_TRAITS row (no tier-name comparisons), so once the
 * recipe is followed GET /tools lists the tier's tools, /invoke runs them, an `allow` reaches them
 * (and refuses them when it does not name them), /catalog and /mcp show them, through the real
 * wiring of src/services.ts and the real app. Each step the recipe names is shown to be needed:
 * the import checker refuses the folder before its layers.json row, and the compiler refuses a
 * tier without its traits row or without its source named in the router's `sources`.
 *
 * When this test fails on an edit below ("not found"), the code moved: update the recipe in
 * docs/ARCHITECTURE.md#add-a-tier and this test together.
 */

const repo = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const TSC = join(repo, 'node_modules', 'typescript', 'bin', 'tsc')

const SIXTH_TRAITS = "{ selectedBy: 'functions', tenantScoped: false, encodedNames: false, reserved: false, mcpResults: false, answersToToolName: false, " +
  'pinned: false }'

/** Recipe step 2: the tier's ToolSource, in its own folder; it imports only routing/ and the neutral folders. */
const SOURCE_TS = `import { isBuiltinName } from '../naming/builtin-names.js'
import type { CatalogEntry } from '../routing/source.js'
import { StaticSource } from '../routing/static-source.js'
import type { ToolOutcome, ToolSpec } from '../routing/types.js'

export interface SixthTool { spec: ToolSpec, run: (args: Record<string, unknown>) => string }

export class SixthSource extends StaticSource {
  readonly tier = 'sixth' as const

  constructor (tools: readonly SixthTool[]) {
    super(tools.map((tool) => {
      if (isBuiltinName(tool.spec.name)) throw new Error(\`'\${tool.spec.name}' is a reserved built-in name\`)
      return { route: 'sixth', source: 'sixth', name: tool.spec.name, spec: tool.spec, ref: tool }
    }))
  }

  async call (entry: CatalogEntry, args: Record<string, unknown>): Promise<ToolOutcome> {
    return { ok: true, value: (entry.ref as SixthTool).run(args) }
  }
}
`

/** Recipe step 3: the folder's index.ts assembles the tier. `calculate` is also an example function (tier 4 wins it). */
const INDEX_TS = `import { SixthSource } from './source.js'

const text = { type: 'object', properties: { text: { type: 'string' } }, required: ['text'], additionalProperties: false }

export function createSixth (): SixthSource {
  return new SixthSource([
    { spec: { name: 'sixth_echo', description: 'Echoes its text', inputSchema: text }, run: (args) => \`sixth:\${String(args.text)}\` },
    { spec: { name: 'calculate', description: 'Not the example function', inputSchema: { type: 'object' } }, run: () => 'sixth calculate' }
  ])
}
`

/**
 * What the compiler must refuse once the tier is in TIERS: a traits table without its row, and
 * router sources that do not name it. An `@ts-expect-error` that has no error to expect is itself
 * an error, so the type check fails if either compiles.
 */
const REFUSED_TS = `import type { RouterOptions } from '../src/routing/router.js'
import type { ToolSource } from '../src/routing/source.js'
import type { Tier, TIER_TRAITS, TierTraits } from '../src/routing/types.js'

declare const source: ToolSource
declare const fiveRows: Omit<typeof TIER_TRAITS, 'sixth'>

// @ts-expect-error the sixth tier's source is not named
export const unwired: RouterOptions['sources'] = { builtin: source, user_mcp: source, local_mcp: source, function: source, global_mcp: source }
// @ts-expect-error the sixth tier has no traits row
export const noRow = fiveRows satisfies Record<Tier, TierTraits>
`

/** The app with the recipe applied, driven in process: every answer, as JSON on stdout. */
const RUN_TS = `import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { buildApp } from '../src/app.js'
import { loadConfig } from '../src/config.js'

const workspaces = await mkdtemp(join(tmpdir(), 'tg-ws-'))
const app = await buildApp(loadConfig({ SANDBOX: 'none', LOG_LEVEL: 'silent', WORKSPACES_DIR: workspaces }), { logger: false })
const call = async (method: 'GET' | 'POST', url: string, payload?: unknown, headers?: Record<string, string>): Promise<{ status: number, body: string }> => {
  const res = await app.inject({ method, url, ...(payload !== undefined ? { payload: payload as object } : {}), ...(headers !== undefined ? { headers } : {}) })
  return { status: res.statusCode, body: res.body }
}
const echo = { name: 'sixth_echo', arguments: { text: 'hi' } }
const mcp = { accept: 'application/json, text/event-stream' }
const out = {
  list: await call('GET', '/tools?functions=sixth_echo,calculate'),
  invoke: await call('POST', '/invoke', echo),
  allowed: await call('POST', '/invoke', { ...echo, allow: { functions: ['sixth_echo'] } }),
  notAllowed: await call('POST', '/invoke', { ...echo, allow: { functions: ['calculate'] } }),
  calculate: await call('POST', '/invoke', { name: 'calculate', arguments: { expression: '2 + 3' } }),
  catalog: await call('GET', '/catalog'),
  mcpList: await call('POST', '/mcp?functions=sixth_echo', { jsonrpc: '2.0', id: 1, method: 'tools/list' }, mcp),
  mcpCall: await call('POST', '/mcp?functions=sixth_echo', { jsonrpc: '2.0', id: 2, method: 'tools/call', params: echo }, mcp)
}
await app.close()
await rm(workspaces, { recursive: true, force: true })
process.stdout.write(JSON.stringify(out))
`

async function run (args: string[], cwd: string): Promise<{ code: number, out: string }> {
  return await new Promise((resolve) => {
    execFile(process.execPath, args, { cwd, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, out: stdout + stderr })
    })
  })
}

/** Replaces the first match of `anchor` in a file of the copy; a missing anchor means the recipe no longer fits the code. */
async function edit (root: string, file: string, anchor: RegExp, replacement: string): Promise<void> {
  const path = join(root, file)
  const text = await readFile(path, 'utf8')
  assert.match(text, anchor, `${file}: ${anchor} not found; update docs/ARCHITECTURE.md#add-a-tier and this test`)
  await writeFile(path, text.replace(anchor, replacement))
}

async function write (root: string, file: string, text: string): Promise<void> {
  await mkdir(dirname(join(root, file)), { recursive: true })
  await writeFile(join(root, file), text)
}

/** What the recipe touches and the app needs, without tests, docs or the console's build. */
async function copyRepository (t: TestContext): Promise<string> {
  const root = await mkdtemp(join(tmpdir(), 'tg-sixth-tier-'))
  t.after(async () => { await rm(root, { recursive: true, force: true }) })
  const copied = [
    'src', 'routes', 'plugins', 'examples/functions', 'examples/mcp-services', 'console/src', 'console/tsconfig.json', 'package.json', 'scripts/layers.json'
  ]
  for (const path of copied) {
    await cp(join(repo, path), join(root, path), { recursive: true })
  }
  await symlink(join(repo, 'node_modules'), join(root, 'node_modules'))
  const tsconfig = JSON.parse(await readFile(join(repo, 'tsconfig.json'), 'utf8')) as { include: string[] }
  tsconfig.include = ['src', 'routes', 'plugins', 'examples', 'recipe']
  await writeFile(join(root, 'tsconfig.json'), JSON.stringify(tsconfig))
  return root
}

const checkImports = async (root: string): Promise<{ code: number, out: string }> => await run([join(repo, 'scripts', 'check-imports.mjs'), root], root)

test('a sixth tier added by the recipe is listed, invoked, allow-listed and cataloged without a change to the router', async (t) => {
  const root = await copyRepository(t)

  // Step 1: the tier in TIERS at its place in the priority, and its traits row beside it.
  await edit(root, 'src/routing/types.ts', /'global_mcp'\] as const/, "'sixth', 'global_mcp'] as const")
  await edit(root, 'src/routing/types.ts', /\n\} as const satisfies Record<Tier, TierTraits>/, `,\n  sixth: ${SIXTH_TRAITS}\n} as const satisfies Record<Tier, TierTraits>`)
  // Step 2: its ToolSource in src/sixth/.
  await write(root, 'src/sixth/source.ts', SOURCE_TS)
  // Step 3: assembled by its index.ts, called in services.ts and named in the router's sources, a layers.json row.
  await write(root, 'src/sixth/index.ts', INDEX_TS)
  await edit(root, 'src/services.ts', /^import /m, "import { createSixth } from './sixth/index.js'\nimport ")
  await edit(root, 'src/services.ts', /(const sources: Record<Tier, ToolSource \| null> = \{)/, '$1\n    sixth: createSixth(),')
  const unlisted = await checkImports(root)
  assert.equal(unlisted.code, 1, unlisted.out)
  assert.match(unlisted.out, /src unit 'sixth' has no row in scripts\/layers\.json/)
  const layers = JSON.parse(await readFile(join(root, 'scripts/layers.json'), 'utf8')) as { units: Record<string, unknown> }
  layers.units.sixth = { imports: ['naming', 'routing'], job: 'tier 6: in-process tools of the recipe test' }
  await writeFile(join(root, 'scripts/layers.json'), JSON.stringify(layers, null, 2))
  const checked = await checkImports(root)
  assert.equal(checked.code, 0, checked.out)
  // Step 4: the console's copy of the allow-list field (its type is derived from TIER_TRAITS).
  await edit(root, 'console/src/views/tools.tsx', /(const SELECTED_BY: SelectedByRoute = \{)/, "$1 sixth: 'functions',")

  await t.test('the project compiles, and would not without the traits row or the wiring', async () => {
    await write(root, 'recipe/refused.ts', REFUSED_TS)
    const server = await run([TSC, '--noEmit', '-p', 'tsconfig.json'], root)
    assert.equal(server.code, 0, server.out)
    const browser = await run([TSC, '--noEmit', '-p', 'console/tsconfig.json'], root)
    assert.equal(browser.code, 0, browser.out)
  })

  await t.test('GET /tools lists it, /invoke runs it with and without allow, /catalog and /mcp show it', async () => {
    await write(root, 'recipe/run.ts', RUN_TS)
    const ran = await run(['--import', 'tsx', 'recipe/run.ts'], root)
    assert.equal(ran.code, 0, ran.out)
    const out = JSON.parse(ran.out) as Record<string, { status: number, body: string }>
    const json = (key: string, status = 200): any => {
      const answer = out[key] as { status: number, body: string }
      assert.equal(answer.status, status, `${key}: ${answer.body}`)
      return JSON.parse(answer.body)
    }

    // Listed by `functions=`; `calculate` is the example function's (tier 4 comes before the sixth tier).
    const list = json('list')
    assert.deepEqual(list.tools.map((tool: any) => tool.function.name), ['sixth_echo', 'calculate'])
    assert.equal(list.tools[0].function.description, 'Echoes its text')
    assert.notEqual(list.tools[1].function.description, 'Not the example function')
    assert.deepEqual(list.unresolved, [])

    const invoked = json('invoke')
    assert.deepEqual([invoked.route, invoked.output, invoked.isError], ['sixth', 'sixth:hi', false])
    const allowed = json('allowed')
    assert.deepEqual([allowed.route, allowed.output], ['sixth', 'sixth:hi'])
    assert.equal(json('notAllowed', 403).code, 'GW_NOT_ALLOWED')
    assert.equal(json('calculate').route, 'function')

    const rows = json('catalog').tools.filter((row: any) => row.route === 'sixth')
    assert.deepEqual(rows.map((row: any) => [row.name, row.source, row.shadowedBy]).sort(), [['calculate', 'sixth', 'function'], ['sixth_echo', 'sixth', null]])

    const rpc = (key: string): any => {
      const body = (out[key] as { body: string }).body
      const data = body.startsWith('{') ? body : body.split('\n').find((line) => line.startsWith('data: '))?.slice(6)
      return JSON.parse(data ?? 'null')
    }
    assert.deepEqual(rpc('mcpList').result.tools.map((tool: any) => tool.name), ['sixth_echo'])
    assert.deepEqual(rpc('mcpCall').result, { content: [{ type: 'text', text: 'sixth:hi' }], isError: false })
  })
})
