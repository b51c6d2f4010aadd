// Whether the process that serves an attachment (a mount or FUSE helper)
// still runs, for rblk umount and list and the stale-record cleanup. kill(pid, 0)
// alone says yes for a zombie, and a detached mount helper whose parent
// exited may stay one for a while where nothing reaps orphans (a container
// whose init does not): /proc/PID/stat tells a zombie apart (proc(5)).
// The state of /proc/PID/stat is the main thread's alone, though: when the
// main thread has exited and another is still running (a native thread
// finishing, or stuck in the kernel on a FUSE or loop request), it shows Z
// while the process still holds all its files, its /dev/fuse session and its
// memory. So every thread in /proc/PID/task is looked at.
import { readdirSync, readFileSync } from 'node:fs';

/** The one-letter state in a /proc stat line; it follows the command name, which may itself hold spaces or ')'. */
function stateOf(statPath: string): string | null {
  try {
    const stat = readFileSync(statPath, 'utf8');
    const end = stat.lastIndexOf(')');
    return stat.slice(end + 2, end + 3);
  } catch {
    return null;
  }
}

const alive = (state: string | null): boolean => state !== null && state !== 'Z' && state !== 'X';

/** True while any thread of the process runs (is not a zombie or dead). */
export function isRunning(pid: number): boolean {
  if (alive(stateOf(`/proc/${pid}/stat`))) return true;
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return false;
  }
  return tasks.some((tid) => alive(stateOf(`/proc/${pid}/task/${tid}/stat`)));
}
