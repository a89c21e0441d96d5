/**
 * Request examples of the OpenAPI document, keyed by operationId. Swagger UI prefills the first
 * body example of an operation and every parameter example, so each one must work as it stands
 * against a gateway started with `npm start` (the example functions and MCP services, the
 * in-memory registry): the calls name real tools, and the workspace ones build on each other in
 * the order a reader tries them (write a file for alice, read it back, checkpoint, restore).
 * test/project/openapi-lint.test.ts runs every one of them against the real server.
 */

export interface BodyExample {
  summary: string
  description?: string
  value: unknown
}

export interface OperationExamples {
  /** Named application/json bodies; the first is the one Swagger UI prefills. */
  body?: Record<string, BodyExample>
  /** Values of path and query parameters, by name (path parameters also fall back to PATH_PARAMETER_EXAMPLES). */
  parameters?: Record<string, string>
}

/** What a path parameter is filled with unless the operation says otherwise. */
export const PATH_PARAMETER_EXAMPLES: Readonly<Record<string, string>> = {
  userId: 'alice',
  // The workspace built-in tools use when a call names none: the invoke examples write to it.
  workspaceId: 'default',
  path: 'notes.md',
  // The shape of an id POST /invoke answers with 202 (the examples test holds a call to get a real one).
  approvalId: 'apr_6f1c0d2e9b8a47d5a3e1f0c9b8d7e6a5'
}

/** The allow-list the listing examples use: two example functions and the example local MCP service's slugify. */
const EXAMPLE_FUNCTIONS = 'current_time,calculate,text_slugify'

export const OPERATION_EXAMPLES: Readonly<Record<string, OperationExamples>> = {
  listTools: { parameters: { functions: EXAMPLE_FUNCTIONS } },
  invokeTool: {
    body: {
      calculate: {
        summary: 'A function tool, arguments as an object',
        value: { name: 'calculate', arguments: { expression: '(2 + 3) * sqrt(16) / 4' }, callId: 'call_1' }
      },
      argumentsAsString: {
        summary: 'A local MCP tool, arguments as the JSON string a model emitted',
        value: { name: 'text_slugify', arguments: '{"text":"Hello, Wörld!"}', callId: 'call_2' }
      },
      writeFile: {
        summary: "A built-in tool in alice's default workspace",
        value: { name: 'write_file', userId: 'alice', arguments: { path: 'notes.md', content: 'hello\n' }, callId: 'call_3' }
      },
      readFileAllowed: {
        summary: 'Only what an allow-list permits (the read-only built-ins)',
        description: 'A call outside `allow` is a 403, the same allow-list GET /tools?functions=@builtin-readonly lists for.',
        value: { name: 'read_file', userId: 'alice', arguments: { path: 'notes.md' }, allow: { functions: ['@builtin-readonly'] }, callId: 'call_4' }
      },
      writeWithCheckpoint: {
        summary: 'A checkpoint before a mutating built-in runs (the result carries its checkpointId)',
        value: {
          name: 'write_file',
          userId: 'alice',
          arguments: { path: 'notes.md', content: 'rewritten\n' },
          context: { workspaceId: 'default', checkpoint: true },
          callId: 'call_5'
        }
      }
    }
  },
  invokeBatch: {
    body: {
      twoCalls: {
        summary: 'Two calls run concurrently, results in order',
        value: {
          calls: [
            { name: 'current_time', arguments: { timeZone: 'Asia/Tokyo' }, callId: 'call_1' },
            { name: 'calculate', arguments: { expression: '6 * 7' }, callId: 'call_2' }
          ]
        }
      }
    }
  },
  putGlobalServer: {
    parameters: { serverId: 'docs' },
    body: {
      streamableHttp: {
        summary: 'A remote server over streamable HTTP',
        value: { type: 'streamable_http', url: 'https://mcp.example.com/mcp', priority: 1 }
      }
    }
  },
  deleteGlobalServer: { parameters: { serverId: 'docs' } },
  listGlobalServerTools: { parameters: { serverId: 'docs' } },
  putUserServer: {
    parameters: { serverId: 'github' },
    body: {
      withSecretHeader: {
        summary: 'A tenant server with a secret header (encrypted at rest, masked on every read)',
        value: { type: 'http', url: 'https://api.example.com/mcp', headers: { Authorization: 'Bearer ghp_xxx' } }
      }
    }
  },
  deleteUserServer: { parameters: { serverId: 'github' } },
  authorizeGlobalServerOAuth: {
    parameters: { serverId: 'github' },
    body: { page: { summary: 'An admin connects a global server once for every tenant', value: {} } }
  },
  authorizeUserServerOAuth: {
    parameters: { serverId: 'github' },
    body: {
      back: { summary: 'Send the user back to the SaaS afterwards (its origin in OAUTH_RETURN_ALLOW)', value: { returnTo: 'https://app.example.com/settings/integrations' } },
      page: { summary: 'No returnTo: the callback answers a page saying connected', value: {} }
    }
  },
  listUserServerTools: { parameters: { serverId: 'github' } },
  getUserServerPins: { parameters: { serverId: 'github' } },
  getGlobalServerPins: { parameters: { serverId: 'github' } },
  acceptUserServerPins: {
    parameters: { serverId: 'github' },
    body: {
      asRead: {
        summary: 'Accept one changed tool, only if it is still offered as it was read (its currentDigest)',
        value: { tools: ['create_issue'], digests: { create_issue: 'sha256:3f0c5e0d2f6a4b1c9e8d7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d' } }
      },
      all: { summary: 'Accept every definition the server offers now', value: {} }
    }
  },
  acceptGlobalServerPins: {
    parameters: { serverId: 'github' },
    body: { all: { summary: 'Accept every definition the server offers now, for calls without a tenant', value: {} } }
  },
  putDefaultPolicy: {
    body: {
      guardRails: {
        summary: 'Guard rails for every tenant: a bash command refused, a ceiling on tool output',
        value: { bash: { denyCommands: ['^\\s*rm\\s+-rf\\s+/\\s*$'] }, limits: { outputMaxChars: 100000 } }
      },
      none: { summary: 'No default policy: restricts nothing', value: {} }
    }
  },
  putUserPolicy: {
    body: {
      noBash: {
        summary: 'This tenant never gets bash, and reads at most 20,000 characters at a time',
        value: { deny: ['bash'], limits: { readMaxChars: 20000 } }
      }
    }
  },
  decideApproval: {
    body: {
      approve: { summary: 'Approve: the call runs now and this answer carries its result', value: { decision: 'approve' } },
      deny: { summary: 'Deny, with a reason the model is told', value: { decision: 'deny', reason: 'Writes to notes.md need a ticket' } }
    }
  },
  createCheckpoint: {
    body: {
      labelled: { summary: 'A checkpoint with a note', value: { label: 'before the refactor' } }
    }
  },
  restoreCheckpoint: {
    body: {
      empty: { summary: 'No options', value: {} }
    }
  },
  mcpPost: {
    parameters: { functions: EXAMPLE_FUNCTIONS },
    body: {
      toolsList: {
        summary: 'tools/list: the allow-list of the URL, in MCP format',
        value: { jsonrpc: '2.0', id: 1, method: 'tools/list' }
      },
      toolsCall: {
        summary: 'tools/call of a tool the URL allows',
        value: { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'calculate', arguments: { expression: '6 * 7' } } }
      },
      initialize: {
        summary: 'initialize (stateless: no session id is issued)',
        value: {
          jsonrpc: '2.0',
          id: 0,
          method: 'initialize',
          params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'swagger-ui', version: '1.0.0' } }
        }
      }
    }
  },
  mcpStream: { parameters: { functions: EXAMPLE_FUNCTIONS } }
}
