/**
 * The primitives every module that touches a tenant's tree shares (docs/ARCHITECTURE.md#fd-layer): the open
 * flags, the path of a name beneath an open directory, and the errno reader.
 *
 * Node has no `openat`. A name is opened relative to a directory fd through `/proc/self/fd/<fd>/<name>`: the
 * magic link resolves to the open directory itself, not to its path, and `<name>` holds no slash, so the only
 * thing the kernel could follow is `<name>` itself, which O_NOFOLLOW refuses. Linux only, like the sandbox.
 */
import { constants as fsConstants, openSync } from 'node:fs'
import type { FileHandle } from 'node:fs/promises'

const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_NONBLOCK, O_DIRECTORY } = fsConstants
/** Linux's value; Node's fs.constants does not carry it. */
export const O_CLOEXEC = 0o2000000
/** A directory on the way down: never a symlink, never anything but a directory. */
export const DIR_FLAGS = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC
/** A leaf opened for reading: a FIFO must not block the call, a symlink is never followed. */
export const READ_FLAGS = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC
/** A new file beside its target (a temp name): it must not exist, and a symlink there is not followed. */
export const CREATE_FLAGS = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC

/** The path the kernel resolves as `name` inside the directory open as `dir` (the directory itself for ''). */
export function at (dir: FileHandle | number, name = ''): string {
  const fd = typeof dir === 'number' ? dir : dir.fd
  return name === '' ? `/proc/self/fd/${fd}` : `/proc/self/fd/${fd}/${name}`
}

/** An error's code: the errno name of a failed system call ('ENOENT', 'ELOOP'...), Node's own otherwise. */
export function errnoOf (err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null | undefined)?.code
  return typeof code === 'string' ? code : undefined
}

/**
 * Opens the directory `name` beneath the directory fd `fd`, synchronously (for the walkers that work on fd
 * numbers). Undefined when it is not a directory any more: a symlink (ELOOP), something else (ENOTDIR), gone
 * (ENOENT); the caller looks again.
 */
export function openDirBeneath (fd: number, name: string): number | undefined {
  try {
    return openSync(at(fd, name), DIR_FLAGS)
  } catch (err) {
    const e = errnoOf(err)
    if (e === 'ELOOP' || e === 'ENOTDIR' || e === 'ENOENT') return undefined
    throw err
  }
}
