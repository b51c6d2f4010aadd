// Children that die with the process that started them. A test worker that
// ava's timeout ends, or a bench killed with SIGKILL, runs no teardown, and
// its rblkd, Ceph monitor and OSD would keep running (and holding ports,
// memory and loop devices) until someone ended them by pid. util-linux's
// setpriv sets PR_SET_PDEATHSIG (prctl(2)) and then execs the command in
// place, so the pid, argv and exit status are the command's own, and the
// kernel sends SIGKILL to it when its parent goes.
import { existsSync } from 'node:fs';

const SETPRIV = ['/usr/bin/setpriv', '/bin/setpriv'].find((p) => existsSync(p));

/** Whether diesWithParent can bind a child to this process here (util-linux's setpriv is installed). */
export const canDieWithParent = SETPRIV !== undefined;

/** argv, prefixed so that the command is killed when this process dies; unchanged where setpriv is missing. */
export function diesWithParent(argv: readonly string[]): [string, ...string[]] {
  if (argv.length === 0) throw new RangeError('diesWithParent: empty argv');
  return SETPRIV === undefined ? (argv as [string, ...string[]]) : [SETPRIV, '--pdeathsig', 'KILL', '--', ...argv];
}
