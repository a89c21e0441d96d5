/** Small helpers shared by the file tools: schema shape and defensive argument reads. */
import type { JsonSchema } from '../../routing/types.js'
import { ToolError } from '../types.js'

/** Every built-in input schema: a closed object. */
export function objectSchema (properties: Record<string, JsonSchema>, required: string[]): JsonSchema {
  return { type: 'object', properties, required, additionalProperties: false }
}

// Arguments are validated against the schema before a tool runs; these re-checks keep a direct
// caller (tests, other tools) from reaching the filesystem with the wrong types.

export function str (args: Record<string, unknown>, key: string): string {
  const v = args[key]
  if (typeof v !== 'string') throw new ToolError(`${key} must be a string`, 'invalid-arguments')
  return v
}

export function optStr (args: Record<string, unknown>, key: string): string | undefined {
  const v = args[key]
  if (v === undefined || v === null) return undefined
  if (typeof v !== 'string') throw new ToolError(`${key} must be a string`, 'invalid-arguments')
  return v
}

export function optInt (args: Record<string, unknown>, key: string, min: number): number | undefined {
  const v = args[key]
  if (v === undefined || v === null) return undefined
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min) {
    throw new ToolError(`${key} must be an integer >= ${min}`, 'invalid-arguments')
  }
  return v
}

export function optBool (args: Record<string, unknown>, key: string): boolean | undefined {
  const v = args[key]
  if (v === undefined || v === null) return undefined
  if (typeof v !== 'boolean') throw new ToolError(`${key} must be a boolean`, 'invalid-arguments')
  return v
}

/** Bytes sniffed for the binary check (a NUL byte in them means binary), as git and ripgrep do. */
export const BINARY_SNIFF_BYTES = 8192

export function looksBinary (buf: Buffer, length = buf.length): boolean {
  return buf.subarray(0, Math.min(length, BINARY_SNIFF_BYTES)).includes(0)
}
