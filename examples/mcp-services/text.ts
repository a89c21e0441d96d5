import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { z } from 'zod'
import { defineMcpService } from '../../src/authoring.js'

/**
 * An example local MCP service: text utilities a model gets wrong by itself (counting,
 * slugs). Exposed as `text_stats` and `text_slugify`.
 */
export const textTools = defineMcpService({
  name: 'text',
  server: () => {
    const server = new McpServer({ name: 'text', version: '1.0.0' })
    server.registerTool('stats', {
      title: 'Text statistics',
      description: 'Count characters, words, lines and sentences of a text exactly.',
      inputSchema: { text: z.string().max(1_000_000).describe('The text to measure') }
    }, async ({ text }) => {
      const stats = {
        characters: [...text].length,
        words: (text.match(/[\p{L}\p{N}][\p{L}\p{N}'’-]*/gu) ?? []).length,
        lines: text === '' ? 0 : text.split(/\r\n|\r|\n/).length,
        sentences: (text.match(/[^.!?]+[.!?]+/g) ?? []).length
      }
      return { content: [{ type: 'text', text: JSON.stringify(stats) }], structuredContent: stats }
    })
    server.registerTool('slugify', {
      title: 'Slugify',
      description: 'Turn a title into a URL slug: lowercase ASCII words joined by hyphens, accents removed.',
      inputSchema: {
        text: z.string().max(10_000).describe('The title'),
        maxLength: z.number().int().min(1).max(200).optional().describe('Cut the slug to this length (default 80)')
      }
    }, async ({ text, maxLength = 80 }) => {
      const slug = text.normalize('NFKD').replace(/[\u0300-\u036f]/g, '').toLowerCase()
        .replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '').slice(0, maxLength).replace(/-+$/, '')
      return { content: [{ type: 'text', text: slug }] }
    })
    return server
  }
})
