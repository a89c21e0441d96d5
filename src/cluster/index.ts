export { newInstanceId } from './coordination.js'
export type { Coordination } from './coordination.js'
export { LeaseLock, LeaseLostError, LockUnavailableError, LockWaitAbortedError } from './lease-lock.js'
export type { LeaseContext, LeaseLockOptions, WriteLock } from './lease-lock.js'
