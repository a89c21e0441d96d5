import type { Logger } from '../logger.js'
import type { RedisTarget } from '../redis/index.js'
import type { SecretBox } from '../registry/secrets.js'
import { RedisApprovalStore } from './redis-store.js'
import { ApprovalService } from './service.js'
import { MemoryApprovalStore } from './store.js'
import { ApprovalWebhook } from './webhook.js'

export { ApprovalFacade } from './facade.js'
export type { ApprovedCall } from './facade.js'
export { ApprovalService } from './service.js'
export type { ApprovalRecord } from './store.js'
export { RedisApprovalStore } from './redis-store.js'

export interface ApprovalSettings {
  /** Where Redis is (REDIS_CLUSTER_NODES or REDIS_URL); wins over redisUrl. */
  target?: RedisTarget | undefined
  /** REDIS_URL; with no target either, held calls stay in this instance's memory. */
  redisUrl?: string | undefined
  keyPrefix: string
  ttlMs: number
  /** TENANT_MAX_PENDING_APPROVALS. */
  maxPendingPerTenant?: number | undefined
  box: SecretBox
  webhookUrl?: string | undefined
  webhookSecret?: string | undefined
  logger: Logger
}

/** Held calls in Redis when it is configured (every instance sees and decides them), else in memory. */
export function createApprovals (s: ApprovalSettings): ApprovalService {
  const target = s.target ?? (s.redisUrl !== undefined && s.redisUrl !== '' ? { kind: 'single' as const, url: s.redisUrl } : undefined)
  const store = target !== undefined
    ? new RedisApprovalStore({ target, keyPrefix: s.keyPrefix, onError: () => {} })
    : new MemoryApprovalStore()
  const webhook = s.webhookUrl !== undefined && s.webhookUrl !== ''
    ? new ApprovalWebhook({ url: s.webhookUrl, secret: s.webhookSecret ?? '', logger: s.logger })
    : undefined
  return new ApprovalService({
    store, box: s.box, ttlMs: s.ttlMs, logger: s.logger, webhook, ...(s.maxPendingPerTenant !== undefined ? { maxPendingPerTenant: s.maxPendingPerTenant } : {})
  })
}
