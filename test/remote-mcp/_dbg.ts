import { readdirSync, readFileSync } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'
import { McpClientPool } from '../../src/remote-mcp/pool.js'
import { minimalStdioFixture, stdioFixture, startStreamableHttpFixture } from '../fixtures/mcp/index.js'
function kids () {
  const out: string[] = []
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8')
      const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      if (Number(rest[1]) === process.pid) out.push(`${name} ${rest[0]} ${readFileSync(`/proc/${name}/cmdline`, 'utf8').replace(/\0/g, ' ')}`)
    } catch {}
  }
  return out
}
const log = { debug: (o: any, m?: string) => console.log('D', m, JSON.stringify(o)), info: (o: any, m?: string) => console.log('I', m, JSON.stringify(o)), warn: (o: any, m?: string) => console.log('W', m, JSON.stringify(o)), error: (o: any, m?: string) => console.log('E', m, JSON.stringify(o)) }
const pool = new McpClientPool({ connectTimeoutMs: 3000, listTimeoutMs: 5000, callTimeoutMs: 5000, idleMs: 60000, maxClients: 10, toolsTtlMs: 0, clientInfo: { name: 'x', version: '1' }, logger: log })
const which = process.argv[2]
if (which === 'hang') {
  await pool.listTools('hang', { type: 'stdio', ...stdioFixture('stdio-hang.ts') }).catch(e => console.log('ERR', e.code, e.message))
  for (let i = 0; i < 8; i++) { console.log(kids()); await sleep(1000) }
}
if (which === 'min') {
  await pool.listTools('m', { type: 'stdio', ...minimalStdioFixture() }).catch(e => console.log('ERR', e.code, e.message))
  console.log(kids()); const t0 = Date.now(); await pool.invalidate('m'); console.log('inval ms', Date.now() - t0, kids())
  await sleep(500); console.log(kids())
}
if (which === 'restart') {
  let fx = await startStreamableHttpFixture()
  const spec = { type: 'streamable_http' as const, url: fx.url }
  await pool.listTools('k', spec)
  await fx.close()
  fx = await startStreamableHttpFixture({ port: fx.port })
  console.log(await pool.listTools('k', spec).then(t => t.length), fx.stats)
  await fx.close()
}
await pool.close()
