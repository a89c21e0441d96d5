/**
 * Code mode (SPEC 19): `run_tools_script`, a meta tool that runs the model's JavaScript or Python
 * in the tenant's sandbox with a client library whose calls come back over a per-call Unix socket
 * and go through the gateway like any call.
 */
export { describeRunToolsScript, RUN_TOOLS_SCRIPT } from './script-entry.js'
export { ScriptTool } from './script-tool.js'
export type { ScriptWorkspace } from './script-tool.js'
export type { InnerAnswer, InnerCall } from './call-socket.js'
