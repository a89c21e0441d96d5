import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFile } from 'node:fs/promises'
import semver from 'semver'

// `npm ci` warns EBADENGINE for any installed package whose `engines.node` the running Node does
// not satisfy. Every Node the project's own `engines` admits must install it cleanly, so every
// locked package (dev ones too: `npm ci` installs them) must accept the oldest of them.
test('every locked package accepts the oldest Node that package.json engines admits', async () => {
  const pkg = JSON.parse(await readFile('package.json', 'utf8'))
  const lock = JSON.parse(await readFile('package-lock.json', 'utf8'))
  const floor = semver.minVersion(pkg.engines.node)
  assert.ok(floor !== null, pkg.engines.node)
  assert.equal(floor.major, 20, 'the project supports Node 20')
  const refused: string[] = []
  for (const [path, entry] of Object.entries<any>(lock.packages)) {
    if (path === '' || entry.optional === true) continue
    const wanted = entry.engines?.node
    if (typeof wanted !== 'string') continue
    if (!semver.satisfies(floor, wanted, { includePrerelease: true })) refused.push(`${path.replace(/^.*node_modules\//, '')}@${entry.version} wants node ${wanted}`)
  }
  assert.deepEqual(refused, [], `npm ci on Node ${floor.version} would warn EBADENGINE`)
})
