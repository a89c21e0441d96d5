import { Type } from '@sinclair/typebox'

const InstanceInfo = Type.Object({
  id: Type.String({ description: 'The instance (host name, pid and a random part; a restart is a new instance)' }),
  url: Type.String({ description: 'Its INSTANCE_URL: where the other instances reach it' }),
  startedAt: Type.Integer({ description: 'Epoch milliseconds' }),
  lastSeenAt: Type.Integer({ description: 'Its last heartbeat, epoch milliseconds' }),
  processes: Type.Integer({ minimum: 0, description: 'Its running background processes (bash start) at that heartbeat' })
})

export const ClusterResponse = Type.Object({
  self: Type.Union([Type.String(), Type.Null()], { description: 'The instance that answered; null without Redis (one instance, no membership)' }),
  instances: Type.Array(InstanceInfo, { description: 'Live instances (heartbeat within 3 x CLUSTER_HEARTBEAT_MS), oldest first; empty without Redis' })
})
