// Session churn with fd and memory accounting: many login/logout cycles, then connections
// that connect and never log in (libfabric connections that send nothing, and bare TCP
// connections to the listening port that never start libfabric's handshake, or send
// half of its first message). After each, rblkd's open descriptors (/proc/PID/fd) must come
// back to where they were, and its resident memory stay within 10%: the login timeout
// (10 s, docs/protocol.md §7) is what frees a connection that never logs in.
import { readFileSync } from 'node:fs';
import { connect as netConnect, type Socket } from 'node:net';
import { Connection } from '../../initiator/connection.js';
import { FabricInitiatorTransport } from '../../initiator/transport/fabric-transport.js';
import { DEFAULT_TARGET_NAME } from '../../protocol/wire/index.js';
import { SoakDaemon, type SoakProvider } from './daemon.js';
import { sleep } from './processes.js';
import { halfRequest } from './half-request.js';
import { RawConnection } from './raw-connection.js';
import { newRow, type SoakRow } from './report.js';
import { eventually } from '../kit/wait.js';

export interface ChurnOptions {
  provider?: SoakProvider;
  cycles: number;
  /** libfabric connections that never log in. */
  idle: number;
  /** Bare TCP connections that never speak. */
  rawTcp?: number;
  parallel?: number;
  log?: (line: string) => void;
}

/** rblkd's login timeout (target/daemon/daemon.ts) plus its keep-alive and some slack: a bound, not a measurement. */
const RELEASE_MS = 20_000;
const RSS_TOLERANCE = 0.1;
/**
 * V8 gives back the young generation a load grew, and heap pages freed by
 * garbage collection, only in a collection that finds the allocation rate
 * low; rblkd has it collect 5 s and 11 s after the last connection of a burst
 * ended (docs/reliability.md, "Memory"). RSS is read once it has settled,
 * within this bound; the tolerance does not change.
 */
const RSS_SETTLE_MS = 45_000;

/** rblkd's RSS once it is within the tolerance of `base`, or after RSS_SETTLE_MS. */
async function settledRss(daemon: SoakDaemon, base: number): Promise<number> {
  await eventually(() => !daemon.alive || daemon.rss() <= base * (1 + RSS_TOLERANCE), RSS_SETTLE_MS);
  return daemon.alive ? daemon.rss() : 0;
}

function loginOptions(port: number, provider: string): Parameters<typeof Connection.open>[1] {
  return { address: '127.0.0.1', port, provider, initiatorName: 'iqn.2026-11.io.rblk:soak-churn', targetName: DEFAULT_TARGET_NAME, queueDepth: 4, maxIo: 64 * 1024, connectTimeoutMs: 5000 };
}

async function settledBaseline(daemon: SoakDaemon): Promise<{ fds: number; rss: number }> {
  await sleep(1000);
  return { fds: daemon.fds(), rss: daemon.rss() };
}

/**
 * For each bare socket rblkd has not closed: whether it half-sent a request, and
 * the daemon side's TCP state from /proc/PID/net/tcp (proc(5)): inode 0 means it
 * still sits in the listen backlog, never accepted; tx/rx queues and the state
 * tell a socket the provider answered from one it still waits on.
 */
function openSocketStates(pid: number, port: number, sockets: Socket[]): string[] {
  let table: string[] = [];
  try {
    table = readFileSync(`/proc/${pid}/net/tcp`, 'utf8').split('\n').slice(1);
  } catch {
    return ['(no /proc table)'];
  }
  const hex = (n: number): string => n.toString(16).toUpperCase().padStart(4, '0');
  return sockets.flatMap((s, i) => {
    if (s.closed || s.localPort === undefined) return [];
    const row = table.map((l) => l.trim().split(/\s+/)).find((c) => c[1]?.endsWith(`:${hex(port)}`) && c[2]?.endsWith(`:${hex(s.localPort ?? 0)}`));
    const kind = i % 2 === 1 ? 'half request' : 'silent';
    return [row ? `#${i} ${kind}: state ${row[3]} queues ${row[4]} inode ${row[9]}` : `#${i} ${kind}: no daemon-side socket`];
  });
}

export async function churn(o: ChurnOptions): Promise<SoakRow[]> {
  const provider = o.provider ?? 'tcp';
  const log = o.log ?? (() => undefined);
  const daemon = new SoakDaemon({ providers: [provider], volumes: [{ name: 'v', path: 'v.img', size: '8MiB' }], limits: { max_sessions: 64 } });
  const cycles = newRow(`churn: login/logout cycles over ${provider}`);
  const idle = newRow(`churn: connections that never log in over ${provider}`);
  const transport = new FabricInitiatorTransport();
  try {
    await daemon.start();
    // Warm up: the first logins load code and grow pools that then stay.
    for (let i = 0; i < 20; i++) await (await Connection.open(transport, loginOptions(daemon.port(provider), provider))).logout();
    const base = await settledBaseline(daemon);
    cycles.fdsBefore = base.fds;
    cycles.rssBeforeKiB = base.rss;
    let started = 0;
    let done = 0;
    let failed = 0;
    const errors = new Set<string>();
    await Promise.all(
      Array.from({ length: o.parallel ?? 4 }, async () => {
        while (started < o.cycles && daemon.alive) {
          started++;
          try {
            const c = await Connection.open(transport, loginOptions(daemon.port(provider), provider));
            await c.logout();
            done++;
          } catch (e) {
            failed++;
            if (errors.size < 3) errors.add(String(e).slice(0, 160));
          }
          if ((done + failed) % Math.max(1000, Math.floor(o.cycles / 5)) === 0) log(`  churn: ${done + failed}/${o.cycles} cycles`);
        }
      }),
    );
    cycles.runs = 1;
    cycles.operations = done;
    cycles.healthyErrors = failed;
    if (daemon.alive) {
      const back = await eventually(() => daemon.fds() <= base.fds, RELEASE_MS);
      cycles.rssAfterKiB = await settledRss(daemon, base.rss);
      cycles.fdsAfter = daemon.fds();
      if (!back) cycles.notes.push(`fds not back to ${base.fds} within ${RELEASE_MS / 1000} s`);
      if (cycles.rssAfterKiB > base.rss * (1 + RSS_TOLERANCE)) cycles.notes.push(`RSS grew more than ${RSS_TOLERANCE * 100}%`);
      cycles.ok = back && cycles.rssAfterKiB <= base.rss * (1 + RSS_TOLERANCE) && failed === 0;
    } else cycles.ok = false;
    if (errors.size > 0) cycles.notes.push(`login errors: ${[...errors].join(' / ')}`);

    // Connections that never log in, held open on our side: rblkd must drop them.
    if (daemon.alive && o.idle > 0) {
      const base2 = await settledBaseline(daemon);
      idle.fdsBefore = base2.fds;
      idle.rssBeforeKiB = base2.rss;
      const held: RawConnection[] = [];
      const sockets: Socket[] = [];
      let connectFailures = 0;
      try {
        for (let i = 0; i < o.idle && daemon.alive; i += 25) {
          const batch = await Promise.allSettled(Array.from({ length: Math.min(25, o.idle - i) }, () => RawConnection.open(provider, daemon.port(provider), { queueDepth: 1, ioBytes: 4096 })));
          for (const b of batch) if (b.status === 'fulfilled') held.push(b.value);
          else connectFailures++;
        }
        let rawClosed = 0;
        // Half of them send the start of a connection request and stop there.
        for (let i = 0; i < (o.rawTcp ?? 0); i++) {
          const s = netConnect(daemon.port(provider), '127.0.0.1');
          if (i % 2 === 1) s.once('connect', () => s.write(halfRequest(provider)));
          s.on('error', () => undefined);
          s.on('close', () => rawClosed++);
          sockets.push(s);
        }
        log(`  churn: holding ${held.length} never-login connections and ${sockets.length} bare TCP connections`);
        const peak = daemon.alive ? daemon.fds() : 0;
        const released = daemon.alive && (await eventually(() => daemon.fds() <= base2.fds, RELEASE_MS));
        // rblkd's fds come back a moment before this side has read each close: wait for
        // that too (a guard, not a timing check), so the counts below are of what happened.
        if (released) await eventually(() => rawClosed === sockets.length && held.every((h) => h.closed), RELEASE_MS);
        const droppedByTarget = held.filter((h) => h.closed).length;
        idle.fdsAfter = daemon.alive ? daemon.fds() : undefined;
        idle.rssAfterKiB = daemon.alive ? daemon.rss() : undefined;
        idle.runs = 1;
        idle.operations = held.length + sockets.length;
        idle.healthyErrors = connectFailures;
        idle.notes.push(`fds peaked at ${peak}; after ${RELEASE_MS / 1000} s rblkd had dropped ${droppedByTarget}/${held.length} libfabric and ${rawClosed}/${sockets.length} bare TCP connections`);
        if (rawClosed < sockets.length && daemon.alive) idle.notes.push(`still open: ${openSocketStates(daemon.pid, daemon.port(provider), sockets).join(', ')}`);
        if (connectFailures > 0) idle.notes.push(`${connectFailures} connects refused or failed`);
        idle.ok = released && rawClosed === sockets.length && droppedByTarget === held.length;
        if (!released) idle.notes.push(`fds not back to ${base2.fds} while the connections were held`);
      } finally {
        for (const s of sockets) s.destroy();
        await Promise.all(held.map((h) => h.close()));
      }
      if (daemon.alive) {
        const back = await eventually(() => daemon.fds() <= base2.fds, RELEASE_MS);
        if (!back) idle.notes.push(`fds still ${daemon.fds()} after we closed ours`);
        idle.rssAfterKiB = await settledRss(daemon, base2.rss);
        idle.fdsAfter = daemon.fds();
      }
      if (idle.rssAfterKiB !== undefined && idle.rssAfterKiB > base2.rss * (1 + RSS_TOLERANCE)) {
        idle.ok = false;
        idle.notes.push(`RSS grew more than ${RSS_TOLERANCE * 100}%`);
      }
    }
  } catch (e) {
    cycles.ok = false;
    cycles.notes.push(`aborted: ${e instanceof Error ? e.message.split('\n')[0] : String(e)}`);
  } finally {
    if (idle.runs === 0) idle.skipped = 'not run: the cycles before it failed';
    cycles.daemonExits = daemon.unexpectedExits;
    if (daemon.unexpectedExits > 0) {
      cycles.ok = idle.ok = false;
      cycles.notes.push(...daemon.exitReports);
    }
    await daemon.close();
  }
  return o.idle > 0 ? [cycles, idle] : [cycles];
}
