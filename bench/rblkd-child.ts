// rblkd as a child process for the benches that kill and restart it (bench/restart.ts,
// bench/failover.ts): the test kit's launcher (bench/kit/child.ts), with the moment it
// first logged a given line.
import type { ChildProcess } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { spawnEntry } from './kit/child.js';

export interface RblkdChild {
  child: ChildProcess;
  /** performance.now() when rblkd first logged a line matching the pattern. */
  seen: Promise<number>;
  exited: Promise<void>;
}

/** Starts rblkd on `config` (with `env` added to its environment); `seen` rejects, with the end of its log, if it exits before logging `pattern`. */
export function startRblkd(config: string, pattern: RegExp, env?: Record<string, string>): RblkdChild {
  const c = spawnEntry('rblkd', ['--config', config], env !== undefined ? { env } : {});
  const seen = c.waitForLine(pattern, { ms: Infinity }).then(() => performance.now());
  seen.catch(() => undefined);
  return { child: c.proc, seen, exited: c.exited.then(() => undefined) };
}
