// rblk side by side with its peers, in one run against one backing file:
// the rblk library and rblk attach's NBD export against rblkd, tgt (iSCSI)
// with iscsi-perf, nbdkit's file plugin with fio's nbd engine, the raw
// transport ceiling (RMA with no storage: our JavaScript loop, and a C one
// over libfabric directly that the ratios use), and local fio on the file
// (the storage ceiling). Each system runs alone, in turn; the bench starts and
// stops every peer itself.
//
// Every server opens the file with O_DIRECT (nbdkit 1.32: cache=none), as
// the local fio ceiling does. Through the page cache the figures depended on
// what happened to be cached: the development VM runs a DAMON "pageout"
// scheme that reclaims rarely touched pages, and fincore showed a file read
// at random only partly cached, by an amount that changed from run to run.
// Before each system the file's pages are dropped from the cache, so nbdkit
// (whose cache=none evicts only after a read) starts cold like the others.
//   node dist/bench/peers.js [--quick] [--only tgt,nbdkit,rblk,...] [--seconds S] [--size 1GiB] [--dir /var/tmp] [--more-depths] [--workloads randread-4k-qd32,...] [--fast-path on|off]
// (--workloads runs only those of the matrix and of --more-depths' depths, by id; --fast-path is rblkd's; the rows rblk-lib-tcp-js and rblk-nbd-tcp-js turn the initiator's off; rblk-lib-tcp-poll and rblk-lib-shm-poll have both ends busy-poll; the shm rows are the same-host fabric, docs/transport.md "RDM endpoints".)
// Prints Markdown on stdout, progress on stderr, and writes
// bench/out/peers.{md,json,svg}.
import { execFileSync } from 'node:child_process';
import { closeSync, fsyncSync, mkdirSync, openSync, unlinkSync, writeFileSync, writeSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isDist, root } from './peers/children.js';
import { ceilingSystem, runCeiling } from './peers/transport-ceiling.js';
import { cCeilingSystem, runCCeiling } from './peers/rma-ceiling.js';
import { LOCAL_VARIANTS, runLocalFio } from './peers/local-fio.js';
import { machineFacts } from './peers/machine.js';
import { NBDKIT, runNbdkit } from './peers/nbdkit.js';
import { computeRatios, toMarkdown, toSvg, type Report } from './peers/report.js';
import { BENCH_BUSY_POLL_US, librarySystem, nbdSystem, rblkProblem, runRblkLibrary, runRblkNbd, startRblkd, stopRblkd, type Rblkd } from './peers/rblk.js';
import { RBLK_ISCSI, runRblkIscsi } from './peers/rblk-iscsi.js';
import { RBLK_NVME, runRblkNvme } from './peers/rblk-nvme.js';
import { runRblkSession, sessionSystem } from './peers/rblk-session.js';
import { runTgt, TGT } from './peers/tgt.js';
import { CHART_WORKLOADS, WORKLOADS, type BenchContext, type SystemInfo, type SystemResult, type Workload } from './peers/workload.js';

const ALL_IDS = [
  'ceiling-tcp',
  'ceiling-c-tcp',
  'ceiling-sockets',
  'ceiling-c-sockets',
  'ceiling-c-shm',
  ...LOCAL_VARIANTS.map((v) => v.system.id),
  'nbdkit',
  'tgt',
  'rblk-lib-tcp',
  'rblk-lib-tcp-js',
  'rblk-lib-tcp-poll',
  'rblk-lib-sockets',
  'rblk-lib-shm',
  'rblk-lib-shm-poll',
  'rblk-nbd-tcp',
  'rblk-nbd-tcp-js',
  'rblk-iscsi',
  'rblk-nvme',
  'rblk-session-tcp',
  'rblk-session-sockets',
] as const;

/** Names --only accepts besides the ids themselves. */
const GROUPS: Record<string, readonly string[]> = {
  ceiling: ['ceiling-tcp', 'ceiling-c-tcp', 'ceiling-sockets', 'ceiling-c-sockets', 'ceiling-c-shm'],
  'ceiling-c': ['ceiling-c-tcp', 'ceiling-c-sockets', 'ceiling-c-shm'],
  local: LOCAL_VARIANTS.map((v) => v.system.id),
  rblk: ['rblk-lib-tcp', 'rblk-lib-tcp-js', 'rblk-lib-tcp-poll', 'rblk-lib-sockets', 'rblk-lib-shm', 'rblk-lib-shm-poll', 'rblk-nbd-tcp', 'rblk-nbd-tcp-js', 'rblk-iscsi', 'rblk-nvme'],
  'rblk-session': ['rblk-session-tcp', 'rblk-session-sockets'],
  peers: ['tgt', 'nbdkit'],
};

/**
 * The default run: everything but the session layer over sockets (slow, and
 * the library row over sockets already shows the provider). The session layer
 * over tcp stays: it stands in for the library while that is not built, and
 * beside it shows what the library adds.
 */
function defaultIds(): string[] {
  return ALL_IDS.filter((id) => id !== 'rblk-session-sockets');
}

export interface Args {
  quick: boolean;
  only: string[] | null;
  seconds: number;
  size: number;
  dir: string;
  moreDepths: boolean;
  /** Only these workloads (Workload.id), in the matrix's order; null for all. */
  workloads: string[] | null;
  /** rblkd's fast_path (docs/operations.md), so one run can measure both. */
  fastPath: boolean;
}

function parseSize(s: string): number {
  const m = s.match(/^(\d+)\s*(K|M|G)?(i?B)?$/i);
  if (!m) throw new Error(`--size ${s}: expected e.g. 1GiB, 512MiB or bytes`);
  const unit = { K: 2 ** 10, M: 2 ** 20, G: 2 ** 30 }[(m[2] ?? '').toUpperCase() as 'K' | 'M' | 'G'] ?? 1;
  return Number(m[1]) * unit;
}

export function parseArgs(argv: string[]): Args {
  const a: Args = { quick: false, only: null, seconds: 3, size: 1 << 30, dir: '/var/tmp', moreDepths: false, workloads: null, fastPath: true };
  let seconds: number | null = null;
  let size: number | null = null;
  for (let i = 0; i < argv.length; i++) {
    const v = argv[i];
    const next = (): string => {
      const n = argv[++i];
      if (n === undefined) throw new Error(`${v} needs a value`);
      return n;
    };
    if (v === '--quick') a.quick = true;
    else if (v === '--only') a.only = next().split(',').filter(Boolean);
    else if (v === '--seconds') seconds = Number(next());
    else if (v === '--size') size = parseSize(next());
    else if (v === '--dir') a.dir = next();
    else if (v === '--more-depths') a.moreDepths = true;
    else if (v === '--workloads') a.workloads = next().split(',').filter(Boolean);
    else if (v === '--fast-path') {
      const f = next();
      if (f !== 'on' && f !== 'off') throw new Error(`--fast-path ${f}: expected on or off`);
      a.fastPath = f === 'on';
    } else throw new Error(`unknown argument ${v} (try --quick, --only ${Object.keys(GROUPS).join('|')}|<id>, --seconds, --size, --dir, --more-depths, --workloads <id,...>, --fast-path on|off)`);
  }
  a.seconds = seconds ?? (a.quick ? 1 : 3);
  a.size = size ?? (a.quick ? 256 << 20 : 1 << 30);
  if (!(a.seconds > 0)) throw new Error('--seconds must be positive');
  if (a.only) {
    const known = new Set<string>([...ALL_IDS, ...Object.keys(GROUPS)]);
    for (const o of a.only) if (!known.has(o)) throw new Error(`--only ${o}: not one of ${[...known].join(', ')}`);
  }
  if (a.workloads) {
    const known = [...WORKLOADS, ...CHART_WORKLOADS].map((w) => w.id);
    for (const w of a.workloads) if (!known.includes(w)) throw new Error(`--workloads ${w}: not one of ${known.join(', ')}`);
  }
  return a;
}

function selected(a: Args): Set<string> {
  if (!a.only) return new Set(defaultIds());
  return new Set(a.only.flatMap((o) => GROUPS[o] ?? [o]));
}

/**
 * The one backing file, written through once so every block is real data on
 * disk (fallocate alone leaves unwritten extents that read as zeroes without
 * touching the disk). Removed when the process exits, however it exits.
 */
function createBackingFile(dir: string, size: number): string {
  const path = join(dir, `rblk-peers-${process.pid}.img`);
  process.on('exit', () => {
    try {
      unlinkSync(path);
    } catch {
      // Already gone.
    }
  });
  const fd = openSync(path, 'wx', 0o600);
  try {
    const chunk = randomBytes(4 << 20);
    for (let at = 0; at < size; at += chunk.length) {
      // Vary each chunk so no layer can deduplicate or compress the file away.
      chunk.writeUInt32LE(at / chunk.length, 0);
      writeSync(fd, chunk, 0, Math.min(chunk.length, size - at), at);
    }
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  return path;
}

/** Drops the file's pages from the page cache (GNU dd: iflag=nocache with count=0 covers the whole file). */
function dropPageCache(path: string): void {
  execFileSync('dd', [`if=${path}`, 'iflag=nocache', 'count=0', 'status=none'], { stdio: 'ignore' });
}

/** Runs one system from a cold page cache; a failure becomes its row's reason instead of ending the run. */
async function guarded(ctx: BenchContext, system: SystemInfo, run: () => Promise<SystemResult>): Promise<SystemResult> {
  try {
    dropPageCache(ctx.file);
    return await run();
  } catch (e) {
    return { system, measurements: [], unavailable: `failed: ${e instanceof Error ? e.message : String(e)}` };
  }
}

async function runRblkRows(ctx: BenchContext, ids: Set<string>): Promise<SystemResult[]> {
  const wanted = ALL_IDS.filter((id) => (id.startsWith('rblk-lib-') || id.startsWith('rblk-nbd-')) && ids.has(id));
  if (wanted.length === 0) return [];
  // The -js rows: the library, and rblk attach, with the initiator fast path off (ConnectOptions.fastPath), beside the rows with it on.
  // The -poll rows: both ends busy-poll (docs/architecture.md "Busy polling"), so they have an rblkd of their own.
  const provider = (id: string): string => (id === 'rblk-lib-sockets' ? 'sockets' : id.startsWith('rblk-lib-shm') ? 'shm' : 'tcp');
  const nbd = (id: string): boolean => id.startsWith('rblk-nbd-');
  const fast = (id: string): boolean => !id.endsWith('-js');
  const poll = (id: string): boolean => id.endsWith('-poll');
  const info = (id: string): SystemInfo => (nbd(id) ? nbdSystem(fast(id)) : librarySystem(provider(id), fast(id), poll(id)));
  const problem = rblkProblem();
  if (problem !== null) return wanted.map((id) => ({ system: info(id), measurements: [], unavailable: problem }));
  const out: SystemResult[] = [];
  for (const spin of [false, true]) {
    const rows = wanted.filter((id) => poll(id) === spin);
    if (rows.length === 0) continue;
    const providers = [...new Set(rows.map(provider))];
    let daemon: Rblkd;
    try {
      ctx.progress(`starting rblkd (${providers.join(', ')}${spin ? `, busy_poll_us ${BENCH_BUSY_POLL_US}` : ''})`);
      daemon = await startRblkd(ctx, providers, undefined, spin ? BENCH_BUSY_POLL_US : 0);
    } catch (e) {
      out.push(...rows.map((id) => ({ system: info(id), measurements: [], unavailable: `rblkd did not start: ${(e as Error).message}` })));
      continue;
    }
    try {
      for (const id of rows)
        out.push(await guarded(ctx, info(id), () => (nbd(id) ? runRblkNbd(ctx, daemon, fast(id)) : runRblkLibrary(ctx, daemon, provider(id), fast(id), poll(id)))));
    } finally {
      await stopRblkd(daemon);
    }
  }
  return out;
}

export async function runPeersBench(a: Args, progress: (m: string) => void): Promise<Report> {
  const t0 = Date.now();
  const ids = selected(a);
  // The chart's extra depths go beside the random-read QD1 they extend, so tables read in order of depth.
  const all: Workload[] = a.moreDepths || a.workloads ? [WORKLOADS[0], ...CHART_WORKLOADS, ...WORKLOADS.slice(1)] : [...WORKLOADS];
  const workloads = a.workloads ? all.filter((w) => a.workloads!.includes(w.id)) : all;
  progress(`writing a ${a.size >> 20} MiB backing file in ${a.dir}`);
  const file = createBackingFile(a.dir, a.size);
  const ctx: BenchContext = { file, fileSize: a.size, lbaSize: 512, seconds: a.seconds, workloads, progress, fastPath: a.fastPath };
  const systems: SystemResult[] = [];
  for (const p of ['tcp', 'sockets', 'shm']) {
    if (ids.has(`ceiling-${p}`)) systems.push(await guarded(ctx, ceilingSystem(p), () => runCeiling(ctx, p)));
    if (ids.has(`ceiling-c-${p}`)) systems.push(await guarded(ctx, cCeilingSystem(p), () => runCCeiling(ctx, p)));
  }
  systems.push(...(await runLocalFio(ctx, ids)));
  if (ids.has('nbdkit')) systems.push(await guarded(ctx, NBDKIT, () => runNbdkit(ctx)));
  if (ids.has('tgt')) systems.push(await guarded(ctx, TGT, () => runTgt(ctx)));
  systems.push(...(await runRblkRows(ctx, ids)));
  if (ids.has('rblk-iscsi')) systems.push(await guarded(ctx, RBLK_ISCSI, () => runRblkIscsi(ctx)));
  if (ids.has('rblk-nvme')) systems.push(await guarded(ctx, RBLK_NVME, () => runRblkNvme(ctx)));
  for (const p of ['tcp', 'sockets']) if (ids.has(`rblk-session-${p}`)) systems.push(await guarded(ctx, sessionSystem(p), () => runRblkSession(ctx, p)));
  unlinkSync(file);
  const argv = process.argv.slice(2).join(' ');
  return {
    date: new Date().toISOString(),
    command: `${isDist ? 'node dist/bench/peers.js' : 'node --import=tsx bench/peers.ts'}${argv ? ' ' + argv : ''}`,
    elapsedSeconds: (Date.now() - t0) / 1000,
    secondsPerMeasurement: a.seconds,
    fileSize: a.size,
    machine: machineFacts(),
    workloads,
    systems,
    ratios: computeRatios(systems, workloads),
  };
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const start = Date.now();
  const progress = (m: string): void => void process.stderr.write(`[${((Date.now() - start) / 1000).toFixed(1).padStart(6)} s] ${m}\n`);
  // ^C: leave through 'exit', whose handlers kill the peers and remove the backing file.
  process.once('SIGINT', () => process.exit(130));
  process.once('SIGTERM', () => process.exit(143));
  const report = await runPeersBench(args, progress);
  const md = toMarkdown(report);
  process.stdout.write(md + '\n');
  const outDir = join(root, 'bench', 'out');
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, 'peers.md'), md + '\n');
  writeFileSync(join(outDir, 'peers.json'), JSON.stringify({ ...report, args }, null, 2) + '\n');
  writeFileSync(join(outDir, 'peers.svg'), toSvg(report.systems, report.workloads, `IOPS against queue depth, ${report.date.slice(0, 10)}`));
  progress(`done in ${report.elapsedSeconds.toFixed(0)} s; wrote bench/out/peers.{md,json,svg}`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().catch((e: unknown) => {
    console.error(e);
    process.exit(1);
  });
}
