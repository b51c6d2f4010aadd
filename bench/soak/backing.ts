// The backing store failing underneath a volume. A full filesystem: a thin 32 MiB volume in
// a 4 MiB tmpfs, written until it is full: writes must then fail NO_SPACE (DATA PROTECT
// 27/07, docs/initiator.md "Errors"), rblkd must keep serving, overwrites of space already
// allocated must still succeed, and every acknowledged write must read back. A shrunken
// file: the volume's file truncated to half its size while rblkd serves it: reads past the
// new end fail MEDIUM_ERROR (03 11/00; target/backend/positional-io.ts), reads before it
// still return what was written.
import { execFile } from 'node:child_process';
import { mkdirSync, truncateSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { librarySession } from './clients.js';
import { SoakDaemon } from './daemon.js';
import { blockContent, LEDGER_BLOCK } from './ledger.js';
import { newRow, type SoakRow } from './report.js';

const run = promisify(execFile);

function codeOf(e: unknown): string {
  return typeof e === 'object' && e !== null && typeof (e as { code?: unknown }).code === 'string' ? (e as { code: string }).code : String(e).slice(0, 80);
}

function count(m: Map<string, number>, k: string): void {
  m.set(k, (m.get(k) ?? 0) + 1);
}

export async function fullFilesystem(o: { writesAfterFull?: number } = {}): Promise<SoakRow> {
  const row = newRow('full backing filesystem (thin volume on a 4 MiB tmpfs)');
  if (process.getuid?.() !== 0) {
    row.skipped = 'needs root to mount a tmpfs';
    return row;
  }
  const daemon = new SoakDaemon({ volumes: [] });
  const mnt = join(daemon.dir, 'full');
  mkdirSync(mnt);
  let mounted = false;
  try {
    await run('mount', ['-t', 'tmpfs', '-o', 'size=4m', 'rblk-soak', mnt]);
    mounted = true;
    daemon.setup.volumes.push({ name: 'v', path: join(mnt, 'v.img'), size: '32MiB', thin: true });
    await daemon.start();
    const s = await librarySession(daemon.url('v'), { commandMs: 10_000, lossMs: 10_000 });
    const acked = new Map<number, number>();
    const errors = new Map<string, number>();
    let serial = 1;
    let afterFull = 0;
    let writes = 0;
    try {
      for (let block = 0; block < (32 << 20) / LEDGER_BLOCK && afterFull < (o.writesAfterFull ?? 64); block++) {
        writes++;
        const sn = serial++;
        try {
          await s.client.write(block * LEDGER_BLOCK, blockContent(block, sn), true);
          acked.set(block, sn);
        } catch (e) {
          count(errors, codeOf(e));
          afterFull++;
        }
      }
      // Space already allocated stays writable.
      let overwrites = 0;
      for (const block of [...acked.keys()].slice(0, 16)) {
        writes++;
        const sn = serial++;
        try {
          await s.client.write(block * LEDGER_BLOCK, blockContent(block, sn), true);
          acked.set(block, sn);
          overwrites++;
        } catch (e) {
          count(errors, `overwrite ${codeOf(e)}`);
        }
      }
      let lost = 0;
      for (const [block, sn] of acked) {
        const got = await s.client.read(block * LEDGER_BLOCK, LEDGER_BLOCK).catch(() => Buffer.alloc(0));
        if (!got.equals(blockContent(block, sn))) lost++;
      }
      row.runs = 1;
      row.operations = writes;
      row.lost = lost;
      const unclear = [...errors].filter(([k]) => k !== 'NO_SPACE').reduce((n, [, v]) => n + v, 0);
      row.healthyErrors = unclear;
      row.notes.push(`${acked.size} writes acknowledged before the filesystem filled; errors: ${[...errors].map(([k, v]) => `${k} ×${v}`).join(', ') || 'none'}; ${overwrites}/16 overwrites of allocated blocks succeeded`);
      if (unclear > 0 || (errors.get('NO_SPACE') ?? 0) === 0 || overwrites < 16 || lost > 0) row.ok = false;
      row.ok &&= daemon.alive;
    } finally {
      await s.session.close();
    }
  } catch (e) {
    row.ok = false;
    row.notes.push(`aborted: ${e instanceof Error ? e.message.split('\n')[0] : String(e)}`);
  } finally {
    row.daemonExits = daemon.unexpectedExits;
    row.notes.push(...daemon.exitReports);
    if (row.daemonExits > 0) row.ok = false;
    await daemon.close(true);
    if (mounted) await run('umount', [mnt]).catch((e: unknown) => row.notes.push(`umount: ${String(e)}`));
    await daemon.close();
  }
  return row;
}

export async function truncatedFile(): Promise<SoakRow> {
  const row = newRow('backing file truncated underneath (16 → 8 MiB)');
  const daemon = new SoakDaemon({ volumes: [{ name: 'v', path: 'v.img', size: '16MiB' }] });
  try {
    await daemon.start();
    const s = await librarySession(daemon.url('v'), { commandMs: 10_000, lossMs: 10_000 });
    const errors = new Map<string, number>();
    let ops = 0;
    let lost = 0;
    let wrongAnswers = 0;
    try {
      const blocks = (16 << 20) / LEDGER_BLOCK;
      const step = 64;
      for (let b = 0; b < blocks; b += step) {
        ops++;
        await s.client.write(b * LEDGER_BLOCK, blockContent(b, b + 1), true);
      }
      truncateSync(join(daemon.dir, 'v.img'), 8 << 20);
      for (let b = 0; b < blocks; b += step) {
        ops++;
        const beyond = b * LEDGER_BLOCK >= 8 << 20;
        try {
          const got = await s.client.read(b * LEDGER_BLOCK, LEDGER_BLOCK);
          if (beyond) {
            // docs: a read past the end of the shrunken file is a medium error, not zeroes.
            wrongAnswers++;
            count(errors, got.equals(Buffer.alloc(LEDGER_BLOCK)) ? 'zeroes' : 'data');
          } else if (!got.equals(blockContent(b, b + 1))) lost++;
        } catch (e) {
          count(errors, codeOf(e));
          if (!beyond || codeOf(e) !== 'MEDIUM_ERROR') wrongAnswers++;
        }
      }
      // A read straddling the new end, and a read of the whole device.
      for (const [off, len] of [
        [(8 << 20) - LEDGER_BLOCK, 2 * LEDGER_BLOCK],
        [0, 1 << 20],
      ] as const) {
        ops++;
        try {
          await s.client.read(off, len);
          if (off + len > 8 << 20) wrongAnswers++;
        } catch (e) {
          count(errors, codeOf(e));
          if (codeOf(e) !== 'MEDIUM_ERROR' || off + len <= 8 << 20) wrongAnswers++;
        }
      }
      row.runs = 1;
      row.operations = ops;
      row.lost = lost;
      row.healthyErrors = wrongAnswers;
      row.notes.push(`answers: ${[...errors].map(([k, v]) => `${k} ×${v}`).join(', ') || 'all data'}${wrongAnswers > 0 ? `; ${wrongAnswers} not as docs say` : ''}`);
      row.ok = lost === 0 && wrongAnswers === 0 && daemon.alive;
    } finally {
      await s.session.close();
    }
  } catch (e) {
    row.ok = false;
    row.notes.push(`aborted: ${e instanceof Error ? e.message.split('\n')[0] : String(e)}`);
  } finally {
    row.daemonExits = daemon.unexpectedExits;
    row.notes.push(...daemon.exitReports);
    if (row.daemonExits > 0) row.ok = false;
    await daemon.close();
  }
  return row;
}
