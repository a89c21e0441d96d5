import { Type } from '@sinclair/typebox'
import type { Static } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'

/**
 * The gateway's configuration: one schema (the variable names are part of the API), read from the environment by
 * loadConfig. Every value is validated at start-up; a bad one stops the process with a
 * message naming the variable.
 */
export const ConfigSchema = Type.Object({
  port: Type.Integer({ minimum: 0, maximum: 65535, env: 'PORT', default: 8080, description: 'Port to listen on' }),
  host: Type.Optional(Type.String({ minLength: 1, env: 'HOST', description: 'Interface to listen on (default 127.0.0.1 in open mode, else 0.0.0.0)' })),
  redisUrl: Type.Optional(Type.String({ pattern: '^rediss?://', env: 'REDIS_URL', description: 'Registry in Redis; unset = in-memory registry' })),
  redisKeyPrefix: Type.String({ minLength: 1, maxLength: 64, env: 'REDIS_KEY_PREFIX', default: 'tg:', description: 'Prefix of every Redis key' }),
  redisClusterNodes: Type.Array(Type.String({ pattern: '^(\\[[0-9A-Fa-f:.]+\\]|[^:\\s\\[\\]]+):[0-9]{1,5}$' }), {
    env: 'REDIS_CLUSTER_NODES',
    default: [],
    description: 'A Redis Cluster instead of REDIS_URL: some of its nodes, host:port,host:port,... (a password and TLS are taken from REDIS_URL when it is set too)'
  }),
  instanceUrl: Type.Optional(Type.String({
    pattern: '^https?://[^/?#]+/?$',
    env: 'INSTANCE_URL',
    description: 'This instance\'s address for the other instances of the cluster (forwarded background-process calls); default http://{HOST}:{PORT}'
  })),
  clusterSecret: Type.Optional(Type.String({
    minLength: 16,
    env: 'CLUSTER_SECRET',
    description: 'Shared by every instance: signs instance-to-instance calls (HMAC-SHA256 with a timestamp). Required when Redis is configured and API keys are set'
  })),
  trustProxy: Type.Optional(Type.String({
    pattern: '^(false|[1-9][0-9]?|[0-9A-Fa-f:./]+(,[0-9A-Fa-f:./]+)*)$',
    env: 'TRUST_PROXY',
    description: 'Behind a reverse proxy or load balancer: which X-Forwarded-For hops to believe for the client address (per-address rate limit in open mode, the failed-authentication guard, logs): a hop count (1 = the proxy in front of the gateway), or the proxies\' addresses/CIDRs (comma list). Unset = the socket\'s address, so every client behind a proxy is one address'
  })),
  allowedHosts: Type.Array(Type.String({ pattern: '^(\\*\\.)?(\\[[0-9A-Fa-f:.]+\\]|[A-Za-z0-9_.-]+)(:[0-9]{1,5})?$' }), {
    env: 'ALLOWED_HOSTS',
    default: [],
    description: 'DNS rebinding protection: the names (name, name:port, *.domain, [IPv6]:port; comma list) a request\'s Host (and Origin, and X-Forwarded-Host with TRUST_PROXY) may carry besides loopback names. Without API keys only loopback names are accepted unless listed here; with API keys the Host is checked only when this is set. /healthz, /readyz and instance-to-instance calls answer whatever the Host (probes address the pod IP)'
  }),
  clusterHeartbeatMs: Type.Integer({
    minimum: 100,
    maximum: 60_000,
    env: 'CLUSTER_HEARTBEAT_MS',
    default: 2000,
    description: 'How often an instance renews its membership in Redis; it counts as gone after 3 missed heartbeats (its running background processes are then reported LOST)'
  }),
  workspaceLockLeaseMs: Type.Integer({
    minimum: 500,
    maximum: 600_000,
    env: 'WORKSPACE_LOCK_LEASE_MS',
    default: 15_000,
    description: 'With Redis: lease of a workspace\'s cluster-wide write lock, renewed every third of it while held; an instance that dies holding it frees it after at most this long'
  }),
  workspacesDir: Type.String({ minLength: 1, env: 'WORKSPACES_DIR', default: './data/workspaces', description: 'Root of tenant workspaces' }),
  workspaceBases: Type.Array(Type.String({ minLength: 1 }), {
    env: 'WORKSPACE_BASES',
    default: [],
    description: 'Where an admin workspaceRoot may point (comma list)'
  }),
  readRoots: Type.Record(Type.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$' }), Type.String({ minLength: 1 }), {
    env: 'READ_ROOTS',
    default: {},
    description: 'Named read-only roots, name=/path,...'
  }),
  workspaceQuotaBytes: Type.Integer({
    minimum: 1024 * 1024,
    env: 'WORKSPACE_QUOTA_BYTES',
    default: 1024 * 1024 * 1024,
    description: 'Bytes one workspace may hold. With WORKSPACE_QUOTA_MODE loop, the file system enforces it (an ext4 image per workspace of this size plus min(64 MiB, 1/16) for block rounding: a write past it fails with ENOSPC); with watchdog, file tools refuse a write past it and a bash command or background process that passes it is stopped by a watchdog that polls what it writes (several fast writers may pass it by far more than 64 MiB)'
  }),
  workspaceMaxFiles: Type.Integer({
    minimum: 1,
    env: 'WORKSPACE_MAX_FILES',
    default: 200_000,
    description: 'Entries (files, directories, symlinks) one workspace may hold, enforced like WORKSPACE_QUOTA_BYTES'
  }),
  workspaceQuotaMode: Type.Union([Type.Literal('auto'), Type.Literal('loop'), Type.Literal('watchdog')], {
    env: 'WORKSPACE_QUOTA_MODE',
    default: 'auto',
    description: 'How the workspace quota is enforced: loop (a loop-mounted ext4 image per workspace, sized to WORKSPACE_QUOTA_BYTES with WORKSPACE_MAX_FILES inodes; needs root and mkfs.ext4, start-up stops without them), watchdog (polling, may be outrun by parallel writers), auto (loop when possible, else watchdog; watchdog with Redis, whose instances may share WORKSPACES_DIR across hosts: set loop only where they share one host and mount namespace); start-up logs and /status say which'
  }),
  tenantMaxWorkspaces: Type.Integer({
    minimum: 1,
    env: 'TENANT_MAX_WORKSPACES',
    default: 50,
    description: 'Workspaces one tenant may have; creating one more (a tool call or an upload naming a new workspaceId) is refused with GW_TENANT_QUOTA_EXCEEDED'
  }),
  tenantMaxServers: Type.Integer({
    minimum: 1,
    env: 'TENANT_MAX_SERVERS',
    default: 200,
    description: 'Remote MCP servers one tenant may have registered (PUT /users/{userId}/mcp/servers/{serverId}); registering one more is refused with GW_TENANT_QUOTA_EXCEEDED (replacing or deleting one is not). Each config is at most 64 KiB as JSON'
  }),
  tenantQuotaBytes: Type.Integer({
    minimum: 1024 * 1024,
    env: 'TENANT_QUOTA_BYTES',
    default: 10 * 1024 * 1024 * 1024,
    description: 'Bytes one tenant\'s workspaces and checkpoints may hold together: a new workspace, an upload or a checkpoint that would pass it is refused with GW_TENANT_QUOTA_EXCEEDED (within existing workspaces, each is bounded by WORKSPACE_QUOTA_BYTES)'
  }),
  checkpointsPerWorkspace: Type.Integer({
    minimum: 1,
    maximum: 1000,
    env: 'CHECKPOINTS_PER_WORKSPACE',
    default: 20,
    description: 'Checkpoints kept per workspace; creating one more drops the oldest (unchanged files are shared between checkpoints)'
  }),
  workspaceIdleTtl: Type.Optional(Type.String({
    pattern: '^[1-9][0-9]{0,9}(ms|s|m|h|d)$',
    env: 'WORKSPACE_IDLE_TTL',
    description: 'A workspace no tool call used for this long (e.g. 7d, 12h, 30m) is deleted with its checkpoints, its processes stopped first; unset = kept'
  })),
  sandbox: Type.Union([Type.Literal('auto'), Type.Literal('bwrap'), Type.Literal('none')], {
    env: 'SANDBOX',
    default: 'auto',
    description: 'Sandbox for bash: auto, bwrap or none'
  }),
  sandboxUidRange: Type.String({
    pattern: '^[1-9][0-9]{0,9}-[1-9][0-9]{0,9}$',
    env: 'SANDBOX_UID_RANGE',
    default: '200000-299999',
    description: 'Host uids given to tenants, one each, when the gateway runs as root (first-last). With Redis the deployment claims the whole range on the host (another deployment overlapping it stops start-up); without Redis a gateway takes a free block of 10,000 of it (of 300000-399999 when left at the default)'
  }),
  sandboxCgroupRoot: Type.Optional(Type.String({
    minLength: 1,
    env: 'SANDBOX_CGROUP_ROOT',
    description: 'Where sandbox cgroups are made: a cgroup v2 directory, or a path inside each v1 controller (cpu, memory, pids); none = no cgroups. Default: under the gateway\'s own cgroup'
  })),
  sandboxTenantMemoryBytes: Type.Integer({
    minimum: 64 * 1024 * 1024,
    env: 'SANDBOX_TENANT_MEMORY_BYTES',
    default: 2 * 1024 * 1024 * 1024,
    description: 'Memory (with tmpfs) of all sandboxed commands of one tenant (cgroups only)'
  }),
  sandboxTenantPids: Type.Integer({
    minimum: 16,
    env: 'SANDBOX_TENANT_PIDS',
    default: 512,
    description: 'Processes of all sandboxed commands of one tenant (cgroups only)'
  }),
  sandboxTenantCpus: Type.Optional(Type.Number({
    minimum: 0,
    maximum: 4096,
    env: 'SANDBOX_TENANT_CPUS',
    description: 'CPUs all sandboxed commands of one tenant may use together while another tenant has processes (cgroups only; fractions ' +
      'allowed, 0 = no cap): a tenant\'s fork bomb or burners never take the host from another tenant; a tenant alone uses every core ' +
      '(docs/ARCHITECTURE.md#isolation). Default: half the host\'s CPUs, at least 1'
  })),
  functionsDirs: Type.Array(Type.String({ minLength: 1 }), {
    env: 'FUNCTIONS_DIR',
    default: [],
    description: 'Extra directories of function tools (comma list)'
  }),
  mcpServicesDirs: Type.Array(Type.String({ minLength: 1 }), {
    env: 'MCP_SERVICES_DIR',
    default: [],
    description: 'Extra directories of local MCP services (comma list)'
  }),
  loadExamples: Type.Boolean({ env: 'LOAD_EXAMPLES', default: true, description: 'Load the example functions and MCP service shipped with the gateway' }),
  mcpServersFile: Type.Optional(Type.String({ minLength: 1, env: 'MCP_SERVERS_FILE', description: 'Global servers, {"mcpServers": {...}}' })),
  egressAllow: Type.Array(Type.String({ minLength: 1 }), {
    env: 'EGRESS_ALLOW',
    default: [],
    description: 'Hosts or CIDRs a tenant server may reach despite the SSRF guard'
  }),
  secretsKey: Type.Optional(Type.String({ minLength: 1, env: 'SECRETS_KEY', description: 'Key for secrets at rest: base64 of 32 bytes, or keyId:base64' })),
  secretsKeyPrevious: Type.Optional(Type.String({
    minLength: 1,
    env: 'SECRETS_KEY_PREVIOUS',
    description: 'Old keys still accepted for decryption after a rotation (comma list, same format)'
  })),
  apiKeys: Type.Optional(Type.String({
    minLength: 1,
    env: 'API_KEYS',
    description: 'key:scope pairs; scope * = admin, approver:{userId} = an approver of that tenant, else a userId'
  })),
  apiKeysFile: Type.Optional(Type.String({ minLength: 1, env: 'API_KEYS_FILE', description: 'File with one key:scope pair per line' })),
  authFailuresPerMinute: Type.Integer({
    minimum: 0,
    env: 'AUTH_FAILURES_PER_MINUTE',
    default: 30,
    description: 'Wrong API keys per minute from one client address with the same 8-character key prefix; at the limit that prefix gets 429 from that address until the minute ends, and at 10x the limit the whole address does (0 = off)'
  }),
  rateLimitPerMinute: Type.Integer({ minimum: 1, env: 'RATE_LIMIT_PER_MINUTE', default: 600, description: 'Requests per minute per tenant' }),
  maxConcurrentPerTenant: Type.Integer({ minimum: 1, env: 'MAX_CONCURRENT_PER_TENANT', default: 32, description: 'Concurrent invocations per tenant' }),
  metricsRequireKey: Type.Boolean({
    env: 'METRICS_REQUIRE_KEY',
    default: false,
    description: 'GET /metrics needs an API key (any configured key; a tenant key for a scraper is enough)'
  }),
  shutdownGraceMs: Type.Integer({
    minimum: 0,
    maximum: 600_000,
    env: 'SHUTDOWN_GRACE_MS',
    default: 10_000,
    description: 'On SIGTERM, how long in-flight requests may finish before they are cut off and their processes killed'
  }),
  logLevel: Type.Union(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l)), {
    env: 'LOG_LEVEL',
    default: 'info',
    description: 'pino log level (the lines go to stdout, a few per write: see Deploying)'
  }),
  bodyLimitBytes: Type.Integer({ minimum: 1024, env: 'BODY_LIMIT_BYTES', default: 2 * 1024 * 1024, description: 'Largest request body accepted (413 beyond)' }),
  requestTimeoutMs: Type.Integer({
    minimum: 100,
    env: 'REQUEST_TIMEOUT_MS',
    default: 60_000,
    description: 'Longest time to receive a whole request (slow or stalled uploads get 408)'
  }),
  outputMaxChars: Type.Integer({ minimum: 1000, env: 'OUTPUT_MAX_CHARS', default: 100_000, description: 'Cap on every tool output string' }),
  functionTimeoutMs: Type.Integer({ minimum: 1, env: 'FUNCTION_TIMEOUT_MS', default: 30_000, description: 'Deadline of a function or local MCP tool call' }),
  invokeTimeoutMs: Type.Integer({
    minimum: 1,
    maximum: 3_600_000,
    env: 'INVOKE_TIMEOUT_MS',
    default: 660_000,
    description: 'Upper bound of any single tool call'
  }),
  mcpConnectTimeoutMs: Type.Integer({ minimum: 1, env: 'MCP_CONNECT_TIMEOUT_MS', default: 10_000, description: 'Connect timeout to a remote MCP server' }),
  mcpStdioFirstConnectMs: Type.Integer({
    minimum: 1,
    maximum: 600_000,
    env: 'MCP_STDIO_FIRST_CONNECT_MS',
    default: 60_000,
    description: 'Connect deadline of a stdio MCP server\'s first start under its config (`npx -y` may download the package first; the longer of this and MCP_CONNECT_TIMEOUT_MS applies). Registration and start-up begin it in the background; meanwhile a listing reports the server in `unavailable` as `starting`'
  }),
  mcpListTimeoutMs: Type.Integer({ minimum: 1, env: 'MCP_LIST_TIMEOUT_MS', default: 5_000, description: 'Per-server deadline of a tool listing' }),
  mcpHttpTransport: Type.Union([Type.Literal('sdk'), Type.Literal('lean')], {
    env: 'MCP_HTTP_TRANSPORT',
    default: 'lean',
    description: 'Client transport for streamable-HTTP MCP servers: `sdk` (the MCP SDK\'s fetch-based one) or `lean` (the gateway\'s own on undici request(): JSON fast path, incremental SSE parser; same sessions, headers and egress checks). Kept selectable so a regression can be bisected'
  }),
  mcpMaxMessageBytes: Type.Optional(Type.Integer({
    minimum: 64 * 1024,
    env: 'MCP_MAX_MESSAGE_BYTES',
    description: 'Largest answer read from a remote MCP server: one JSON body or one SSE event (stdio: one line), in bytes. Reading stops there and the call is the tool error GW_UPSTREAM_TOO_LARGE. Default: 4 x OUTPUT_MAX_CHARS (the output cap in UTF-8) + 4 MiB (the raw items a result\'s trace keeps and `/mcp` passes through: images, resources, structuredContent), 4,594,304 with the default cap'
  })),
  mcpResponseBudgetBytes: Type.Integer({
    minimum: 1024 * 1024,
    env: 'MCP_RESPONSE_BUDGET_BYTES',
    default: 128 * 1024 * 1024,
    description: 'Bytes of remote MCP answers the instance holds in flight (received, not yet parsed) over all tenants; a call whose answer would pass it stops being read and is the tool error GW_UPSTREAM_BUDGET_EXHAUSTED'
  }),
  mcpTenantListBytes: Type.Integer({
    minimum: 65536,
    env: 'MCP_TENANT_LIST_BYTES',
    default: 32 * 1024 * 1024,
    description: 'Bytes (as JSON) of the lists (tools; resources, resource templates and prompts for /mcp) the instance keeps for one tenant\'s remote MCP servers together (each global server counts on its own); a listing that would pass it makes that server unavailable, saying so. At least MCP_MAX_MESSAGE_BYTES'
  }),
  mcpTenantListItems: Type.Integer({
    minimum: 5000,
    env: 'MCP_TENANT_LIST_ITEMS',
    default: 10_000,
    description: 'Tools the instance keeps of one tenant\'s remote MCP servers\' lists together, and as many of each other kind (resources, resource templates, prompts for /mcp); each global server counts on its own. A listing that would pass it makes that server unavailable, saying so. At least 5,000 (what one server may list)'
  }),
  mcpResponseBudgetTenantBytes: Type.Integer({
    minimum: 64 * 1024,
    env: 'MCP_RESPONSE_BUDGET_TENANT_BYTES',
    default: 32 * 1024 * 1024,
    description: 'The same budget for one tenant\'s servers (each global server has one of its own); at least MCP_MAX_MESSAGE_BYTES and at most MCP_RESPONSE_BUDGET_BYTES'
  }),
  mcpCallTimeoutMs: Type.Integer({ minimum: 1, env: 'MCP_CALL_TIMEOUT_MS', default: 60_000, description: 'Default tools/call timeout of a remote server' }),
  mcpIdleMs: Type.Integer({ minimum: 1000, env: 'MCP_IDLE_MS', default: 300_000, description: 'A remote MCP client unused this long is closed' }),
  mcpMaxClients: Type.Integer({
    minimum: 1,
    env: 'MCP_MAX_CLIENTS',
    default: 1000,
    description: 'Most open remote MCP clients per pool (least recently used closed first)'
  }),
  mcpToolsTtlMs: Type.Integer({
    minimum: 1000,
    env: 'MCP_TOOLS_TTL_MS',
    default: 300_000,
    description: 'A cached remote tool list older than this is refreshed'
  }),
  mcpBreakerFailures: Type.Integer({
    minimum: 1,
    maximum: 1000,
    env: 'MCP_BREAKER_FAILURES',
    default: 5,
    description: 'Consecutive transport, connect or protocol failures of one remote MCP server (within MCP_BREAKER_WINDOW_MS) that open its circuit breaker: its calls then fail fast with GW_UPSTREAM_UNAVAILABLE'
  }),
  mcpBreakerWindowMs: Type.Integer({
    minimum: 1,
    maximum: 86_400_000,
    env: 'MCP_BREAKER_WINDOW_MS',
    default: 60_000,
    description: 'The failures that open a breaker must fall within this window (counted from the first of them)'
  }),
  mcpBreakerOpenMs: Type.Integer({
    minimum: 1,
    maximum: 86_400_000,
    env: 'MCP_BREAKER_OPEN_MS',
    default: 30_000,
    description: 'How long an open breaker fails calls fast before one half-open probe (a call or a listing) decides: success closes it, failure reopens it'
  }),
  codeModeMaxCalls: Type.Integer({
    minimum: 1,
    maximum: 10_000,
    env: 'CODE_MODE_MAX_CALLS',
    default: 50,
    description: 'Tool calls one code-mode script (run_tools_script) may make; past it each call fails inside the script'
  }),
  batchConcurrency: Type.Integer({ minimum: 1, maximum: 64, env: 'BATCH_CONCURRENCY', default: 8, description: 'Calls of one batch run at once' }),
  batchMaxCalls: Type.Integer({ minimum: 1, maximum: 1000, env: 'BATCH_MAX_CALLS', default: 100, description: 'Most calls in one batch' }),
  readMaxChars: Type.Integer({ minimum: 1, env: 'READ_MAX_CHARS', default: 12_000, description: 'read_file maximum chars' }),
  commandTimeoutMs: Type.Integer({ minimum: 1, maximum: 600_000, env: 'COMMAND_TIMEOUT_MS', default: 30_000, description: 'bash command timeout maximum' }),
  bashLogChars: Type.Integer({ minimum: 1, env: 'BASH_LOG_CHARS', default: 12_000, description: 'bash logs default chars' }),
  maxProcessOutputChars: Type.Integer({ minimum: 1, env: 'MAX_PROCESS_OUTPUT_CHARS', default: 120_000, description: 'Background process log buffer' }),
  maxProcessesPerTenant: Type.Integer({
    minimum: 1,
    env: 'MAX_PROCESSES_PER_TENANT',
    default: 16,
    description: 'Running background processes (bash start) per tenant across all its workspaces (8 per workspace in any case)'
  }),
  journal: Type.Union([Type.Literal('full'), Type.Literal('meta'), Type.Literal('off')], {
    env: 'JOURNAL',
    default: 'full',
    description: 'Invocation journal: full (arguments, output and trace, masked and capped), meta (without them) or off'
  }),
  journalMaxEntries: Type.Integer({
    minimum: 1,
    maximum: 10_000_000,
    env: 'JOURNAL_MAX_ENTRIES',
    default: 10_000,
    description: 'Journal entries kept per tenant (Redis: approximate MAXLEN of its stream); the oldest go first'
  }),
  journalRetention: Type.String({
    pattern: '^[1-9][0-9]{0,9}(ms|s|m|h|d)$',
    env: 'JOURNAL_RETENTION',
    default: '7d',
    description: 'Journal entries older than this are not returned and are trimmed (e.g. 7d, 12h)'
  }),
  journalTenantBytes: Type.Integer({
    minimum: 1024 * 1024,
    env: 'JOURNAL_TENANT_BYTES',
    default: 32 * 1024 * 1024,
    description: 'Journal entries kept per tenant by size (entry JSON, UTF-8 bytes; Redis and memory alike); past it the tenant\'s own oldest go first, its newest always stays'
  }),
  journalMemoryBytes: Type.Integer({
    minimum: 1024 * 1024,
    env: 'JOURNAL_MEMORY_BYTES',
    default: 64 * 1024 * 1024,
    description: 'Without Redis: the memory journal\'s total size over all tenants (entry JSON, approximate); past it the oldest entries of any tenant go first'
  }),
  approvalTtl: Type.String({
    pattern: '^[1-9][0-9]{0,9}(ms|s|m|h|d)$',
    env: 'APPROVAL_TTL',
    default: '1h',
    description: 'How long a held call (a tool matching a policy\'s requireApproval) waits for a decision; past it the call is APPROVAL_EXPIRED'
  }),
  tenantMaxPendingApprovals: Type.Integer({
    minimum: 1,
    env: 'TENANT_MAX_PENDING_APPROVALS',
    default: 100,
    description: 'Calls one tenant may have awaiting approval at once (each keeps its whole request until decided or expired); one more is refused with GW_TENANT_QUOTA_EXCEEDED and does not run'
  }),
  approvalWebhookUrl: Type.Optional(Type.String({
    pattern: '^https?://',
    env: 'APPROVAL_WEBHOOK_URL',
    description: 'Receives a POST per held call (approvalId, userId, name, callId, createdAt, expiresAt; never the arguments), signed in x-gateway-signature'
  })),
  approvalWebhookSecret: Type.Optional(Type.String({
    minLength: 16,
    env: 'APPROVAL_WEBHOOK_SECRET',
    description: 'HMAC-SHA256 key of the approval webhook\'s x-gateway-signature (sha256=<hex of the raw body>)'
  })),
  guardrailWebhookSecret: Type.Optional(Type.String({
    minLength: 16,
    env: 'GUARDRAIL_WEBHOOK_SECRET',
    description: 'HMAC-SHA256 key of a policy guardrail webhook\'s x-gateway-signature (sha256=<hex of the raw body>); without it a webhook check fails (its failOpen decides)'
  })),
  publicUrl: Type.Optional(Type.String({
    pattern: '^https?://[^/?#]+(/[^?#]*)?$',
    env: 'PUBLIC_URL',
    description: 'The gateway\'s external base URL (behind a TLS proxy: its https address). Required for OAuth: the redirect URI {PUBLIC_URL}/oauth/callback, the client ID metadata document, the protected resource metadata'
  })),
  oauthReturnAllow: Type.Array(Type.String({ pattern: '^https?://[^/?#]+$' }), {
    env: 'OAUTH_RETURN_ALLOW',
    default: [],
    description: 'Origins (scheme://host[:port], comma list, compared exactly) the OAuth callback may redirect to as a returnTo; none = the callback answers a small page'
  }),
  oauthClientMetadataUrl: Type.Optional(Type.String({
    pattern: '^https://[^/?#]+/[^?#]+$',
    env: 'OAUTH_CLIENT_METADATA_URL',
    description: 'The https URL of the gateway\'s OAuth client ID metadata document when it is hosted elsewhere than {PUBLIC_URL}/oauth/client-metadata.json (which the gateway serves); used as client_id with authorization servers that accept such documents'
  })),
  oauthIssuer: Type.Optional(Type.String({
    pattern: '^https?://',
    env: 'OAUTH_ISSUER',
    description: 'Incoming OAuth: /mcp and the REST API also accept JWT access tokens of this issuer (its JWKS from its metadata), beside the API keys'
  })),
  oauthAudience: Type.Optional(Type.String({
    minLength: 1,
    env: 'OAUTH_AUDIENCE',
    description: 'Incoming OAuth: the audience an access token must carry; default {PUBLIC_URL}/mcp'
  })),
  oauthTenantClaim: Type.String({
    pattern: '^[A-Za-z0-9_.:/-]{1,128}$',
    env: 'OAUTH_TENANT_CLAIM',
    default: 'sub',
    description: 'Incoming OAuth: the token claim that names the tenant (its userId)'
  }),
  oauthAdminScope: Type.Optional(Type.String({
    pattern: '^[!#-\\[\\]-~]+$',
    env: 'OAUTH_ADMIN_SCOPE',
    description: 'Incoming OAuth: a token with this scope acts as an admin key (all tenants); unset = no token is admin'
  })),
  oauthApproverScope: Type.Optional(Type.String({
    pattern: '^[!#-\\[\\]-~]+$',
    env: 'OAUTH_APPROVER_SCOPE',
    description: 'Incoming OAuth: a token with this scope may decide held calls of its tenant (approve, deny)'
  }))
})

export type Config = Static<typeof ConfigSchema> & {
  /**
   * WORKSPACES_DIR was set. Only the default may be moved somewhere the sandbox can reach (see
   * createBuiltins); absent (a config not made by loadConfig) counts as set.
   */
  workspacesDirExplicit?: boolean
}

const DURATION_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const

/** `7d`, `12h`, `30m`, `45s`, `500ms` in milliseconds (the WORKSPACE_IDLE_TTL format). */
export function parseDuration (text: string): number {
  const m = /^([1-9][0-9]{0,9})(ms|s|m|h|d)$/.exec(text)
  if (m === null) throw new ConfigError(`not a duration: ${JSON.stringify(text)} (e.g. 7d, 12h, 30m)`)
  return Number(m[1]) * DURATION_MS[m[2] as keyof typeof DURATION_MS]
}

export class ConfigError extends Error {
  constructor (message: string) {
    super(message)
    this.name = 'ConfigError'
  }
}

type Env = Record<string, string | undefined>

/** Reads and validates the configuration; throws ConfigError naming every bad variable. */
export function loadConfig (env: Env): Config {
  const raw: Record<string, unknown> = {}
  const problems: string[] = []
  for (const [key, schema] of Object.entries(ConfigSchema.properties)) {
    const name = (schema as unknown as { env: string }).env
    const value = env[name]
    if (value === undefined || value.trim() === '') continue
    const parsed = parseValue(schema as unknown as Record<string, unknown>, value.trim())
    if (parsed.ok) raw[key] = parsed.value
    else problems.push(`${name}: ${parsed.message}`)
  }
  const withDefaults = Value.Default(ConfigSchema, raw)
  for (const err of Value.Errors(ConfigSchema, withDefaults)) {
    const key = err.path.split('/')[1] ?? ''
    const name = (ConfigSchema.properties as Record<string, { env?: string }>)[key]?.env ?? err.path
    problems.push(`${name}: ${err.message}${err.value !== undefined && typeof err.value !== 'object' ? ` (got ${JSON.stringify(err.value)})` : ''}`)
  }
  if (problems.length > 0) throw new ConfigError(`Invalid configuration:\n  - ${[...new Set(problems)].join('\n  - ')}`)
  const config = withDefaults as Config
  const dir = env.WORKSPACES_DIR
  config.workspacesDirExplicit = dir !== undefined && dir.trim() !== ''
  return config
}

function parseValue (schema: Record<string, unknown>, value: string): { ok: true, value: unknown } | { ok: false, message: string } {
  switch (schema.type) {
    case 'integer': {
      if (!/^-?\d+$/.test(value)) return { ok: false, message: `expected an integer, got ${JSON.stringify(value)}` }
      return { ok: true, value: Number(value) }
    }
    case 'number': {
      if (!/^\d+(\.\d+)?$/.test(value)) return { ok: false, message: `expected a number, got ${JSON.stringify(value)}` }
      return { ok: true, value: Number(value) }
    }
    case 'boolean': {
      if (/^(1|true|yes|on)$/i.test(value)) return { ok: true, value: true }
      if (/^(0|false|no|off)$/i.test(value)) return { ok: true, value: false }
      return { ok: false, message: `expected true or false, got ${JSON.stringify(value)}` }
    }
    case 'array':
      return { ok: true, value: splitList(value) }
    case 'object': {
      const out: Record<string, string> = {}
      for (const pair of splitList(value)) {
        const eq = pair.indexOf('=')
        if (eq <= 0) return { ok: false, message: `expected name=/path pairs, got ${JSON.stringify(pair)}` }
        out[pair.slice(0, eq).trim()] = pair.slice(eq + 1).trim()
      }
      return { ok: true, value: out }
    }
    default:
      return { ok: true, value }
  }
}

function splitList (value: string): string[] {
  return value.split(',').map((s) => s.trim()).filter((s) => s !== '')
}

/** The README's configuration table, generated from the schema (a test keeps them equal). */
export function renderConfigTable (): string {
  const rows = Object.values(ConfigSchema.properties).map((schema) => {
    const s = schema as unknown as { env: string, description?: string, default?: unknown }
    const def = s.default === undefined
      ? 'unset'
      : Array.isArray(s.default) && s.default.length === 0
        ? 'unset'
        : typeof s.default === 'object' && s.default !== null && Object.keys(s.default).length === 0
          ? 'unset'
          : `\`${String(s.default)}\``
    return `| \`${s.env}\` | ${s.description ?? ''} | ${def} |`
  })
  return ['| variable | meaning | default |', '|---|---|---|', ...rows].join('\n')
}
