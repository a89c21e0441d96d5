/**
 * Key names with a Redis Cluster hash tag: `{prefix}{scope}:rest`. Every key of one scope (a
 * tenant's registry, a tenant's journal, one workspace's lock, the cluster's membership) shares
 * its `{scope}` tag, so lands in one hash slot, so the Lua scripts that touch several of them
 * run on a Redis Cluster. The layout is documented in docs/CLUSTER.md#redis-key-layout.
 */
export function taggedKey (prefix: string, scope: string, rest: string): string {
  // A brace inside the scope would end the tag early (Redis hashes up to the first '}').
  if (scope.includes('{') || scope.includes('}')) throw new Error(`A key scope may not contain braces: ${scope}`)
  return `${prefix}{${scope}}:${rest}`
}
