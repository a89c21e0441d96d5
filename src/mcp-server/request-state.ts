/**
 * The requestState handles of `input_required` rounds are shared by /mcp and REST: they live in
 * src/routing/input-rounds.ts (docs/ARCHITECTURE.md#mcp-eras). These names stay for /mcp's endpoint
 * and its prompts/get and resources/read rounds (surface-handlers.ts).
 */
export { RequestStateSealer } from '../routing/input-rounds.js'
export type { RoundClaims } from '../routing/input-rounds.js'
