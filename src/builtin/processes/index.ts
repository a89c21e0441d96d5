export { DEFAULT_WRITE_TIMEOUT_MS, ProcessManager } from './process-manager.js'
export type { ProcessSnapshot } from './process-manager.js'
export { ProcessService } from './process-service.js'
