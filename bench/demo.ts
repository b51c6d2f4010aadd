// `npm run demo`: the main job on one machine. It starts rblkd on the default
// config (config/rblkd.default.yaml: one 256 MiB thin volume, tcp on
// 127.0.0.1:7471), then an initiator uses it through the `rblk` library:
// it lists the volumes, writes 16 MiB of a pattern, reads it back and compares,
// measures 4 KiB random reads and writes for a few seconds, and shuts the
// daemon down with SIGTERM (a drain). Every step prints what it saw.
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { dirname, join } from 'node:path';
import { createHistogram } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { connect, type Volume } from '../initiator/index.js';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const config = join(root, 'config', 'rblkd.default.yaml');

function startDaemon(): Promise<{ child: ChildProcess; port: number; lines: string[] }> {
  const child = spawn(process.execPath, [join(root, 'dist', 'bin-src', 'rblkd.js'), '--config', config], { stdio: ['ignore', 'inherit', 'pipe'] });
  const lines: string[] = [];
  return new Promise((resolve, reject) => {
    const rl = createInterface({ input: child.stderr! });
    rl.on('line', (line) => {
      lines.push(line);
      process.stderr.write(`  rblkd | ${line}\n`);
      const m = /listening \S+ [\d.]+:(\d+)/.exec(line);
      if (m) resolve({ child, port: Number(m[1]), lines });
    });
    child.once('exit', (code) => reject(new Error(`rblkd exited with ${code} before listening (is port 7471 in use?)`)));
  });
}

async function measure(vol: Volume, kind: 'read' | 'write', seconds: number, qd: number): Promise<{ iops: number; p50: number; p99: number }> {
  const blocks = Math.floor(vol.size / 4096);
  const h = createHistogram();
  let done = 0;
  const end = Date.now() + seconds * 1000;
  const t0 = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: qd }, async () => {
      const buf = Buffer.alloc(4096, 0xa5);
      while (Date.now() < end) {
        const off = Math.floor(Math.random() * blocks) * 4096;
        const s = process.hrtime.bigint();
        if (kind === 'read') await vol.read(off, 4096);
        else await vol.write(off, buf);
        h.record(Number(process.hrtime.bigint() - s) || 1);
        done++;
      }
    }),
  );
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  return { iops: done / secs, p50: h.percentile(50) / 1000, p99: h.percentile(99) / 1000 };
}

async function main(): Promise<void> {
  console.log(`rblk demo: starting rblkd with ${config}`);
  const daemon = await startDaemon();
  let exitCode: number | null = null;
  const exited = new Promise<number | null>((r) => daemon.child.once('exit', (code) => r((exitCode = code))));
  try {
    const session = await connect(`rblk://127.0.0.1:${daemon.port}/demo?provider=tcp`);
    console.log(`\nlogged in: session ${session.connections.map((c) => c.sessionId).join(', ')} over ${session.connections[0]?.provider}`);
    for (const v of await session.volumes())
      console.log(`  LUN ${v.lun}  ${v.name}  ${(v.size / 2 ** 20).toFixed(0)} MiB  ${v.blockSize}-byte blocks  ${v.readOnly ? 'read-only' : 'read-write'}  ${v.thin ? 'thin' : 'thick'}  ${v.id}`);
    const vol = await session.open('demo');

    const size = 16 << 20;
    const data = Buffer.alloc(size);
    for (let i = 0; i < size; i += 32) createHash('sha256').update(`rblk demo ${i}`).digest().copy(data, i);
    let t = Date.now();
    for (let off = 0; off < size; off += 1 << 20) await vol.write(off, data.subarray(off, off + (1 << 20)), { fua: off + (1 << 20) === size });
    await vol.flush();
    const wms = Date.now() - t;
    t = Date.now();
    const back = Buffer.concat(await Promise.all(Array.from({ length: 16 }, (_, i) => vol.read(i << 20, 1 << 20))));
    const rms = Date.now() - t;
    const same = back.equals(data);
    console.log(`\nwrote 16 MiB in ${wms} ms (${(16 / (wms / 1000)).toFixed(0)} MiB/s), read it back in ${rms} ms (${(16 / (rms / 1000)).toFixed(0)} MiB/s): ${same ? 'identical' : 'MISMATCH'}`);
    if (!same) process.exitCode = 1;

    console.log('\n4 KiB random I/O, 3 s each:');
    for (const [kind, qd] of [
      ['read', 1],
      ['read', 32],
      ['write', 32],
    ] as const) {
      const r = await measure(vol, kind, 3, qd);
      console.log(`  ${kind.padEnd(5)} QD${String(qd).padEnd(2)}  ${Math.round(r.iops).toLocaleString('en-US').padStart(7)} IOPS   p50 ${r.p50.toFixed(0)} µs   p99 ${r.p99.toFixed(0)} µs`);
    }
    await session.close();
    console.log('\nlogged out; stopping rblkd with SIGTERM (drain)');
  } finally {
    if (exitCode === null) daemon.child.kill('SIGTERM');
    const code = await exited;
    console.log(`rblkd exited with ${code}`);
    if (code !== 0) process.exitCode = 1;
  }
}

main().catch((e: unknown) => {
  console.error(`demo failed: ${(e as Error).message}`);
  process.exit(1);
});
