// One daemon per store (docs/backends.md "One daemon per store"): a file or
// block-device backend takes flock on its store's descriptor, exclusive when
// it writes and shared when it is read-only, so that a second rblkd started on
// the same files is refused instead of writing them under the first one's
// feet. The lock belongs to the descriptor's open file description: closing
// the descriptor (the backend's close, or the process's end, kill -9 included)
// releases it.
//
// Backends of one process share one lock per store (device and inode): a
// reload that opens a volume again on the same store (renamed, say) before the
// old one is closed must not lock itself out. The first backend's descriptor
// holds the lock for all of them; when that backend closes first, its
// descriptor stays open until the last of them closes. Volumes that several
// gateways serve (an `alua` section) take no lock at all.
import { readFile, stat, type FileHandle } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { addon } from '../../native/binding.js';
import { backendError, hasCode } from './backend-error.js';

interface Held {
  /** The descriptor whose open file description holds the lock. */
  fh: FileHandle;
  exclusive: boolean;
  /** Backends of this process that use the store. */
  refs: number;
}

/** This process's locks, by "dev:ino" of the store. */
const held = new Map<string, Held>();

export class StoreLock {
  #key: string | null;

  private constructor(key: string) {
    this.#key = key;
  }

  /**
   * Locks the store `fh` is open on (`what` names it in messages: "file
   * /srv/a.img"), exclusively unless `shared`. Refused with EBUSY, naming the
   * store and, when /proc/locks shows it, the pid of the process that holds it.
   */
  static async take(fh: FileHandle, what: string, opts: { shared: boolean }): Promise<StoreLock> {
    const st = await fh.stat({ bigint: true });
    const key = `${st.dev}:${st.ino}`;
    const exclusive = !opts.shared;
    const mine = held.get(key);
    if (mine !== undefined) {
      // Another backend of this process holds it; a read-only one's shared lock is made exclusive in place.
      if (exclusive && !mine.exclusive) {
        await lockOrExplain(mine.fh.fd, true, what, st.dev, st.ino);
        mine.exclusive = true;
      }
      mine.refs++;
      return new StoreLock(key);
    }
    await lockOrExplain(fh.fd, exclusive, what, st.dev, st.ino);
    held.set(key, { fh, exclusive, refs: 1 });
    return new StoreLock(key);
  }

  /**
   * Closes the backend's descriptor `fh` and gives its use of the lock back.
   * The descriptor that holds the lock is closed, which releases it, once no
   * backend of this process uses the store any more.
   */
  async closeWith(fh: FileHandle): Promise<void> {
    const key = this.#key;
    this.#key = null;
    const h = key === null ? undefined : held.get(key);
    if (h === undefined) return fh.close();
    h.refs--;
    if (fh !== h.fh) await fh.close();
    if (h.refs > 0) return;
    held.delete(key!);
    await h.fh.close();
  }
}

/**
 * Why a block device could not be opened with O_EXCL (EBUSY): another
 * rblkd's lock, named with its pid when /proc/locks shows one; null when no
 * flock holder is seen (a mount, or another claimant), for the caller to say
 * what the kernel said.
 */
export async function lockHolderOf(path: string, what: string): Promise<Error | null> {
  try {
    const st = await stat(path, { bigint: true });
    const pid = holderPid((await procLocks()) ?? '', st.dev, st.ino);
    return pid === null ? null : inUse(what, pid);
  } catch {
    return null;
  }
}

/**
 * A holder that has exited may keep its lock a moment longer: the kernel drops
 * a dead process's descriptors only once io_uring has finished with the I/O it
 * had in flight. Retried this often, this far apart, before it is refused.
 */
const DEAD_HOLDER_RETRIES = 40;
const DEAD_HOLDER_RETRY_MS = 50;

/** flock, or EBUSY naming the store and its holder. */
async function lockOrExplain(fd: number, exclusive: boolean, what: string, dev: bigint, ino: bigint): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      addon().lockStore(fd, exclusive);
      return;
    } catch (e) {
      if (!hasCode(e, 'EAGAIN', 'EWOULDBLOCK')) throw e;
      const pid = holderPid((await procLocks()) ?? '', dev, ino);
      if (pid === null || alive(pid) || attempt >= DEAD_HOLDER_RETRIES) throw inUse(what, pid);
      await sleep(DEAD_HOLDER_RETRY_MS);
    }
  }
}

/** Whether a process of this pid exists (EPERM: it does, and is someone else's). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return !hasCode(e, 'ESRCH');
  }
}

function inUse(what: string, pid: number | null): Error {
  const holder = pid === null ? 'another process' : pid === process.pid ? 'this process' : `process ${pid}`;
  return backendError(
    'EBUSY',
    `${what} is in use: ${holder} holds its lock (rblkd locks every file and block device it serves, so that two daemons never serve one store; ` +
      `stop the other one, or give every gateway of a shared store an alua section: docs/backends.md "One daemon per store")`,
  );
}

async function procLocks(): Promise<string | null> {
  try {
    return await readFile('/proc/locks', 'utf8');
  } catch {
    return null;
  }
}

/**
 * The pid of a FLOCK line of /proc/locks on this device and inode ("1: FLOCK
 * ADVISORY WRITE 8301 fe:00:2146433 0 EOF": major and minor in hex), or null.
 * Best effort: a holder in another pid namespace shows as 0 or not at all.
 */
export function holderPid(locks: string, dev: bigint, ino: bigint): number | null {
  // glibc's dev_t encoding (major/minor in <sys/sysmacros.h>).
  const major = ((dev >> 8n) & 0xfffn) | ((dev >> 32n) & ~0xfffn);
  const minor = (dev & 0xffn) | ((dev >> 12n) & ~0xffn);
  const id = `${major.toString(16).padStart(2, '0')}:${minor.toString(16).padStart(2, '0')}:${ino}`;
  for (const line of locks.split('\n')) {
    const f = line.trim().split(/\s+/);
    // "N:" FLOCK ADVISORY WRITE|READ pid id start end; a blocked waiter's line has "->" second.
    if (f[1] !== 'FLOCK' || f[5] !== id) continue;
    const pid = Number(f[4]);
    if (Number.isSafeInteger(pid) && pid > 0) return pid;
  }
  return null;
}
