/* eslint-disable no-template-curly-in-string -- the strings hold Compose's ${VAR} syntax, not templates */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { existsSync, readFileSync, statSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import picomatch from 'picomatch'
import { parse } from 'yaml'
import { ConfigSchema, loadConfig } from '../../src/config.js'

// There is no Docker engine on the CI machines: these tests lint the files instead of running them.
// The compose lint does what `docker compose config` would (interpolation, references between
// services, volumes, profiles) plus what only this project knows (config variable names, the
// cluster's instances and its nginx proxy). Its checks are functions returning problems, so the
// last test can break the real files one way at a time and see each check fail.

/** The Node major the image runs and .ci/run tests on (README "Two commands": 22 and 24 supported, 24 recommended). */
const RECOMMENDED_NODE = 24
/**
 * What the runtime image installs: the sandbox and the gateway's own needs (util-linux: prlimit,
 * setpriv; mount: mount, losetup; e2fsprogs: mkfs.ext4 for loop-mounted quotas), and what a coding
 * agent's bash expects (the sandbox binds the image's /usr). README "Docker" lists the same.
 */
const RUNTIME_PACKAGES = [
  'bubblewrap', 'util-linux', 'mount', 'e2fsprogs', 'procps', 'ripgrep', 'ca-certificates', 'python3', 'git', 'curl',
  'make', 'jq', 'unzip', 'xz-utils'
]

test('Dockerfile: multi-stage, slim Debian Node 24, the sandbox and a coding toolset, non-root, no examples, CMD node, volume, healthcheck', async () => {
  const text = await readFile('Dockerfile', 'utf8')
  const froms = [...text.matchAll(/^FROM\s+(\S+)(?:\s+AS\s+(\S+))?/gim)]
  assert.ok(froms.length >= 2, 'at least two stages')
  for (const [, image] of froms) assert.match(image ?? '', new RegExp(`^node:${RECOMMENDED_NODE}-bookworm-slim$`))
  const lastStage = text.split(/^FROM /m).at(-1) ?? ''
  const installed = [...lastStage.replace(/\\\n/g, ' ').matchAll(/apt-get install ([^&\n]*)/g)].flatMap((m) => (m[1] ?? '').split(/\s+/)).filter((w) => w !== '' && !w.startsWith('-'))
  assert.deepEqual(RUNTIME_PACKAGES.filter((p) => !installed.includes(p)), [], `the runtime stage installs ${installed.join(' ')}`)
  const readme = await readFile('README.md', 'utf8')
  const docker = readme.slice(readme.indexOf('\n## Docker'), readme.indexOf('\n## ', readme.indexOf('\n## Docker') + 1))
  assert.deepEqual(RUNTIME_PACKAGES.filter((p) => !docker.includes(`\`${p}\``)), [], 'README "Docker" names every package the image installs')
  // Example tools are for `npm start`: off in the image unless asked for.
  const { files } = await realFiles()
  assert.equal(files.imageEnv.LOAD_EXAMPLES, 'false')
  assert.equal(loadConfig(files.imageEnv).loadExamples, false)
  assert.match(text, /COPY --from=build/)
  const users = [...text.matchAll(/^USER\s+(\S+)/gm)].map((m) => m[1])
  assert.ok(users.length > 0 && users.at(-1) !== 'root', 'the runtime stage runs as a non-root user')
  assert.match(text, /^CMD \["node", "dist\/src\/server\.js"\]$/m)
  assert.match(text, /^VOLUME /m)
  assert.match(text, /^HEALTHCHECK /m)
  assert.doesNotMatch(text, /npm start/)
  // the runtime copies the built server the CMD names
  assert.match(text, /npm run build/)
})

test('.dockerignore keeps dependencies, data, builds, logs and secrets out of the build context, and nothing the Dockerfile copies', async () => {
  assert.ok(existsSync('.dockerignore'), 'docker build . would send node_modules, data/ and .git')
  const rules = readFileSync('.dockerignore', 'utf8').split('\n').map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#'))
  const mustIgnore = ['node_modules/fastify/package.json', '.git/HEAD', 'data/workspaces/alice/default/a.txt', 'dist/src/server.js',
    'console/dist/index.html', 'npm-debug.log', 'gateway.log', 'bench/results/run.json', 'coverage/lcov.info', '.env', '.env.production',
    'test/unit/config.test.ts']
  assert.deepEqual(mustIgnore.filter((p) => !dockerIgnored(rules, p)), [])
  const { copies } = await realFiles()
  const sources = copies.filter((c) => c.from === undefined).flatMap((c) => c.sources)
  assert.ok(sources.includes('src') && sources.includes('package-lock.json'), JSON.stringify(sources))
  // Every tracked file under a source the build copies reaches the builder.
  const tracked = execFileSync('git', ['ls-files', '-z', '--', ...sources], { encoding: 'utf8' }).split('\0').filter(Boolean)
  assert.ok(tracked.length > 100, `${tracked.length} tracked files under ${sources.join(' ')}`)
  assert.deepEqual(tracked.filter((p) => dockerIgnored(rules, p)), [])
  for (const source of sources) assert.ok(existsSync(source), source)
})

test('docker-compose.yml: gateway + redis with healthcheck, depends_on condition, init, sandbox options', async () => {
  const compose = loadCompose(await readFile('docker-compose.yml', 'utf8'))
  const gateway = compose.services.gateway
  const redis = compose.services.redis
  assert.ok(gateway && redis)
  assert.equal(gateway.init, true)
  assert.equal(gateway.depends_on.redis.condition, 'service_healthy')
  assert.ok(redis.healthcheck.test.includes('ping'))
  assert.match(gateway.environment.REDIS_URL, /^redis:\/\/redis:6379/)
  assert.ok(gateway.security_opt.includes('seccomp=unconfined'))
  assert.ok(gateway.volumes.some((v: string) => v.endsWith(':/data/workspaces')))
  assert.ok('workspaces' in compose.volumes)
  // Redis holds the registry with its secrets, policies, approvals and the journal: it keeps them.
  assert.deepEqual(redisProblems(compose), [])
})

test('docker-compose.yml and deploy/nginx/cluster.conf pass the compose, cluster and proxy lint', async () => {
  const { compose, files } = await realFiles()
  const problems = lint(compose, files)
  assert.deepEqual(problems, [])
  // What the lint looked at, so a vacuous pass (no cluster services found) shows up here.
  const cluster = enabledServices(compose, ['cluster'])
  assert.deepEqual(enabledServices(compose, []), ['gateway', 'redis'])
  assert.deepEqual(cluster, ['cluster-proxy', 'gateway', 'gateway-1', 'gateway-2', 'gateway-3', 'redis'])
  assert.deepEqual(enabledServices(compose, ['isolated']), ['gateway', 'gateway-isolated', 'redis'])
})

test('each lint check fails on a file broken its way', async () => {
  const mutations: Array<[RegExp, (c: any, f: Files) => void]> = [
    [/top-level key "servces"/, (c) => { c.servces = {} }],
    [/gateway-2: neither image nor build/, (c) => { delete c.services['gateway-2'].build; delete c.services['gateway-2'].image }],
    [/gateway-1: build context .* has no Dockerfile/, (c) => { c.services['gateway-1'].build = 'deploy' }],
    [/redis: image "redis" has no pinned tag/, (c) => { c.services.redis.image = 'redis' }],
    [/cluster-proxy: depends on unknown service "gateway-4"/, (c) => { c.services['cluster-proxy'].depends_on['gateway-4'] = { condition: 'service_started' } }],
    [/gateway: depends on "gateway-1", which its profiles do not enable/, (c) => { c.services.gateway.depends_on['gateway-1'] = { condition: 'service_started' } }],
    [/cluster-proxy: waits for gateway-3 to be healthy, which has no healthcheck/, (c) => { c.services['gateway-3'].healthcheck = { disable: true } }],
    [/redis: healthcheck test/, (c) => { c.services.redis.healthcheck.test = ['redis-cli', 'ping'] }],
    [/redis: healthcheck interval/, (c) => { c.services.redis.healthcheck.interval = '5 seconds' }],
    [/gateway-3: named volume "cluster-workspace" is not declared/, (c) => { c.services['gateway-3'].volumes = ['cluster-workspace:/data/workspaces'] }],
    [/cluster-proxy: bind source .* does not exist/, (c) => { c.services['cluster-proxy'].volumes = ['./deploy/nginx/missing.conf:/etc/nginx/conf.d/default.conf:ro'] }],
    [/gateway: port "8080:808080"/, (c) => { c.services.gateway.ports = ['8080:808080'] }],
    [/host port 8080 is published by both/, (c) => { c.services['cluster-proxy'].ports = ['8080:80'] }],
    [/gateway-1: environment variable SANDBOX_MODE is not a config variable/, (c) => { c.services['gateway-1'].environment.SANDBOX_MODE = 'bwrap' }],
    [/gateway-2: its environment does not load: [\s\S]*INSTANCE_URL/, (c) => { c.services['gateway-2'].environment.INSTANCE_URL = 'gateway-2:8080' }],
    [/docker compose up needs more than API_KEYS, SECRETS_KEY and CLUSTER_SECRET \(required variable PROXY_TOKEN/, (c) => { c.services['gateway-1'].environment.INSTANCE_URL = '${PROXY_TOKEN:?set it}' }],
    [/gateway: Redis and API keys without CLUSTER_SECRET: the gateway would not start/, (c) => { c.services.gateway.environment.CLUSTER_SECRET = '${CLUSTER_SECRET_UNSET:-}' }],
    [/gateway: WORKSPACES_DIR \/data\/workspaces is not a volume/, (c) => { c.services.gateway.volumes = [] }],
    [/without a profile: gateway, redis, gateway-3 \(expected gateway, redis\)/, (c) => { delete c.services['gateway-3'].profiles }],
    [/cluster: 2 gateway instances/, (c) => { delete c.services['gateway-3']; delete c.services['cluster-proxy'].depends_on['gateway-3'] }],
    [/gateway-2: INSTANCE_URL http:\/\/gateway-1:8080 is not http:\/\/gateway-2:8080/, (c) => { c.services['gateway-2'].environment.INSTANCE_URL = 'http://gateway-1:8080' }],
    [/gateway-3: CLUSTER_SECRET differs from gateway-1's/, (c) => { c.services['gateway-3'].environment.CLUSTER_SECRET = '${OTHER_SECRET:-}' }],
    [/gateway-2: API_KEYS differs from gateway-1's/, (c) => { c.services['gateway-2'].environment.API_KEYS = '${API_KEYS_2:-k:*}' }],
    [/gateway-1: REDIS_URL differs from gateway-1's|gateway-3: REDIS_URL differs/, (c) => { c.services['gateway-3'].environment.REDIS_URL = 'redis://redis:6379/1' }],
    [/gateway-2: WORKSPACES_DIR is not on the volume the other instances share/, (c) => { c.services['gateway-2'].volumes = ['workspaces:/data/workspaces'] }],
    [/gateway-3: not the same build and image/, (c) => { c.services['gateway-3'].image = 'tool-gateway:other' }],
    [/gateway-1: security_opt lacks seccomp=unconfined/, (c) => { c.services['gateway-1'].security_opt = ['apparmor=unconfined'] }],
    [/gateway-2: not init: true/, (c) => { c.services['gateway-2'].init = false }],
    [/gateway-1: publishes ports/, (c) => { c.services['gateway-1'].ports = ['8082:8080'] }],
    [/gateway-3: does not wait for a healthy redis/, (c) => { delete c.services['gateway-3'].depends_on }],
    [/cluster: no nginx:1\.27-alpine proxy/, (c) => { c.services['cluster-proxy'].image = 'nginx:latest' }],
    [/cluster-proxy: no healthcheck/, (c) => { delete c.services['cluster-proxy'].healthcheck }],
    [/cluster-proxy: does not wait for a healthy gateway-2/, (c) => { delete c.services['cluster-proxy'].depends_on['gateway-2'] }],
    [/cluster-proxy: mounts no config from deploy\/nginx\/cluster\.conf/, (c) => { c.services['cluster-proxy'].volumes = ['./Dockerfile:/etc/nginx/conf.d/default.conf:ro'] }],
    [/cluster-proxy: publishes container port 8080, nginx listens on 80/, (c) => { c.services['cluster-proxy'].ports = ['8081:8080'] }],
    [/nginx: upstream servers gateway-1:8080, gateway-2:8080 are not/, (c, f) => { f.nginx = f.nginx.replace(/^\s*server gateway-3:8080[^\n]*\n/m, '') }],
    [/nginx: upstream servers .*gateway-3:9090/, (c, f) => { f.nginx = f.nginx.replace('gateway-3:8080', 'gateway-3:9090') }],
    [/nginx: upstream gateway_cluster is not round robin \(ip_hash\)/, (c, f) => { f.nginx = f.nginx.replace('keepalive 32;', 'keepalive 32;\n    ip_hash;') }],
    [/nginx: location \/ does not proxy_pass to the upstream/, (c, f) => { f.nginx = f.nginx.replace(/(location \/ \{\s*proxy_pass )http:\/\/gateway_cluster/, '$1http://gateway-1:8080') }],
    [/nginx: client_max_body_size of \/invoke is 1048576, BODY_LIMIT_BYTES is 2097152/, (c, f) => { f.nginx = f.nginx.replace('client_max_body_size 2m;', 'client_max_body_size 1m;') }],
    [/nginx: client_max_body_size of \/invoke is 1048576/, (c, f) => { f.nginx = f.nginx.replace(/^\s*client_max_body_size 2m;\n/m, '') }],
    [/nginx: \/users\/alice\/workspaces\/proj .*upload.*client_max_body_size/, (c, f) => { f.nginx = f.nginx.replace('client_max_body_size 1g;', 'client_max_body_size 10m;') }],
    [/nginx: \/users\/alice\/workspaces\/proj .*proxy_request_buffering/, (c, f) => { f.nginx = f.nginx.replace('proxy_request_buffering off;', '') }],
    [/nginx: \/mcp has proxy_buffering on/, (c, f) => { f.nginx = f.nginx.replace('proxy_buffering off;', 'proxy_buffering on;') }],
    [/nginx: \/mcp read timeout 60 s/, (c, f) => { f.nginx = f.nginx.replace('proxy_read_timeout 3600s;', 'proxy_read_timeout 60s;') }],
    [/nginx: \/invoke read timeout 60 s is not above INVOKE_TIMEOUT_MS/, (c, f) => { f.nginx = f.nginx.replace('proxy_read_timeout 700s;', '') }],
    [/nginx: \/invoke does not set X-Forwarded-For/, (c, f) => { f.nginx = f.nginx.replace(/^\s*proxy_set_header X-Forwarded-For[^\n]*\n/m, '') }],
    [/nginx: \/mcp does not set X-Forwarded-For/, (c, f) => { f.nginx = f.nginx.replace('proxy_cache off;', 'proxy_cache off;\n        proxy_set_header Host $host;') }],
    [/nginx: unbalanced braces/, (c, f) => { f.nginx = f.nginx.replace(/\}\s*$/, '') }],
    [/redis: appendonly is not yes/, (c) => { c.services.redis.command = ['redis-server', '--save', '', '--appendonly', 'no'] }],
    [/redis: appendonly is not yes/, (c) => { delete c.services.redis.command }],
    [/redis: appendfsync no/, (c) => { c.services.redis.command = ['redis-server', '--appendonly', 'yes', '--appendfsync', 'no'] }],
    [/redis: \/data is not on a named volume/, (c) => { delete c.services.redis.volumes }],
    [/redis: \/data is not on a named volume/, (c) => { c.services.redis.volumes = ['/tmp/redis:/data'] }],
    [/isolated: 0 gateway services/, (c) => { delete c.services['gateway-isolated'] }],
    [/gateway-isolated: runs as 1000, not root/, (c) => { c.services['gateway-isolated'].user = '1000' }],
    [/gateway-isolated: runs as the image's user, not root/, (c) => { delete c.services['gateway-isolated'].user }],
    [/gateway-isolated: privileged/, (c) => { c.services['gateway-isolated'].privileged = true }],
    [/gateway-isolated: cap_add ALL/, (c) => { c.services['gateway-isolated'].cap_add = ['ALL'] }],
    [/gateway-isolated: cap_add lacks SYS_ADMIN/, (c) => { c.services['gateway-isolated'].cap_add = ['NET_ADMIN'] }],
    [/gateway-isolated: security_opt lacks seccomp=unconfined/, (c) => { c.services['gateway-isolated'].security_opt = ['apparmor=unconfined'] }],
    [/gateway-isolated: no private cgroup namespace/, (c) => { delete c.services['gateway-isolated'].cgroup }],
    [/gateway-isolated: no \/dev\/loop-control/, (c) => { c.services['gateway-isolated'].devices = [] }],
    [/gateway-isolated: device_cgroup_rules do not allow the loop devices/, (c) => { c.services['gateway-isolated'].device_cgroup_rules = ['c 10:237 rmw'] }],
    [/gateway-isolated: entrypoint \/usr\/local\/bin\/nope is not an executable the image copies/, (c) => { c.services['gateway-isolated'].entrypoint = ['/usr/local/bin/nope'] }],
    [/gateway-isolated: command .* is not the image's CMD/, (c) => { delete c.services['gateway-isolated'].command }],
    [/gateway-isolated: shares the workspaces volume with gateway/, (c) => { c.services['gateway-isolated'].volumes = ['workspaces:/data/workspaces'] }],
    [/gateway-isolated: REDIS_KEY_PREFIX is gateway's/, (c) => { delete c.services['gateway-isolated'].environment.REDIS_KEY_PREFIX }],
    [/gateway-isolated: not init: true/, (c) => { delete c.services['gateway-isolated'].init }],
    [/host port 8080 is published by both gateway and gateway-isolated/, (c) => { c.services['gateway-isolated'].ports = ['8080:8080'] }],
    [/gateway-isolated: entrypoint .* is not an executable the image copies/, (c, f) => { f.copies = f.copies.filter((x) => !x.dest.includes('isolated')) }]
  ]
  const missed: string[] = []
  for (const [expected, mutate] of mutations) {
    const { compose, files } = await realFiles()
    mutate(compose, files)
    const problems = lint(compose, files)
    if (!problems.some((p) => expected.test(p))) missed.push(`${expected}: got ${JSON.stringify(problems)}`)
  }
  assert.deepEqual(missed, [])
})

test('the compose interpolation reads ${VAR}, ${VAR:-default}, ${VAR:?error} and $$ as Compose does', () => {
  assert.equal(interpolate('a${X}b$${Y}$Z', { X: '1', Z: '3' }), 'a1b${Y}3')
  assert.equal(interpolate('${X:-d}', {}), 'd')
  assert.equal(interpolate('${X:-d}', { X: '' }), 'd')
  assert.equal(interpolate('${X-d}', { X: '' }), '')
  assert.throws(() => interpolate('${X:?set X, e.g. $(openssl rand -base64 32)}', {}), /set X, e\.g\. \$\(openssl/)
  assert.throws(() => interpolate('${X?}', {}), /X/)
  assert.equal(interpolate('${X?}', { X: '' }), '')
})

// ---------------------------------------------------------------------------------------------

interface Files {
  /** deploy/nginx/cluster.conf as read (a mutation may change it). */
  nginx: string
  /** The Dockerfile's ENV of its last stage: PORT, WORKSPACES_DIR. */
  imageEnv: Record<string, string>
  dockerfileHealthcheck: boolean
  /** The last stage's CMD (exec form). */
  dockerfileCmd: string[]
  /** The Dockerfile's COPY instructions, each stage's. */
  copies: DockerCopy[]
}

interface DockerCopy { from: string | undefined, chmod: string | undefined, sources: string[], dest: string, lastStage: boolean }

/**
 * Whether `docker build` leaves `path` (relative to the context) out: the last rule of
 * .dockerignore that matches the path or one of its parent directories decides, `!` re-includes
 * (moby's patternmatcher; `*` stops at `/`, `**` crosses directories).
 */
function dockerIgnored (rules: readonly string[], path: string): boolean {
  const parts = path.split('/')
  let ignored = false
  for (const rule of rules) {
    const negate = rule.startsWith('!')
    const re = picomatch.makeRe((negate ? rule.slice(1) : rule).replace(/^\/+|\/+$/g, ''), { dot: true })
    if (parts.some((_, i) => re.test(parts.slice(0, i + 1).join('/')))) ignored = !negate
  }
  return ignored
}

function dockerfileCopies (dockerfile: string): DockerCopy[] {
  const stages = dockerfile.replace(/\\\n/g, ' ').split(/^FROM /m).slice(1)
  return stages.flatMap((stage, i) => [...stage.matchAll(/^COPY\s+(.*)$/gm)].map((m): DockerCopy => {
    const words = (m[1] ?? '').trim().split(/\s+/)
    const flags = words.filter((w) => w.startsWith('--'))
    const paths = words.filter((w) => !w.startsWith('--'))
    const flag = (name: string): string | undefined => flags.find((f) => f.startsWith(`--${name}=`))?.slice(name.length + 3)
    return { from: flag('from'), chmod: flag('chmod'), sources: paths.slice(0, -1).map((p) => p.replace(/^\.\//, '').replace(/\/$/, '')), dest: paths.at(-1) ?? '', lastStage: i === stages.length - 1 }
  }))
}

const CLUSTER_INSTANCES = ['gateway-1', 'gateway-2', 'gateway-3']
const PROXY_CONF = 'deploy/nginx/cluster.conf'
/**
 * What `docker compose up` needs, and all it may need: with Redis and API keys the gateway
 * requires CLUSTER_SECRET (createCluster, src/cluster/index.ts), so the default gateway needs it too.
 */
const DEFAULT_ENV = {
  API_KEYS: 'k-admin-0123456789:*',
  SECRETS_KEY: Buffer.alloc(32, 7).toString('base64'),
  CLUSTER_SECRET: 'a-cluster-secret-of-32-characters'
}
/** The cluster profile needs nothing more. */
const CLUSTER_ENV = DEFAULT_ENV
const CONFIG_ENV_NAMES = new Set(Object.values(ConfigSchema.properties).map((s) => (s as unknown as { env: string }).env))
const configDefault = (env: string): number => {
  const s = Object.values(ConfigSchema.properties).find((p) => (p as unknown as { env: string }).env === env) as unknown as { default: number }
  return s.default
}

/** Compose files may use YAML merge keys (`<<: *anchor`), as Compose reads them. */
function loadCompose (text: string): any {
  return parse(text, { merge: true })
}

async function realFiles (): Promise<{ compose: any, files: Files, copies: DockerCopy[] }> {
  const compose = loadCompose(await readFile('docker-compose.yml', 'utf8'))
  const dockerfile = await readFile('Dockerfile', 'utf8')
  const lastStage = dockerfile.split(/^FROM /m).at(-1) ?? ''
  const imageEnv: Record<string, string> = {}
  for (const m of lastStage.replace(/\\\n/g, ' ').matchAll(/^ENV\s+(.*)$/gm)) {
    for (const pair of (m[1] ?? '').trim().split(/\s+/)) {
      const eq = pair.indexOf('=')
      if (eq > 0) imageEnv[pair.slice(0, eq)] = pair.slice(eq + 1)
    }
  }
  const cmd = /^CMD\s+(\[.*\])\s*$/m.exec(lastStage)?.[1]
  return {
    compose,
    copies: dockerfileCopies(dockerfile),
    files: {
      nginx: existsSync(PROXY_CONF) ? await readFile(PROXY_CONF, 'utf8') : '',
      imageEnv,
      dockerfileHealthcheck: /^HEALTHCHECK\s+(?!NONE)/m.test(lastStage),
      dockerfileCmd: cmd !== undefined ? JSON.parse(cmd) : [],
      copies: dockerfileCopies(dockerfile)
    }
  }
}

/** Compose's variable substitution: `$$` is a literal `$`; a `:?`/`?` variable that is missing throws its message. */
function interpolate (text: string, env: Record<string, string>): string {
  return text.replace(/\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)/g, (whole, name?: string, op?: string, arg?: string, bare?: string) => {
    if (whole === '$$') return '$'
    if (bare !== undefined) return env[bare] ?? ''
    const value = env[name ?? '']
    const missing = op?.startsWith(':') === true ? value === undefined || value === '' : value === undefined
    if (op === undefined) return value ?? ''
    if (!missing) return value ?? ''
    if (op.endsWith('-')) return arg ?? ''
    throw new Error(`required variable ${name ?? ''} is missing a value: ${arg ?? ''}`)
  })
}

function interpolateAll (value: unknown, env: Record<string, string>): unknown {
  if (typeof value === 'string') return interpolate(value, env)
  if (Array.isArray(value)) return value.map((v) => interpolateAll(v, env))
  if (value !== null && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, interpolateAll(v, env)]))
  return value
}

function profilesOf (service: any): string[] {
  return Array.isArray(service?.profiles) ? service.profiles : []
}

/** The services `docker compose --profile p ... up` starts: those without profiles, and those with one of `profiles`. */
function enabledServices (compose: any, profiles: string[]): string[] {
  return Object.entries<any>(compose.services ?? {})
    .filter(([, s]) => profilesOf(s).length === 0 || profilesOf(s).some((p) => profiles.includes(p)))
    .map(([name]) => name)
    .sort()
}

function environmentOf (service: any): Record<string, string> {
  const env = service?.environment
  if (Array.isArray(env)) {
    return Object.fromEntries(env.map((e: string) => {
      const eq = e.indexOf('=')
      return eq < 0 ? [e, ''] : [e.slice(0, eq), e.slice(eq + 1)]
    }))
  }
  return Object.fromEntries(Object.entries(env ?? {}).map(([k, v]) => [k, v === null ? '' : String(v)]))
}

interface Mount { source: string, target: string, bind: boolean }

function mountsOf (service: any): Mount[] {
  return (Array.isArray(service?.volumes) ? service.volumes : []).map((v: any): Mount => {
    if (typeof v === 'object' && v !== null) return { source: String(v.source ?? ''), target: String(v.target ?? ''), bind: v.type === 'bind' }
    const [source = '', target = ''] = String(v).split(':')
    return target === '' ? { source: '', target: source, bind: false } : { source, target, bind: source.startsWith('.') || source.startsWith('/') }
  })
}

/** A project image: built here, so its environment is read by src/config.ts. */
function isGateway (service: any): boolean {
  return service?.build !== undefined
}

function hasHealthcheck (service: any, files: Files): boolean {
  const hc = service?.healthcheck
  if (hc?.disable === true || (Array.isArray(hc?.test) && hc.test[0] === 'NONE')) return false
  return hc?.test !== undefined || (isGateway(service) && files.dockerfileHealthcheck)
}

function lint (compose: any, files: Files): string[] {
  return [
    ...composeProblems(compose, files),
    ...redisProblems(compose),
    ...isolatedProblems(compose, files),
    ...clusterProblems(compose, files),
    ...nginxProblems(compose, files)
  ]
}

/** The value after `--flag` in redis-server's command line (the image's default when absent). */
function redisOption (service: any, flag: string): string | undefined {
  const command: string[] = Array.isArray(service?.command) ? service.command.map(String) : String(service?.command ?? '').split(/\s+/)
  const i = command.lastIndexOf(`--${flag}`)
  return i < 0 ? undefined : command[i + 1]
}

/**
 * The `redis` service keeps what the gateway stores in it (README "Docker": what is durable
 * where): an append-only file, fsynced at least every second, on a named volume.
 */
function redisProblems (compose: any): string[] {
  const redis = compose.services?.redis
  const problems: string[] = []
  if (redis === undefined) return ['redis: no redis service']
  if (redisOption(redis, 'appendonly') !== 'yes') {
    problems.push('redis: appendonly is not yes: a restart loses the registry with its secrets, policies, approvals and the journal')
  }
  const fsync = redisOption(redis, 'appendfsync') ?? 'everysec'
  if (!['everysec', 'always'].includes(fsync)) problems.push(`redis: appendfsync ${fsync}: a crash may lose more than the last second`)
  const data = mountsOf(redis).find((m) => m.target === (redisOption(redis, 'dir') ?? '/data'))
  if (data === undefined || data.bind || !(data.source in (compose.volumes ?? {}))) {
    problems.push('redis: /data is not on a named volume: the append-only file goes with the container')
  }
  return problems
}

/**
 * The `isolated` profile: one gateway as root with the isolation it has on a host (a uid and a
 * cgroup per tenant, loop-mounted workspaces), given the capabilities and devices that needs and
 * never `privileged`, beside the default non-root gateway without sharing its workspaces or keys.
 */
function isolatedProblems (compose: any, files: Files): string[] {
  const services: Record<string, any> = compose.services ?? {}
  const names = Object.keys(services).filter((n) => isGateway(services[n]) && profilesOf(services[n]).includes('isolated'))
  if (names.length !== 1) return [`isolated: ${names.length} gateway services in the profile, expected one`]
  const name = names[0] ?? ''
  const s = services[name]
  const problems: string[] = []
  const user = s.user === undefined ? undefined : String(s.user)
  if (user === undefined) problems.push(`${name}: runs as the image's user, not root: no uid or cgroup per tenant`)
  else if (!['0', '0:0', 'root', 'root:root'].includes(user)) problems.push(`${name}: runs as ${user}, not root: no uid or cgroup per tenant`)
  if (s.privileged === true) problems.push(`${name}: privileged: it needs CAP_SYS_ADMIN, its cgroup namespace and the loop devices, not every device and capability`)
  const caps: string[] = (s.cap_add ?? []).map((c: string) => String(c).replace(/^CAP_/, ''))
  if (caps.includes('ALL')) problems.push(`${name}: cap_add ALL: it needs SYS_ADMIN only`)
  else if (!caps.includes('SYS_ADMIN')) problems.push(`${name}: cap_add lacks SYS_ADMIN (cgroupfs read-write, loop mounts)`)
  for (const opt of ['seccomp=unconfined', 'apparmor=unconfined']) {
    if (!(s.security_opt ?? []).includes(opt)) problems.push(`${name}: security_opt lacks ${opt} (bubblewrap's namespaces, the entrypoint's mounts)`)
  }
  if (s.cgroup !== 'private') problems.push(`${name}: no private cgroup namespace (cgroup: private): its cgroups would be made in the host's hierarchy`)
  if (!(s.devices ?? []).some((d: string) => String(d).split(':')[0] === '/dev/loop-control')) problems.push(`${name}: no /dev/loop-control device: no loop-mounted workspaces`)
  if (!(s.device_cgroup_rules ?? []).some((r: string) => /^b 7:\* [rwm]*r[rwm]*$/.test(String(r)) && String(r).includes('w'))) problems.push(`${name}: device_cgroup_rules do not allow the loop devices (b 7:* rw)`)
  const entrypoint = Array.isArray(s.entrypoint) ? s.entrypoint[0] : undefined
  if (entrypoint !== undefined) {
    const copy = files.copies.find((c) => c.lastStage && c.from === undefined && c.dest === entrypoint)
    const source = copy?.sources[0]
    const executable = source !== undefined && existsSync(source) && ((statSync(source).mode & 0o111) !== 0 || copy?.chmod === '0755')
    if (!executable) problems.push(`${name}: entrypoint ${entrypoint} is not an executable the image copies`)
    // A service's entrypoint replaces the image's and drops its CMD.
    if (JSON.stringify(s.command) !== JSON.stringify(files.dockerfileCmd)) problems.push(`${name}: command ${JSON.stringify(s.command)} is not the image's CMD ${JSON.stringify(files.dockerfileCmd)} (an entrypoint drops it)`)
  }
  if (s.init !== true) problems.push(`${name}: not init: true`)
  const gateway = services.gateway
  const volumeOf = (x: any): string | undefined =>
    mountsOf(x).find((m) => m.target === (environmentOf(x).WORKSPACES_DIR ?? files.imageEnv.WORKSPACES_DIR))?.source
  if (gateway !== undefined && volumeOf(s) === volumeOf(gateway)) problems.push(`${name}: shares the workspaces volume with gateway, whose workspaces belong to another uid`)
  if (gateway !== undefined && (environmentOf(s).REDIS_KEY_PREFIX ?? '') === (environmentOf(gateway).REDIS_KEY_PREFIX ?? '')) problems.push(`${name}: REDIS_KEY_PREFIX is gateway's: one registry for two sandboxes with other uids and workspaces`)
  return problems
}

/** What `docker compose config` would refuse, and what this project's services must get right. */
function composeProblems (compose: any, files: Files): string[] {
  const problems: string[] = []
  for (const key of Object.keys(compose)) {
    if (!['services', 'volumes', 'networks', 'configs', 'secrets', 'name'].includes(key) && !key.startsWith('x-')) problems.push(`top-level key "${key}" is not a Compose key`)
  }
  const services: Record<string, any> = compose.services ?? {}
  for (const [name, s] of Object.entries(services)) {
    if (s.image === undefined && s.build === undefined) problems.push(`${name}: neither image nor build`)
    if (s.build !== undefined) {
      const context = typeof s.build === 'string' ? s.build : s.build.context ?? '.'
      const dockerfile = typeof s.build === 'object' && s.build.dockerfile !== undefined ? s.build.dockerfile : 'Dockerfile'
      if (!existsSync(join(context, dockerfile))) problems.push(`${name}: build context ${context} has no ${dockerfile}`)
    }
    if (s.image !== undefined && (!/^[a-z0-9][a-z0-9._/-]*:[A-Za-z0-9._-]+$/.test(s.image) || s.image.endsWith(':latest'))) problems.push(`${name}: image "${s.image}" has no pinned tag`)
    for (const [dep, how] of Object.entries<any>(
      Array.isArray(s.depends_on) ? Object.fromEntries(s.depends_on.map((d: string) => [d, {}])) : s.depends_on ?? {}
    )) {
      const target = services[dep]
      if (target === undefined) { problems.push(`${name}: depends on unknown service "${dep}"`); continue }
      // Every profile that starts this service must start its dependency too.
      const ok = profilesOf(target).length === 0 || (profilesOf(s).length > 0 && profilesOf(s).every((p) => profilesOf(target).includes(p)))
      if (!ok) problems.push(`${name}: depends on "${dep}", which its profiles do not enable`)
      const condition = how?.condition ?? 'service_started'
      if (!['service_started', 'service_healthy', 'service_completed_successfully'].includes(condition)) problems.push(`${name}: depends_on ${dep} condition "${condition}"`)
      if (condition === 'service_healthy' && !hasHealthcheck(target, files)) problems.push(`${name}: waits for ${dep} to be healthy, which has no healthcheck`)
    }
    const hc = s.healthcheck
    if (hc !== undefined && hc.disable !== true) {
      if (!Array.isArray(hc.test) || !['CMD', 'CMD-SHELL', 'NONE'].includes(hc.test[0]) || hc.test.length < 2) problems.push(`${name}: healthcheck test ${JSON.stringify(hc.test)} is not ["CMD", ...] or ["CMD-SHELL", "..."]`)
      for (const key of ['interval', 'timeout', 'start_period']) {
        if (hc[key] !== undefined && !/^([0-9]+(ms|s|m|h))+$/.test(String(hc[key]))) problems.push(`${name}: healthcheck ${key} "${hc[key]}" is not a duration`)
      }
      if (hc.retries !== undefined && !Number.isInteger(hc.retries)) problems.push(`${name}: healthcheck retries "${hc.retries}"`)
    }
    for (const m of mountsOf(s)) {
      if (!m.target.startsWith('/')) problems.push(`${name}: volume target "${m.target}" is not an absolute path`)
      if (m.bind && !existsSync(m.source)) problems.push(`${name}: bind source ${m.source} does not exist`)
      if (!m.bind && m.source !== '' && !(m.source in (compose.volumes ?? {}))) problems.push(`${name}: named volume "${m.source}" is not declared under volumes`)
    }
    for (const p of s.ports ?? []) {
      const m = /^(?:(?:[0-9.]+:)?([0-9]{1,5}):)?([0-9]{1,5})(?:\/(tcp|udp))?$/.exec(String(p))
      if (m === null || [m[1], m[2]].some((n) => n !== undefined && (Number(n) < 1 || Number(n) > 65535))) problems.push(`${name}: port "${p}" is not [host:]container`)
    }
    if (isGateway(s)) {
      const env = environmentOf(s)
      for (const key of Object.keys(env)) {
        if (!CONFIG_ENV_NAMES.has(key)) problems.push(`${name}: environment variable ${key} is not a config variable of src/config.ts`)
      }
      try {
        const loaded = loadConfig({
          ...files.imageEnv,
          ...(interpolateAll(env, profilesOf(s).length > 0 ? CLUSTER_ENV : DEFAULT_ENV) as Record<string, string>)
        })
        // The start-up rule of createCluster (src/cluster/index.ts): Redis and API keys without CLUSTER_SECRET do not start.
        if ((loaded.redisUrl !== undefined || loaded.redisClusterNodes.length > 0) && loaded.apiKeys !== undefined && loaded.clusterSecret === undefined) {
          problems.push(`${name}: Redis and API keys without CLUSTER_SECRET: the gateway would not start`)
        }
      } catch (err) {
        problems.push(`${name}: its environment does not load: ${(err as Error).message}`)
      }
      const dir = env.WORKSPACES_DIR ?? files.imageEnv.WORKSPACES_DIR ?? ''
      if (!mountsOf(s).some((m) => m.target === dir && m.source !== '')) problems.push(`${name}: WORKSPACES_DIR ${dir} is not a volume`)
    }
  }
  // Compose interpolates the whole file before it picks services by profile: a `:?` variable of
  // the cluster would stop the default `docker compose up` too.
  try {
    interpolateAll(compose, DEFAULT_ENV)
  } catch (err) {
    problems.push(`docker compose up needs more than API_KEYS, SECRETS_KEY and CLUSTER_SECRET (${(err as Error).message}); a cluster-only variable needs a ":-" default`)
  }
  for (const profiles of [[], ['cluster'], ['isolated']]) {
    const published = new Map<string, string>()
    for (const name of enabledServices(compose, profiles)) {
      for (const p of services[name]?.ports ?? []) {
        const host = /^(?:[0-9.]+:)?([0-9]{1,5}):/.exec(String(p))?.[1]
        if (host === undefined) continue
        const other = published.get(host)
        if (other !== undefined) problems.push(`host port ${host} is published by both ${other} and ${name}`)
        published.set(host, name)
      }
    }
  }
  return problems
}

/** The `cluster` profile: three instances of one image, sharing what they must, behind a proxy. */
function clusterProblems (compose: any, files: Files): string[] {
  const problems: string[] = []
  const services: Record<string, any> = compose.services ?? {}
  const defaults = enabledServices(compose, [])
  if (defaults.join(',') !== 'gateway,redis') problems.push(`services without a profile: ${Object.keys(services).filter((n) => defaults.includes(n)).join(', ')} (expected gateway, redis)`)
  const instances = Object.keys(services).filter((n) => isGateway(services[n]) && profilesOf(services[n]).includes('cluster'))
  if (instances.join(',') !== CLUSTER_INSTANCES.join(',')) problems.push(`cluster: ${instances.length} gateway instances (${instances.join(', ')}), expected ${CLUSTER_INSTANCES.join(', ')}`)
  const first = services[instances[0] ?? '']
  const firstEnv = environmentOf(first)
  const shared = ['CLUSTER_SECRET', 'API_KEYS', 'SECRETS_KEY', 'REDIS_URL', 'REDIS_CLUSTER_NODES', 'REDIS_KEY_PREFIX', 'SANDBOX', 'WORKSPACES_DIR']
  const volumeOf = (s: any): string | undefined =>
    mountsOf(s).find((m) => m.target === (environmentOf(s).WORKSPACES_DIR ?? files.imageEnv.WORKSPACES_DIR))?.source
  for (const name of instances) {
    const s = services[name]
    const env = environmentOf(s)
    const port = env.PORT ?? files.imageEnv.PORT ?? '8080'
    if (env.INSTANCE_URL !== `http://${name}:${port}`) problems.push(`${name}: INSTANCE_URL ${env.INSTANCE_URL} is not http://${name}:${port}`)
    if (env.CLUSTER_SECRET === undefined) problems.push(`${name}: no CLUSTER_SECRET`)
    for (const key of shared) {
      if (env[key] !== firstEnv[key]) problems.push(`${name}: ${key} differs from ${instances[0] ?? ''}'s`)
    }
    if (volumeOf(s) === undefined || volumeOf(s) !== volumeOf(first) || !(String(volumeOf(s)) in (compose.volumes ?? {}))) problems.push(`${name}: WORKSPACES_DIR is not on the volume the other instances share`)
    if (JSON.stringify([s.build, s.image]) !== JSON.stringify([first.build, first.image])) problems.push(`${name}: not the same build and image as ${instances[0] ?? ''}`)
    for (const opt of services.gateway?.security_opt ?? []) {
      if (!(s.security_opt ?? []).includes(opt)) problems.push(`${name}: security_opt lacks ${opt} (bubblewrap needs it, see gateway)`)
    }
    if (s.init !== true) problems.push(`${name}: not init: true`)
    if ((s.ports ?? []).length > 0) problems.push(`${name}: publishes ports (only the proxy should)`)
    if (s.depends_on?.redis?.condition !== 'service_healthy') problems.push(`${name}: does not wait for a healthy redis`)
  }
  const proxies = Object.keys(services).filter((n) => services[n].image === 'nginx:1.27-alpine' && profilesOf(services[n]).includes('cluster'))
  if (proxies.length !== 1) { problems.push(`cluster: no nginx:1.27-alpine proxy in the cluster profile (found ${proxies.length})`); return problems }
  const proxyName = proxies[0] ?? ''
  const proxy = services[proxyName]
  if (!hasHealthcheck(proxy, files)) problems.push(`${proxyName}: no healthcheck`)
  for (const name of instances) {
    if (proxy.depends_on?.[name]?.condition !== 'service_healthy') problems.push(`${proxyName}: does not wait for a healthy ${name}`)
  }
  if (!mountsOf(proxy).some((m) => m.bind && m.source.replace(/^\.\//, '') === PROXY_CONF && /^\/etc\/nginx\/conf\.d\/[^/]+\.conf$/.test(m.target))) problems.push(`${proxyName}: mounts no config from ${PROXY_CONF} into /etc/nginx/conf.d`)
  // A config that does not parse is nginxProblems' to report.
  let conf: Directive[] = []
  try { conf = parseNginx(files.nginx) } catch {}
  const listen = conf.find((d) => d.name === 'server')?.block?.find((d) => d.name === 'listen')?.args[0]
  for (const p of proxy.ports ?? []) {
    const container = String(p).split(':').at(-1)?.replace(/\/tcp$/, '')
    if (container !== listen) problems.push(`${proxyName}: publishes container port ${container}, nginx listens on ${listen}`)
  }
  if ((proxy.ports ?? []).length === 0) problems.push(`${proxyName}: publishes no port`)
  return problems
}

interface Directive { name: string, args: string[], block?: Directive[] }

/** nginx's configuration syntax: directives ending in `;`, blocks in braces, `#` comments, quoted strings. */
function parseNginx (text: string): Directive[] {
  const tokens = [...text.matchAll(/#[^\n]*|'(?:\\.|[^'\\])*'|"(?:\\.|[^"\\])*"|[{};]|[^\s{};'"#]+/g)].map((m) => m[0]).filter((t) => !t.startsWith('#'))
  let i = 0
  const block = (depth: number): Directive[] => {
    const out: Directive[] = []
    let words: string[] = []
    while (i < tokens.length) {
      const t = tokens[i++] ?? ''
      if (t === ';') { out.push({ name: words[0] ?? '', args: words.slice(1).map(unquote) }); words = [] } else if (t === '{') {
        const d: Directive = { name: words[0] ?? '', args: words.slice(1).map(unquote) }
        d.block = block(depth + 1)
        out.push(d)
        words = []
      } else if (t === '}') {
        if (depth === 0) throw new Error('unbalanced braces: a } too many')
        return out
      } else words.push(t)
    }
    if (depth > 0 || words.length > 0) throw new Error('unbalanced braces or a directive without ;')
    return out
  }
  return block(0)
}

function unquote (s: string): string {
  return /^(['"]).*\1$/s.test(s) ? s.slice(1, -1) : s
}

/** nginx sizes (`2m`) in bytes. */
function size (text: string | undefined): number {
  const m = /^([0-9]+)([kKmMgG]?)$/.exec(text ?? '')
  if (m === null) return NaN
  return Number(m[1]) * ({ '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 } as Record<string, number>)[(m[2] ?? '').toLowerCase()]!
}

/** nginx times (`700s`, `1h`, `90`) in seconds. */
function seconds (text: string | undefined): number {
  const m = /^([0-9]+)(ms|s|m|h|d)?$/.exec(text ?? '')
  if (m === null) return NaN
  return Number(m[1]) * ({ ms: 0.001, s: 1, m: 60, h: 3600, d: 86400 } as Record<string, number>)[m[2] ?? 's']!
}

/** The location nginx picks for a path: exact, then the longest prefix unless a regex (in order) matches, `^~` skipping the regexes. */
function locationFor (server: Directive[], path: string): Directive | undefined {
  const locations = server.filter((d) => d.name === 'location' && !(d.args[0] ?? '').startsWith('@'))
  const exact = locations.find((l) => l.args[0] === '=' && l.args[1] === path)
  if (exact !== undefined) return exact
  const prefixes = locations.filter((l) => (l.args.length === 1 || l.args[0] === '^~') && path.startsWith(l.args.at(-1) ?? '\0'))
    .sort((a, b) => (b.args.at(-1) ?? '').length - (a.args.at(-1) ?? '').length)
  if (prefixes[0]?.args[0] === '^~') return prefixes[0]
  const regex = locations.find((l) => (l.args[0] === '~' || l.args[0] === '~*') && new RegExp(l.args[1] ?? '', l.args[0] === '~*' ? 'i' : '').test(path))
  return regex ?? prefixes[0]
}

/** The value of a directive in a location, inherited from the server when the location does not set it, else nginx's default. */
function effective (server: Directive[], location: Directive | undefined, name: string, fallback: string): string[] {
  return (location?.block?.find((d) => d.name === name) ?? server.find((d) => d.name === name))?.args ?? [fallback]
}

/** `proxy_set_header` is inherited only by a location that sets none of its own. */
function proxyHeaders (server: Directive[], location: Directive | undefined): Map<string, string> {
  const own = (location?.block ?? []).filter((d) => d.name === 'proxy_set_header')
  const list = own.length > 0 ? own : server.filter((d) => d.name === 'proxy_set_header')
  return new Map(list.map((d) => [(d.args[0] ?? '').toLowerCase(), d.args[1] ?? '']))
}

/** deploy/nginx/cluster.conf against the compose services and the config defaults. */
function nginxProblems (compose: any, files: Files): string[] {
  const problems: string[] = []
  let conf: Directive[]
  try {
    conf = parseNginx(files.nginx)
  } catch (err) {
    return [`nginx: ${(err as Error).message}`]
  }
  const upstreams = conf.filter((d) => d.name === 'upstream')
  const servers = conf.filter((d) => d.name === 'server')
  if (upstreams.length !== 1 || servers.length !== 1) return [`nginx: ${upstreams.length} upstream and ${servers.length} server blocks, expected one each`]
  const upstream = upstreams[0] as Directive
  const server = servers[0]?.block ?? []
  const services: Record<string, any> = compose.services ?? {}
  const expected = Object.keys(services).filter((n) => isGateway(services[n]) && profilesOf(services[n]).includes('cluster'))
    .map((n) => `${n}:${environmentOf(services[n]).PORT ?? files.imageEnv.PORT ?? '8080'}`).sort()
  const members = (upstream.block ?? []).filter((d) => d.name === 'server').map((d) => d.args[0] ?? '').sort()
  if (members.join(',') !== expected.join(',')) problems.push(`nginx: upstream servers ${members.join(', ')} are not the cluster's instances ${expected.join(', ')}`)
  for (const d of upstream.block ?? []) {
    if (['ip_hash', 'hash', 'sticky', 'least_conn', 'random'].includes(d.name)) problems.push(`nginx: upstream ${upstream.args[0] ?? ''} is not round robin (${d.name})`)
  }
  for (const l of server.filter((d) => d.name === 'location' && !(d.args[0] ?? '').startsWith('@'))) {
    const pass = l.block?.find((d) => d.name === 'proxy_pass')?.args[0]
    if (pass !== `http://${upstream.args[0] ?? ''}`) problems.push(`nginx: location ${l.args.join(' ')} does not proxy_pass to the upstream (${pass})`)
  }
  const bodyLimit = configDefault('BODY_LIMIT_BYTES')
  const invokeTimeoutS = configDefault('INVOKE_TIMEOUT_MS') / 1000
  const quota = configDefault('WORKSPACE_QUOTA_BYTES')
  for (const path of ['/invoke', '/invoke/batch', '/mcp', '/users/alice/workspaces/proj', '/registry/servers']) {
    const location = locationFor(server, path)
    if (location === undefined) { problems.push(`nginx: no location serves ${path}`); continue }
    const body = size(effective(server, location, 'client_max_body_size', '1m')[0])
    const upload = path.startsWith('/users/')
    if (!upload && body !== bodyLimit) problems.push(`nginx: client_max_body_size of ${path} is ${body}, BODY_LIMIT_BYTES is ${bodyLimit}`)
    if (upload && !(body >= quota)) problems.push(`nginx: ${path} (a workspace upload) has client_max_body_size ${body}, under WORKSPACE_QUOTA_BYTES ${quota}`)
    if (upload && effective(server, location, 'proxy_request_buffering', 'on')[0] !== 'off') problems.push(`nginx: ${path} (a workspace upload) is buffered to disk first: set proxy_request_buffering off`)
    const read = seconds(effective(server, location, 'proxy_read_timeout', '60s')[0])
    if (!(read > invokeTimeoutS)) problems.push(`nginx: ${path} read timeout ${read} s is not above INVOKE_TIMEOUT_MS (${invokeTimeoutS} s)`)
    if (path === '/mcp') {
      if (effective(server, location, 'proxy_buffering', 'on')[0] !== 'off') {
        problems.push('nginx: /mcp has proxy_buffering on: SSE events would wait in its buffer')
      }
      if (!(read >= 3600)) problems.push(`nginx: /mcp read timeout ${read} s is under an hour: idle SSE streams would be cut`)
    }
    if (proxyHeaders(server, location).get('x-forwarded-for') !== '$proxy_add_x_forwarded_for') problems.push(`nginx: ${path} does not set X-Forwarded-For`)
    if (effective(server, location, 'proxy_http_version', '1.0')[0] !== '1.1') problems.push(`nginx: ${path} proxies with HTTP/1.0 (no keep-alive, no chunked SSE)`)
  }
  return problems
}

// Keeps a missing proxy file visible as a plain failure too (the lint above reports it as a parse problem).
test('the proxy config file the compose file mounts exists', () => {
  assert.ok(existsSync(PROXY_CONF), PROXY_CONF)
  assert.match(readFileSync(PROXY_CONF, 'utf8'), /upstream\s+\S+\s*\{/)
})
