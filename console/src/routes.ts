/**
 * Every HTTP route the console calls, by the operationId openapi.yaml gives it, as (method, path
 * template). The client (api.ts) reaches the gateway only through this table, and
 * test/project/console-api.test.ts checks each row against openapi.yaml: the console uses no
 * route that is not in the public API.
 */
export const ROUTES = {
  listTools: ['GET', '/tools'],
  searchTools: ['GET', '/tools/search'],
  getCatalog: ['GET', '/catalog'],
  invokeTool: ['POST', '/invoke'],
  listGlobalServers: ['GET', '/mcp/servers'],
  putGlobalServer: ['PUT', '/mcp/servers/{serverId}'],
  deleteGlobalServer: ['DELETE', '/mcp/servers/{serverId}'],
  listGlobalServerTools: ['GET', '/mcp/servers/{serverId}/tools'],
  authorizeGlobalServerOAuth: ['POST', '/mcp/servers/{serverId}/oauth/authorize'],
  getGlobalServerOAuth: ['GET', '/mcp/servers/{serverId}/oauth'],
  deleteGlobalServerOAuth: ['DELETE', '/mcp/servers/{serverId}/oauth'],
  getGlobalServerPins: ['GET', '/mcp/servers/{serverId}/pins'],
  acceptGlobalServerPins: ['POST', '/mcp/servers/{serverId}/pins'],
  listUserServers: ['GET', '/users/{userId}/mcp/servers'],
  putUserServer: ['PUT', '/users/{userId}/mcp/servers/{serverId}'],
  deleteUserServer: ['DELETE', '/users/{userId}/mcp/servers/{serverId}'],
  listUserServerTools: ['GET', '/users/{userId}/mcp/servers/{serverId}/tools'],
  authorizeUserServerOAuth: ['POST', '/users/{userId}/mcp/servers/{serverId}/oauth/authorize'],
  getUserServerOAuth: ['GET', '/users/{userId}/mcp/servers/{serverId}/oauth'],
  deleteUserServerOAuth: ['DELETE', '/users/{userId}/mcp/servers/{serverId}/oauth'],
  getUserServerPins: ['GET', '/users/{userId}/mcp/servers/{serverId}/pins'],
  acceptUserServerPins: ['POST', '/users/{userId}/mcp/servers/{serverId}/pins'],
  listInvocations: ['GET', '/users/{userId}/invocations'],
  getInvocation: ['GET', '/users/{userId}/invocations/{callId}'],
  listApprovals: ['GET', '/approvals'],
  getApproval: ['GET', '/approvals/{approvalId}'],
  decideApproval: ['POST', '/approvals/{approvalId}'],
  listWorkspaces: ['GET', '/users/{userId}/workspaces'],
  uploadWorkspace: ['PUT', '/users/{userId}/workspaces/{workspaceId}'],
  deleteWorkspace: ['DELETE', '/users/{userId}/workspaces/{workspaceId}'],
  downloadWorkspace: ['GET', '/users/{userId}/workspaces/{workspaceId}/archive'],
  createCheckpoint: ['POST', '/users/{userId}/workspaces/{workspaceId}/checkpoints'],
  listCheckpoints: ['GET', '/users/{userId}/workspaces/{workspaceId}/checkpoints'],
  restoreCheckpoint: ['POST', '/users/{userId}/workspaces/{workspaceId}/checkpoints/{checkpointId}/restore'],
  deleteCheckpoint: ['DELETE', '/users/{userId}/workspaces/{workspaceId}/checkpoints/{checkpointId}'],
  getWhoAmI: ['GET', '/whoami'],
  getStatus: ['GET', '/status'],
  getCluster: ['GET', '/cluster'],
  getReadiness: ['GET', '/readyz'],
  getMetrics: ['GET', '/metrics']
} as const satisfies Record<string, readonly ['GET' | 'POST' | 'PUT' | 'DELETE', `/${string}`]>

export type RouteName = keyof typeof ROUTES

/** The path parameters a template names: `/users/{userId}/x` needs `{ userId }`. */
export type PathParams<P extends string> = P extends `${string}{${infer Name}}${infer Rest}` ? { [K in Name | keyof PathParams<Rest>]: string } : Record<never, never>

/** Fills a path template, each value URL-encoded; a missing value is a bug of the caller. */
export function fillPath (template: string, params: Record<string, string>): string {
  return template.replace(/\{([A-Za-z]+)\}/g, (_m, name: string) => {
    const value = params[name]
    if (value === undefined || value === '') throw new Error(`missing path parameter ${name} for ${template}`)
    return encodeURIComponent(value)
  })
}
