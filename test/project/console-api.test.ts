import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync, readdirSync, statSync } from 'node:fs'
import { join, relative } from 'node:path'
import { parse } from 'yaml'
import { ROUTES } from '../../console/src/routes.js'

// The console uses only the public HTTP API: every (method, path template) its client can call is
// an operation of the committed openapi.yaml, under the operationId the console names it by, and
// nothing in console/src reaches the network except the client's one fetch.

type Doc = { paths?: Record<string, Record<string, { operationId?: string } | undefined> | undefined> }
type Routes = Record<string, readonly [string, string]>

/** What is wrong with each route against the document: an unknown path, method or a different operationId. */
function routeProblems (routes: Routes, doc: Doc): string[] {
  const problems: string[] = []
  for (const [operationId, [method, path]] of Object.entries(routes)) {
    const item = doc.paths?.[path]
    if (item === undefined) { problems.push(`${method} ${path}: no such path in openapi.yaml`); continue }
    const operation = item[method.toLowerCase()]
    if (operation === undefined) { problems.push(`${method} ${path}: the path has no ${method} in openapi.yaml`); continue }
    if (operation.operationId !== operationId) problems.push(`${method} ${path}: openapi.yaml names it ${operation.operationId ?? '(none)'}, the console ${operationId}`)
  }
  return problems
}

const doc = parse(readFileSync('openapi.yaml', 'utf8')) as Doc

function sources (dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = join(dir, name)
    return statSync(full).isDirectory() ? sources(full) : /\.tsx?$/.test(name) ? [full] : []
  })
}

test('every route the console calls is an operation of openapi.yaml, by its operationId', () => {
  assert.ok(Object.keys(ROUTES).length >= 25, 'the route table is read')
  assert.deepEqual(routeProblems(ROUTES, doc), [])
})

test('the check fails on a made-up path, a wrong method and a wrong operationId', () => {
  assert.deepEqual(routeProblems({ listFrobs: ['GET', '/frobs/{frobId}'] }, doc), ['GET /frobs/{frobId}: no such path in openapi.yaml'])
  assert.deepEqual(routeProblems({ deleteTools: ['DELETE', '/tools'] }, doc), ['DELETE /tools: the path has no DELETE in openapi.yaml'])
  assert.deepEqual(routeProblems({ getTools: ['GET', '/tools'] }, doc), ['GET /tools: openapi.yaml names it listTools, the console getTools'])
})

test('console/src reaches the network only through the client\'s one fetch, with paths only from the route table', () => {
  const files = sources('console/src')
  assert.ok(files.length > 5)
  let fetches = 0
  for (const file of files) {
    const name = relative('console/src', file)
    const text = readFileSync(file, 'utf8').replace(/^\s*\/\/.*$/gm, '')
    assert.doesNotMatch(text, /XMLHttpRequest|EventSource|WebSocket|sendBeacon|importScripts/, name)
    const here = text.match(/\bfetch\(/g)?.length ?? 0
    if (name !== 'api.ts') assert.equal(here, 0, `${name} calls fetch: go through api.ts`)
    fetches += here
    // An API path written outside the route table would be a route the check above never sees.
    if (name !== 'routes.ts') assert.doesNotMatch(text, /['"`]\/(tools|catalog|invoke|mcp|users|approvals|status|cluster|readyz|healthz|metrics|policy)\b/, `${name} writes an API path: add it to routes.ts`)
  }
  assert.equal(fetches, 1)
})

test('the Docker image builds the console with npm ci and ships it where dist/routes/console.js looks', () => {
  const dockerfile = readFileSync('Dockerfile', 'utf8')
  const ci = dockerfile.indexOf('RUN npm ci')
  for (const copy of ['COPY scripts/build-console.mjs', 'COPY console ./console']) {
    const at = dockerfile.indexOf(copy)
    assert.ok(at >= 0 && at < ci, `${copy} before npm ci (its prepare script builds the console)`)
  }
  assert.match(dockerfile, /^COPY --from=build \/app\/console\/dist \.\/console\/dist$/m)
  const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: Record<string, string> }
  assert.equal(pkg.scripts.prepare, 'node scripts/build-console.mjs')
  assert.equal(pkg.scripts['build:console'], 'node scripts/build-console.mjs')
})
