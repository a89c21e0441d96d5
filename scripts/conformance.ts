/**
 * `npm run conformance [-- leg...] [--update-baseline]`: the official MCP conformance suite
 * (@modelcontextprotocol/conformance, Node >= 22) in four legs, each at 2025-11-25 and 2026-07-28,
 * the client legs also at 2025-03-26 (its two OAuth back-compat scenarios):
 *
 * - control-server: the suite against our fixture server (scripts/lib/mcp-fixtures/conformance/server.ts)
 * - gateway-server: the same, through the gateway's `/mcp?mcp=conformance`, the fixture being a global server
 *   (behind queryProxy: some of the suite's raw requests drop the URL's query string)
 * - control-client: the suite's scenario servers against our fixture client (SDK v2 `Client`, OAuth by the SDK's `auth()`)
 * - gateway-client: the same scenarios with the gateway as the client (register, `GET /tools`, `POST /invoke`;
 *   for auth/*, the user connecting the server through the gateway's authorize route and callback)
 *
 * The server legs at 2026-07-28 also run the suite's extension scenarios (EXTENSION_SCENARIOS: the
 * Tasks extension), named one by one since `--suite all` leaves them out.
 *
 * Checks go to a temp dir (one checks.json per scenario). Each leg and revision has a baseline of
 * expected failures, test/conformance/expected-failures.<leg>.<revision>.yaml, read with the suite's
 * own rules (`<scenario>` or `<scenario>:<check-id>`; FAILURE and WARNING fail). Exit 1 on a failure
 * not in the baseline or a baseline entry that passes now (stale). `--update-baseline` rewrites the
 * baselines of the legs run from the current failures, keeping the comment of each entry that stays.
 * `--keep` keeps the temp dir of a passing run (a failing run always keeps it).
 */
import { spawn, spawnSync } from 'node:child_process'
import { createServer, request as httpRequest } from 'node:http'
import type { AddressInfo } from 'node:net'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { parse } from 'yaml'
import { startGateway } from './lib/gateway-process.js'
import { startConformanceServer } from './lib/mcp-fixtures/conformance/server.js'

const LEGS = ['control-server', 'gateway-server', 'control-client', 'gateway-client'] as const
type Leg = typeof LEGS[number]
type Version = '2025-03-26' | '2025-11-25' | '2026-07-28'
/**
 * The revisions each role runs. 2025-03-26 is a client-only run: the suite has client scenarios there
 * only for OAuth back-compat (an authorization server without RFC 9728 metadata), and no server suite.
 */
const ROLE_VERSIONS: Record<'server' | 'client', Version[]> = {
  server: ['2025-11-25', '2026-07-28'],
  client: ['2025-03-26', '2025-11-25', '2026-07-28']
}

/**
 * OAuth client scenarios per revision, as `conformance list --client --spec-version <v>` lists them.
 * Left out: the suite's extension ones (`[extension]` in the list: auth/client-credentials-jwt,
 * auth/client-credentials-basic, auth/enterprise-managed-authorization, auth/dpop, auth/dpop-nonce,
 * auth/wif-jwt-bearer). They belong to no revision, and the adapter registers the scenario server for
 * a tenant, whose one flow is the user's authorization code (SPEC 16: client credentials only for a
 * global server from the configuration; no private_key_jwt, enterprise-managed authorization, DPoP or
 * workload identity).
 */
const AUTH_BOTH = [
  'auth/metadata-default', 'auth/metadata-var1', 'auth/metadata-var2', 'auth/metadata-var3', 'auth/basic-cimd',
  'auth/scope-from-www-authenticate', 'auth/scope-from-scopes-supported', 'auth/scope-omitted-when-undefined',
  'auth/scope-step-up', 'auth/scope-retry-limit', 'auth/token-endpoint-auth-basic', 'auth/token-endpoint-auth-post',
  'auth/token-endpoint-auth-none', 'auth/pre-registration'
]
const AUTH_SCENARIOS: Record<Version, string[]> = {
  '2025-03-26': ['auth/2025-03-26-oauth-metadata-backcompat', 'auth/2025-03-26-oauth-endpoint-fallback'],
  '2025-11-25': AUTH_BOTH,
  '2026-07-28': [
    ...AUTH_BOTH, 'auth/resource-mismatch', 'auth/offline-access-scope', 'auth/offline-access-not-supported',
    'auth/authorization-server-migration', 'auth/iss-supported', 'auth/iss-not-advertised', 'auth/iss-supported-missing',
    'auth/iss-wrong-issuer', 'auth/iss-unexpected', 'auth/iss-normalized', 'auth/metadata-issuer-mismatch'
  ]
}
/** Client scenarios per revision (`conformance list --client --spec-version <v>`, extensions left out as above). */
const CLIENT_SCENARIOS: Record<Version, string[]> = {
  '2025-03-26': AUTH_SCENARIOS['2025-03-26'],
  '2025-11-25': [
    'initialize', 'tools_call', 'elicitation-sep1034-client-defaults', 'sse-retry', 'json-schema-2020-12-preservation',
    ...AUTH_SCENARIOS['2025-11-25']
  ],
  '2026-07-28': [
    'tools_call', 'request-metadata', 'sep-2322-client-request-state', 'http-standard-headers', 'http-custom-headers',
    'http-invalid-tool-headers', 'json-schema-ref-no-deref', 'json-schema-2020-12-preservation', ...AUTH_SCENARIOS['2026-07-28']
  ]
}
/**
 * Client scenarios run at once per leg, across its revisions (one budget: three revisions side by side
 * with one each would be 18 at once). A scenario is two Node processes (the suite, the client under
 * tsx) that spend most of their time starting: 6 keep 2 cores busy; more only makes each slower.
 */
const CLIENT_PARALLEL = 6
/**
 * Extension scenarios per revision: the suite leaves them out of `--suite all --spec-version` (they are
 * "not on the spec timeline") and runs one only when named (`--scenario`), at 2026-07-28 unless told
 * otherwise. The Tasks extension (SEP-2663) is defined on the 2026-07-28 wire only (its `tasks/*`
 * names are the ones 2026-07-28 removed from core), so 2025-11-25 has none.
 */
const EXTENSION_SCENARIOS: Record<Version, string[]> = {
  '2025-03-26': [],
  '2025-11-25': [],
  '2026-07-28': [
    'tasks-lifecycle', 'tasks-capability-negotiation', 'tasks-wire-fields', 'tasks-request-state-removal', 'tasks-mrtr-input',
    'tasks-request-headers', 'tasks-dispatch-and-envelope', 'tasks-status-notifications', 'tasks-required-task-error', 'tasks-mrtr-composition'
  ]
}
const EXTENSION_PARALLEL = 5
// Per scenario: the fixture's slowest takes well under a second; a scenario that waits for an answer
// that never comes (server-sse-polling through the stateless /mcp) fails after this instead of 30 s.
const SERVER_SCENARIO_TIMEOUT_MS = '15000'
// The same for a client scenario (the client command included): sse-retry through the gateway waits
// for an answer its upstream client dropped (the lean transport does not resume the stream) until this.
const CLIENT_SCENARIO_TIMEOUT_MS = '20000'
/**
 * The suite needs Node >= 22 and brings packages that refuse the oldest Node the project supports,
 * so it is not a dependency of the repository: it is installed, pinned, into a folder outside it
 * (like .ci/run's Node 24), on first use or by .ci/run. MCP_CONFORMANCE_DIR names another folder.
 */
const SUITE_VERSION = '0.2.0-alpha.12'
const SUITE_DIR = process.env.MCP_CONFORMANCE_DIR ?? `/opt/tool-gateway-ci/conformance-${SUITE_VERSION}`
const SUITE = join(SUITE_DIR, 'node_modules/@modelcontextprotocol/conformance/dist/index.js')

/** Installs the pinned suite into SUITE_DIR when it is not there (npm, from the registry). */
function ensureSuite (): void {
  if (existsSync(SUITE)) return
  console.log(`installing @modelcontextprotocol/conformance@${SUITE_VERSION} into ${SUITE_DIR}`)
  mkdirSync(SUITE_DIR, { recursive: true })
  const npm = spawnSync('npm', ['install', '--prefix', SUITE_DIR, '--no-audit', '--no-fund', `@modelcontextprotocol/conformance@${SUITE_VERSION}`], { stdio: 'inherit' })
  if (npm.status !== 0 || !existsSync(SUITE)) throw new Error(`could not install the conformance suite into ${SUITE_DIR} (npm exited ${String(npm.status)})`)
}
const FIXTURES = 'scripts/lib/mcp-fixtures/conformance'
const TSX = `${JSON.stringify(process.execPath)} --import tsx`
const GLOBAL_SERVER_ID = 'conformance'

interface Check { id: string, status: string, errorMessage?: string }
type Results = Map<string, Check[]>

const failing = (c: Check): boolean => c.status === 'FAILURE' || c.status === 'WARNING'

/**
 * A loopback HTTP proxy in front of the gateway that gives `/mcp` the query `query` when a
 * request comes without one. The suite's raw requests (http-header-validation,
 * http-custom-header-server-validation) are sent to the URL's path only, dropping its query
 * (the allow-list of `/mcp?mcp=...`); everything else, the Host and Origin headers included
 * (dns-rebinding-protection), passes as it came, and answers stream back as they come.
 */
async function queryProxy (target: string, query: string): Promise<{ url: string, close: () => Promise<void> }> {
  const upstream = new URL(target)
  const server = createServer((req, res) => {
    const path = req.url === '/mcp' ? `/mcp?${query}` : req.url ?? '/'
    const out = httpRequest({ hostname: upstream.hostname, port: upstream.port, path, method: req.method, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers)
      answer.pipe(res)
    })
    out.on('error', () => { res.destroy() })
    res.on('close', () => { out.destroy() })
    req.pipe(out)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: async () => {
      server.closeAllConnections()
      await new Promise<void>((resolve) => { server.close(() => { resolve() }) })
    }
  }
}

/** The suite's reading of a scenario's checks: INFO kept, otherwise one check per id, its worst status. */
function worstPerId (checks: Check[]): Check[] {
  const rank = (s: string): number => s === 'FAILURE' ? 3 : s === 'WARNING' ? 2 : s === 'SUCCESS' ? 1 : 0
  const best = new Map<string, number>()
  checks.forEach((c, i) => {
    if (c.status === 'INFO') return
    const seen = best.get(c.id)
    if (seen === undefined || rank(c.status) >= rank(checks[seen]?.status ?? '')) best.set(c.id, i)
  })
  return checks.filter((c, i) => c.status !== 'INFO' && best.get(c.id) === i)
}

function runSuite (args: string[], env: Record<string, string>, log: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [SUITE, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    child.stdout.on('data', (c: Buffer) => { out += c.toString() })
    child.stderr.on('data', (c: Buffer) => { out += c.toString() })
    child.on('error', reject)
    child.on('close', (code) => { writeFileSync(log, out); resolve(code ?? 1) })
  })
}

const TIMESTAMP = /-\d{4}-\d{2}-\d{2}T[\d-]+Z$/

/**
 * checks.json of each scenario under `dir` (`server-` prefix dropped for server runs). The suite
 * writes a scenario `auth/x` to `auth/x-<timestamp>/`: a folder without checks.json is read as
 * such a prefix.
 */
function readResults (dir: string, role: 'server' | 'client', into: Results, only?: string, prefix = ''): void {
  if (!existsSync(dir)) return
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (!entry.isDirectory()) continue
    const file = join(dir, entry.name, 'checks.json')
    if (!existsSync(file)) {
      if (prefix === '') readResults(join(dir, entry.name), role, into, only, `${entry.name}/`)
      continue
    }
    let name = `${prefix}${entry.name.replace(TIMESTAMP, '')}`
    if (role === 'server') name = name.replace(/^server-/, '')
    if (only !== undefined && name !== only) continue
    into.set(name, JSON.parse(readFileSync(file, 'utf8')) as Check[])
  }
}

async function pool<T> (items: T[], size: number, work: (item: T) => Promise<void>): Promise<void> {
  const queue = [...items]
  await Promise.all(Array.from({ length: Math.min(size, queue.length) }, async () => {
    for (let item = queue.shift(); item !== undefined; item = queue.shift()) await work(item)
  }))
}

/** At most `size` of the functions given run at once (one budget for the revisions a leg runs side by side). */
function limiter (size: number): <T>(work: () => Promise<T>) => Promise<T> {
  let running = 0
  const waiting: Array<() => void> = []
  return async (work) => {
    if (running >= size) await new Promise<void>((resolve) => { waiting.push(resolve) })
    else running++
    try {
      return await work()
    } finally {
      const next = waiting.shift()
      if (next !== undefined) next()
      else running--
    }
  }
}

async function serverRun (url: string, version: Version, out: string): Promise<Results> {
  const results: Results = new Map()
  await runSuite(['server', '--url', url, '--suite', 'all', '--spec-version', version, '--timeout', SERVER_SCENARIO_TIMEOUT_MS, '-o', out], {}, `${out}.log`)
  readResults(out, 'server', results)
  if (results.size === 0) throw new Error(`the suite wrote no checks for ${url} at ${version}; see ${out}.log`)
  await pool(EXTENSION_SCENARIOS[version], EXTENSION_PARALLEL, async (scenario) => {
    const dir = join(`${out}-extensions`, scenario)
    await runSuite(['server', '--url', url, '--scenario', scenario, '--spec-version', version, '--force', '--timeout', SERVER_SCENARIO_TIMEOUT_MS, '-o', dir], {}, `${dir}.log`)
    readResults(dir, 'server', results, scenario)
    if (!results.has(scenario)) results.set(scenario, [{ id: scenario, status: 'FAILURE', errorMessage: `no checks written; see ${dir}.log` }])
  })
  return results
}

async function clientRun (command: string, version: Version, out: string, env: Record<string, string>, slot: ReturnType<typeof limiter>): Promise<Results> {
  const results: Results = new Map()
  await Promise.all(CLIENT_SCENARIOS[version].map(async (scenario) => await slot(async () => {
    // One folder per scenario: auth/x is a folder x under auth/ (its log beside it).
    const dir = join(out, scenario)
    mkdirSync(dirname(dir), { recursive: true })
    await runSuite(['client', '--command', command, '--scenario', scenario, '--spec-version', version, '--timeout', CLIENT_SCENARIO_TIMEOUT_MS, '-o', dir], env, `${dir}.log`)
    readResults(dir, 'client', results, scenario)
    if (!results.has(scenario)) results.set(scenario, [{ id: scenario, status: 'FAILURE', errorMessage: `no checks written; see ${dir}.log` }])
  })))
  return results
}

// ---- baselines ----

interface Baseline { header: string[], entries: Map<string, string> }

/** CONFORMANCE_BASELINE_DIR: another directory of baselines (the harness's own test uses it). */
const baselinePath = (leg: Leg, version: Version): string =>
  join(process.env.CONFORMANCE_BASELINE_DIR ?? 'test/conformance', `expected-failures.${leg}.${version}.yaml`)
const roleOf = (leg: Leg): 'server' | 'client' => leg.endsWith('-server') ? 'server' : 'client'

/** Reads `- entry  # why` lines; the comment lines before the role key are the file's header. */
function readBaseline (path: string, role: 'server' | 'client'): Baseline {
  const baseline: Baseline = { header: [], entries: new Map() }
  if (!existsSync(path)) return baseline
  const source = readFileSync(path, 'utf8')
  const parsed = (parse(source) ?? {}) as Record<string, unknown>
  const listed = parsed[role] ?? []
  if (!Array.isArray(listed) || listed.some((e) => typeof e !== 'string')) throw new Error(`${path}: '${role}' must be a list of '<scenario>' or '<scenario>:<check-id>'`)
  let inHeader = true
  for (const line of source.split('\n')) {
    if (/^\w+:/.test(line)) inHeader = false
    if (inHeader && line.startsWith('#')) baseline.header.push(line)
    const m = /^\s*-\s*([^\s#]+)\s*(?:#\s*(.*))?$/.exec(line)
    if (m?.[1] !== undefined) baseline.entries.set(m[1], m[2] ?? '')
  }
  for (const entry of listed as string[]) if (!baseline.entries.has(entry)) baseline.entries.set(entry, '')
  return baseline
}

interface Verdict { passed: number, failed: number, expected: string[], unexpected: string[], stale: string[] }

/** The suite's baseline rules (its `--expected-failures`), over the results of one leg and revision. */
function judge (results: Results, entries: Set<string>): Verdict {
  const verdict: Verdict = { passed: 0, failed: 0, expected: [], unexpected: [], stale: [] }
  for (const [scenario, all] of results) {
    // The counts are the suite's own totals (every check reported); the verdict reads one check per id.
    verdict.passed += all.filter((c) => c.status === 'SUCCESS').length
    verdict.failed += all.filter(failing).length
    const checks = worstPerId(all)
    const bad = checks.filter(failing)
    if (entries.has(scenario)) {
      (bad.length > 0 ? verdict.expected : verdict.stale).push(scenario)
      continue
    }
    for (const c of bad) (entries.has(`${scenario}:${c.id}`) ? verdict.expected : verdict.unexpected).push(`${scenario}:${c.id}${c.errorMessage === undefined ? '' : ` (${c.errorMessage.slice(0, 160)})`}`)
    for (const c of checks) if (c.status === 'SUCCESS' && entries.has(`${scenario}:${c.id}`)) verdict.stale.push(`${scenario}:${c.id}`)
  }
  return verdict
}

/** The current failures as baseline entries: the scenario when all its checks fail, else each failing check. */
function currentFailures (results: Results): string[] {
  const out: string[] = []
  for (const [scenario, all] of [...results].sort(([a], [b]) => a.localeCompare(b))) {
    const checks = worstPerId(all)
    const bad = checks.filter(failing)
    if (bad.length === 0) continue
    if (bad.length === checks.length) out.push(scenario)
    else out.push(...bad.map((c) => `${scenario}:${c.id}`))
  }
  return out
}

function writeBaseline (path: string, leg: Leg, version: Version, old: Baseline, failures: string[]): void {
  const role = roleOf(leg)
  const why = (entry: string): string => {
    const scenario = entry.split(':')[0] ?? entry
    const sibling = [...old.entries].find(([e]) => e.split(':')[0] === scenario)
    return old.entries.get(entry) ?? old.entries.get(scenario) ?? sibling?.[1] ?? 'TODO: say why'
  }
  const header = old.header.length > 0
    ? old.header
    : [`# Expected failures of the ${leg} leg at ${version} (scripts/conformance.ts; \`npm run conformance -- ${leg} --update-baseline\` rewrites it).`,
        '# One entry per line, `<scenario>` or `<scenario>:<check-id>`, with the reason it fails today after the #.']
  const lines = failures.length === 0 ? [`${role}: []`] : [`${role}:`, ...failures.map((e) => `  - ${e}  # ${why(e) === '' ? 'TODO: say why' : why(e)}`)]
  writeFileSync(path, `${[...header, ...lines].join('\n')}\n`)
}

// ---- legs ----

interface Cleanup { after: (fn: () => unknown) => void, run: () => Promise<void> }
function cleanupScope (): Cleanup {
  const fns: Array<() => unknown> = []
  return { after: (fn) => { fns.push(fn) }, run: async () => { for (const fn of fns.reverse()) await fn() } }
}

interface Shared { fixtureUrl?: string, gatewayUrl?: string, slot: ReturnType<typeof limiter> }

async function runLeg (leg: Leg, version: Version, out: string, shared: Shared): Promise<Results> {
  switch (leg) {
    case 'control-server':
      return await serverRun(shared.fixtureUrl ?? '', version, out)
    case 'gateway-server':
      return await serverRun(`${shared.gatewayUrl ?? ''}/mcp?mcp=${GLOBAL_SERVER_ID}`, version, out)
    case 'control-client':
      return await clientRun(`${TSX} ${FIXTURES}/client.ts`, version, out, {}, shared.slot)
    case 'gateway-client':
      return await clientRun(`${TSX} ${FIXTURES}/gateway-client.ts`, version, out, { GATEWAY_URL: shared.gatewayUrl ?? '' }, shared.slot)
  }
}

async function main (): Promise<number> {
  const args = process.argv.slice(2)
  const update = args.includes('--update-baseline')
  const keep = args.includes('--keep')
  const options = ['--update-baseline', '--keep']
  const unknown = args.filter((a) => !options.includes(a) && !(LEGS as readonly string[]).includes(a))
  if (unknown.length > 0) {
    console.error(`unknown argument(s) ${unknown.join(' ')}; usage: npm run conformance -- [${LEGS.join('|')} ...] [--update-baseline] [--keep]`)
    return 2
  }
  if (Number(process.versions.node.split('.')[0]) < 22) {
    console.error(`the conformance suite needs Node >= 22 (this is ${process.version})`)
    return 2
  }
  const legs = LEGS.filter((l) => args.includes(l) || args.every((a) => options.includes(a)))
  ensureSuite()
  const root = mkdtempSync(join(tmpdir(), 'mcp-conformance-'))
  console.log(`conformance checks under ${root}`)
  let bad = false
  for (const leg of legs) {
    const scope = cleanupScope()
    const started = performance.now()
    try {
      const shared: Shared = { slot: limiter(CLIENT_PARALLEL) }
      if (leg.endsWith('-server')) {
        const fixture = await startConformanceServer()
        scope.after(async () => { await fixture.close() })
        shared.fixtureUrl = fixture.url
      }
      if (leg.startsWith('gateway-')) {
        const env: Record<string, string> = { LOAD_EXAMPLES: 'false' }
        if (shared.fixtureUrl !== undefined) {
          const file = join(root, 'mcp-servers.json')
          writeFileSync(file, JSON.stringify({ mcpServers: { [GLOBAL_SERVER_ID]: { type: 'streamable_http', url: shared.fixtureUrl } } }))
          env.MCP_SERVERS_FILE = file
        } else {
          env.EGRESS_ALLOW = '127.0.0.1,localhost,::1'
          // The auth/* scenarios: the gateway's OAuth needs its public URL (the redirect URI is
          // ${PUBLIC_URL}/oauth/callback). An https name, as behind the TLS proxy of a deployment:
          // the adapter plays the user's browser and takes the authorization server's redirect to the
          // gateway's loopback address, as that proxy would. The client ID metadata document URL is
          // the one the suite's authorization servers expect (auth/basic-cimd); the gateway serves
          // its own at ${PUBLIC_URL}/oauth/client-metadata.json, which nothing here can fetch.
          env.PUBLIC_URL = 'https://gateway.conformance.test'
          env.OAUTH_CLIENT_METADATA_URL = 'https://conformance-test.local/client-metadata.json'
        }
        const gateway = await startGateway(scope, env)
        scope.after(async () => { await gateway.stop() })
        shared.gatewayUrl = gateway.url
        if (leg === 'gateway-server') {
          const proxy = await queryProxy(gateway.url, `mcp=${GLOBAL_SERVER_ID}`)
          scope.after(proxy.close)
          shared.gatewayUrl = proxy.url
        }
      }
      const runs = await Promise.all(ROLE_VERSIONS[roleOf(leg)].map(async (version) => {
        const t0 = performance.now()
        const results = await runLeg(leg, version, join(root, leg, version), shared)
        return { version, results, seconds: (performance.now() - t0) / 1000 }
      }))
      for (const { version, results, seconds } of runs) {
        const path = baselinePath(leg, version)
        const baseline = readBaseline(path, roleOf(leg))
        if (update) writeBaseline(path, leg, version, baseline, currentFailures(results))
        const verdict = judge(results, update ? new Set(currentFailures(results)) : new Set(baseline.entries.keys()))
        const ok = verdict.unexpected.length === 0 && verdict.stale.length === 0
        bad ||= !ok
        console.log(`${ok ? 'ok  ' : 'FAIL'} ${leg} ${version}: ${verdict.passed} passed, ${verdict.failed} failed (${verdict.expected.length} baseline entries hit), ` +
          `${results.size} scenarios, ${seconds.toFixed(1)} s${update ? `, baseline rewritten: ${path}` : ''}`)
        for (const e of verdict.unexpected) console.log(`       new failure: ${e}`)
        for (const e of verdict.stale) console.log(`       stale baseline entry (passes now, delete it from ${path}): ${e}`)
      }
    } catch (err) {
      bad = true
      console.log(`FAIL ${leg}: ${err instanceof Error ? err.stack ?? err.message : String(err)}`)
    } finally {
      await scope.run()
      console.log(`     ${leg}: ${((performance.now() - started) / 1000).toFixed(1)} s wall`)
    }
  }
  // The checks stay for a failed run (or with --keep); a passing one leaves nothing behind.
  if (bad || keep) console.log(`checks and the suite's output per scenario: ${root}`)
  else rmSync(root, { recursive: true, force: true })
  return bad ? 1 : 0
}

process.exitCode = await main()
