export { DEFAULT_WRITE_TIMEOUT_MS, ProcessManager } from './process-manager.js'
export type { ProcessLogs, ProcessManagerOptions, ProcessManagerStats, ProcessSnapshot, ProcessStatus, StartRequest, WriteOptions } from './process-manager.js'
export { LogRing } from './log-ring.js'
export type { LogSlice } from './log-ring.js'
