import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { test } from 'node:test'
import { SERVER_INFO } from '../../src/mcp-server/server.js'
import { VERSION } from '../../src/version.js'

test('VERSION is package.json\'s version, and the MCP server announces it', () => {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
  assert.equal(VERSION, pkg.version)
  assert.equal(SERVER_INFO.version, pkg.version)
})
