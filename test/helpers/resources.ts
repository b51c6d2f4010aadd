// What a process holds, read from /proc (proc(5)): its open file descriptors,
// by kind, and its resident memory (VmRSS). Suites that open sessions take a
// baseline once warmed up and check, at the end, that both came back: a
// connection that leaves an fd behind fails here long before a daemon runs
// out of them (docs/target.md "Resources per connection").
import type { ExecutionContext } from 'ava';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

export interface Resources {
  readonly pid: number;
  /** Open file descriptors. */
  readonly fds: number;
  /** fd count per kind: eventpoll, unix, tcp, socket, pipe, eventfd, file, ... */
  readonly kinds: Readonly<Record<string, number>>;
  /** Resident set size in KiB (VmRSS). */
  readonly rssKiB: number;
  /** Threads (a provider may run one per connection: sockets runs its own per domain). */
  readonly threads: number;
}

/** Socket inodes listed in one of /proc/PID/net/{unix,tcp,tcp6}: the inode is a fixed column. */
function socketInodes(pid: number, table: string, column: number): Set<string> {
  const out = new Set<string>();
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/net/${table}`, 'utf8');
  } catch {
    return out;
  }
  for (const line of text.split('\n').slice(1)) {
    const cols = line.trim().split(/\s+/);
    if (cols.length > column) out.add(cols[column]);
  }
  return out;
}

function kindOf(target: string, unix: Set<string>, tcp: Set<string>): string {
  const sock = /^socket:\[(\d+)\]$/.exec(target);
  if (sock) return unix.has(sock[1]) ? 'unix' : tcp.has(sock[1]) ? 'tcp' : 'socket';
  const anon = /^anon_inode:\[?([a-z_]+)\]?$/.exec(target);
  if (anon) return anon[1];
  if (target.startsWith('pipe:')) return 'pipe';
  if (target.startsWith('/dev/')) return 'device';
  return 'file';
}

/** The process's fds and RSS now. Throws if it does not exist. */
export function resources(pid: number = process.pid): Resources {
  const unix = socketInodes(pid, 'unix', 6);
  const tcp = new Set([...socketInodes(pid, 'tcp', 9), ...socketInodes(pid, 'tcp6', 9)]);
  const kinds: Record<string, number> = {};
  let fds = 0;
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    let target: string;
    try {
      target = readlinkSync(`/proc/${pid}/fd/${fd}`);
    } catch {
      continue; // closed while we looked (readdir's own fd among them)
    }
    fds++;
    const k = kindOf(target, unix, tcp);
    kinds[k] = (kinds[k] ?? 0) + 1;
  }
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const rss = /^VmRSS:\s+(\d+) kB$/m.exec(status);
  const threads = /^Threads:\s+(\d+)$/m.exec(status);
  return { pid, fds, kinds, rssKiB: rss ? Number(rss[1]) : 0, threads: threads ? Number(threads[1]) : 0 };
}

/**
 * How much RSS may grow over a baseline taken after warm-up: 10% of it or
 * 8 MiB, whichever is more. V8 grows its heap in steps and keeps freed pages
 * a while, so RSS never returns to the byte; a per-connection leak of even
 * 4 KiB over a few hundred cycles still shows, and a leaked 1 MiB pool per
 * session shows after eight.
 */
export function rssAllowanceKiB(base: Resources): number {
  return Math.max(Math.ceil(base.rssKiB * 0.1), 8 * 1024);
}

/** "eventpoll +1, unix +2": what changed between two samples. */
export function kindDelta(from: Resources, to: Resources): string {
  const names = new Set([...Object.keys(from.kinds), ...Object.keys(to.kinds)]);
  const parts: string[] = [];
  for (const k of [...names].sort()) {
    const d = (to.kinds[k] ?? 0) - (from.kinds[k] ?? 0);
    if (d !== 0) parts.push(`${k} ${d > 0 ? '+' : ''}${d}`);
  }
  return parts.join(', ') || 'none';
}

/**
 * A baseline once the process has settled: sampled until the fd count holds
 * still for a few samples in a row (bounded), so that a close still under way
 * from a warm-up is not taken as the starting point.
 */
export async function baseline(pid: number = process.pid): Promise<Resources> {
  let last = resources(pid);
  for (let i = 0, same = 0; i < 60 && same < 4; i++) {
    await new Promise((r) => setTimeout(r, 50));
    const now = resources(pid);
    same = now.fds === last.fds ? same + 1 : 0;
    last = now;
  }
  return last;
}

export interface ReturnOptions {
  /** Names the process in the message ("rblkd", "the test process"). */
  what?: string;
  /** Also check RSS growth (a daemon's; a test runner's own RSS is too noisy to judge). */
  rss?: boolean;
  /** fds the suite may legitimately leave open (e.g. a cached provider object); 0 unless said. */
  fdSlack?: number;
  /** How long to wait for the counts to come back (a guard, not a timing check); 5 s unless said. */
  settleMs?: number;
  /** With rss: how long to wait for RSS to come back within its allowance; 45 s unless said (see settleRss). */
  rssSettleMs?: number;
}

/**
 * V8 keeps the pages of a young generation grown under load, and heap pages
 * freed by garbage collection, until its memory reducer runs on a process that
 * has gone quiet: about 20 to 30 s after the load stops, measured here with
 * a churn of 2,000 sessions (RSS 76 → 110 MiB at the end of the churn, 71 MiB
 * 30 s later). So RSS is judged once the process has settled, polled up to a
 * bound (a guard, not a timing check); the allowance itself does not change.
 */
async function settleRss(base: Resources, now: Resources, settleMs: number): Promise<Resources> {
  for (let i = 0; i < settleMs / 250 && now.rssKiB - base.rssKiB > rssAllowanceKiB(base); i++) {
    await new Promise((r) => setTimeout(r, 250));
    now = resources(base.pid);
  }
  return now;
}

/** Polls (bounded, a guard against waiting forever, not a timing check) until the fds are back. */
async function settle(base: Resources, slack: number, settleMs: number): Promise<Resources> {
  let now = resources(base.pid);
  for (let i = 0; i < settleMs / 50 && (now.fds > base.fds + slack || now.threads > base.threads); i++) {
    await new Promise((r) => setTimeout(r, 50));
    now = resources(base.pid);
  }
  return now;
}

/**
 * Asserts that the process's fd and thread counts came back to (at most) the
 * baseline, and, with rss, that its RSS grew by no more than rssAllowanceKiB. Closing
 * is asynchronous (a peer's FI_SHUTDOWN, a session's logout), so it polls
 * briefly first. Returns the last sample.
 */
/** assertReturned without ava (for a helper's teardown): resolves the complaint, or null when all came back. */
export async function notReturned(base: Resources, o: ReturnOptions = {}): Promise<string | null> {
  const what = o.what ?? `pid ${base.pid}`;
  let now = await settle(base, o.fdSlack ?? 0, o.settleMs ?? 5000);
  if (o.rss) now = await settleRss(base, now, o.rssSettleMs ?? 45_000);
  if (now.fds > base.fds + (o.fdSlack ?? 0)) return `${what} holds ${now.fds} fds, ${now.fds - base.fds} more than its baseline of ${base.fds} (${kindDelta(base, now)})`;
  if (o.rss && now.rssKiB - base.rssKiB > rssAllowanceKiB(base)) return `${what} RSS grew from ${base.rssKiB} KiB to ${now.rssKiB} KiB, more than the ${rssAllowanceKiB(base)} KiB allowed`;
  return null;
}

export async function assertReturned(t: ExecutionContext, base: Resources, o: ReturnOptions = {}): Promise<Resources> {
  const what = o.what ?? `pid ${base.pid}`;
  let now = await settle(base, o.fdSlack ?? 0, o.settleMs ?? 5000);
  if (o.rss) now = await settleRss(base, now, o.rssSettleMs ?? 45_000);
  t.true(
    now.fds <= base.fds + (o.fdSlack ?? 0),
    `${what} holds ${now.fds} fds, ${now.fds - base.fds} more than its baseline of ${base.fds} (${kindDelta(base, now)})`,
  );
  t.true(now.threads <= base.threads, `${what} runs ${now.threads} threads, ${now.threads - base.threads} more than its baseline of ${base.threads}`);
  if (o.rss) {
    const allowed = rssAllowanceKiB(base);
    t.true(
      now.rssKiB - base.rssKiB <= allowed,
      `${what} RSS grew from ${base.rssKiB} KiB to ${now.rssKiB} KiB, more than the ${allowed} KiB allowed`,
    );
  }
  return now;
}

/**
 * For a file whose tests open sessions in this process: a baseline before
 * the first test and the check after the last. warmUp runs first, so what a
 * library opens once per process (a provider's global state) is not counted.
 */
export function checkSuiteResources(
  test: { before(fn: (t: ExecutionContext) => Promise<void> | void): void; after: { always(title: string, fn: (t: ExecutionContext) => Promise<void>): void } },
  o: ReturnOptions & { warmUp?: () => Promise<void> | void } = {},
): void {
  let base: Resources | null = null;
  test.before(async () => {
    await o.warmUp?.();
    base = resources();
  });
  test.after.always('fds return to their baseline', async (t) => {
    if (base === null) {
      t.fail('no baseline was taken');
      return;
    }
    await assertReturned(t, base, { what: o.what ?? 'the test process', rss: o.rss, fdSlack: o.fdSlack });
  });
}

/**
 * One connection over each provider, opened and closed, for checkSuiteResources'
 * warmUp: what libfabric opens once per process (its providers' global state)
 * then belongs to the baseline, not to the suite.
 */
export async function warmUpFabric(providers: readonly string[] = ['tcp', 'sockets']): Promise<void> {
  const { connectPair } = await import('./fabric-pair.js');
  for (const p of providers) {
    const pair = await connectPair(p);
    await pair.close();
  }
}
