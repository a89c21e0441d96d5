/**
 * The names of the built-in coding tools. They are reserved: tier 1 always wins them, so the
 * loaders of functions and local MCP services refuse tools that take one, and the allow-list
 * groups `@builtin` / `@builtin-readonly` expand to them. Kept here, beside the other naming
 * rules, so those folders need not import the built-in tools themselves.
 * The order is the reference implementation's (ai4j's allCodingToolNames()).
 */
export const BUILTIN_NAMES = ['bash', 'read_file', 'write_file', 'apply_patch', 'glob', 'grep', 'edit', 'update_agents_md'] as const
export type BuiltinName = typeof BUILTIN_NAMES[number]
/** The built-ins that never change the workspace (`@builtin-readonly`). */
export const BUILTIN_READONLY: readonly BuiltinName[] = ['read_file', 'glob', 'grep']

export function isBuiltinName (name: string): name is BuiltinName {
  return (BUILTIN_NAMES as readonly string[]).includes(name)
}

/**
 * The names of the gateway's own meta tools (routing/meta.ts): `tool_search` searches the
 * request's allow-list (SPEC 17), `run_tools_script` runs a program that calls its tools (code
 * mode, SPEC 19; `functions=@code`). Reserved like the built-ins, never part of `@builtin`.
 */
export const META_TOOL_NAMES = ['tool_search', 'run_tools_script'] as const

/** A name no function or local MCP tool may take: a built-in's or a meta tool's. */
export function isReservedToolName (name: string): boolean {
  return isBuiltinName(name) || (META_TOOL_NAMES as readonly string[]).includes(name)
}
