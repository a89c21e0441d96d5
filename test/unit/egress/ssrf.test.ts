import assert from 'node:assert/strict'
import { createServer, type Server } from 'node:http'
import { test } from 'node:test'
import {
  checkUrl, createEgressPolicy, EgressBlockedError, guardedFetch, isAddressAllowed, isBlockedAddress, parseEgressAllow,
  type AddressList, type ResolveAll
} from '../../../src/egress/ssrf.js'

/** A resolver that must not be called: IP literals are judged without DNS. */
const noDns: ResolveAll = async (host) => { throw new Error(`unexpected DNS lookup of ${host}`) }
const deny = createEgressPolicy([], { resolve: noDns })

const BLOCKED_URLS = [
  // loopback, in every IPv4 spelling the WHATWG parser accepts
  'http://127.0.0.1/', 'http://127.8.9.10:8080/mcp', 'http://2130706433/', 'http://0177.0.0.1/', 'http://0x7f.1/',
  'http://0x7f000001/', 'http://127.1/', 'http://017700000001/', 'http://127.0.0.1./', 'https://%31%32%37.0.0.1/',
  'http://[::1]/', 'http://[0:0:0:0:0:0:0:1]/',
  // unspecified
  'http://0.0.0.0/', 'http://0/', 'http://[::]/',
  // RFC 1918
  'http://10.0.0.1/', 'http://10.255.255.255/', 'http://172.16.0.1/', 'http://172.31.255.254/', 'http://192.168.1.1/',
  // link-local and cloud metadata
  'http://169.254.169.254/latest/meta-data/', 'http://169.254.0.1/', 'http://[fe80::1]/', 'http://[febf::1]/',
  // CGNAT
  'http://100.64.0.1/', 'http://100.127.255.254/',
  // multicast, reserved, broadcast
  'http://224.0.0.1/', 'http://239.255.255.250/', 'http://[ff02::1]/', 'http://240.0.0.1/', 'http://255.255.255.255/',
  // unique local (includes AWS fd00:ec2::254)
  'http://[fc00::1]/', 'http://[fd00:ec2::254]/',
  // IPv4-mapped, translated, compatible, NAT64 and 6to4 forms of blocked IPv4
  'http://[::ffff:127.0.0.1]/', 'http://[::ffff:7f00:1]/', 'http://[0:0:0:0:0:ffff:169.254.169.254]/', 'http://[::ffff:10.0.0.1]/',
  'http://[::ffff:0:127.0.0.1]/', 'http://[::127.0.0.1]/', 'http://[64:ff9b::127.0.0.1]/', 'http://[64:ff9b::a9fe:a9fe]/',
  'http://[2002:7f00:1::]/', 'http://[2002:c0a8:101::1]/', 'http://[64:ff9b:1::1]/',
  // documentation, benchmarking, Teredo
  'http://192.0.2.1/', 'http://198.18.0.1/', 'http://[2001:db8::1]/', 'http://[2001::1]/'
]

const PUBLIC_URLS = [
  'http://93.184.215.14/', 'https://8.8.8.8/mcp', 'http://1.1.1.1:8443/', 'http://172.15.255.255/', 'http://172.32.0.1/',
  'http://100.63.255.255/', 'http://100.128.0.1/', 'http://169.255.0.1/', 'http://11.0.0.1/', 'http://223.255.255.254/',
  'https://[2606:4700:4700::1111]/', 'http://[2001:4860:4860::8888]/', 'http://[::ffff:8.8.8.8]/', 'http://[64:ff9b::808:808]/',
  'http://[2002:808:808::1]/'
]

test('every blocked range is refused (IP literals, no DNS)', async () => {
  for (const url of BLOCKED_URLS) {
    const result = await checkUrl(url, deny)
    assert.equal(result.ok, false, `${url} must be refused`)
    assert.equal(result.ok ? '' : result.reason, 'blocked-address', url)
  }
})

test('public addresses are allowed (IP literals, no DNS)', async () => {
  for (const url of PUBLIC_URLS) {
    const result = await checkUrl(url, deny)
    assert.ok(result.ok, `${url}: ${result.ok ? '' : result.message}`)
    assert.equal(result.addresses.length, 1)
  }
})

test('isBlockedAddress on raw addresses, including zone ids and garbage', () => {
  for (const ip of [
    '127.0.0.1', '::1', '::ffff:127.0.0.1', '::ffff:7f00:1', 'fe80::1%eth0', '169.254.169.254', '0.0.0.0', '::',
    'FC00::1', 'not-an-ip', '', '1.2.3', '2130706433'
  ]) {
    assert.equal(isBlockedAddress(ip), true, ip)
  }
  for (const ip of ['8.8.8.8', '2606:4700:4700::1111', '::ffff:1.1.1.1']) assert.equal(isBlockedAddress(ip), false, ip)
})

test('only http and https; invalid URLs refused', async () => {
  for (const url of ['ftp://8.8.8.8/', 'file:///etc/passwd', 'gopher://8.8.8.8/', 'ws://8.8.8.8/', 'data:text/plain,x']) {
    const result = await checkUrl(url, deny)
    assert.equal(result.ok ? '' : result.reason, 'scheme', url)
  }
  for (const url of ['not a url', 'http://', '/relative', 'http://1.2.3.4.5/']) {
    const result = await checkUrl(url, deny)
    assert.equal(result.ok ? '' : result.reason, 'invalid-url', url)
  }
})

test('EGRESS_ALLOW opens exact ranges and hostnames', async () => {
  const policy = createEgressPolicy(['127.0.0.1/32', '10.1.0.0/16', 'fd00::/8', '192.168.5.5', 'mcp.internal'], {
    resolve: async (host) => host === 'mcp.internal' ? [{ address: '10.9.9.9', family: 4 }] : [{ address: '10.2.0.1', family: 4 }]
  })
  for (const url of ['http://127.0.0.1:3000/', 'http://2130706433/', 'http://[::ffff:127.0.0.1]/', 'http://10.1.200.3/', 'http://[fd12::1]/', 'http://192.168.5.5/']) {
    assert.ok((await checkUrl(url, policy)).ok, url)
  }
  for (const url of ['http://127.0.0.2/', 'http://[::1]/', 'http://10.2.0.1/', 'http://192.168.5.6/', 'http://[fc00::1]/', 'http://169.254.169.254/']) {
    assert.equal((await checkUrl(url, policy)).ok, false, url)
  }
  assert.deepEqual(await checkUrl('http://MCP.Internal./x', policy), { ok: true, addresses: ['10.9.9.9'] }, 'a listed hostname is trusted whatever it resolves to')
  assert.equal((await checkUrl('http://other.internal/', policy)).ok, false, 'an unlisted name resolving into a blocked range stays blocked')
  assert.equal(isAddressAllowed('127.0.0.1', policy), true)
  assert.equal(isAddressAllowed('127.0.0.2', policy), false)
  assert.equal(isAddressAllowed('8.8.8.8', deny), true)
})

test('EGRESS_ALLOW parsing', () => {
  assert.deepEqual(parseEgressAllow(' 127.0.0.1/32, mcp.internal ,,::1/128'), { ok: true, entries: ['127.0.0.1/32', 'mcp.internal', '::1/128'] })
  assert.deepEqual(parseEgressAllow(undefined), { ok: true, entries: [] })
  for (const bad of ['127.0.0.1/33', '::1/129', 'not a host', 'http://x/', '10.0.0.0/x', '*.example.com']) {
    assert.equal(parseEgressAllow(bad).ok, false, bad)
    assert.throws(() => createEgressPolicy([bad]), TypeError)
  }
})

test('names: every address must be allowed; DNS failure and empty answers fail closed', async () => {
  const answers: Record<string, AddressList> = {
    'public.test': [{ address: '93.184.215.14', family: 4 }, { address: '2606:2800:21f:cb07:6820:80da:af6b:8b2c', family: 6 }],
    'mixed.test': [{ address: '93.184.215.14', family: 4 }, { address: '10.0.0.5', family: 4 }],
    'mapped.test': [{ address: '::ffff:169.254.169.254', family: 6 }],
    'empty.test': []
  }
  const policy = createEgressPolicy([], {
    resolve: async (host) => {
      const a = answers[host]
      if (a === undefined) throw Object.assign(new Error('ENOTFOUND'), { code: 'ENOTFOUND' })
      return a
    }
  })
  assert.deepEqual(await checkUrl('https://public.test/mcp', policy), { ok: true, addresses: ['93.184.215.14', '2606:2800:21f:cb07:6820:80da:af6b:8b2c'] })
  assert.equal((await checkUrl('https://mixed.test/', policy)).ok, false)
  assert.equal((await checkUrl('https://mapped.test/', policy)).ok, false)
  const empty = await checkUrl('https://empty.test/', policy)
  assert.equal(empty.ok ? '' : empty.reason, 'dns-failure')
  const missing = await checkUrl('https://missing.test/', policy)
  assert.equal(missing.ok ? '' : missing.reason, 'dns-failure')
  const hanging = createEgressPolicy([], { dnsTimeoutMs: 50, resolve: () => new Promise<AddressList>(() => {}) })
  const timedOut = await checkUrl('https://slow.test/', hanging)
  assert.equal(timedOut.ok ? '' : timedOut.reason, 'dns-failure', 'an unanswered lookup fails closed')
})

test('localhost (real DNS) is refused', async () => {
  const result = await checkUrl('http://localhost:8080/mcp', createEgressPolicy([]))
  assert.equal(result.ok, false)
  assert.ok(!result.ok && (result.reason === 'blocked-address' || result.reason === 'dns-failure'), !result.ok ? result.reason : '')
  const allowed = await checkUrl('http://localhost:8080/mcp', createEgressPolicy(['localhost']))
  assert.ok(allowed.ok, 'a listed hostname opens it')
})

async function listen (handler: Parameters<typeof createServer>[1]): Promise<{ server: Server, port: number, hits: string[] }> {
  const hits: string[] = []
  const server = createServer((req, res) => {
    hits.push(req.url ?? '')
    handler?.(req, res)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  if (address === null || typeof address === 'string') throw new Error('no port')
  return { server, port: address.port, hits }
}

async function closeServer (server: Server): Promise<void> {
  server.closeAllConnections()
  await new Promise<void>((resolve) => server.close(() => resolve()))
}

test('guardedFetch: allowed loopback works; redirects are refused, not followed', { timeout: 15_000 }, async (t) => {
  const { server, port, hits } = await listen((req, res) => {
    if (req.url === '/redirect') {
      res.writeHead(302, { location: `http://127.0.0.1:${port}/target` })
      res.end()
      return
    }
    res.writeHead(200, { 'content-type': 'text/plain' })
    res.end(`ok ${req.method ?? ''}`)
  })
  const fetch = guardedFetch(createEgressPolicy(['127.0.0.1/32']))
  t.after(async () => {
    await fetch.close()
    await closeServer(server)
  })

  const ok = await fetch(`http://127.0.0.1:${port}/hello`, { method: 'POST', body: 'x', headers: { 'content-type': 'text/plain' } })
  assert.equal(ok.status, 200)
  assert.equal(await ok.text(), 'ok POST')

  await assert.rejects(fetch(`http://127.0.0.1:${port}/redirect`, { redirect: 'follow' }), (err: unknown) => {
    assert.ok(err instanceof EgressBlockedError)
    assert.equal(err.reason, 'redirect')
    return true
  })
  assert.deepEqual(hits, ['/hello', '/redirect'], 'the redirect target was never requested')

  const denied = guardedFetch(createEgressPolicy([]))
  t.after(async () => { await denied.close() })
  await assert.rejects(denied(`http://127.0.0.1:${port}/hello`), (err: unknown) => err instanceof EgressBlockedError && err.reason === 'blocked-address')
  await assert.rejects(denied(new URL(`http://0x7f.1:${port}/hello`)), EgressBlockedError)
  await assert.rejects(denied('file:///etc/passwd'), (err: unknown) => err instanceof EgressBlockedError && err.reason === 'scheme')
  assert.deepEqual(hits, ['/hello', '/redirect'], 'blocked requests never reached the server')
})

test('guardedFetch checks the address actually dialled (DNS rebinding)', { timeout: 15_000 }, async (t) => {
  const { server, port, hits } = await listen((_req, res) => { res.end('reached') })
  t.after(async () => { await closeServer(server) })

  // First answer public (what the registration check sees), then loopback (what a rebinding
  // DNS server hands the connect).
  let calls = 0
  const rebinding = createEgressPolicy([], {
    resolve: async () => (calls++ === 0 ? [{ address: '93.184.215.14', family: 4 }] : [{ address: '127.0.0.1', family: 4 }])
  })
  assert.ok((await checkUrl(`http://rebind.test:${port}/`, rebinding)).ok, 'passes at check time')
  const fetch = guardedFetch(rebinding)
  t.after(async () => { await fetch.close() })
  await assert.rejects(fetch(`http://rebind.test:${port}/`), (err: unknown) => {
    assert.ok(err instanceof EgressBlockedError, String(err))
    assert.equal(err.reason, 'blocked-address')
    return true
  })
  assert.equal(calls, 2, 'the connect resolved the name again')
  assert.deepEqual(hits, [], 'nothing reached the loopback server')

  // Control: the same name pinned to loopback with loopback allowed connects through the guard's lookup.
  const allowed = guardedFetch(createEgressPolicy(['127.0.0.1/32'], { resolve: async () => [{ address: '127.0.0.1', family: 4 }] }))
  t.after(async () => { await allowed.close() })
  const res = await allowed(`http://fixture.test:${port}/`)
  assert.equal(await res.text(), 'reached')
  assert.deepEqual(hits, ['/'])
})

test('guardedFetch keeps no per-origin state forever: ' +
  'past maxOriginsPerAgent it moves to a fresh connection pool, and a response still streaming on the old one completes', { timeout: 20_000 }, async (t) => {
  // undici's Agent never forgets an origin it dispatched to (~20 KiB each): with one shared
  // agent, every tenant server ever contacted stayed in memory for the life of the process.
  const servers = await Promise.all(Array.from({ length: 8 }, async (_, i) => await listen((req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' })
    if (req.url === '/slow') {
      res.write('first ')
      setTimeout(() => res.end('last'), 500)
    } else {
      res.end(`server ${i}`)
    }
  })))
  const fetch = guardedFetch(createEgressPolicy(['127.0.0.1/32']), { maxOriginsPerAgent: 3 })
  t.after(async () => {
    await fetch.close()
    await Promise.all(servers.map(async (s) => await closeServer(s.server)))
  })
  const slow = await fetch(`http://127.0.0.1:${servers[0]?.port ?? 0}/slow`)
  for (const [i, s] of servers.entries()) {
    const res = await fetch(`http://127.0.0.1:${s.port}/`)
    assert.equal(await res.text(), `server ${i}`)
  }
  assert.equal(await slow.text(), 'first last')
  const stats = fetch.stats()
  assert.ok(stats.origins <= 3, `${stats.origins} origins on the current pool`)
  assert.equal(stats.pools, 3, 'origins 1-3, 4-6, 7-8 (origin 1 again counts on the first)')
})

test('guardedFetch: connects to one host within dnsCacheMs share one DNS answer (concurrent ones the lookup in flight); every connect still checks it; ' +
  'a failed lookup is not kept', { timeout: 15_000 }, async (t) => {
  // Slow answers, so that concurrent requests need a connection (and a lookup) each.
  const { server, port } = await listen((_req, res) => { setTimeout(() => res.end('ok'), 100) })
  t.after(async () => { await closeServer(server) })
  const counting = (answer: () => AddressList): { policy: ReturnType<typeof createEgressPolicy>, calls: () => number } => {
    let calls = 0
    return { policy: createEgressPolicy(['127.0.0.1/32'], { resolve: async () => { calls++; return answer() } }), calls: () => calls }
  }
  const loopback = (): AddressList => [{ address: '127.0.0.1', family: 4 }]
  const three = async (fetch: ReturnType<typeof guardedFetch>): Promise<string[]> =>
    await Promise.all([1, 2, 3].map(async () => await (await fetch(`http://cache.test:${port}/`)).text()))

  const cached = counting(loopback)
  const fetch = guardedFetch(cached.policy, { dnsCacheMs: 60_000 })
  t.after(async () => { await fetch.close() })
  assert.deepEqual(await three(fetch), ['ok', 'ok', 'ok'])
  assert.equal(cached.calls(), 1, 'three connects, one lookup')

  // Control: without the memory each connect resolves.
  const uncached = counting(loopback)
  const plain = guardedFetch(uncached.policy, { dnsCacheMs: 0 })
  t.after(async () => { await plain.close() })
  assert.deepEqual(await three(plain), ['ok', 'ok', 'ok'])
  assert.equal(uncached.calls(), 3)

  // A remembered answer that is blocked is refused on every connect, not once.
  const privateAnswer = counting(() => [{ address: '10.1.2.3', family: 4 }])
  const refusing = guardedFetch(privateAnswer.policy, { dnsCacheMs: 60_000 })
  t.after(async () => { await refusing.close() })
  for (let i = 0; i < 2; i++) {
    await assert.rejects(refusing(`http://inner.test:${port}/`), (err: unknown) => err instanceof EgressBlockedError && err.reason === 'blocked-address')
  }
  assert.equal(privateAnswer.calls(), 1)

  // A lookup that failed is asked again next time.
  let attempt = 0
  const flaky = counting(() => { if (attempt++ === 0) throw new Error('SERVFAIL'); return loopback() })
  const recovering = guardedFetch(flaky.policy, { dnsCacheMs: 60_000 })
  t.after(async () => { await recovering.close() })
  await assert.rejects(recovering(`http://flaky.test:${port}/`), (err: unknown) => err instanceof EgressBlockedError && err.reason === 'dns-failure')
  assert.equal(await (await recovering(`http://flaky.test:${port}/`)).text(), 'ok')
  assert.equal(flaky.calls(), 2)
})

test('guardedFetch opens at most connectionsPerOrigin sockets to one origin; more requests wait for one', { timeout: 30_000 }, async (t) => {
  // A server that keeps its answers: each request the gateway sends it would otherwise take a socket of its own.
  let connections = 0
  const held: Array<() => void> = []
  const { server, port } = await listen((_req, res) => { held.push(() => res.end('ok')) })
  server.on('connection', () => { connections++ })
  const fetch = guardedFetch(createEgressPolicy(['127.0.0.1/32']), { connectionsPerOrigin: 4 })
  t.after(async () => {
    for (const done of held.splice(0)) done()
    await fetch.close()
    await closeServer(server)
  })
  const requests = Array.from({ length: 20 }, async () => await (await fetch(`http://127.0.0.1:${port}/`)).text())
  for (let i = 0; i < 100 && held.length < 4; i++) await new Promise((resolve) => setTimeout(resolve, 10))
  await new Promise((resolve) => setTimeout(resolve, 100))
  assert.equal(connections, 4, `${connections} sockets for 20 requests held by the server`)
  // As the server answers, the waiting requests go out on the same sockets.
  const release = setInterval(() => { for (const done of held.splice(0)) done() }, 5)
  t.after(() => { clearInterval(release) })
  assert.deepEqual(await Promise.all(requests), Array(20).fill('ok'))
  assert.equal(connections, 4)
})
