// Space thresholds under a sustained write load (docs/operations.md "Space
// thresholds"), against the real rblkd: a thin file volume on a 32 MiB tmpfs
// with space_threshold.filesystem 25%, and for RBLK_SPACE_SUSTAIN_S seconds
// (20 by default) one rblk session at QD8: a writer that puts down a new
// 64 KiB chunk at 1 MiB/s, so that the filesystem passes 25% (8 MiB) about
// 8 s in, and seven workers that rewrite the chunks already there and read
// each back. THIN PROVISIONING SOFT THRESHOLD REACHED (38/07) must come once,
// mid-run, and nothing else: every other command GOOD, every read what was
// last written, the session the one that logged in. Needs root (mount);
// skipped without it.
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { CommandResult } from '../../initiator/connection.js';
import * as cdb from '../../protocol/scsi/cdb.js';
import { ScsiStatus } from '../../protocol/scsi/status.js';
import { controlRequest } from '../../target/daemon/control-client.js';
import type { SessionInfo } from '../../target/connection/environment.js';
import type { SpaceInfo } from '../../target/daemon/space-watch.js';
import { baseConfig, spawnDaemon, workdir } from './helpers/daemon-process.js';
import { command, login, pattern, read, senseOf, write, type SenseTriple } from './helpers/initiator.js';

const SECONDS = Number(process.env.RBLK_SPACE_SUSTAIN_S ?? 20);
const MiB = 1024 * 1024;
const CHUNK = 64 * 1024;
/** New chunks a second: 1 MiB/s. */
const PACE = MiB / CHUNK;
const REWRITERS = 7;

const root = process.getuid?.() === 0;
const rootTest = root ? test : test.skip;
if (!root) test.skip('space threshold sustained: needs root to mount a tmpfs', () => undefined);

rootTest(`${SECONDS} s of writes through a filesystem threshold: 38/07 once, mid-run, and no other error; every read is what was last written`, async (t) => {
  t.timeout((SECONDS + 60) * 1000);
  const w = workdir(t);
  const mnt = join(w.dir, 'small');
  mkdirSync(mnt);
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=32m', 'tmpfs', mnt]);
  // Registered before the daemon's: ava runs teardowns last first, so this one runs after rblkd is gone.
  t.teardown(() => {
    try {
      execFileSync('umount', [mnt]);
    } catch {
      execFileSync('umount', ['-l', mnt]);
    }
  });
  w.writeConfig(baseConfig(w, [{ name: 'v', path: join(mnt, 'v.img'), size: '24MiB', thin: true, lun: 0, space_threshold: { filesystem: 25 } }]));
  const d = spawnDaemon(t, ['--config', w.configPath]);
  const port = await d.port();
  await d.waitForLine(/rblkd ready/);
  const socket = join(w.dir, 'rblkd.ctl');
  const space = async (): Promise<SpaceInfo | null> => ((await controlRequest(socket, 'volumes')) as { space: SpaceInfo | null }[])[0]!.space;

  const c = await login(port, { queueDepth: 8 });
  t.teardown(() => c.close());
  // The POWER ON unit attention of a new nexus, before the run.
  await command(c, { lun: 0, cdb: cdb.testUnitReady() });
  const [session] = (await controlRequest(socket, 'sessions')) as SessionInfo[];
  const first = await space();
  t.false(first?.low ?? false, JSON.stringify(first));

  const attentions: { sense: SenseTriple; at: number }[] = [];
  const seen = (from: SenseTriple[]): void => {
    for (const s of from.splice(0)) attentions.push({ sense: s, at: (performance.now() - started) / 1000 });
  };
  const failures: string[] = [];
  /** The generation last written to each chunk; a chunk's writes and reads are its owner's alone. */
  const written: number[] = [];
  let commands = 0;
  let reads = 0;
  const started = performance.now();
  const end = started + SECONDS * 1000;
  const elapsed = (): number => performance.now() - started;

  const check = (what: string, r: CommandResult): boolean => {
    commands++;
    if (r.status === ScsiStatus.GOOD) return true;
    failures.push(`${what}: status ${r.status} ${JSON.stringify(senseOf(r))} at ${(elapsed() / 1000).toFixed(1)} s`);
    return false;
  };
  // The new chunks, in order, at PACE a second.
  const grower = async (): Promise<void> => {
    for (let k = 0; performance.now() < end && (k + 1) * CHUNK <= 24 * MiB; k++) {
      const due = (k * 1000) / PACE;
      if (elapsed() < due) await new Promise((r) => setTimeout(r, due - elapsed()));
      const ua: SenseTriple[] = [];
      const ok = check(`write of new chunk ${k}`, await write(c, 0, (k * CHUNK) / 512, pattern(CHUNK, k * 1000), {}, ua));
      seen(ua);
      if (!ok) return;
      written[k] = 0;
    }
  };
  // Rewrites of chunks already written, each read back at once.
  const rewriter = async (r: number): Promise<void> => {
    for (let i = 0; performance.now() < end; i++) {
      const mine = written.map((_, k) => k).filter((k) => k % REWRITERS === r && written[k] !== undefined);
      if (mine.length === 0) {
        await new Promise((res) => setTimeout(res, 50));
        continue;
      }
      const k = mine[i % mine.length]!;
      const gen = written[k]! + 1;
      const ua: SenseTriple[] = [];
      const ok = check(`rewrite of chunk ${k}`, await write(c, 0, (k * CHUNK) / 512, pattern(CHUNK, k * 1000 + gen), {}, ua));
      seen(ua);
      if (!ok) return;
      written[k] = gen;
      const back = await read(c, 0, (k * CHUNK) / 512, CHUNK / 512, ua);
      seen(ua);
      if (!check(`read of chunk ${k}`, back.result)) return;
      reads++;
      if (!back.data.equals(pattern(CHUNK, k * 1000 + gen))) {
        failures.push(`chunk ${k} read back other bytes than its write ${gen}`);
        return;
      }
    }
  };
  await Promise.all([grower(), ...Array.from({ length: REWRITERS }, (_, r) => rewriter(r))]);

  t.deepEqual(failures, [], 'every command GOOD, every read what was written');
  t.log(`${commands} commands (${reads} reads checked), ${written.length} chunks (${((written.length * CHUNK) / MiB).toFixed(1)} MiB) in ${SECONDS} s; unit attentions: ${JSON.stringify(attentions)}`);
  t.deepEqual(
    attentions.map((a) => a.sense),
    [{ key: 6, asc: 0x38, ascq: 0x07 }],
    'THIN PROVISIONING SOFT THRESHOLD REACHED, once, and no other unit attention',
  );
  const at = attentions[0]?.at ?? 0;
  t.true(at > 2 && at < SECONDS - 2, `the threshold was crossed mid-run (${at.toFixed(1)} s in)`);
  const low = await space();
  t.true(low?.low, JSON.stringify(low));
  t.is(low?.crossings, 1);
  t.regex(low?.why ?? '', /space_threshold\.filesystem 25%/);
  t.is(d.lines.filter((l) => /warn: volume v: low on space/.test(l)).length, 1, 'one warning in the log');
  t.deepEqual(d.lines.filter((l) => /\berror\b/i.test(l)), [], 'rblkd logged no error');

  // The session carried on: the one that logged in, and every chunk reads its last write.
  const after = (await controlRequest(socket, 'sessions')) as SessionInfo[];
  t.deepEqual(after.map((s) => s.id), [session!.id]);
  const wrong: number[] = [];
  for (let k = 0; k < written.length; k++) {
    const back = await read(c, 0, (k * CHUNK) / 512, CHUNK / 512);
    if (back.result.status !== ScsiStatus.GOOD || !back.data.equals(pattern(CHUNK, k * 1000 + written[k]!))) wrong.push(k);
  }
  t.deepEqual(wrong, [], 'chunks that do not read their last write');
  await c.logout();
  d.kill('SIGTERM');
  t.deepEqual(await d.exited, { code: 0, signal: null });
});
