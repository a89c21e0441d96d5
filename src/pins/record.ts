import { randomUUID } from 'node:crypto'
import type { CallRecord } from '../journal/index.js'
import type { DefinitionChanged } from './service.js'

/**
 * A changed definition as a journal entry (SPEC 18): no call, so no arguments and no durations;
 * `status: definition_changed`, the server and tool, both digests in the trace.
 */
export function definitionChangedRecord (change: DefinitionChanged): CallRecord {
  return {
    callId: `pin_${randomUUID()}`,
    name: change.name,
    endedAt: Date.now(),
    userId: change.userId,
    route: change.route,
    serverId: change.serverId,
    arguments: null,
    output: `Tool '${change.tool}' of server '${change.serverId}' changed its definition: ${change.oldDigest} is pinned, ${change.newDigest} is offered`,
    trace: { definitionChanged: { tool: change.tool, oldDigest: change.oldDigest, newDigest: change.newDigest } },
    isError: false,
    error: null,
    truncated: false,
    durationMs: 0,
    toolMs: 0,
    keyId: null,
    checkpointId: null,
    approvalId: null,
    status: 'definition_changed'
  }
}
