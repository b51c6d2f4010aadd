// bench's JSON result, its --yes rule and its byte budget; verify over a
// file-backed volume, and a block corrupted behind the target's back.
import test from 'ava';
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { once } from 'node:events';
import { rblk, spawnRblk, tempDir } from './helpers/cli.js';
import { startTargetProcess, stopAllTargets, type TargetProcess } from './helpers/target-process.js';

const MiB = 1 << 20;

interface Latency {
  min: number;
  mean: number;
  stdev: number;
  p1: number;
  p5: number;
  p10: number;
  p50: number;
  p90: number;
  p95: number;
  p99: number;
  p99_9: number;
  p99_99: number;
  max: number;
}
interface Stats {
  ops: number;
  bytes: number;
  iops: number;
  bandwidth: number;
  latencyUs: Latency;
}
interface BenchJson extends Stats {
  volume: string;
  pattern: string;
  rw: string;
  blockSize: number;
  queueDepth: number;
  elapsedMs: number;
  read?: Stats;
  write?: Stats;
  interrupted: boolean;
}

let started: Promise<TargetProcess> | undefined;
const target = (): Promise<TargetProcess> =>
  (started ??= startTargetProcess(null, { provider: 'tcp', volumes: [{ name: 'scratch', lun: 0, size: 16 * MiB }] }));
test.after.always(stopAllTargets);

function orderedPercentiles(t: { true(v: boolean, m?: string): void }, l: Latency): void {
  t.true(l.min > 0, 'min > 0');
  const order = [l.min, l.p1, l.p5, l.p10, l.p50, l.p90, l.p95, l.p99, l.p99_9, l.p99_99, l.max];
  t.true(order.every((v, i) => i === 0 || order[i - 1] <= v), `ordered: ${JSON.stringify(l)}`);
  t.true(l.stdev >= 0, 'stdev');
}

test('bench --json --runtime 1s: one JSON object with IOPS and latency percentiles', async (t) => {
  const tp = await target();
  const r = await rblk(['bench', tp.url('scratch'), '--json', '--runtime', '1s', '--qd', '8']);
  t.is(r.code, 0, r.stderr);
  const b = JSON.parse(r.out) as BenchJson;
  t.like(b, { volume: 'scratch', pattern: 'rand', rw: 'read', blockSize: 4096, queueDepth: 8 });
  t.true(b.iops > 0);
  t.true(b.ops > 0);
  t.is(b.bytes, b.ops * 4096);
  t.is(b.read?.ops, b.ops);
  t.false('write' in b, 'a read-only run has no write section');
  t.true(b.elapsedMs >= 1000);
  orderedPercentiles(t, b.latencyUs);
  t.is(r.stderr, '', 'no progress bar when stderr is not a terminal');
});

test('bench --progress then SIGINT: progress lines with the current rate, the partial result, exit 130', async (t) => {
  const tp = await target();
  const child = spawnRblk(['bench', tp.url('scratch'), '--json', '--progress', '--runtime', '120s', '--qd', '4']);
  child.stdin?.end();
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  let out = '';
  let err = '';
  child.stdout?.setEncoding('utf8').on('data', (x: string) => (out += x));
  const exited = once(child, 'close') as Promise<[number | null]>;
  // Interrupt once the first progress line is out: the run is under way.
  await new Promise<void>((resolve) => {
    child.stderr?.setEncoding('utf8').on('data', (x: string) => {
      err += x;
      if (err.includes('\n')) resolve();
    });
  });
  child.kill('SIGINT');
  const [code] = await exited;
  t.is(code, 130, err);
  const first = err.split('\n')[0];
  // Not a TTY: plain lines, no \r; the rate is that of the last interval.
  t.regex(first, /^ {0,2}\d+% {2}\d+ IOPS {2}[\d.]+ [KMG]?i?B\/s {2}\d+ ops {2}\d+\.\d s$/);
  t.false(err.includes('\r'));
  const b = JSON.parse(out) as BenchJson;
  t.true(b.interrupted);
  t.true(b.ops > 0);
  t.is(b.read?.ops, b.ops);
});

test('bench --size: a sequential mixed run issues exactly the byte budget', async (t) => {
  const tp = await target();
  const r = await rblk(['bench', tp.url('scratch'), '--json', '--pattern', 'seq', '--rw', 'mixed', '--mix', '50', '--bs', '64k', '--qd', '4', '--size', '8m', '--yes', '--no-zero-copy']);
  t.is(r.code, 0, r.stderr);
  const b = JSON.parse(r.out) as BenchJson;
  t.is(b.bytes, 8 * MiB);
  t.is(b.ops, 128);
  if (b.read === undefined || b.write === undefined) return t.fail('a mixed run has both sections');
  t.is(b.read.ops + b.write.ops, 128);
  t.true(b.read.ops > 0 && b.write.ops > 0, `both kinds ran: ${b.read.ops} reads, ${b.write.ops} writes`);
  orderedPercentiles(t, b.read.latencyUs);
  orderedPercentiles(t, b.write.latencyUs);
});

test('bench prints a readable report without --json; --bs must be whole blocks', async (t) => {
  const tp = await target();
  const r = await rblk(['bench', tp.url('scratch'), '--size', '1m', '--bs', '8k', '--qd', '2', '--seed', '7']);
  t.is(r.code, 0, r.stderr);
  const n = '[\\d.]+';
  t.regex(
    r.out,
    new RegExp(
      `^scratch: rand read, bs 8 KiB, qd 2, \\d+\\.\\d\\d s\\n {2}ops: {9}128 {2}\\(\\d+ IOPS, ${n} MiB/s\\)\\n` +
        ` {2}latency: {5}min ${n} {2}mean ${n} {2}stdev ${n} {2}max ${n} {2}\\(µs\\)\\n` +
        ` {2}percentiles: p1 ${n} {2}p5 ${n} {2}p10 ${n} {2}p50 ${n} {2}p90 ${n} {2}p95 ${n} {2}p99 ${n} {2}p99\\.9 ${n} {2}p99\\.99 ${n} {2}\\(µs\\)\\n {2}reconnects: {2}0\\n$`,
    ),
  );
  const odd = await rblk(['bench', tp.url('scratch'), '--bs', '1000', '--runtime', '1s']);
  t.is(odd.code, 2);
  t.is(odd.stderr, "rblk: --bs 1000 is not a multiple of volume scratch's 512-byte block size\n");
});

test('verify writes and checks the pattern; a corrupted block is reported by LBA and fails the read-only check', async (t) => {
  const dir = await tempDir(t, 'verify');
  const backing = join(dir, 'disk.img');
  const tp = await startTargetProcess(t, { provider: 'tcp', volumes: [{ name: 'disk', lun: 0, size: 4 * MiB, file: backing }] });
  const url = tp.url('disk');

  const ok = await rblk(['verify', url, '--yes', '--seed', '42']);
  t.is(ok.code, 0, ok.stderr);
  t.is(ok.out, 'verify disk [0, +4194304) (4 MiB, 8192 blocks), seed 42: OK\n');

  // Change three bytes of LBA 1234 in the backing file, under the target.
  const fh = await open(backing, 'r+');
  try {
    await fh.write(Buffer.from([0xde, 0xad, 0xbe]), 0, 3, 1234 * 512 + 200);
    await fh.sync();
  } finally {
    await fh.close();
  }

  const bad = await rblk(['verify', url, '--read-only', '--seed', '42']);
  t.is(bad.code, 1);
  const lines = bad.out.trimEnd().split('\n');
  t.is(lines.length, 2, bad.out);
  t.regex(lines[0], /^mismatch at LBA 1234 \(byte 631808\): expected lba 1234 seed 42 crc 0x[0-9a-f]{8}; found lba 1234 seed 42 block size 512 crc 0x[0-9a-f]{8} bad \(computed 0x[0-9a-f]{8}\); [1-3] of 512 bytes differ, the first at byte 20[0-2]$/);
  t.is(lines[1], 'verify disk [0, +4194304) (4 MiB, 8192 blocks), seed 42: 1 bad block');
  t.is(bad.stderr, 'rblk: verify found 1 bad block in volume disk\n');

  // A range that leaves the block out passes; another seed finds every block stale.
  const around = await rblk(['verify', url, '--read-only', '--seed', '42', '--offset', String(1235 * 512), '--length', '64k']);
  t.is(around.code, 0, around.stdout.toString());
  const other = await rblk(['verify', url, '--read-only', '--seed', '43', '--length', '2k']);
  t.is(other.code, 1);
  t.is(other.out.split('\n').filter((l) => l.startsWith('mismatch at LBA')).length, 4);
  t.regex(other.out, /^mismatch at LBA 0 \(byte 0\): expected lba 0 seed 43 crc 0x[0-9a-f]{8}; found lba 0 seed 42 block size 512 crc 0x[0-9a-f]{8} ok; /);

  // Every block stale: the first 10 are listed, then the count; progress goes to stderr only.
  const all = await rblk(['verify', url, '--read-only', '--seed', '43', '--progress']);
  t.is(all.code, 1);
  const out = all.out.trimEnd().split('\n');
  t.is(out.length, 11, all.out);
  t.deepEqual(out.slice(0, 10).map((l) => /^mismatch at LBA (\d+) /.exec(l)?.[1]), ['0', '1', '2', '3', '4', '5', '6', '7', '8', '9']);
  t.is(out[10], 'verify disk [0, +4194304) (4 MiB, 8192 blocks), seed 43: 8192 bad blocks (the first 10 listed; --max-mismatches N for more)');
  const err = all.stderr.split('\n').filter((l) => l !== '');
  t.is(err[err.length - 1], 'rblk: verify found 8192 bad blocks in volume disk');
  for (const line of err.slice(0, -1)) t.regex(line, /^ {0,2}\d+% {2}checked [\d.]+ \S+ of 4 MiB {2}/);

  // --max-mismatches 0: the count alone, without a pointer to the option just given.
  const none = await rblk(['verify', url, '--read-only', '--seed', '43', '--max-mismatches', '0', '--length', '64k']);
  t.is(none.code, 1);
  t.is(none.out, 'verify disk [0, +65536) (64 KiB, 128 blocks), seed 43: 128 bad blocks\n');

  const j = await rblk(['verify', url, '--read-only', '--seed', '43', '--json', '--max-mismatches', '2', '--length', '64k']);
  t.is(j.code, 1);
  const v = JSON.parse(j.out) as { ok: boolean; badBlocks: number; unlisted: number; blocks: number; mismatches: Array<{ lba: number; byte: number; expected: string; found: string }> };
  t.like(v, { ok: false, badBlocks: 128, unlisted: 126, blocks: 128 });
  t.deepEqual(v.mismatches.map((m) => [m.lba, m.byte]), [[0, 0], [1, 512]]);
  t.regex(v.mismatches[1].expected, /^lba 1 seed 43 /);
  const good = await rblk(['verify', url, '--read-only', '--seed', '42', '--json', '--length', '64k']);
  t.is(good.code, 0, good.stderr);
  t.like(JSON.parse(good.out), { ok: true, badBlocks: 0, mismatches: [], unlisted: 0 });
});
