// The initiator's native queue on and off, interleaved (issue 10 item 4,
// docs/initiator.md "Fast path"): one rblkd serving one file, and for each
// workload 2 × --rounds short runs through the library in ABBA order (on, off,
// off, on, ...), each on a fresh session, so that warm-up, the host's disk
// cache and the load of a shared machine fall on both sides alike. bench/peers
// runs its rows one after another, and there the row that runs first on a
// file was seen to lose (0.57× for 128 KiB writes) what this interleaved
// comparison gives back. The reference is the same library with fastPath:
// false, measured in the same run; the bench prints the medians and their ratio.
//   node dist/bench/fast-path-ab.js [--rounds 5] [--seconds 1.5] [--direct on|off] [--provider tcp|sockets] [--json]
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { connect } from '../initiator/index.js';
import { freePort } from './peers/children.js';
import { startRblkd } from './rblkd-child.js';

const FILE = 256 << 20;

interface Workload {
  label: string;
  write: boolean;
  size: number;
  depth: number;
  random: boolean;
}

const WORKLOADS: Workload[] = [
  { label: '4 KiB random read, QD1', write: false, size: 4096, depth: 1, random: true },
  { label: '4 KiB random read, QD32', write: false, size: 4096, depth: 32, random: true },
  { label: '4 KiB random write, QD32', write: true, size: 4096, depth: 32, random: true },
  { label: '128 KiB sequential read, QD8', write: false, size: 131072, depth: 8, random: false },
  { label: '128 KiB sequential write, QD8', write: true, size: 131072, depth: 8, random: false },
];

interface Args {
  rounds: number;
  seconds: number;
  direct: boolean;
  provider: string;
  json: boolean;
}

function parseArgs(argv: string[]): Args {
  const a: Args = { rounds: 5, seconds: 1.5, direct: true, provider: 'tcp', json: false };
  for (let i = 0; i < argv.length; i++) {
    const v = argv[i + 1];
    switch (argv[i]) {
      case '--rounds':
        a.rounds = Number(v);
        i++;
        break;
      case '--seconds':
        a.seconds = Number(v);
        i++;
        break;
      case '--direct':
        a.direct = v !== 'off';
        i++;
        break;
      case '--provider':
        a.provider = v;
        i++;
        break;
      case '--json':
        a.json = true;
        break;
      default:
        throw new Error(`unknown argument ${argv[i]} (see the comment at the top of bench/fast-path-ab.ts)`);
    }
  }
  if (!Number.isInteger(a.rounds) || a.rounds < 1 || !(a.seconds > 0)) throw new Error('--rounds must be a positive integer and --seconds positive');
  return a;
}

function median(xs: number[]): number {
  const s = [...xs].sort((x, y) => x - y);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** One run: a fresh session, `depth` workers each with its own registered buffer; IOPS. */
async function runOnce(port: number, provider: string, w: Workload, fastPath: boolean, seconds: number): Promise<{ iops: number; queued: number }> {
  const s = await connect({ address: '127.0.0.1', port, provider, initiatorName: 'iqn.2026-12.io.rblk:bench-ab', targetName: 'iqn.2026-11.io.rblk:target', fastPath, queueDepth: w.depth * 2, maxIo: w.size });
  try {
    const v = await s.open('vol');
    const bufs = Array.from({ length: w.depth }, (_, i) => {
      const b = s.allocate(w.size);
      b.buffer.fill(0x5a ^ i);
      return b;
    });
    const slots = FILE / w.size;
    let n = 0;
    let seed = 0x9e3779b9;
    const next = (): number => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed % slots;
    };
    const start = performance.now();
    const until = start + seconds * 1000;
    await Promise.all(
      bufs.map(async (b, i) => {
        let k = i;
        while (performance.now() < until) {
          const at = (w.random ? next() : k % slots) * w.size;
          if (w.write) await v.write(at, b);
          else await v.read(at, b);
          k += w.depth;
          n++;
        }
      }),
    );
    const elapsed = (performance.now() - start) / 1000;
    const queued = s.fastPathCommands;
    for (const b of bufs) b.release();
    return { iops: n / elapsed, queued };
  } finally {
    await s.close();
  }
}

async function main(): Promise<void> {
  const a = parseArgs(process.argv.slice(2));
  const dir = mkdtempSync(join(tmpdir(), 'rblk-bench-ab-'));
  const port = await freePort();
  const config = join(dir, 'rblkd.yaml');
  // Written, not sparse: a read of a hole costs the disk nothing.
  writeFileSync(join(dir, 'vol.img'), Buffer.alloc(FILE, 0x33));
  writeFileSync(
    config,
    [
      'listeners:',
      `  - { provider: ${a.provider}, address: 127.0.0.1, port: ${port} }`,
      'limits: { queue_depth: 128, max_io: 1MiB, keepalive_ms: 60000 }',
      'volumes:',
      `  - { name: vol, path: ${join(dir, 'vol.img')}, direct: ${a.direct} }`,
      `state_dir: ${join(dir, 'state')}`,
      'control: { enabled: false }',
      '',
    ].join('\n'),
  );
  const rblkd = startRblkd(config, /rblkd ready/);
  const results: { workload: string; on: number[]; off: number[]; ratio: number }[] = [];
  try {
    await rblkd.seen;
    for (const w of WORKLOADS) {
      const on: number[] = [];
      const off: number[] = [];
      for (let r = 0; r < a.rounds; r++) {
        // ABBA: on first in even rounds, off first in odd ones.
        for (const fastPath of r % 2 === 0 ? [true, false] : [false, true]) {
          const got = await runOnce(port, a.provider, w, fastPath, a.seconds);
          if (fastPath && got.queued === 0) throw new Error(`${w.label}: the native queue carried nothing with fastPath on`);
          if (!fastPath && got.queued !== 0) throw new Error(`${w.label}: the native queue carried commands with fastPath off`);
          (fastPath ? on : off).push(got.iops);
        }
      }
      const row = { workload: w.label, on, off, ratio: median(on) / median(off) };
      results.push(row);
      if (!a.json) {
        const f = (xs: number[]): string => xs.map((x) => Math.round(x).toLocaleString('en-US')).join(', ');
        console.log(`${w.label}: fastPath on ${Math.round(median(on)).toLocaleString('en-US')} IOPS (median of ${f(on)}), off ${Math.round(median(off)).toLocaleString('en-US')} (${f(off)}); on ÷ off ${row.ratio.toFixed(2)}×`);
      }
    }
  } finally {
    rblkd.child.kill('SIGTERM');
    await rblkd.exited;
    rmSync(dir, { recursive: true, force: true });
  }
  if (a.json) console.log(JSON.stringify({ provider: a.provider, direct: a.direct, rounds: a.rounds, seconds: a.seconds, results }));
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : String(e));
  process.exitCode = 1;
});
