/**
 * Tool definitions for the tool-search tests (routes/tools.search, routes/mcp.search), after
 * public MCP servers' (GitHub's and the filesystem reference server's, MIT), shortened, and an
 * SDK server that lists them and answers any call with its name and arguments.
 */
import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js'
import type { Tool } from '@modelcontextprotocol/sdk/types.js'

export const tool = (name: string, description: string, properties: Record<string, object>, required: string[] = []): Tool =>
  ({ name, description, inputSchema: { type: 'object', properties, required } })
export const str = { type: 'string' }
const num = { type: 'number' }

export const TRACKER: Tool[] = [
  tool('create_issue', 'Create a new issue in a GitHub repository', { owner: str, repo: str, title: str, body: str }, ['owner', 'repo', 'title']),
  tool('search_issues', 'Search for issues and pull requests across GitHub repositories', { q: { type: 'string', description: 'Search query' } }, ['q']),
  tool('add_issue_comment', 'Add a comment to an existing issue', { issue_number: num, body: str }, ['issue_number', 'body']),
  tool('merge_pull_request', 'Merge a pull request', { pull_number: num, merge_method: { type: 'string', enum: ['merge', 'squash'] } }, ['pull_number'])
]
export const FILES: Tool[] = [
  tool('read_text_file', 'Read the complete contents of a file from the file system as text', { path: str }, ['path']),
  tool('list_directory', 'Get a detailed listing of all files and directories in a specified path', { path: str }, ['path']),
  tool('move_file', 'Move or rename files and directories', { source: str, destination: str }, ['source', 'destination'])
]
/** Globex's own server: a tool that would match acme's queries best, were it ever searched for acme. */
export const GLOBEX_TOOLS: Tool[] = [
  tool('create_issue_report', 'Create a new issue bug report ticket in the repository issue tracker', { title: str }, ['title'])
]

export function toolServer (tools: Tool[]): () => Server {
  return () => {
    const server = new Server({ name: 'search-fixture', version: '1.0.0' }, { capabilities: { tools: {} } })
    server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools }))
    server.setRequestHandler(CallToolRequestSchema, async (r) => ({
      content: [{ type: 'text' as const, text: `ran ${r.params.name} ${JSON.stringify(r.params.arguments)}` }]
    }))
    return server
  }
}
