// Long `rblk bench` runs on one login (docs/reliability.md "Sustained sessions"): for
// each volume kind (a file, and an RBD image of a throw-away cluster with --rbd), reactor
// setting (0 and 2), queue depth (1 and 32) and buffer kind (pooled, zero-copy), one
// `rblk bench` of --seconds (60 by default) against the real rblkd with its default
// limits, keep-alive included. Each row says how many times the initiator logged in
// (the daemon's log), how many reconnects the bench saw, and whether it exited 0: the
// goal is 1, 0 and yes on every row.
//   node dist/bench/sustained.js [--seconds 60] [--rbd] [--rw read|write]
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cephMissing, startCephCluster, type CephCluster } from './ceph-cluster.js';
import { spawnEntry } from './kit/child.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const args = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const SECONDS = Number(flag('--seconds') ?? 60);
const RW = flag('--rw') ?? 'read';
const WITH_RBD = args.includes('--rbd');

interface Daemon {
  child: ChildProcess;
  port: number;
  lines: string[];
}

async function startDaemon(dir: string, name: string, volume: Record<string, unknown>, reactors: number): Promise<Daemon> {
  const config = join(dir, `${name}.json`);
  writeFileSync(
    config,
    JSON.stringify({
      listeners: [{ provider: 'tcp', address: '127.0.0.1', port: 0 }],
      state_dir: join(dir, `state-${name}`),
      control: { socket: join(dir, `${name}.ctl`) },
      reactors,
      logging: { level: 'info' },
      volumes: [volume],
    }),
  );
  const c = spawnEntry('rblkd', ['--config', config]);
  const m = await c.waitForLine(/listening tcp 127\.0\.0\.1:(\d+)/, { ms: 60_000 });
  await c.waitForLine(/rblkd ready/, { ms: 60_000 });
  return { child: c.proc, port: Number(m[1]), lines: c.lines };
}

interface Row {
  kind: string;
  reactors: number;
  qd: number;
  zeroCopy: boolean;
  iops: number;
  logins: number;
  reconnects: number | null;
  exit: number | null;
  error: string;
}

function bench(port: number, volume: string, qd: number, zeroCopy: boolean, initiator: string): Promise<{ code: number | null; iops: number; reconnects: number | null; err: string }> {
  const argv = [join(ROOT, 'dist', 'bin-src', 'rblk.js'), 'bench', `rblk://127.0.0.1:${port}/${volume}`, '--provider', 'tcp', '--initiator-name', initiator];
  argv.push('--rw', RW, '--bs', '4096', '--qd', String(qd), '--runtime', `${SECONDS}s`, '--json', '--yes');
  if (zeroCopy) argv.push('--zero-copy');
  return new Promise((resolve) => {
    const child = spawn(process.execPath, argv, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr.on('data', (b: Buffer) => (err += b.toString()));
    child.on('exit', (code) => {
      let iops = 0;
      let reconnects: number | null = null;
      try {
        const r = JSON.parse(out) as { iops: number; reconnects?: number };
        iops = r.iops;
        reconnects = r.reconnects ?? null;
      } catch {
        // No JSON: the run failed; its stderr says why.
      }
      resolve({ code, iops, reconnects, err: err.trim().split('\n')[0] ?? '' });
    });
  });
}

const dir = mkdtempSync(join(tmpdir(), 'rblk-sustained-'));
let cluster: CephCluster | null = null;
const rows: Row[] = [];
try {
  const kinds: { kind: string; volume: () => Promise<Record<string, unknown>> }[] = [{ kind: 'file', volume: () => Promise.resolve({ name: 'v', path: join(dir, 'v.img'), size: '256MiB' }) }];
  if (WITH_RBD) {
    const missing = cephMissing();
    if (missing !== null) console.error(`skipping rbd: ${missing}`);
    else {
      cluster = await startCephCluster();
      const c = cluster;
      await c.createImage('sustained', 256 << 20);
      kinds.push({ kind: 'rbd', volume: () => Promise.resolve({ name: 'v', rbd: { pool: c.pool, image: 'sustained', conf: c.conf } }) });
    }
  }
  let n = 0;
  for (const { kind, volume } of kinds) {
    for (const reactors of [0, 2]) {
      const d = await startDaemon(dir, `${kind}-r${reactors}`, await volume(), reactors);
      try {
        for (const qd of [1, 32]) {
          for (const zeroCopy of [false, true]) {
            const initiator = `iqn.2026-12.io.rblk:sustained-${n++}`;
            const r = await bench(d.port, 'v', qd, zeroCopy, initiator);
            const logins = d.lines.filter((l) => /logged in/.test(l) && l.includes(`initiator=${initiator}`)).length;
            const row: Row = { kind, reactors, qd, zeroCopy, iops: r.iops, logins, reconnects: r.reconnects, exit: r.code, error: r.code === 0 ? '' : r.err };
            rows.push(row);
            console.error(`${kind} reactors ${reactors} qd ${qd} ${zeroCopy ? 'zero-copy' : 'pooled'}: ${Math.round(r.iops)} IOPS, ${logins} login(s), ${r.reconnects ?? '?'} reconnects, exit ${r.code}`);
          }
        }
      } finally {
        d.child.kill('SIGTERM');
        await new Promise((r) => d.child.once('exit', r));
      }
    }
  }
} finally {
  await cluster?.stop();
  rmSync(dir, { recursive: true, force: true });
}

console.log(`\`${`node dist/bench/sustained.js ${args.join(' ')}`.trim()}\`: ${SECONDS} s of 4 KiB random ${RW}s per row\n`);
console.log('| volume | reactors | QD | buffers | IOPS | logins | reconnects | exit | error |');
console.log('|---|---:|---:|---|---:|---:|---:|---:|---|');
for (const r of rows) console.log(`| ${r.kind} | ${r.reactors} | ${r.qd} | ${r.zeroCopy ? 'zero-copy' : 'pooled'} | ${Math.round(r.iops)} | ${r.logins} | ${r.reconnects ?? '—'} | ${r.exit} | ${r.error.replace(/\|/g, '\\|')} |`);
process.exitCode = rows.every((r) => r.exit === 0 && r.logins === 1 && r.reconnects === 0) ? 0 : 1;
