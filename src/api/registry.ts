import { Type } from '@sinclair/typebox'
import { ServerConfigInputSchema, ServerConfigSchema } from '../registry/server-config.js'
import { IdString } from './common.js'

export const ServerParams = Type.Object({ serverId: IdString })
export const UserParams = Type.Object({ userId: IdString })
export const UserServerParams = Type.Object({ userId: IdString, serverId: IdString })

// Without $id: each route compiles its own copy, and Ajv refuses an $id registered twice.
const { $id: _configId, ...ServerConfigShape } = ServerConfigSchema
const { $id: _inputId, ...ServerConfigInputShape } = ServerConfigInputSchema

export const ServerView = Type.Object({
  serverId: Type.String(),
  config: ServerConfigShape as typeof ServerConfigSchema,
  updatedAt: Type.String()
}, { description: 'A registered server; header and env values are masked' })

export const ServerList = Type.Object({ servers: Type.Array(ServerView) })

export const PutServerBody = ServerConfigInputShape as typeof ServerConfigInputSchema

export const PutServerResponse = Type.Object({
  serverId: Type.String(),
  created: Type.Boolean(),
  version: Type.Integer({ description: 'The scope version after the write' }),
  server: ServerView
})

export const DeleteServerResponse = Type.Object({
  serverId: Type.String(),
  deleted: Type.Literal(true),
  version: Type.Integer()
})

export const LiveToolsResponse = Type.Object({
  serverId: Type.String(),
  tools: Type.Array(Type.Object({}, { additionalProperties: true }), { description: 'The server\'s tools/list, as MCP Tool objects' })
})

export const StatusResponse = Type.Object({
  totalClients: Type.Integer(),
  globalClients: Type.Integer(),
  userClients: Type.Integer(),
  connectedClients: Type.Integer(),
  totalTools: Type.Integer(),
  clients: Type.Record(Type.String(), Type.Object({}, { additionalProperties: true })),
  sandbox: Type.Object({
    mode: Type.String(),
    probe: Type.Unknown(),
    warning: Type.Union([Type.String(), Type.Null()]),
    isolation: Type.Union([Type.Object({
      uidPerTenant: Type.Boolean({ description: 'Each tenant\'s commands run as its own host uid (SANDBOX_UID_RANGE)' }),
      uids: Type.String(),
      cgroup: Type.Union([Type.Literal('v1'), Type.Literal('v2'), Type.Literal('none')]),
      cgroupDetail: Type.String(),
      rlimits: Type.Boolean(),
      seccomp: Type.Boolean({ description: 'A seccomp filter denies ptrace, keyrings, bpf, io_uring, the mount family and new user namespaces' })
    }), Type.Null()], { description: 'Isolation mechanisms in force (uid per tenant, cgroups, rlimits, seccomp); null without a built-in sandbox' })
  }),
  registry: Type.Object({ backend: Type.String(), secretsEncrypted: Type.Boolean() }),
  workspaceQuota: Type.Union([Type.Object({
    mode: Type.Union([Type.Literal('loop'), Type.Literal('watchdog')], {
      description: 'loop: the file system enforces the quota (an ext4 image per workspace); watchdog: a polling watchdog, which parallel writers can outrun'
    }),
    reason: Type.Union([Type.String(), Type.Null()], { description: 'Why not loop, in watchdog mode' })
  }), Type.Null()], {
    description: 'How WORKSPACE_QUOTA_BYTES and WORKSPACE_MAX_FILES are enforced (WORKSPACE_QUOTA_MODE as resolved at start-up); null without built-in tools'
  }),
  remoteMcp: Type.Object({
    retries: Type.Integer({
      description: 'tools/call retried once on a fresh connection (read-only or idempotent tools whose call failed in transport before any answer)'
    }),
    breakerOpens: Type.Integer({ description: 'Times a circuit breaker opened (or reopened after a failed probe)' }),
    openBreakers: Type.Integer(),
    breakers: Type.Array(Type.Object({
      pool: Type.Union([Type.Literal('global'), Type.Literal('tenant')]),
      server: Type.String({ description: 'The client key: `{serverId}` or `user_{userId}_service_{serverId}`' }),
      state: Type.Union([Type.Literal('closed'), Type.Literal('open'), Type.Literal('half-open')]),
      consecutiveFailures: Type.Integer(),
      openedAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
      retryAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
      lastError: Type.Union([Type.String(), Type.Null()])
    }), { description: 'Circuit breakers that are open, half-open or counting failures (closed ones without failures are left out)' })
  }, { description: 'Retries and circuit breakers of the remote MCP servers' })
})
