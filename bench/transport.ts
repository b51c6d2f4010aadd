// Transport benchmark: what the native libfabric layer costs, beside
// libfabric's own fi_pingpong measured in the same run.
//   node dist/bench/transport.js [--providers tcp,sockets] [--seconds 1.5] [--quick]
// Prints a Markdown table and writes bench/out/transport.{md,json}.
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createHistogram } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { createInterface } from 'node:readline';
import { Domain, type Endpoint } from '../native/fabric.js';
import type { DataDescriptor } from '../protocol/wire/index.js';

const here = dirname(fileURLToPath(import.meta.url));
const root = here.endsWith(join('dist', 'bench')) ? join(here, '..', '..') : join(here, '..');
const execFileP = promisify(execFile);

export interface Args {
  providers: string[];
  seconds: number;
  pingpongIters: number;
}

function parseArgs(argv: string[]): Args {
  const a: Args = { providers: ['tcp', 'sockets'], seconds: 1.5, pingpongIters: 20_000 };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--providers') a.providers = argv[++i].split(',');
    else if (argv[i] === '--seconds') a.seconds = Number(argv[++i]);
    else if (argv[i] === '--quick') {
      a.seconds = 0.5;
      a.pingpongIters = 3000;
    } else throw new Error(`unknown argument ${argv[i]}`);
  }
  return a;
}

export interface Row {
  provider: string;
  test: string;
  opsPerSec?: number;
  mbPerSec?: number;
  p50us?: number;
  p99us?: number;
  meanUs?: number;
  reference?: string;
  ratio?: number;
}

async function startPeer(provider: string, busyPollMicros = 0): Promise<{ child: ChildProcess; port: number }> {
  const isDist = here.endsWith(join('dist', 'bench'));
  const script = join(here, isDist ? 'transport-peer.js' : 'transport-peer.ts');
  const peerArgs = [provider, String(64 << 20), String(busyPollMicros)];
  const args = isDist ? [script, ...peerArgs] : ['--import=tsx', script, ...peerArgs];
  const child = spawn(process.execPath, args, { stdio: ['pipe', 'pipe', 'inherit'] });
  const rl = createInterface({ input: child.stdout! });
  const line = await new Promise<string>((resolve, reject) => {
    rl.once('line', resolve);
    child.once('exit', (code) => reject(new Error(`peer exited with ${code}`)));
  });
  return { child, port: (JSON.parse(line) as { port: number }).port };
}

async function stopPeer(child: ChildProcess): Promise<void> {
  const exited = new Promise((r) => child.once('exit', r));
  child.stdin?.end();
  await exited;
}

/**
 * One-way latency = round trip / 2, as fi_pingpong reports usec/xfer. Driven
 * from the receive callback with fi_inject sends, as a latency-minded user of
 * the API would write it: no promise per message.
 */
async function pingPong(ep: Endpoint, domain: Domain, iters: number, label: string): Promise<Row> {
  const mr = domain.register(4096);
  const msg = Buffer.alloc(64, 0x5a);
  const h = createHistogram();
  let sentAt = 0n;
  let left = iters;
  const t0 = process.hrtime.bigint();
  await new Promise<void>((resolve) => {
    ep.onReceive = (slice) => {
      const now = process.hrtime.bigint();
      h.record(Math.max(1, Math.round(Number(now - sentAt) / 2)));
      ep.postReceive(slice);
      if (--left === 0) return resolve();
      sentAt = process.hrtime.bigint();
      ep.sendInline(msg);
    };
    ep.postReceive(mr.slice(0, 4096));
    sentAt = process.hrtime.bigint();
    ep.sendInline(msg);
  });
  const total = Number(process.hrtime.bigint() - t0) / 1e9;
  // mr keeps a posted receive until the endpoint closes; the domain closes it.
  return {
    provider: domain.provider,
    test: `ping-pong 64 B, one way, ${label}`,
    p50us: h.percentile(50) / 1000,
    p99us: h.percentile(99) / 1000,
    meanUs: h.mean / 1000,
    opsPerSec: (2 * iters) / total,
  };
}

async function messageRate(ep: Endpoint, domain: Domain, seconds: number): Promise<Row> {
  const WINDOW = 32;
  const mr = domain.register(2 * WINDOW * 4096);
  let got = 0;
  ep.onReceive = (slice) => {
    got++;
    ep.postReceive(slice);
  };
  for (let i = 0; i < WINDOW; i++) ep.postReceive(mr.slice((WINDOW + i) * 4096, 4096));
  let sent = 0;
  const end = Date.now() + seconds * 1000;
  const t0 = process.hrtime.bigint();
  while (Date.now() < end) {
    const batch: Promise<number>[] = [];
    while (sent - got < WINDOW) batch.push(ep.send(mr.slice((sent++ % WINDOW) * 4096, 64)));
    await Promise.all(batch);
    await new Promise((r) => setImmediate(r));
  }
  while (got < sent) await new Promise((r) => setImmediate(r));
  const total = Number(process.hrtime.bigint() - t0) / 1e9;
  return { provider: domain.provider, test: 'echo 64 B, 32 in flight (messages/s each way)', opsPerSec: got / total };
}

async function rma(ep: Endpoint, domain: Domain, remote: DataDescriptor, op: 'read' | 'write', size: number, qd: number, seconds: number): Promise<Row> {
  const mr = domain.register(qd * size);
  const h = createHistogram();
  let done = 0;
  let stop = false;
  const end = Date.now() + seconds * 1000;
  const t0 = process.hrtime.bigint();
  const worker = async (slot: number): Promise<void> => {
    const local = mr.slice(slot * size, size);
    const where: DataDescriptor = { address: remote.address + BigInt((slot * size) % Math.max(size, remote.length - size)), key: remote.key, length: size };
    while (!stop) {
      const s = process.hrtime.bigint();
      if (op === 'read') await ep.read(local, where);
      else await ep.write(local, where);
      h.record(Number(process.hrtime.bigint() - s) || 1);
      done++;
      if ((done & 63) === 0 && Date.now() >= end) stop = true;
    }
  };
  const timer = setTimeout(() => (stop = true), seconds * 1000);
  await Promise.all(Array.from({ length: qd }, (_, i) => worker(i)));
  clearTimeout(timer);
  const total = Number(process.hrtime.bigint() - t0) / 1e9;
  await mr.close();
  return {
    provider: domain.provider,
    test: `RMA ${op} ${size >= 1 << 20 ? `${size >> 20} MiB` : `${size >> 10} KiB`} QD${qd}`,
    opsPerSec: done / total,
    mbPerSec: (done * size) / total / 1e6,
    p50us: h.percentile(50) / 1000,
    p99us: h.percentile(99) / 1000,
  };
}

/** libfabric's own ping-pong (busy-polling C), the reference. */
async function fiPingpong(provider: string, iters: number): Promise<number | null> {
  const port = String(20000 + Math.floor(Math.random() * 20000));
  const server = spawn('fi_pingpong', ['-p', provider, '-e', 'msg', '-I', String(iters), '-S', '64', '-B', port], { stdio: 'ignore' });
  try {
    await new Promise((r) => setTimeout(r, 300));
    const { stdout } = await execFileP('fi_pingpong', ['-p', provider, '-e', 'msg', '-I', String(iters), '-S', '64', '-P', port, '127.0.0.1'], {
      timeout: 60_000,
    });
    const line = stdout.split('\n').find((l) => /^64\s/.test(l));
    return line ? Number(line.trim().split(/\s+/)[6]) : null;
  } catch {
    return null;
  } finally {
    server.kill();
  }
}

function fmt(n: number | undefined, digits = 1): string {
  if (n === undefined || !Number.isFinite(n)) return '';
  return n >= 1000 ? Math.round(n).toLocaleString('en-US') : n.toFixed(digits);
}

export function toMarkdown(rows: Row[]): string {
  const out = ['| provider | test | ops/s | MB/s | p50 µs | p99 µs | mean µs | reference | rblk/ref |', '|---|---|---:|---:|---:|---:|---:|---|---:|'];
  for (const r of rows)
    out.push(
      `| ${r.provider} | ${r.test} | ${fmt(r.opsPerSec)} | ${fmt(r.mbPerSec)} | ${fmt(r.p50us)} | ${fmt(r.p99us)} | ${fmt(r.meanUs)} | ${r.reference ?? ''} | ${r.ratio === undefined ? '' : r.ratio.toFixed(2) + '×'} |`,
    );
  return out.join('\n');
}

export async function runTransportBench(args: Args): Promise<Row[]> {
  const rows: Row[] = [];
  for (const provider of args.providers) {
    const { child, port } = await startPeer(provider);
    const domain = Domain.open({ provider, address: '127.0.0.1' });
    try {
      const ep = await domain.connect({ address: '127.0.0.1', port });
      const pd = ep.peerPrivateData;
      const remote: DataDescriptor = { address: pd.readBigUInt64BE(0), key: pd.readBigUInt64BE(8), length: pd.readUInt32BE(16) };
      const iters = provider === 'sockets' ? Math.min(args.pingpongIters, 5000) : args.pingpongIters;
      const ref = await fiPingpong(provider, iters);
      const withRef = (pp: Row): Row => {
        if (ref !== null) {
          pp.reference = `fi_pingpong ${ref.toFixed(2)} µs/xfer (mean)`;
          pp.ratio = (pp.meanUs ?? 0) / ref;
        }
        return pp;
      };
      rows.push(withRef(await pingPong(ep, domain, iters, 'fd wake-ups (default)')));
      // fi_pingpong spins on its CQ; compare like with like: busy polling on both sides.
      const busy = await startPeer(provider, 200);
      try {
        const bep = await domain.connect({ address: '127.0.0.1', port: busy.port });
        bep.busyPollMicros = 200;
        rows.push(withRef(await pingPong(bep, domain, iters, 'busy poll 200 µs')));
        await bep.close();
      } finally {
        await stopPeer(busy.child);
      }
      rows.push(await messageRate(ep, domain, args.seconds));
      for (const op of ['read', 'write'] as const)
        for (const size of [4096, 1 << 20])
          for (const qd of [1, 32]) {
            if (size === 1 << 20 && qd === 32 && remote.length < 32 << 20) continue;
            rows.push(await rma(ep, domain, remote, op, size, qd, args.seconds));
          }
      await ep.close();
    } finally {
      await domain.close();
      await stopPeer(child);
    }
  }
  return rows;
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const rows = await runTransportBench(args);
  const md = toMarkdown(rows);
  console.log(md);
  const outDir = join(root, 'bench', 'out');
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, 'transport.md'), md + '\n');
  writeFileSync(join(outDir, 'transport.json'), JSON.stringify({ date: new Date().toISOString(), args, rows }, null, 2) + '\n');
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().catch((e: unknown) => {
    console.error(e);
    process.exit(1);
  });
}
