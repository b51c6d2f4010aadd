// Whether the process that serves an attachment still runs. kill(pid, 0)
// alone says yes for a zombie, and a detached mount helper whose parent
// exited may stay one for a while where nothing reaps orphans (a container
// whose init does not): /proc/PID/stat tells a zombie apart (proc(5)).
import { readFileSync } from 'node:fs';

export function isRunning(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The state follows the parenthesised command name, which may itself hold spaces or ')'.
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}
