export { newInstanceId } from './coordination.js'
export type { Coordination } from './coordination.js'
