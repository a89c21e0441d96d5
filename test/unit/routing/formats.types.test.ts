/**
 * Type-level contract between GET /tools and the providers' own SDK types. `npm run typecheck`
 * compiles this file, so when a format's declared shape and the package's type drift apart
 * the build fails. Each format is checked twice: the rendered value must be assignable to the
 * SDK type, and every field it declares must exist on that type (assignability alone would let
 * an unknown extra field through, which some APIs refuse). Runtime checks of real listings are
 * in test/http/routes/tools.formats.test.ts.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import type { ChatCompletionFunctionTool, ChatCompletionTool } from 'openai/resources/chat/completions'
import type { FunctionDefinition } from 'openai/resources/shared'
import type { FunctionTool, Tool as ResponsesSdkTool } from 'openai/resources/responses/responses'
import type Anthropic from '@anthropic-ai/sdk'
import type { Messages } from '@anthropic-ai/sdk/resources/messages'
import { Type } from '@google/genai'
import type { FunctionDeclaration, Schema, Tool as GenaiTool } from '@google/genai'
import type { Tool as McpSdkTool } from '@modelcontextprotocol/sdk/types.js'
import { renderTools } from '../../../src/routing/formats.js'
import type {
  AnthropicTool, GeminiFunctionDeclaration, GeminiSchema, GeminiType, McpTool, OpenAIChatTool, ResponsesTool
} from '../../../src/routing/formats.js'
import type { ListedTool } from '../../../src/routing/router.js'

/** Compiles only when T is `true`. */
type Assert<T extends true> = T
/** True when every key of A is a key of B. */
type KeysWithin<A, B> = Exclude<keyof A, keyof B> extends never ? true : false

// The declared fields exist on the SDK types.
export type OpenAIFields = Assert<KeysWithin<OpenAIChatTool, ChatCompletionFunctionTool>>
export type OpenAIFunctionFields = Assert<KeysWithin<OpenAIChatTool['function'], FunctionDefinition>>
export type ResponsesFields = Assert<KeysWithin<ResponsesTool, FunctionTool>>
export type AnthropicFields = Assert<KeysWithin<AnthropicTool, Anthropic.Tool>>
export type AnthropicSchemaFields = Assert<KeysWithin<AnthropicTool['input_schema'], Anthropic.Tool.InputSchema>>
export type GeminiFields = Assert<KeysWithin<GeminiFunctionDeclaration, FunctionDeclaration>>
export type GeminiSchemaFields = Assert<KeysWithin<GeminiSchema, Schema>>
export type McpFields = Assert<KeysWithin<McpTool, McpSdkTool>>

// Every Gemini type name the gateway emits is a value of @google/genai's `Type` enum.
export type GeminiTypeValues = Assert<GeminiType extends `${Type}` ? true : false>

/**
 * `Type` is a TypeScript enum, which a string literal never satisfies at the type level even
 * when the value is identical; the check above proves the values match, and this maps the
 * gateway's literal union onto the enum so the rest of the schema can be compared field by field.
 */
type AsGenai<S> = S extends GeminiType ? Type
  : S extends ReadonlyArray<infer E> ? Array<AsGenai<E>>
    : S extends Record<string, unknown> | GeminiSchema ? { [K in keyof S]: AsGenai<S[K]> }
      : S

const schema = {
  type: 'object',
  properties: { path: { type: 'string', minLength: 1 }, mode: { anyOf: [{ const: 'a' }, { type: 'null' }] } },
  required: ['path', 'mode'],
  additionalProperties: false
}
const listed: ListedTool[] = [{
  name: 'probe',
  entry: { route: 'function', source: 'probe', name: 'probe', spec: { name: 'probe', description: 'A probe.', inputSchema: schema } }
}]

test('each format\'s rendered value is assignable to the provider SDK type', () => {
  const chat: ChatCompletionTool[] = renderTools(listed, 'openai')
  const chatFn: ChatCompletionFunctionTool[] = renderTools(listed, 'openai')
  const responses: ResponsesSdkTool[] = renderTools(listed, 'responses')
  const responsesFn: FunctionTool[] = renderTools(listed, 'responses')
  const anthropic: Anthropic.Tool[] = renderTools(listed, 'anthropic')
  const messages: Messages.Tool[] = renderTools(listed, 'anthropic')
  const declarations: FunctionDeclaration[] = renderTools(listed, 'gemini') as Array<AsGenai<GeminiFunctionDeclaration>>
  const geminiTools: GenaiTool[] = [{ functionDeclarations: declarations }]
  const mcp: McpSdkTool[] = renderTools(listed, 'mcp')

  // The values behind the types, so this test fails at runtime too if a renderer changes shape.
  assert.equal(chat.length + chatFn.length + responses.length + responsesFn.length + anthropic.length + messages.length + mcp.length, 7)
  assert.equal(responsesFn[0]?.strict, false, 'minLength is outside strict mode: not strict')
  assert.equal(geminiTools[0]?.functionDeclarations?.[0]?.parameters?.type, Type.OBJECT)
  assert.equal(geminiTools[0]?.functionDeclarations?.[0]?.parameters?.properties?.path?.minLength, '1')
})
