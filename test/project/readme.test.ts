import { after, test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { renderConfigTable } from '../../src/config.js'
import { renderOpenApiYaml } from '../../src/openapi.js'

const run = promisify(execFile)

/** The README's commands run here: one that writes a file (`> acme.ndjson`) writes it in a temp dir, not the checkout. */
const SCRATCH = await mkdtemp(join(tmpdir(), 'tg-readme-cwd-'))
after(async () => await rm(SCRATCH, { recursive: true, force: true }))

/** The curl commands of the README's walk-through, continuation lines joined. */
function curlCommands (readme: string): string[] {
  const section = readme.slice(readme.indexOf('## Walk-through with curl'), readme.indexOf('## The API in short'))
  const blocks = [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1] ?? '')
  return blocks.flatMap((b) => b.replace(/\\\n\s*/g, ' ').split('\n')).map((l) => l.trim()).filter((l) => l.startsWith('curl '))
}

/** Starts `src/server.ts` as `npm start` does, on a free port; resolves once it listens. */
async function startServer (t: { after: (fn: () => void) => void }, env: Record<string, string>): Promise<{ port: number, logs: string }> {
  const server = spawn(process.execPath, ['--import', 'tsx', 'src/server.ts'], {
    env: { ...process.env, PORT: '0', LOG_LEVEL: 'info', API_KEYS: '', API_KEYS_FILE: '', REDIS_URL: '', ...env },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  t.after(() => { server.kill('SIGKILL') })
  let logs = ''
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${logs}`)), 60_000)
    server.stdout.on('data', (chunk: Buffer) => {
      logs += chunk.toString()
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(logs)
      if (m) { clearTimeout(timer); resolve(Number(m[1])) }
    })
    server.stderr.on('data', (chunk: Buffer) => { logs += chunk.toString() })
    server.on('exit', (code) => { clearTimeout(timer); reject(new Error(`server exited ${code}:\n${logs}`)) })
  })
  return { port, logs }
}

test('the README walk-through works as written against a real server started like npm start', async (t) => {
  const readme = await readFile('README.md', 'utf8')
  const commands = curlCommands(readme)
  assert.ok(commands.length >= 9, `found ${commands.length} curl lines`)
  const workspaces = await mkdtemp(join(tmpdir(), 'tg-readme-'))
  t.after(async () => await rm(workspaces, { recursive: true, force: true }))
  const { port, logs } = await startServer(t, { WORKSPACES_DIR: workspaces })
  assert.match(logs, /running OPEN/)

  const outputs: any[] = []
  for (const command of commands) {
    const { stdout } = await run('sh', ['-c', command.replaceAll('127.0.0.1:8080', `127.0.0.1:${port}`)], { timeout: 30_000, cwd: SCRATCH })
    outputs.push(JSON.parse(stdout))
  }
  const byCommand = (needle: string): any => outputs[commands.findIndex((c) => c.includes(needle))]
  assert.deepEqual(byCommand('functions=current_time').tools.map((x: any) => x.function.name), ['current_time', 'calculate', 'text_slugify'])
  assert.deepEqual(byCommand('no_such_tool&format').unresolved.map((u: any) => u.name), ['no_such_tool'])
  assert.equal(JSON.parse(byCommand('(2 + 3)').output).result, 5)
  assert.equal(byCommand('Hello, W').output, 'hello-world')
  const failed = byCommand('1 / 0')
  assert.equal(failed.isError, true)
  assert.match(failed.output, /^TOOL_ERROR: .*Division by zero/)
  assert.equal(byCommand('"name":"no_such_tool"').code, 'GW_TOOL_NOT_FOUND')
  assert.equal(JSON.parse(byCommand('write_file').output).created, true)
  const wc = JSON.parse(byCommand('wc -l').output)
  assert.equal(wc.exitCode, 0)
  assert.match(wc.stdout, /^1 notes\.md/)
  const batch = byCommand('invoke/batch').results
  assert.equal(batch[0].isError, false)
  assert.equal(batch[1].statusCode, 404)
})

test('the README configuration table is the one generated from the config schema', async () => {
  const readme = await readFile('README.md', 'utf8')
  const table = /<!-- config:start -->\n([\s\S]*?)\n<!-- config:end -->/.exec(readme)?.[1]
  assert.equal(table, renderConfigTable(), 'run `npm run docs` to regenerate it')
})

test('openapi.yaml is the document generated from the routes', async () => {
  const committed = await readFile('openapi.yaml', 'utf8')
  assert.equal(committed, await renderOpenApiYaml(), 'run `npm run docs` to regenerate it')
})

test('the README workspace walk-through works as written: upload a tar czf archive, download, list, checkpoint, restore, delete', async (t) => {
  const readme = await readFile('README.md', 'utf8')
  const section = readme.slice(readme.indexOf('## Workspaces'), readme.indexOf('## Governance'))
  const lines = [...section.matchAll(/```sh\n([\s\S]*?)```/g)]
    .flatMap((m) => (m[1] ?? '').replace(/\\\n\s*/g, ' ').split('\n'))
    .map((l) => l.trim())
    .filter((l) => l !== '')
  assert.ok(lines.filter((l) => l.startsWith('curl ')).length >= 10, `found ${lines.length} lines`)
  const dir = await mkdtemp(join(tmpdir(), 'tg-readme-ws-'))
  t.after(async () => await rm(dir, { recursive: true, force: true }))
  const { port } = await startServer(t, { WORKSPACES_DIR: join(dir, 'w'), SANDBOX: 'none' })
  let checkpointId = ''
  const out: Record<string, string> = {}
  for (const line of lines) {
    const command = line.replaceAll('127.0.0.1:8080', `127.0.0.1:${port}`).replaceAll('/tmp/', `${dir}/`).replaceAll('CHECKPOINT_ID', checkpointId)
    const { stdout } = await run('sh', ['-c', command], { timeout: 30_000, cwd: SCRATCH })
    out[line] = stdout
    if (line.includes('"label"')) checkpointId = JSON.parse(stdout).checkpointId
  }
  const ending = (suffix: string): string => out[lines.find((l) => l.endsWith(suffix)) ?? ''] ?? ''
  const having = (needle: string): string => out[lines.find((l) => l.includes(needle)) ?? ''] ?? ''
  // app and app/main.py
  assert.deepEqual(JSON.parse(having('-X PUT')), { workspaceId: 'proj', bytes: 12, files: 2, skipped: [], skippedEntries: 0 })
  assert.equal(ending('files/app/main.py'), 'print("hi")\n')
  const { stdout: listing } = await run('tar', ['tzf', join(dir, 'proj-back.tar.gz')])
  assert.deepEqual(listing.split('\n').filter((l) => l !== '').sort(), ['app/', 'app/main.py'])
  // ?path=app keeps the workspace's names.
  const { stdout: sub } = await run('tar', ['tzf', join(dir, 'proj-src.tar.gz')])
  assert.deepEqual(sub.split('\n').filter((l) => l !== '').sort(), ['app/', 'app/main.py'])
  assert.deepEqual(JSON.parse(ending('/users/alice/workspaces')).workspaces.map((w: any) => w.workspaceId), ['proj'])
  assert.match(checkpointId, /^[A-Za-z0-9]/)
  const invoked = JSON.parse(having('"checkpoint":true'))
  assert.equal(invoked.isError, false, invoked.output)
  assert.equal(typeof invoked.checkpointId, 'string')
  assert.equal(JSON.parse(ending('/proj/checkpoints')).checkpoints.length, 2)
  assert.deepEqual(JSON.parse(ending('/restore')), { restored: true, checkpointId })
  assert.equal(having('-X DELETE http://127.0.0.1:8080/users/alice/workspaces/proj/checkpoints/'), '')
  assert.equal(ending('-X DELETE http://127.0.0.1:8080/users/alice/workspaces/proj'), '')
  assert.equal(existsSync(join(dir, 'w', 'alice', 'proj')), false)
})

test('the README remote-MCP walk-through works offline as written, against the example MCP server', async (t) => {
  const readme = await readFile('README.md', 'utf8')
  const section = readme.slice(readme.indexOf('## Remote MCP servers'), readme.indexOf('- **Storage**'))
  const blocks = [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => (m[1] ?? '').replace(/\\\n\s*/g, ' ').split('\n').map((l) => l.trim()))
  // The first block says how to start the two processes; the test starts them the same way.
  assert.ok(blocks[0]?.some((l) => l.startsWith('npm run example:mcp-server')), 'the walk-through starts the example server')
  const egress = /^(EGRESS_ALLOW=\S+) npm start/.exec(blocks[0]?.find((l) => l.includes('npm start')) ?? '')
  assert.ok(egress !== null, 'the walk-through says how to start the gateway')
  const lines = blocks.slice(1).flat().filter((l) => l.startsWith('curl '))
  assert.ok(lines.length >= 10, `found ${lines.length} curl lines`)

  const example = spawn(
    process.execPath,
    ['--import', 'tsx', 'examples/mcp-server/server.ts'],
    { env: { ...process.env, PORT: '0' }, stdio: ['ignore', 'pipe', 'inherit'] }
  )
  t.after(() => { example.kill('SIGKILL') })
  const examplePort = await new Promise<number>((resolve, reject) => {
    let out = ''
    example.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString()
      const m = /on http:\/\/127\.0\.0\.1:(\d+)\/mcp/.exec(out)
      if (m !== null) resolve(Number(m[1]))
    })
    example.on('exit', (code) => reject(new Error(`example server exited ${code}: ${out}`)))
  })
  const [name, value] = (egress[1] ?? '').split('=')
  const { port } = await startServer(t, { [name ?? '']: value ?? '' })
  const out: string[] = []
  for (const line of lines) {
    const command = line.replaceAll('127.0.0.1:8080', `127.0.0.1:${port}`).replaceAll('127.0.0.1:3001', `127.0.0.1:${examplePort}`)
    const { stdout } = await run('sh', ['-c', command], { timeout: 30_000, cwd: SCRATCH })
    out.push(stdout)
  }
  const having = (needle: string): any => {
    const i = lines.findIndex((l) => l.includes(needle))
    assert.ok(i >= 0, needle)
    return out[i] === '' ? '' : JSON.parse(out[i] ?? '')
  }
  assert.equal(having('-X PUT http://127.0.0.1:8080/mcp/servers/docs').serverId, 'docs')
  assert.deepEqual(having('/mcp/servers/docs/tools').tools.map((x: any) => x.name).sort(), ['search_docs', 'word_count'])
  assert.deepEqual(having("tools?mcp=docs'").tools.map((x: any) => x.function.name).sort(), ['search_docs', 'word_count'])
  const searched = having('"name":"search_docs"')
  assert.equal(searched.isError, false, searched.output)
  assert.match(searched.output, /bubblewrap sandbox/)
  assert.equal(having('-X PUT http://127.0.0.1:8080/users/alice').serverId, 'notes')
  assert.match(JSON.stringify(having('/users/alice/mcp/servers ')), /Bearer \*\*\*\*/)
  assert.ok(having('servers/notes/tools').tools.some((x: any) => x.name === 'word_count'))
  assert.ok(having('userId=alice').tools.some((x: any) => x.function.name === 'user_alice_tool_word_count'))
  const counted = having('user_alice_tool_word_count')
  assert.equal(counted.output, '3')
  assert.equal(counted.route, 'user_mcp')
})

test('the README governance blocks (journal, policies, approvals) run in order as written, with the keys the section starts the gateway with', async (t) => {
  const readme = await readFile('README.md', 'utf8')
  const section = readme.slice(readme.indexOf('## Governance'), readme.indexOf('### Remote MCP resilience'))
  const lines = [...section.matchAll(/```sh\n([\s\S]*?)```/g)]
    .flatMap((m) => (m[1] ?? '').replace(/\\\n\s*/g, ' ').split('\n'))
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'))
  const start = /^API_KEYS='([^']+)' npm start$/.exec(lines[0] ?? '')
  assert.ok(start !== null, `the section starts the gateway with its keys: ${lines[0] ?? ''}`)
  const dir = await mkdtemp(join(tmpdir(), 'tg-readme-gov-'))
  t.after(async () => await rm(dir, { recursive: true, force: true }))
  const { port } = await startServer(t, { API_KEYS: start[1] ?? '', WORKSPACES_DIR: dir, HOST: '127.0.0.1' })
  // Each line runs in a shell of its own, as the README's other tests do; a `name=$(...)` line's value is
  // handed to the lines after it as an environment variable, as one shell session would.
  const vars: Record<string, string> = {}
  const out: Array<{ line: string, stdout: string }> = []
  for (const line of lines.slice(1)) {
    const command = line.replaceAll('127.0.0.1:8080', `127.0.0.1:${port}`)
    const assignment = /^([a-z]+)=\$\(/.exec(command)
    const script = assignment === null ? command : `${command}; printf %s "$${assignment[1] ?? ''}"`
    const { stdout } = await run('sh', ['-c', script], { timeout: 30_000, cwd: SCRATCH, env: { ...process.env, ...vars } })
    if (assignment !== null) vars[assignment[1] ?? ''] = stdout
    out.push({ line, stdout })
  }
  const json = (needle: string, nth = 0): any => {
    const hits = out.filter((o) => o.line.includes(needle))
    assert.ok(hits[nth] !== undefined, `no line with ${needle}`)
    return JSON.parse(hits[nth]?.stdout ?? '')
  }
  // Journal
  assert.match(vars.cursor ?? '', /\S/, 'the first page had a nextCursor')
  assert.ok(json('invocations?limit=20\'').invocations.length >= 2)
  assert.deepEqual(json('isError=true').invocations.map((e: any) => e.name), ['calculate'])
  assert.equal(json('invocations/call_journal_demo').callId, 'call_journal_demo')
  assert.ok(json('cursor=$cursor').invocations.length >= 1)
  const exported = await readFile(join(SCRATCH, 'acme.ndjson'), 'utf8')
  assert.ok(exported.trim().split('\n').every((l) => JSON.parse(l).userId === 'acme'))
  // Policies: written, read by the tenant, then both deleted.
  assert.deepEqual(json('-X PUT http://127.0.0.1:8080/policy ').policy, { deny: ['write_file', 'apply_patch'] })
  assert.ok(json('curl -s http://127.0.0.1:8080/users/acme/policy -H').policy.allowOnly.includes('calculate'))
  assert.equal(json('-X DELETE http://127.0.0.1:8080/policy ').deleted, true)
  // Approvals: held, listed by the approver, approved (the write ran), then read by the tenant.
  assert.match(vars.approval ?? '', /^apr_/)
  assert.ok(json('/approvals -H').approvals.some((a: any) => a.approvalId === vars.approval))
  const decided = json('"decision":"approve"')
  assert.equal(decided.result.isError, false, JSON.stringify(decided))
  assert.equal(json('"http://127.0.0.1:8080/approvals/$approval" -H \'authorization: Bearer k-acme').status, 'approved')
})
