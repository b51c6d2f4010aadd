// The real programs a soak drives: rblkd and the rblk CLI as child processes, run the way a
// user runs them (the compiled entry points when this file runs from dist/, the TypeScript
// sources under tsx when it runs from the tree, as the tests do), and what /proc says about
// a process: its open descriptors and resident memory.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import { spawnEntry as spawnKitEntry, type Child, type Entry } from '../kit/child.js';

export { Child, childEnv, entryArgs, killAllChildren, ROOT, type Exit } from '../kit/child.js';

/** rblkd or rblk for a soak: a fuzzed daemon logs every disconnect, so only the newest lines are kept. */
export function spawnEntry(name: Entry, args: string[]): Child {
  return spawnKitEntry(name, args, { keepLines: 2000 });
}

/** Open file descriptors of a process (/proc/PID/fd). */
export function fdCount(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length;
}

/** Resident set size of a process in KiB (/proc/PID/status VmRSS). */
export function rssKiB(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : 0;
}

/** The first of these directories that holds an executable name. */
export function haveTool(name: string): boolean {
  return ['/usr/bin', '/usr/sbin', '/usr/local/bin', '/bin', '/sbin'].some((d) => existsSync(join(d, name)));
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** p, or `fallback` if it has not settled within ms; the timer never outlives the race. */
export async function within<T, F>(p: Promise<T>, ms: number, fallback: F): Promise<T | F> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<F>((r) => (timer = setTimeout(() => r(fallback), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}
