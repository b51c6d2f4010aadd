// A throw-away Ceph cluster for the rbd tests and bench/rbd.ts: one monitor and one memstore
// OSD in a temporary directory, on 127.0.0.1, with authentication off and no
// manager (docs/backends.md "Testing the rbd kind"). It comes up in a few
// seconds on an idle machine; a test file starts one and shares it. The
// daemons run in the foreground as our children, so stop() kills exactly them.
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { diesWithParent } from './parent-death.js';

const TOOLS = ['ceph-mon', 'ceph-osd', 'ceph', 'rbd', 'monmaptool'];
/** A guard against a hang, never an assertion about speed. */
const STEP_MS = 60_000;

/** Why the rbd tests cannot run here, or null when they can. */
export function cephMissing(): string | null {
  const missing = TOOLS.filter((t) => spawnSync('sh', ['-c', `command -v ${t}`]).status !== 0);
  return missing.length > 0 ? `Ceph is not installed (${missing.join(', ')} missing: apt-get install ceph-mon ceph-osd ceph-common)` : null;
}

export interface CephCluster {
  readonly dir: string;
  /** The ceph.conf clients use. */
  readonly conf: string;
  readonly pool: string;
  /** Runs a Ceph CLI (rbd, ceph, rados) against this cluster; resolves its stdout. */
  run(tool: 'rbd' | 'ceph' | 'rados', args: string[], input?: Buffer): Promise<Buffer>;
  createImage(name: string, bytes: number): Promise<void>;
  /** Freezes the monitor and the OSD (SIGSTOP): the cluster is away, its data kept. */
  pause(): void;
  /** Thaws them (SIGCONT) and waits until the OSD serves a fresh client again. */
  resume(): Promise<void>;
  stop(): Promise<void>;
}

/** Blocks until every thread of `pid` is stopped (state T in /proc), or it is gone; bounded against a hang. */
function waitStopped(pid: number): void {
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (let i = 0; i < 2000; i++) {
    let tids: string[];
    try {
      tids = readdirSync(`/proc/${pid}/task`);
    } catch {
      return;
    }
    const running = tids.some((tid) => {
      try {
        // "pid (comm) S ...": the state follows the last ')'.
        const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
        return !/^\s*[Tt]/.test(stat.slice(stat.lastIndexOf(')') + 1));
      } catch {
        return false;
      }
    });
    if (!running) return;
    Atomics.wait(pause, 0, 0, 1);
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

/**
 * Ceph's own tools and daemons run without the sanitizer runtime that a
 * sanitized test run preloads (scripts/sanitize.sh): they are not ours, and
 * the Python `ceph` CLI aborts under a preloaded libasan.
 */
function cephEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.LD_PRELOAD;
  return env;
}

function exec(file: string, args: string[], input?: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const child = execFile(file, args, { encoding: 'buffer', timeout: STEP_MS, maxBuffer: 256 * 1024 * 1024, env: cephEnv() }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${file} ${args.join(' ')}: ${err.message}\n${stderr.toString()}`));
      else resolve(stdout);
    });
    if (input !== undefined) child.stdin!.end(input);
  });
}

export interface CephClusterOptions {
  /**
   * More `key = value` lines for the `[global]` section of its ceph.conf (the
   * monitor, the OSD and every client read it), such as a shorter
   * `osd client watch timeout`.
   */
  readonly conf?: readonly string[];
}

export async function startCephCluster(options: CephClusterOptions = {}): Promise<CephCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'rblk-ceph-'));
  for (const d of ['mon', 'osd', 'run']) mkdirSync(join(dir, d));
  // The monitor's address is in the monmap, so it needs a port fixed before it starts.
  const port = await freePort();
  const fsid = randomUUID();
  const osdUuid = randomUUID();
  const conf = join(dir, 'ceph.conf');
  writeFileSync(
    conf,
    [
      '[global]',
      `fsid = ${fsid}`,
      `mon host = v2:127.0.0.1:${port}`,
      'mon initial members = a',
      'auth cluster required = none',
      'auth service required = none',
      'auth client required = none',
      'osd objectstore = memstore',
      'memstore device bytes = 1073741824',
      'osd pool default size = 1',
      'osd pool default min size = 1',
      'osd crush chooseleaf type = 0',
      // Every map change otherwise waits about a second.
      'paxos propose interval = 0.1',
      'mon warn on insecure global id reclaim allowed = false',
      'mon allow pool size one = true',
      'ms bind ipv6 = false',
      'public addr = 127.0.0.1',
      `run dir = ${join(dir, 'run')}`,
      `admin socket = ${join(dir, 'run', '$name.asok')}`,
      `log file = ${join(dir, '$name.log')}`,
      `mon data = ${join(dir, 'mon')}`,
      `osd data = ${join(dir, 'osd')}`,
      'osd op num shards = 1',
      'osd op num threads per shard = 2',
      ...(options.conf ?? []),
      '',
    ].join('\n'),
  );
  const children: ChildProcess[] = [];
  const daemon = (file: string, args: string[]): ChildProcess => {
    // Killed with this process, should it die without stop() (a test worker's timeout).
    const [cmd, ...argv] = diesWithParent([file, '-f', '-c', conf, ...args]);
    const child = spawn(cmd, argv, { stdio: 'ignore', env: cephEnv() });
    child.on('error', () => undefined);
    children.push(child);
    return child;
  };
  const stop = async (): Promise<void> => {
    for (const c of children) {
      if (c.exitCode !== null || c.signalCode !== null) continue;
      const gone = new Promise<void>((resolve) => c.once('exit', () => resolve()));
      c.kill('SIGCONT');
      // memstore writes everything out on a clean stop: nothing here is worth keeping.
      c.kill('SIGKILL');
      await gone;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const ceph = (args: string[]): Promise<Buffer> => exec('ceph', ['-c', conf, ...args]);
  /** The end of the monitor's and the OSD's logs, for an error that says why the cluster did not serve. */
  const logTails = (): string =>
    ['mon.a', 'osd.0']
      .map((n) => {
        try {
          return `--- ${n}.log (end):\n${readFileSync(join(dir, `${n}.log`), 'utf8').split('\n').slice(-25).join('\n')}`;
        } catch {
          return `--- ${n}.log: none`;
        }
      })
      .join('\n');
  try {
    await exec('monmaptool', ['--create', '--addv', 'a', `[v2:127.0.0.1:${port}]`, '--fsid', fsid, join(dir, 'monmap')]);
    await exec('ceph-mon', ['-c', conf, '--mkfs', '-i', 'a', '--monmap', join(dir, 'monmap')]);
    daemon('ceph-mon', ['-i', 'a']);
    // Independent of each other once the monitor answers.
    await Promise.all([
      ceph(['osd', 'new', osdUuid]),
      exec('ceph-osd', ['-c', conf, '-i', '0', '--mkfs', '--osd-uuid', osdUuid]),
      ceph(['osd', 'pool', 'create', 'rbd', '8']),
    ]);
    daemon('ceph-osd', ['-i', '0']);
  } catch (e) {
    await stop();
    throw e;
  }
  return {
    dir,
    conf,
    pool: 'rbd',
    run: (tool, args, input) => exec(tool, ['-c', conf, ...args], input),
    // rbd create waits until the pool's placement groups are active: the cluster is ready then.
    createImage: async (name, bytes) => void (await exec('rbd', ['-c', conf, 'create', '--size', `${bytes}B`, `rbd/${name}`])),
    pause() {
      for (const c of children) c.kill('SIGSTOP');
      // kill(2) returns before the stop: each thread stops on its own way back to user mode. Until then the
      // daemon may still answer what reaches it, so this returns only once every thread of both is stopped.
      for (const c of children) if (c.pid !== undefined) waitStopped(c.pid);
    },
    async resume() {
      children.forEach((c) => c.kill('SIGCONT'));
      // A busy machine may take many seconds to get the OSD's sessions back up.
      const until = Date.now() + STEP_MS;
      for (;;) {
        try {
          await exec('rados', ['-c', conf, '--rados-osd-op-timeout', '5', '-p', 'rbd', 'stat', 'rbd_directory']);
          return;
        } catch (e) {
          if (Date.now() > until) throw new Error(`${e instanceof Error ? e.message : String(e)}\n${logTails()}`);
        }
      }
    },
    stop,
  };
}

export interface RbdGatewayOptions {
  /** The image to serve, as volume `volume` (default: the image's name). */
  image: string;
  volume?: string;
  /** Top-level fast_path of its rblkd.yaml; absent: the default (on). */
  fastPath?: boolean;
  /** Bytes of a memory volume `ram` beside the image: the same rblk path without Ceph. */
  ramBytes?: number;
}

/**
 * One rblkd gateway (rblkd.js of dist/, the repository root as its cwd) on
 * 127.0.0.1, any free port, serving one image of `c`; its config and state go
 * in `dir` under `name`. Resolves once it is ready, with its port; the child
 * dies with this process.
 */
export async function startRbdGateway(c: CephCluster, dir: string, name: string, o: RbdGatewayOptions): Promise<{ port: number; child: ChildProcess }> {
  // bench/ when run by tsx, dist/bench/ when compiled.
  const root = fileURLToPath(new URL(import.meta.url.endsWith('.ts') ? '../' : '../../', import.meta.url));
  const config = join(dir, `${name}.yaml`);
  writeFileSync(
    config,
    JSON.stringify({
      listeners: [{ provider: 'tcp', address: '127.0.0.1', port: 0 }],
      state_dir: join(dir, `state-${name}`),
      logging: { level: 'info' },
      ...(o.fastPath === undefined ? {} : { fast_path: o.fastPath }),
      volumes: [
        { name: o.volume ?? o.image, rbd: { pool: c.pool, image: o.image, conf: c.conf } },
        ...(o.ramBytes === undefined ? [] : [{ name: 'ram', memory: true, size: o.ramBytes }]),
      ],
    }),
  );
  const [cmd, ...argv] = diesWithParent([process.execPath, join(root, 'dist', 'bin-src', 'rblkd.js'), '--config', config]);
  const child = spawn(cmd, argv, { cwd: root, stdio: ['ignore', 'ignore', 'pipe'] });
  const port = await new Promise<number>((resolve, reject) => {
    let buf = '';
    child.stderr!.on('data', (b: Buffer) => {
      buf += b.toString();
      const m = /listening tcp 127\.0\.0\.1:(\d+)/.exec(buf);
      if (m !== null && /rblkd ready/.test(buf)) resolve(Number(m[1]));
    });
    child.on('exit', (code) => reject(new Error(`rblkd exited ${String(code)}: ${buf}`)));
  });
  return { port, child };
}
