// Sustained I/O through every front end and buffer kind (docs/reliability.md
// "Sustained sessions"): the real rblkd with its default limits (keep-alive
// included), and for RBLK_SUSTAIN_S seconds (20 by default) of data that is
// written, read back and compared, through
//   - the library with registered (zero-copy) buffers and with ordinary ones,
//     with reactors off and on, and with both ends busy-polling;
//   - the NBD export (`rblk attach`), driven by fio's nbd engine with crc32c verify;
//   - the iSCSI listener, driven by QEMU's iSCSI initiator (qemu-nbd over an
//     iscsi:// image) and the same fio job;
//   - the library over the RDM providers, shm and tcp;ofi_rxm, both at once
//     (docs/transport.md "RDM endpoints").
// Each path must log in exactly once, see no error and no reconnect, and the
// daemon's fds and memory must come back when it is done. A session ended by
// its own keep-alive while busy (the fast path's commands not counted as heard)
// fails here.
import test, { type ExecutionContext } from 'ava';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { connect, type RegisteredBuffer, type Session, type Volume } from '../../initiator/index.js';
import { availableRdmProviders } from '../../native/fabric.js';
import { RDM_PROVIDERS } from '../helpers/fabric-pair.js';
import { controlRequest } from '../../target/daemon/control-client.js';
import type { SessionInfo } from '../../target/connection/environment.js';
import { diesWithParent } from '../../bench/parent-death.js';
import { resources, rssAllowanceKiB, type Resources } from '../helpers/resources.js';
import { ROOT, spawnDaemon, workdir, type DaemonProcess } from './helpers/daemon-process.js';

const SECONDS = Number(process.env.RBLK_SUSTAIN_S ?? 20);
const TARGET = 'iqn.2026-12.io.rblk:sustained';
const BS = 4096;
const VOLUME_BLOCKS = 4096; // 16 MiB
const QD = 8;

interface Served {
  d: DaemonProcess;
  port: number;
  iscsiPort: number | null;
  socket: string;
  baseline: Resources;
}

async function serve(t: ExecutionContext, opts: { reactors: number; iscsi?: boolean; rdm?: readonly string[]; busyPollMicros?: number }): Promise<Served> {
  const w = workdir(t);
  const socket = join(w.dir, 'rblkd.ctl');
  const listeners: Record<string, unknown>[] = [{ provider: 'tcp', address: '127.0.0.1', port: 0 }];
  if (opts.iscsi === true) listeners.push({ protocol: 'iscsi', address: '127.0.0.1', port: 0 });
  for (const provider of opts.rdm ?? []) listeners.push({ provider, address: '127.0.0.1', port: 0 });
  // The default limits, keep-alive included: only the state directory and the socket are the test's.
  w.writeConfig({
    target_name: TARGET,
    reactors: opts.reactors,
    ...(opts.busyPollMicros !== undefined ? { busy_poll_us: opts.busyPollMicros } : {}),
    listeners,
    volumes: [{ name: 'vol', path: 'vol.img', size: `${(VOLUME_BLOCKS * BS) >> 20}MiB`, lun: 0 }],
    state_dir: w.state,
    control: { socket },
  });
  const d = spawnDaemon(t, ['--config', w.configPath]);
  const port = await d.port();
  const iscsiPort = opts.iscsi === true ? await d.iscsiPort() : null;
  await d.waitForLine(/rblkd ready/);
  return { d, port, iscsiPort, socket, baseline: resources(d.child.pid!) };
}

const loginsOf = (d: DaemonProcess, initiator: string): number => d.lines.filter((l) => /logged in/.test(l) && l.includes(`initiator=${initiator}`)).length;
const trouble = (d: DaemonProcess): string[] => d.lines.filter((l) => /\b(warn|error):/.test(l));

async function sessionsOf(socket: string, initiator: string): Promise<SessionInfo[]> {
  return ((await controlRequest(socket, 'sessions')) as SessionInfo[]).filter((s) => s.initiator === initiator);
}

/** Waits until the daemon holds what it held before the sessions, then checks its memory (docs/target.md "Resources per connection"). */
async function resourcesBack(t: ExecutionContext, s: Served): Promise<void> {
  const pid = s.d.child.pid!;
  let now = resources(pid);
  for (let i = 0; i < 200 && now.fds > s.baseline.fds; i++) {
    await new Promise((r) => setTimeout(r, 50));
    now = resources(pid);
  }
  t.true(now.fds <= s.baseline.fds, `the daemon's fds came back: ${now.fds} now, ${s.baseline.fds} before (${JSON.stringify(now.kinds)})`);
  t.true(now.rssKiB - s.baseline.rssKiB <= rssAllowanceKiB(s.baseline) + 64 * 1024, `the daemon's memory came back: ${now.rssKiB} KiB now, ${s.baseline.rssKiB} KiB before`);
}

interface Totals {
  writes: number;
  reads: number;
  mismatches: number;
}

/**
 * QD workers, each on its own blocks: write a fresh pattern, read it back,
 * compare; for `seconds`. Registered buffers carry the data zero-copy; else
 * ordinary Buffers take the pool (or, for small writes, the capsule). `part`
 * keeps the workers to part.index of part.of equal slices of the volume, for
 * sessions that share it.
 */
async function libraryLoad(session: Session, vol: Volume, registered: boolean, seconds: number, part = { index: 0, of: 1 }): Promise<Totals> {
  const totals: Totals = { writes: 0, reads: 0, mismatches: 0 };
  const end = Date.now() + seconds * 1000;
  const memory: RegisteredBuffer | null = registered ? session.allocate(QD * 2 * BS) : null;
  try {
    await Promise.all(
      Array.from({ length: QD }, async (_, worker) => {
        const out = memory !== null ? memory.buffer.subarray(worker * 2 * BS, worker * 2 * BS + BS) : Buffer.alloc(BS);
        const back = memory !== null ? memory.buffer.subarray(worker * 2 * BS + BS, (worker + 1) * 2 * BS) : Buffer.alloc(BS);
        const mine = VOLUME_BLOCKS / part.of / QD;
        const first = (part.index * QD + worker) * mine;
        while (Date.now() < end) {
          const block = first + Math.floor(Math.random() * mine);
          const expected = randomBytes(BS);
          expected.copy(out);
          await vol.write(block * BS, out);
          totals.writes++;
          back.fill(0);
          await vol.read(block * BS, back);
          totals.reads++;
          if (!back.equals(expected)) totals.mismatches++;
        }
      }),
    );
  } finally {
    memory?.release();
  }
  return totals;
}

/** What every library run must show: bytes as written, one login, no error or reconnect, every command counted. */
async function checkRun(
  t: ExecutionContext,
  s: Served,
  r: { initiator: string; session: Session; errors: unknown[]; before: SessionInfo | undefined; totals: Totals; label: string },
): Promise<SessionInfo | undefined> {
  const [info] = await sessionsOf(s.socket, r.initiator);
  t.log(`${r.label}: ${r.totals.writes} writes and ${r.totals.reads} reads in ${SECONDS} s; native commands ${info?.native.commands ?? 0}`);
  t.is(r.totals.mismatches, 0, `${r.label}: every block read back as written`);
  t.true(r.totals.writes > 0 && r.totals.reads === r.totals.writes);
  t.is(r.session.reconnects, 0, `${r.label}: the session never reconnected`);
  t.deepEqual(r.errors, [], `${r.label}: the session reported no error`);
  t.is(loginsOf(s.d, r.initiator), 1, `${r.label}: one login for the whole run`);
  t.not(info, undefined, `${r.label}: the session is still the daemon's`);
  t.is(info!.errors, 0);
  t.is(info!.ops - (r.before?.ops ?? 0), r.totals.writes + r.totals.reads, `${r.label}: ctl sessions counted every command, native or not`);
  return info;
}

/** One session to the daemon's volume, closed at teardown unless close() ran; `before` is its ctl record at the start. */
async function logIn(t: ExecutionContext, s: Served, port: number, provider: string, initiator: string, busyPollMicros = 0) {
  const errors: unknown[] = [];
  const session = await connect({ address: '127.0.0.1', port, provider, initiatorName: initiator, targetName: TARGET, busyPollMicros });
  session.on('error', (e) => errors.push(e));
  let closed = false;
  t.teardown(async () => {
    if (!closed) await session.close();
  });
  const vol = await session.open('vol');
  const [before] = await sessionsOf(s.socket, initiator);
  const close = async (): Promise<void> => {
    closed = true;
    await session.close();
  };
  return { initiator, errors, session, vol, before, close };
}

async function libraryPath(t: ExecutionContext, opts: { reactors: number; registered: boolean; busyPollMicros?: number }): Promise<void> {
  t.timeout((SECONDS + 60) * 1000);
  const s = await serve(t, { reactors: opts.reactors, busyPollMicros: opts.busyPollMicros });
  const spin = opts.busyPollMicros ?? 0;
  const l = await logIn(t, s, s.port, 'tcp', `iqn.2026-12.io.rblk:sustained-${opts.registered ? 'registered' : 'pooled'}-r${opts.reactors}${spin > 0 ? '-poll' : ''}`, spin);
  const totals = await libraryLoad(l.session, l.vol, opts.registered, SECONDS);
  const info = await checkRun(t, s, { ...l, totals, label: 'tcp' });
  if (opts.registered || opts.reactors > 0) t.true(info!.native.commands > 0, 'the fast path served the run');
  if (spin > 0) t.true(l.session.endpointWakeups.some((w) => w.spins > 0), 'the library busy-polled');
  // Version 5 (docs/protocol.md §5.1): the workers' commands went out several to a message.
  if (opts.registered) t.true(l.session.fastPathTrains > 0, 'the library sent trains');
  t.log(`trains: ${l.session.fastPathTrains}`);
  await l.close();
  // The session's last log line counts what the fast path served, after it closed with the connection.
  const ended = await s.d.waitForLine(new RegExp(`session ended: .*initiator=${l.initiator.replace(/[.]/g, '\\.')} .*nativeCommands=(\\d+)`));
  if (opts.registered || opts.reactors > 0) t.is(Number(ended[1]), info!.native.commands, `the end of session logs the fast path's commands: ${ended[0]}`);
  t.deepEqual(trouble(s.d), [], 'the daemon logged no warning or error');
  await resourcesBack(t, s);
}

test('library, registered buffers, reactors 0: 20 s of verified I/O on one login, no error, no reconnect', (t) => libraryPath(t, { reactors: 0, registered: true }));
test('library, pooled buffers, reactors 0: 20 s of verified I/O on one login, no error, no reconnect', (t) => libraryPath(t, { reactors: 0, registered: false }));
test('library, registered buffers, reactors 2: 20 s of verified I/O on one login, no error, no reconnect', (t) => libraryPath(t, { reactors: 2, registered: true }));
test('library, pooled buffers, reactors 2: 20 s of verified I/O on one login, no error, no reconnect', (t) => libraryPath(t, { reactors: 2, registered: false }));
// Busy polling on both ends (docs/architecture.md "Busy polling"): the same load, answered while both sides spin.
test('library, registered buffers, busy polling 50 µs on both ends: 20 s of verified I/O on one login, no error, no reconnect', (t) =>
  libraryPath(t, { reactors: 0, registered: true, busyPollMicros: 50 }));

// shm and tcp;ofi_rxm at once, one login each on its own half of the volume:
// shm is polled and woken by its peer's doorbell, rxm sleeps on its CQ's fd
// (docs/transport.md "Progress without a wait fd"); both must keep moving.
const rdmHere = RDM_PROVIDERS.filter((p) => availableRdmProviders().includes(p));
(rdmHere.includes('shm') ? test : test.skip)(`library over ${rdmHere.join(' and ')} at once, registered buffers: 20 s of verified I/O on one login each, no error, no reconnect`, async (t) => {
  t.timeout((SECONDS + 60) * 1000);
  const s = await serve(t, { reactors: 0, rdm: rdmHere });
  const runs = await Promise.all(
    rdmHere.map(async (provider, index) => {
      const m = await s.d.waitForLine(new RegExp(`listening ${provider} 127\\.0\\.0\\.1:(\\d+)`));
      return { provider, index, ...(await logIn(t, s, Number(m[1]), provider, `iqn.2026-12.io.rblk:sustained-${provider.replace(/;/g, '-')}`)) };
    }),
  );
  const totals = await Promise.all(runs.map((r) => libraryLoad(r.session, r.vol, true, SECONDS, { index: r.index, of: runs.length })));
  for (const [i, r] of runs.entries()) {
    const info = await checkRun(t, s, { ...r, totals: totals[i]!, label: r.provider });
    t.true(info!.native.commands > 0, `${r.provider}: the fast path served the run`);
  }
  for (const r of runs) await r.close();
  t.deepEqual(trouble(s.d), [], 'the daemon logged no warning or error');
  await resourcesBack(t, s);
});

interface FioJob {
  error: number;
  read: { io_bytes: number };
  write: { io_bytes: number };
}

function run(cmd: string, args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const [c, ...a] = diesWithParent([cmd, ...args]);
    const child = spawn(c, a, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (x: string) => (stdout += x));
    child.stderr.setEncoding('utf8').on('data', (x: string) => (stderr += x));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** fio's nbd engine for SECONDS: random 4 KiB writes, each batch read back and checked with crc32c. */
async function fioVerified(t: ExecutionContext, uri: string): Promise<FioJob> {
  const r = await run('fio', [
    '--name=sustained',
    '--ioengine=nbd',
    `--uri=${uri}`,
    '--rw=randwrite',
    '--bs=4k',
    `--iodepth=${QD}`,
    '--size=8m',
    '--time_based',
    `--runtime=${SECONDS}`,
    '--verify=crc32c',
    '--verify_backlog=128',
    '--verify_fatal=1',
    '--verify_state_save=0',
    '--output-format=json',
  ]);
  t.is(r.code, 0, r.stderr);
  const report = JSON.parse(r.stdout.slice(r.stdout.indexOf('{'))) as { jobs: FioJob[] };
  return report.jobs[0]!;
}

const haveTool = (bin: string): boolean =>
  ['/usr/bin', '/usr/sbin', '/usr/local/bin', '/bin'].some((d) => {
    try {
      return statSync(join(d, bin)).isFile();
    } catch {
      return false;
    }
  });

/** Starts a long-running helper, waits for `ready` on its stdout or stderr (null: not at all), and kills it at teardown. */
async function helper(t: ExecutionContext, cmd: string, args: string[], ready: RegExp | null): Promise<{ stop(): Promise<number | null>; output(): string }> {
  const [c, ...a] = diesWithParent([cmd, ...args]);
  const child = spawn(c, a, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const exited = new Promise<number | null>((r) => child.on('close', (code) => r(code)));
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  });
  await new Promise<void>((resolve, reject) => {
    if (ready === null) resolve();
    const check = (x: string): void => {
      out += x;
      if (ready !== null && ready.test(out)) resolve();
    };
    child.stdout.setEncoding('utf8').on('data', check);
    child.stderr.setEncoding('utf8').on('data', check);
    void exited.then((code) => reject(new Error(`${cmd} exited (${code}) before it was ready:\n${out}`)));
  });
  return {
    async stop() {
      child.kill('SIGTERM');
      return exited;
    },
    output: () => out,
  };
}

(haveTool('fio') ? test : test.skip)('NBD export (rblk attach), fio verified: 20 s on one login, no error, no reconnect', async (t) => {
  t.timeout((SECONDS + 60) * 1000);
  const s = await serve(t, { reactors: 0 });
  const initiator = 'iqn.2026-12.io.rblk:sustained-nbd';
  const w = workdir(t);
  const socket = join(w.dir, 'nbd.sock');
  const att = await helper(
    t,
    process.execPath,
    ['--import=tsx', join(ROOT, 'bin-src', 'rblk.ts'), 'attach', `rblk://127.0.0.1:${s.port}/vol`, '--target-name', TARGET, '--initiator-name', initiator, '--nbd-socket', socket],
    /serving vol/,
  );
  const job = await fioVerified(t, `nbd+unix:///vol?socket=${socket}`);
  const [info] = await sessionsOf(s.socket, initiator);
  t.log(`fio: ${job.write.io_bytes} bytes written, ${job.read.io_bytes} verified`);
  t.is(job.error, 0);
  t.true(job.write.io_bytes > 0 && job.read.io_bytes > 0, 'fio wrote and verified');
  t.is(loginsOf(s.d, initiator), 1, 'one login for the whole run');
  t.not(info, undefined);
  t.is(info!.errors, 0);
  t.is(await att.stop(), 0, att.output());
  t.notRegex(att.output(), /reconnect|error/i, 'the export saw no reconnect or error');
  t.deepEqual(trouble(s.d), [], 'the daemon logged no warning or error');
  await resourcesBack(t, s);
});

(haveTool('fio') && haveTool('qemu-nbd') ? test : test.skip)('iSCSI listener (QEMU initiator through qemu-nbd), fio verified: 20 s on one login, no error', async (t) => {
  t.timeout((SECONDS + 60) * 1000);
  const s = await serve(t, { reactors: 0, iscsi: true });
  const initiator = 'iqn.2026-12.org.qemu:sustained';
  const w = workdir(t);
  const socket = join(w.dir, 'qemu-nbd.sock');
  const image = `driver=iscsi,transport=tcp,portal=127.0.0.1:${s.iscsiPort},target=${TARGET},lun=0,initiator-name=${initiator}`;
  // One qemu-nbd: one iSCSI login, held for every NBD client (fio) that comes and goes.
  const q = await helper(t, 'qemu-nbd', ['--persistent', '--shared=4', '--cache=none', `--socket=${socket}`, '--image-opts', `driver=raw,file.${image.replace(/,/g, ',file.')}`], null);
  // qemu-nbd says nothing once its socket is up: wait until the socket exists.
  for (let i = 0; i < 400 && !existsSync(socket); i++) await new Promise((r) => setTimeout(r, 25));
  t.true(existsSync(socket), `qemu-nbd serves the iSCSI LUN: ${q.output()}`);
  const job = await fioVerified(t, `nbd+unix:///?socket=${socket}`);
  const [info] = await sessionsOf(s.socket, initiator);
  t.log(`fio: ${job.write.io_bytes} bytes written, ${job.read.io_bytes} verified`);
  t.is(job.error, 0);
  t.true(job.write.io_bytes > 0 && job.read.io_bytes > 0, 'fio wrote and verified');
  t.is(s.d.lines.filter((l) => /iSCSI session logged in/.test(l) && l.includes(initiator)).length, 1, 'one login for the whole run');
  t.not(info, undefined);
  t.is(info!.errors, 0);
  await q.stop();
  t.deepEqual(trouble(s.d), [], 'the daemon logged no warning or error');
  await resourcesBack(t, s);
});
