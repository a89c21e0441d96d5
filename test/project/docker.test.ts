import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFile } from 'node:fs/promises'
import { parse } from 'yaml'

// There is no Docker engine on the CI machines: these tests lint the files instead of running them.

test('Dockerfile: multi-stage, slim Debian Node 20, bwrap + ripgrep, non-root, CMD node, volume, healthcheck', async () => {
  const text = await readFile('Dockerfile', 'utf8')
  const froms = [...text.matchAll(/^FROM\s+(\S+)(?:\s+AS\s+(\S+))?/gim)]
  assert.ok(froms.length >= 2, 'at least two stages')
  for (const [, image] of froms) assert.match(image ?? '', /^node:20-[a-z]+-slim$/)
  assert.match(text, /apt-get install[^\n]*\\?\n?[^\n]*bubblewrap[^\n]*ripgrep/)
  assert.match(text, /COPY --from=build/)
  const users = [...text.matchAll(/^USER\s+(\S+)/gm)].map((m) => m[1])
  assert.ok(users.length > 0 && users.at(-1) !== 'root', 'the runtime stage runs as a non-root user')
  assert.match(text, /^CMD \["node", "dist\/src\/server\.js"\]$/m)
  assert.match(text, /^VOLUME /m)
  assert.match(text, /^HEALTHCHECK /m)
  assert.doesNotMatch(text, /npm start/)
  // the runtime copies the built server the CMD names
  assert.match(text, /npm run build/)
})

test('docker-compose.yml: gateway + redis with healthcheck, depends_on condition, init, sandbox options', async () => {
  const compose = parse(await readFile('docker-compose.yml', 'utf8')) as any
  const gateway = compose.services.gateway
  const redis = compose.services.redis
  assert.ok(gateway && redis)
  assert.equal(gateway.init, true)
  assert.equal(gateway.depends_on.redis.condition, 'service_healthy')
  assert.ok(redis.healthcheck.test.includes('ping'))
  assert.match(gateway.environment.REDIS_URL, /^redis:\/\/redis:6379/)
  assert.ok(gateway.security_opt.includes('seccomp=unconfined'))
  assert.ok(gateway.volumes.some((v: string) => v.endsWith(':/data/workspaces')))
  assert.ok('workspaces' in compose.volumes)
})
