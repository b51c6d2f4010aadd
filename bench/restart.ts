// Restart benchmark: how soon I/O resumes after rblkd comes back. A real rblkd
// (tcp provider by default, a file volume) is killed with SIGKILL and started again on the
// same port N times while a session keeps reads outstanding. For each restart
// it records when the initiator noticed the loss (kill -> session
// `reconnecting`), when I/O resumed (rblkd logged `listening` -> the first read
// that completed after it), and the longest single read.
//   node dist/bench/restart.js [--kills 10] [--queue-depth 4] [--down-ms 300] [--provider tcp|sockets] [--json] [--verbose]
// docs/initiator.md ("Reconnecting and the loss timeout") quotes its numbers.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { connect, type Session, type Volume } from '../initiator/index.js';
import { delay } from '../initiator/wait.js';
import { freePort } from './peers/children.js';
import { startRblkd, type RblkdChild } from './rblkd-child.js';


interface Args {
  kills: number;
  queueDepth: number;
  downMs: number;
  json: boolean;
  verbose: boolean;
  provider: string;
}

function parseArgs(argv: string[]): Args {
  const a: Args = { kills: 10, queueDepth: 4, downMs: 300, json: false, verbose: false, provider: 'tcp' };
  for (let i = 0; i < argv.length; i++) {
    const next = (): number => {
      const n = Number(argv[++i]);
      if (!Number.isInteger(n) || n < 0) throw new RangeError(`${argv[i - 1]} needs a non-negative integer`);
      return n;
    };
    if (argv[i] === '--kills') a.kills = next();
    else if (argv[i] === '--queue-depth') a.queueDepth = Math.max(1, next());
    else if (argv[i] === '--down-ms') a.downMs = next();
    else if (argv[i] === '--json') a.json = true;
    else if (argv[i] === '--verbose') a.verbose = true;
    else if (argv[i] === '--provider') a.provider = argv[++i];
    else throw new RangeError(`unknown argument ${argv[i]}`);
  }
  return a;
}

function startDaemon(config: string): RblkdChild {
  return startRblkd(config, /listening \S+ 127\.0\.0\.1:/);
}

interface Completion {
  at: number;
  ms: number;
}

/** Keeps queueDepth 4 KiB reads outstanding until stopped; records each completion. */
function readLoad(vol: Volume, queueDepth: number): { done: Completion[]; errors: string[]; stop(): Promise<void> } {
  const done: Completion[] = [];
  const errors: string[] = [];
  let running = true;
  const blocks = Math.floor(vol.size / 4096);
  const worker = async (w: number): Promise<void> => {
    let i = w;
    while (running) {
      const start = performance.now();
      try {
        await vol.read(((i * 7919) % blocks) * 4096, 4096);
        const at = performance.now();
        done.push({ at, ms: at - start });
      } catch (e) {
        errors.push((e as Error).message);
        await delay(10);
      }
      i += queueDepth;
    }
  };
  const workers = Array.from({ length: queueDepth }, (_, w) => worker(w));
  return {
    done,
    errors,
    async stop() {
      running = false;
      await Promise.all(workers);
    },
  };
}

function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}

const fmt = (ms: number): string => `${ms.toFixed(0)} ms`;

interface Round {
  detectMs: number;
  resumeMs: number;
  longestReadMs: number;
}

async function main(): Promise<void> {
  const a = parseArgs(process.argv.slice(2));
  const dir = mkdtempSync(join(tmpdir(), 'rblk-restart-'));
  let daemon: RblkdChild | null = null;
  let session: Session | null = null;
  try {
    const port = await freePort();
    const config = join(dir, 'rblkd.yaml');
    writeFileSync(
      config,
      [
        'listeners:',
        `  - { provider: ${a.provider}, address: 127.0.0.1, port: ${port} }`,
        'volumes:',
        `  - { name: vol0, path: ${join(dir, 'vol0.img')}, size: 16MiB, lun: 0 }`,
        `state_dir: ${join(dir, 'state')}`,
        '',
      ].join('\n'),
    );
    daemon = startDaemon(config);
    await daemon.seen;
    // The defaults are what is measured; only the loss timeout is raised so no read fails.
    session = await connect({ address: '127.0.0.1', port, provider: a.provider, timeouts: { lossMs: 120_000 } });
    const s = session;
    const t0 = performance.now();
    const vol = await s.open('vol0');
    let lostAt = 0;
    s.on('state', (state) => {
      if (state === 'reconnecting') lostAt = performance.now();
    });
    s.on('error', (e) => {
      if (a.verbose) console.log(`  ${(performance.now() - t0).toFixed(0)} ms: ${e.message}`);
    });
    s.on('recovery', (e) => {
      if (a.verbose) console.log(`  ${(performance.now() - t0).toFixed(0)} ms: recovery ${e.action}: ${e.reason}`);
    });
    const load = readLoad(vol, a.queueDepth);
    const rounds: Round[] = [];
    for (let k = 0; k < a.kills; k++) {
      await delay(500);
      const from = load.done.length;
      const killedAt = performance.now();
      lostAt = 0;
      if (a.verbose) console.log(`  ${(killedAt - t0).toFixed(0)} ms: SIGKILL`);
      daemon.child.kill('SIGKILL');
      await daemon.exited;
      await delay(a.downMs);
      daemon = startDaemon(config);
      const listenAt = await daemon.seen;
      if (a.verbose) console.log(`  ${(listenAt - t0).toFixed(0)} ms: listening`);
      while (!load.done.slice(from).some((c) => c.at > listenAt)) await delay(5);
      const first = load.done.slice(from).find((c) => c.at > listenAt)!;
      await delay(200);
      const since = load.done.slice(from);
      rounds.push({
        detectMs: lostAt > 0 ? lostAt - killedAt : NaN,
        resumeMs: first.at - listenAt,
        longestReadMs: Math.max(...since.map((c) => c.ms)),
      });
      if (!a.json) {
        const r = rounds[rounds.length - 1];
        console.log(`restart ${k + 1}: loss noticed ${fmt(r.detectMs)} after the kill, I/O resumed ${fmt(r.resumeMs)} after listening, longest read ${fmt(r.longestReadMs)}`);
      }
    }
    await load.stop();
    const resume = rounds.map((r) => r.resumeMs);
    const detect = rounds.map((r) => r.detectMs);
    const longest = rounds.map((r) => r.longestReadMs);
    const summary = {
      kills: a.kills,
      downMs: a.downMs,
      queueDepth: a.queueDepth,
      resumeP50Ms: Math.round(percentile(resume, 50)),
      resumeMaxMs: Math.round(Math.max(...resume)),
      detectP50Ms: Math.round(percentile(detect, 50)),
      detectMaxMs: Math.round(Math.max(...detect)),
      longestReadP50Ms: Math.round(percentile(longest, 50)),
      longestReadMaxMs: Math.round(Math.max(...longest)),
      readErrors: load.errors.length,
    };
    if (a.json) console.log(JSON.stringify(summary));
    else {
      console.log(`\n${a.kills} restarts (down ${a.downMs} ms each, QD ${a.queueDepth} 4 KiB reads):`);
      console.log(`  I/O resumed after listening: p50 ${fmt(summary.resumeP50Ms)}, max ${fmt(summary.resumeMaxMs)}`);
      console.log(`  loss noticed after the kill: p50 ${fmt(summary.detectP50Ms)}, max ${fmt(summary.detectMaxMs)}`);
      console.log(`  longest single read:         p50 ${fmt(summary.longestReadP50Ms)}, max ${fmt(summary.longestReadMaxMs)}`);
      console.log(`  reads that failed:           ${summary.readErrors}`);
    }
  } finally {
    await session?.close();
    if (daemon !== null && daemon.child.exitCode === null && daemon.child.signalCode === null) {
      daemon.child.kill('SIGTERM');
      await daemon.exited;
    }
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
