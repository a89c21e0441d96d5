/**
 * A seccomp filter for the bash sandbox, generated here in TypeScript (no package, no network, no
 * compiler at run time) and handed to bubblewrap with `--seccomp FD`.
 *
 * The namespaces, `--cap-drop ALL` and `--disable-userns` already keep most of these syscalls from
 * doing harm; the filter removes the kernel attack surface behind them (keyrings, eBPF, io_uring,
 * userfaultfd, perf, the new mount API, user namespaces), which is where sandbox escapes are found.
 * It is a deny list: everything not named below is allowed, so ordinary programs keep working.
 *
 * ## How the spawner uses it
 * ```ts
 * const filter = buildSeccompFilter()            // once, at start-up; undefined on other archs
 * if (filter === undefined) log.warn(SECCOMP_UNSUPPORTED_WARNING)
 * // bwrap reads the program from an inherited fd until EOF, before it execs the command.
 * // fd 3 is --info-fd, so the filter takes the next stdio slot; prlimit passes fds on to bwrap.
 * const bwrap = ['--info-fd', '3', ...(filter ? seccompArgs(4) : []), ...buildBwrapArgs(c)]
 * const child = spawn(prlimit, buildPrlimitArgs(limits, [bwrapPath, ...bwrap]), {
 *   stdio: [stdin, 'pipe', 'pipe', 'pipe', filter ? 'pipe' : 'ignore'], ...
 * })
 * if (filter) writeSeccompFilter(child.stdio[4], filter)  // writes it all and ends it (EOF) at once
 * ```
 * The program is a few hundred bytes (512 on x64), far under the 64 KiB a pipe or socket buffers,
 * so writing it and ending the stream before bwrap reads cannot block either side. The
 * `--seccomp` options must come before `--` (they are bwrap's, not the command's).
 * test/unit/builtin/sandbox/seccomp.test.ts runs exactly this layout.
 *
 * ## What the program does (classic BPF over `struct seccomp_data`)
 * 1. `arch` must be this build's native ABI, or the process is killed: the same syscall number
 *    means another call in the i386 (`int 0x80`) or AArch32 ABI, so a number check alone could
 *    be bypassed by switching ABI.
 * 2. x86_64 only: the x32 ABI (numbers with bit 30 set) reports the x86_64 arch; refused (ENOSYS).
 * 3. Denied syscalls return EPERM (a clear error for a program that probes, rather than a kill).
 * 4. `clone` and `unshare` with CLONE_NEWUSER in their flags return EPERM; other flags are allowed
 *    (fork, threads, and namespaces that need capabilities the sandbox does not have).
 * 5. `clone3` returns ENOSYS: its flags are in memory, which seccomp cannot read, and glibc falls
 *    back to `clone` on ENOSYS, whose flags are checked above.
 * 6. `personality` is allowed only with the personas of ALLOWED_PERSONAS (Docker's list), else EPERM.
 * 7. Everything else is allowed.
 *
 * Cost: since Linux 5.11 the kernel caches, per syscall number, "always allowed whatever the
 * arguments", so ordinary syscalls skip the program; only clone/unshare/personality (which read
 * args[0]) and the denied ones run it, and the program is ~65 instructions. Building it takes microseconds.
 *
 * Not filtered (left to the namespaces and capabilities): ioctl requests
 * (TIOCSTI is handled by bwrap's --new-session), and the namespace flags other than
 * CLONE_NEWUSER, which need CAP_SYS_ADMIN the sandbox does not have.
 */
import { Writable, type Readable } from 'node:stream'

/** Architectures the filter is built for (Node's `process.arch` names). */
export const SECCOMP_ARCHES = ['x64', 'arm64'] as const
export type SeccompArch = typeof SECCOMP_ARCHES[number]

export const SECCOMP_UNSUPPORTED_WARNING =
  'seccomp: no filter for this CPU architecture (only x64 and arm64); bash commands run in the ' +
  'sandbox without a syscall filter.'

// ---- Kernel ABI constants (include/uapi/linux/{filter,bpf_common,seccomp,audit,elf-em}.h) ----

/** `BPF_LD | BPF_W | BPF_ABS`: A = 32-bit word of seccomp_data at offset k. */
const LD_W_ABS = 0x20
/** `BPF_JMP | BPF_JEQ | BPF_K`: A == k ? jt : jf. */
const JEQ = 0x15
/** `BPF_JMP | BPF_JGE | BPF_K`: A >= k (unsigned) ? jt : jf. */
const JGE = 0x35
/** `BPF_JMP | BPF_JSET | BPF_K`: (A & k) != 0 ? jt : jf. */
const JSET = 0x45
/** `BPF_RET | BPF_K`: return k. */
const RET = 0x06

/** Offsets in `struct seccomp_data { int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]; }`. */
const OFF_NR = 0
const OFF_ARCH = 4
/** Low 32 bits of args[0] (both supported arches are little-endian). Flags are `int`/`unsigned long` whose bits of interest are all in the low word. */
const OFF_ARG0_LO = 16

export const SECCOMP_RET_KILL_PROCESS = 0x80000000
export const SECCOMP_RET_ERRNO = 0x00050000
export const SECCOMP_RET_ALLOW = 0x7fff0000

/** errno values are the generic ones on both arches. */
const EPERM = 1
const ENOSYS = 38

/** `EM_* | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE`. */
export const AUDIT_ARCH: Readonly<Record<SeccompArch, number>> = {
  x64: 0xc000003e, // EM_X86_64 = 62
  arm64: 0xc00000b7 // EM_AARCH64 = 183
}

/** x86_64: syscalls of the x32 ABI carry this bit in `nr` (and report AUDIT_ARCH_X86_64). */
const X32_SYSCALL_BIT = 0x40000000
export const CLONE_NEWUSER = 0x10000000

// ---- Syscall numbers ----
// x64: arch/x86/entry/syscalls/syscall_64.tbl (= /usr/include/x86_64-linux-gnu/asm/unistd_64.h).
// arm64: the generic table include/uapi/asm-generic/unistd.h. Since 424 (pidfd_send_signal) every
// arch shares the same numbers, hence the identical tail. `undefined`: the syscall does not exist there.
// test/unit/builtin/sandbox/seccomp.test.ts checks these against the installed kernel headers.

/** Denied outright with EPERM, and why. */
export const DENIED_SYSCALLS = {
  // Inspecting or changing other processes (same uid inside the sandbox: one command's tree).
  ptrace: 'debugger access to another process: memory, registers, syscall injection',
  process_vm_readv: 'reads another process\'s memory',
  process_vm_writev: 'writes another process\'s memory',
  kcmp: 'compares kernel objects of two processes; an info leak (kernel pointers ordering)',
  // Kernel keyrings: not namespaced, a history of refcount bugs.
  keyctl: 'kernel keyring management (keyrings are not namespaced)',
  add_key: 'kernel keyring: adds a key',
  request_key: 'kernel keyring: asks for a key (may call a user-space helper)',
  // Large, frequently exploited kernel surfaces that a coding sandbox has no use for.
  bpf: 'eBPF verifier and maps: a large kernel attack surface',
  userfaultfd: 'lets a process stall the kernel in a page fault: the classic race-widening tool',
  perf_event_open: 'performance counters: kernel info leaks and a history of bugs',
  io_uring_setup: 'io_uring: bypasses per-syscall filtering, a history of privilege escalations',
  io_uring_enter: 'io_uring',
  io_uring_register: 'io_uring',
  // The mount family (old and new mount API) and namespace switching: the layout bwrap built is final.
  mount: 'mount API',
  umount2: 'mount API',
  pivot_root: 'mount API',
  move_mount: 'new mount API',
  open_tree: 'new mount API',
  open_tree_attr: 'new mount API (Linux 6.15)',
  fsopen: 'new mount API',
  fsconfig: 'new mount API',
  fsmount: 'new mount API',
  fspick: 'new mount API',
  mount_setattr: 'new mount API',
  setns: 'joins another namespace',
  // Host administration: need capabilities the sandbox never has; refused before the kernel parses them.
  kexec_load: 'loads a new kernel',
  kexec_file_load: 'loads a new kernel',
  init_module: 'loads a kernel module',
  finit_module: 'loads a kernel module',
  delete_module: 'unloads a kernel module',
  swapon: 'host swap',
  swapoff: 'host swap',
  reboot: 'host reboot',
  acct: 'process accounting to a file',
  quotactl: 'disk quotas',
  quotactl_fd: 'disk quotas',
  // File handles bypass path-based checks (the "shocker" container escape).
  open_by_handle_at: 'opens a file by handle, bypassing the path walk',
  name_to_handle_at: 'makes handles for open_by_handle_at',
  // x86 port I/O.
  iopl: 'x86 I/O privilege level',
  ioperm: 'x86 I/O port permissions',
  lookup_dcookie: 'profiling interface, returns paths of kernel dentries'
} as const

export type DeniedSyscall = keyof typeof DENIED_SYSCALLS
/** Checked by argument (clone, unshare) or refused with ENOSYS (clone3). */
export type FilteredSyscall = DeniedSyscall | 'clone' | 'unshare' | 'clone3' | 'personality'

/**
 * The only `personality()` arguments let through: Docker's default profile's list. PER_LINUX (0),
 * PER_LINUX32 (8: `linux32`, `setarch i686`), UNAME26 (0x20000, alone or with PER_LINUX32: old
 * software's version check) and 0xffffffff (the query glibc and runtimes make). Everything else is
 * EPERM, above all READ_IMPLIES_EXEC (every readable mapping also executable: data becomes code for an
 * exploit) and ADDR_NO_RANDOMIZE (`setarch -R`: no ASLR for the program and what it execs).
 */
export const ALLOWED_PERSONAS: readonly number[] = [0x0, 0x8, 0x20000, 0x20008, 0xffffffff]

export const SYSCALL_NUMBERS: Readonly<Record<SeccompArch, Readonly<Record<FilteredSyscall, number | undefined>>>> = {
  x64: {
    ptrace: 101,
    process_vm_readv: 310,
    process_vm_writev: 311,
    kcmp: 312,
    keyctl: 250,
    add_key: 248,
    request_key: 249,
    bpf: 321,
    userfaultfd: 323,
    perf_event_open: 298,
    io_uring_setup: 425,
    io_uring_enter: 426,
    io_uring_register: 427,
    mount: 165,
    umount2: 166,
    pivot_root: 155,
    move_mount: 429,
    open_tree: 428,
    open_tree_attr: 467,
    fsopen: 430,
    fsconfig: 431,
    fsmount: 432,
    fspick: 433,
    mount_setattr: 442,
    setns: 308,
    kexec_load: 246,
    kexec_file_load: 320,
    init_module: 175,
    finit_module: 313,
    delete_module: 176,
    swapon: 167,
    swapoff: 168,
    reboot: 169,
    acct: 163,
    quotactl: 179,
    quotactl_fd: 443,
    open_by_handle_at: 304,
    name_to_handle_at: 303,
    iopl: 172,
    ioperm: 173,
    lookup_dcookie: 212,
    clone: 56,
    unshare: 272,
    clone3: 435,
    personality: 135
  },
  arm64: {
    ptrace: 117,
    process_vm_readv: 270,
    process_vm_writev: 271,
    kcmp: 272,
    keyctl: 219,
    add_key: 217,
    request_key: 218,
    bpf: 280,
    userfaultfd: 282,
    perf_event_open: 241,
    io_uring_setup: 425,
    io_uring_enter: 426,
    io_uring_register: 427,
    mount: 40,
    umount2: 39,
    pivot_root: 41,
    move_mount: 429,
    open_tree: 428,
    open_tree_attr: 467,
    fsopen: 430,
    fsconfig: 431,
    fsmount: 432,
    fspick: 433,
    mount_setattr: 442,
    setns: 268,
    kexec_load: 104,
    kexec_file_load: 294,
    init_module: 105,
    finit_module: 273,
    delete_module: 106,
    swapon: 224,
    swapoff: 225,
    reboot: 142,
    acct: 89,
    quotactl: 60,
    quotactl_fd: 443,
    open_by_handle_at: 265,
    name_to_handle_at: 264,
    iopl: undefined, // x86 only
    ioperm: undefined, // x86 only
    lookup_dcookie: 18,
    clone: 220,
    unshare: 97,
    clone3: 435,
    personality: 92
  }
}

// ---- A tiny assembler: instructions whose jump targets are labels, resolved at the end ----

type Target = string | 0 // a label, or 0 = fall through to the next instruction
type Insn =
  | { op: 'ld', offset: number }
  | { op: 'jmp', code: number, k: number, jt: Target, jf: Target }
  | { op: 'ret', k: number }
  | { op: 'label', name: string }

function assemble (insns: readonly Insn[]): Buffer {
  const labels = new Map<string, number>()
  const real: Array<Exclude<Insn, { op: 'label' }>> = []
  for (const i of insns) {
    if (i.op === 'label') labels.set(i.name, real.length)
    else real.push(i)
  }
  const out = Buffer.alloc(real.length * 8)
  real.forEach((i, pc) => {
    let code: number
    let jt = 0
    let jf = 0
    let k: number
    if (i.op === 'ld') {
      code = LD_W_ABS
      k = i.offset
    } else if (i.op === 'ret') {
      code = RET
      k = i.k
    } else {
      code = i.code
      k = i.k
      // Classic BPF jumps only forward, by an unsigned 8-bit count of instructions to skip.
      const rel = (t: Target): number => {
        if (t === 0) return 0
        const at = labels.get(t)
        if (at === undefined) throw new Error(`seccomp: unknown label ${t}`)
        const d = at - pc - 1
        if (d < 0 || d > 255) throw new Error(`seccomp: jump to ${t} out of range (${d})`)
        return d
      }
      jt = rel(i.jt)
      jf = rel(i.jf)
    }
    const o = pc * 8
    out.writeUInt16LE(code, o)
    out.writeUInt8(jt, o + 2)
    out.writeUInt8(jf, o + 3)
    out.writeUInt32LE(k >>> 0, o + 4)
  })
  return out
}

const ld = (offset: number): Insn => ({ op: 'ld', offset })
const ret = (k: number): Insn => ({ op: 'ret', k })
const label = (name: string): Insn => ({ op: 'label', name })
const jeq = (k: number, jt: Target, jf: Target = 0): Insn => ({ op: 'jmp', code: JEQ, k, jt, jf })
const jge = (k: number, jt: Target, jf: Target = 0): Insn => ({ op: 'jmp', code: JGE, k, jt, jf })
const jset = (k: number, jt: Target, jf: Target = 0): Insn => ({ op: 'jmp', code: JSET, k, jt, jf })

function isSeccompArch (a: string): a is SeccompArch {
  return (SECCOMP_ARCHES as readonly string[]).includes(a)
}

/**
 * The filter for `arch` (Node's `process.arch` names) as bytes for `bwrap --seccomp FD`: an array
 * of `struct sock_filter { u16 code; u8 jt; u8 jf; u32 k }`, little-endian, 8 bytes each.
 * `undefined` for an architecture without a table: the caller runs without a filter and says so
 * (SECCOMP_UNSUPPORTED_WARNING).
 */
export function buildSeccompFilter (arch: string = process.arch): Buffer | undefined {
  if (!isSeccompArch(arch)) return undefined
  const nr = SYSCALL_NUMBERS[arch]
  const p: Insn[] = [
    ld(OFF_ARCH),
    jeq(AUDIT_ARCH[arch], 0, 'kill'),
    ld(OFF_NR)
  ]
  if (arch === 'x64') p.push(jge(X32_SYSCALL_BIT, 'enosys'))
  for (const name of Object.keys(DENIED_SYSCALLS) as DeniedSyscall[]) {
    const n = nr[name]
    if (n !== undefined) p.push(jeq(n, 'eperm'))
  }
  p.push(
    jeq(nr.clone as number, 'check_newuser'),
    jeq(nr.unshare as number, 'check_newuser'),
    jeq(nr.clone3 as number, 'enosys'),
    jeq(nr.personality as number, 'check_persona'),
    ret(SECCOMP_RET_ALLOW),
    // personality(unsigned int persona): the kernel reads only the low word, so that is all to check.
    label('check_persona'),
    ld(OFF_ARG0_LO),
    ...ALLOWED_PERSONAS.map((p) => jeq(p, 'allow')),
    ret(SECCOMP_RET_ERRNO | EPERM),
    label('allow'),
    ret(SECCOMP_RET_ALLOW),
    // clone(flags, ...) and unshare(flags): flags is args[0] on both arches (x86_64's clone
    // swaps only the later arguments).
    label('check_newuser'),
    ld(OFF_ARG0_LO),
    jset(CLONE_NEWUSER, 'eperm'),
    ret(SECCOMP_RET_ALLOW),
    label('eperm'),
    ret(SECCOMP_RET_ERRNO | EPERM),
    label('enosys'),
    ret(SECCOMP_RET_ERRNO | ENOSYS),
    label('kill'),
    ret(SECCOMP_RET_KILL_PROCESS)
  )
  return assemble(p)
}

/** bwrap options that load the filter from inherited fd `fd` (put them before `--`). */
export function seccompArgs (fd: number): string[] {
  if (!Number.isSafeInteger(fd) || fd < 3) throw new TypeError('seccomp fd must be an integer >= 3 (0-2 are stdio)')
  return ['--seccomp', String(fd)]
}

/**
 * Writes the filter into the child's end of an extra stdio pipe and ends it, so bwrap reads it to
 * EOF. Errors on the stream (bwrap exited before reading, EPIPE) are swallowed: bwrap then fails
 * on its own and that failure is what the caller reports.
 */
export function writeSeccompFilter (stream: Readable | Writable | null | undefined, filter: Buffer): void {
  // child.stdio[n] for an extra 'pipe' entry is a duplex socket, typed as Readable | Writable.
  if (!(stream instanceof Writable)) throw new TypeError('seccomp: the child has no writable pipe at the seccomp fd')
  stream.on('error', () => {})
  stream.end(filter)
}
