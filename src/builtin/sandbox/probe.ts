import { constants } from 'node:fs'
import { access, chown, mkdtemp, realpath, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sandboxEnv } from './bwrap-args.js'
import { runToCompletion } from './run-to-completion.js'
import { spawnSandboxed, type SpawnConfig } from './spawn.js'
import type { Workspace } from '../types.js'

const PROBE_TIMEOUT_MS = 15_000

/** What to tell an operator when bwrap cannot create its namespaces. */
const CONTAINER_HINT =
  'bubblewrap could not create its namespaces. In Docker run the gateway with ' +
  '`--security-opt seccomp=unconfined --security-opt apparmor=unconfined` (compose: security_opt), ' +
  'in Kubernetes set securityContext.seccompProfile.type=Unconfined and appArmorProfile.type=Unconfined; ' +
  'on the host unprivileged user namespaces must be enabled (sysctl user.max_user_namespaces > 0, ' +
  'kernel.unprivileged_userns_clone=1, kernel.apparmor_restrict_unprivileged_userns=0 on Ubuntu 24.04+).'

const INSTALL_HINT =
  'install bubblewrap and util-linux (Debian/Ubuntu: apt-get install bubblewrap util-linux), ' +
  'or set SANDBOX=none for local development only.'

// One line per fact so a failure names exactly which property is missing.
const PROBE_SCRIPT = [
  'echo "uid=$(id -u)"',
  'echo "capeff=$(grep CapEff /proc/self/status | tr -d \'[:space:]\' | cut -d: -f2)"',
  'echo "ifaces=$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d \' \' | tr \'\\n\' \',\')"',
  'echo "envkeys=$(env | cut -d= -f1 | sort | tr \'\\n\' \',\')"',
  'echo "shadow=$(test -e /etc/shadow && echo present || echo absent)"',
  'echo probe > .probe && echo "write=$(cat .probe)"'
].join('; ')

export interface ProbeResult {
  ok: boolean
  reason: string
}

function field (out: string, name: string): string | undefined {
  const line = out.split('\n').find((l) => l.startsWith(`${name}=`))
  return line?.slice(name.length + 1).trim()
}

/**
 * Runs a tiny command in exactly the shape every command gets, and checks the properties the
 * isolation depends on instead of trusting that bwrap exiting 0 means they hold. `hostUid` is
 * the uid bwrap runs as (bwrap nests two user namespaces, so uid_map inside cannot show it).
 */
export async function runProbe (cfg: SpawnConfig, owner: { uid: number, gid: number } | undefined, hostUid: number): Promise<ProbeResult> {
  for (const bin of [cfg.bwrapPath, cfg.prlimitPath]) {
    try {
      await access(bin, constants.X_OK)
    } catch {
      return { ok: false, reason: `${bin} is not installed or not executable: ${INSTALL_HINT}` }
    }
  }
  const root = await realpath(await mkdtemp(join(tmpdir(), 'tool-gateway-probe-')))
  try {
    if (owner !== undefined) await chown(root, owner.uid, owner.gid)
    const workspace: Workspace = {
      tenant: '_',
      workspaceId: 'probe',
      root,
      readRoots: [],
      limits: { readMaxChars: 1, commandTimeoutMs: PROBE_TIMEOUT_MS, bashLogChars: 1, maxProcessOutputChars: 1, outputMaxChars: 1 }
    }
    const proc = spawnSandboxed(cfg, { workspace, command: PROBE_SCRIPT, cwd: root, stdin: 'ignore' })
    const r = await runToCompletion(proc, { timeoutMs: PROBE_TIMEOUT_MS, maxOutputBytes: 64 * 1024 })
    if (r.spawnError !== undefined) {
      const code = (r.spawnError as NodeJS.ErrnoException).code
      if (code === 'ENOENT') return { ok: false, reason: `bwrap or prlimit not found: ${INSTALL_HINT}` }
      return { ok: false, reason: `could not start the sandbox (${code ?? r.spawnError.message}).` }
    }
    if (r.timedOut) return { ok: false, reason: `the sandbox probe did not finish within ${PROBE_TIMEOUT_MS} ms.` }
    if (r.exitCode !== 0) {
      const msg = r.stderr.trim().slice(0, 400)
      if (/namespace|Operation not permitted|uid map|setting up|Permission denied/i.test(msg)) {
        return { ok: false, reason: `${CONTAINER_HINT} (bwrap said: ${msg})` }
      }
      return { ok: false, reason: `the sandbox probe failed with exit code ${r.exitCode}: ${msg}` }
    }
    return checkProbeOutput(r.stdout, root, hostUid)
  } finally {
    await rm(root, { recursive: true, force: true })
  }
}

function checkProbeOutput (out: string, root: string, hostUid: number): ProbeResult {
  const uid = field(out, 'uid')
  if (uid === undefined || uid === '0') return { ok: false, reason: `commands would run as uid ${uid ?? '?'} inside the sandbox.` }
  const cap = field(out, 'capeff')
  if (cap === undefined || !/^0+$/.test(cap)) return { ok: false, reason: `sandboxed commands keep capabilities (CapEff ${cap ?? '?'}).` }
  const ifaces = (field(out, 'ifaces') ?? '').split(',').filter(Boolean)
  if (ifaces.length !== 1 || ifaces[0] !== 'lo') return { ok: false, reason: `the sandbox can see network interfaces (${ifaces.join(' ')}).` }
  const allowed = new Set([...Object.keys(sandboxEnv(root)), 'PWD', 'SHLVL', '_', 'OLDPWD'])
  const leaked = (field(out, 'envkeys') ?? '').split(',').filter((k) => k !== '' && !allowed.has(k))
  if (leaked.length > 0) return { ok: false, reason: `the sandbox environment is not clean (${leaked.join(' ')}).` }
  if (field(out, 'shadow') !== 'absent') return { ok: false, reason: 'the host /etc/shadow is visible in the sandbox.' }
  if (field(out, 'write') !== 'probe') return { ok: false, reason: 'the sandbox uid cannot write its workspace.' }
  return {
    ok: true,
    reason: `bwrap works: uid ${uid} inside (host uid ${hostUid}), no capabilities, loopback only, clean environment.`
  }
}
