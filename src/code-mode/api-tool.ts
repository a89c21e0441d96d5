/** A tool as code mode's typed API sees it (SPEC 19): its name as the listing shows it, description and input schema. */
export interface ApiTool { name: string, description: string, inputSchema?: unknown }

/**
 * A listed tool's parts with the types the renderers rely on: the listing's text comes from tool servers, and
 * the typed API must render something for any input rather than throw.
 */
export function toolParts (tool: unknown): { name: string, description: unknown, inputSchema: unknown } {
  const t = typeof tool === 'object' && tool !== null ? tool as Partial<ApiTool> : {}
  return { name: typeof t.name === 'string' ? t.name : '', description: t.description, inputSchema: t.inputSchema }
}
