// Whether rblkd could make and write its state_dir (docs/operations.md "Checking a file"): the
// start makes it before the first volume opens (target/daemon/volumes.ts), so a state_dir under
// a regular file, or in a directory this user may not write, is reported by --check-config and
// refuses the start as a configuration error rather than as a failed open.
import { accessSync, constants, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { describeFsError } from './secret-file.js';

export const STATE_DIR_HINT = '(set state_dir in the file, or run with --state-dir DIR)';

/** Why state_dir `dir` (absolute) cannot be used, or undefined when it can. */
export function stateDirProblem(dir: string): string | undefined {
  // The nearest part of the path that exists: the directory itself, or where mkdir -p starts.
  let at = dir;
  for (;;) {
    let st;
    try {
      st = statSync(at);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if ((code === 'ENOENT' || code === 'ENOTDIR') && dirname(at) !== at) {
        at = dirname(at);
        continue;
      }
      return `${at === dir ? dir : `cannot create ${dir}: ${at}`} ${describeFsError(e)} ${STATE_DIR_HINT}`;
    }
    const made = at === dir ? dir : `cannot create ${dir}: ${at}`;
    if (!st.isDirectory()) return `${made} is not a directory ${STATE_DIR_HINT}`;
    try {
      accessSync(at, constants.W_OK | constants.X_OK);
    } catch {
      return `${at === dir ? `${dir} is` : `cannot create ${dir}: directory ${at} is`} not writable ${STATE_DIR_HINT}`;
    }
    return undefined;
  }
}
