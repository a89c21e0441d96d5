export { PinFacade } from './facade.js'
export { PinningPolicies } from './policy.js'
export { PinService } from './service.js'
export { definitionChangedRecord } from './record.js'
