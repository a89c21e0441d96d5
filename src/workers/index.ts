/**
 * Worker threads shared fairly between tenants (docs/ARCHITECTURE.md#workers): the pool, its
 * scheduler, and what a worker does first.
 */
export { defaultPoolSize, FairWorkerPool } from './pool.js'
export type { PoolCall, PoolErrors, WorkBudget } from './pool.js'
export { announceThread } from './thread.js'
