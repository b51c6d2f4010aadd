// How many more file descriptors this process may open (RLIMIT_NOFILE minus
// those open), from /proc (proc(5): /proc/self/limits, /proc/self/fd).
//
// Why the transport asks before accepting: the tcp provider accept()s a
// connection's socket itself, on its own, and when that fails with EMFILE it
// only logs to libfabric's log and leaves the connection in the backlog (the
// initiator then times out, rblkd hears nothing). Refusing connections while a
// reserve is still free keeps rblkd in the state where it can still take a
// socket, reject it with a reason and log why (docs/target.md "Resources per
// connection").
import { readdirSync, readFileSync } from 'node:fs';

/** Free fds kept for the provider's accept of refused peers, and for volumes' file I/O. */
export const FD_RESERVE = 32;

/** Free fds left, or Infinity when it cannot be known (no /proc, no limit). */
export function fdHeadroom(): number {
  let limit: number;
  try {
    const m = /^Max open files\s+(\d+|unlimited)/m.exec(readFileSync('/proc/self/limits', 'utf8'));
    if (!m || m[1] === 'unlimited') return Infinity;
    limit = Number(m[1]);
    // readdir holds one fd of its own while it runs.
    return limit - (readdirSync('/proc/self/fd').length - 1);
  } catch {
    return Infinity;
  }
}
