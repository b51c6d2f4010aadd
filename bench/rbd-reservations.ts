// What keeping persistent reservations in the cluster costs (docs/architecture.md
// "Reservation stores"): PERSISTENT RESERVE OUT (REGISTER AND IGNORE EXISTING
// KEY, one at a time) on an rbd volume served by one gateway, then by two, each
// against the same command on a memory volume of the same rblkd (the in-process
// store) measured in the same run. On the rbd volume each one is a
// compare-and-swap write op plus a notify that every gateway acknowledges.
// Also READ KEYS, which reads the gateway's copy on both.
//   node dist/bench/rbd-reservations.js [--ops N]
// Prints a Markdown table. Figures on a shared machine are indicative only.
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { connect, type Volume } from '../initiator/index.js';
import { startCephCluster, startRbdGateway, type CephCluster } from './ceph-cluster.js';

const at = process.argv.indexOf('--ops');
const OPS = (at > 0 ? Number(process.argv[at + 1]) : 200) || 200;

function gateway(c: CephCluster, dir: string, name: string, withRam: boolean): Promise<{ port: number; child: ChildProcess }> {
  return startRbdGateway(c, dir, name, { image: 'pr', ramBytes: withRam ? 4 * 1024 * 1024 : undefined });
}

/** Mean microseconds per call over OPS calls, after a few to warm up. */
async function perOp(fn: (i: number) => Promise<unknown>): Promise<number> {
  for (let i = 0; i < 5; i++) await fn(i);
  const t0 = performance.now();
  for (let i = 0; i < OPS; i++) await fn(i);
  return ((performance.now() - t0) * 1000) / OPS;
}

async function measure(v: Volume): Promise<{ register: number; readKeys: number }> {
  const register = await perOp((i) => v.reservations.register(BigInt(1 + (i % 2))));
  const readKeys = await perOp(() => v.reservations.readKeys());
  await v.reservations.unregister();
  return { register, readKeys };
}

async function main(): Promise<void> {
  const c = await startCephCluster();
  const dir = mkdtempSync(join(tmpdir(), 'rblk-pr-bench-'));
  const children: ChildProcess[] = [];
  try {
    await c.createImage('pr', 4 * 1024 * 1024);
    const a = await gateway(c, dir, 'a', true);
    children.push(a.child);
    const s = await connect({ address: '127.0.0.1', port: a.port, provider: 'tcp', initiatorName: 'iqn.2026-12.io.rblk:bench' });
    try {
      const [ram, pr] = await Promise.all([s.open('ram'), s.open('pr')]);
      const rows = [
        '| PERSISTENT RESERVE OUT / IN, one at a time | memory volume (in-process store) µs | rbd volume µs | ratio |',
        '|---|---|---|---|',
      ];
      const row = (what: string, ref: number, ours: number): void => {
        rows.push(`| ${what} | ${ref.toFixed(0)} | ${ours.toFixed(0)} | ${(ours / ref).toFixed(1)} |`);
        process.stderr.write(`${rows[rows.length - 1]}\n`);
      };
      // A first pass warms the session and JIT for both columns alike.
      await measure(ram);
      const ref1 = await measure(ram);
      const one = await measure(pr);
      row('REGISTER AND IGNORE EXISTING KEY, one gateway', ref1.register, one.register);
      row('READ KEYS, one gateway', ref1.readKeys, one.readKeys);
      const b = await gateway(c, dir, 'b', false);
      children.push(b.child);
      const ref2 = await measure(ram);
      const two = await measure(pr);
      row('REGISTER AND IGNORE EXISTING KEY, two gateways', ref2.register, two.register);
      row('READ KEYS, two gateways', ref2.readKeys, two.readKeys);
      process.stdout.write(`${rows.join('\n')}\n`);
    } finally {
      await s.close();
    }
  } finally {
    for (const child of children) child.kill('SIGTERM');
    await Promise.all(children.map((child) => new Promise((resolve) => (child.exitCode !== null ? resolve(null) : child.once('exit', resolve)))));
    await c.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e: unknown) => {
  process.stderr.write(`bench/rbd-reservations: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(1);
});
