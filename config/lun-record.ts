// The LUNs rblkd has given its volumes, remembered in state_dir/luns.json so that a LUN never
// moves because another volume was removed or the file was reordered (docs/operations.md
// "Stable LUNs"). The file is a JSON object keyed by volume name; each entry holds the
// volume's `lun` and may gain more numbers later (an NVMe front end's `nsid`, LUN + 1 unless
// recorded otherwise): fields this version does not know are kept as they are when it rewrites
// the file. Entries of removed volumes stay, so their LUNs are not given to a new volume while
// hosts may still have them cached; an explicit `lun:` in the config takes one back.
//
// The config loader reads the file (resolve.ts; --check-config only reads it); the daemon
// writes it, crash-safely, when it applies a configuration (target/daemon/daemon.ts).

import { readFileSync } from 'node:fs';
import { open, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { describeFsError } from './secret-file.js';

export const LUN_RECORD_NAME = 'luns.json';
const FORMAT = 1;
const MAX_LUN = 255;

/** One volume's entry: its LUN, and whatever a later version recorded next to it. */
export type LunEntry = { lun: number } & Record<string, unknown>;

export interface LunRecord {
  /** state_dir/luns.json. */
  file: string;
  /** By volume name, every volume this state directory has served, removed ones included. */
  entries: ReadonlyMap<string, LunEntry>;
}

/** What a loaded config would make of the record: written by the daemon when it applies the config. */
export interface LunRecordUpdate extends LunRecord {
  /** Whether entries differ from the file's: the daemon writes only then. */
  changed: boolean;
}

export function lunRecordFile(stateDir: string): string {
  return join(stateDir, LUN_RECORD_NAME);
}

/**
 * The record in `stateDir`, empty when there is none yet (a first start, or a state_dir not
 * made yet); a message saying what is wrong with a file that exists but cannot be used.
 */
export function readLunRecord(stateDir: string): { ok: true; record: LunRecord } | { ok: false; message: string } {
  const file = lunRecordFile(stateDir);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return { ok: true, record: { file, entries: new Map() } };
    return { ok: false, message: `${file} ${describeFsError(e)}` };
  }
  const fix = `fix it, or move it aside to have LUNs assigned afresh in file order (docs/operations.md "Stable LUNs")`;
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    return { ok: false, message: `${file} is not JSON (${e instanceof Error ? e.message : String(e)}): ${fix}` };
  }
  const obj = (v: unknown): Record<string, unknown> | undefined => (typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined);
  const root = obj(doc);
  if (root === undefined || !Number.isSafeInteger(root.format) || obj(root.volumes) === undefined) {
    return { ok: false, message: `${file} is not a LUN record (an object with "format" and "volumes"): ${fix}` };
  }
  if ((root.format as number) > FORMAT) {
    return { ok: false, message: `${file} is format ${String(root.format)}, written by a newer rblkd; this one reads format ${FORMAT}` };
  }
  const entries = new Map<string, LunEntry>();
  const byLun = new Map<number, string>();
  for (const [name, raw] of Object.entries(obj(root.volumes)!)) {
    const e = obj(raw);
    const lun = e?.lun;
    if (e === undefined || typeof lun !== 'number' || !Number.isSafeInteger(lun) || lun < 0 || lun > MAX_LUN) {
      return { ok: false, message: `${file}: volume ${JSON.stringify(name)} has no LUN from 0 to ${MAX_LUN}: ${fix}` };
    }
    const other = byLun.get(lun);
    if (other !== undefined) return { ok: false, message: `${file}: volumes ${JSON.stringify(other)} and ${JSON.stringify(name)} both hold LUN ${lun}: ${fix}` };
    byLun.set(lun, name);
    entries.set(name, { ...e, lun });
  }
  return { ok: true, record: { file, entries } };
}

/** The file's text: entries in LUN order, so that a person reading it sees the LUN map. */
export function formatLunRecord(entries: ReadonlyMap<string, LunEntry>): string {
  const sorted = [...entries].sort(([, a], [, b]) => a.lun - b.lun);
  return `${JSON.stringify({ format: FORMAT, volumes: Object.fromEntries(sorted) }, null, 2)}\n`;
}

export function sameEntries(a: ReadonlyMap<string, LunEntry>, b: ReadonlyMap<string, LunEntry>): boolean {
  return formatLunRecord(a) === formatLunRecord(b);
}

/**
 * Replaces the file with `entries`, so that a crash at any point leaves the old record or the
 * new one, never a mix or nothing: written aside, flushed, renamed over, and the directory
 * flushed so that the rename itself survives a power loss.
 */
export async function writeLunRecord(file: string, entries: ReadonlyMap<string, LunEntry>): Promise<void> {
  const tmp = `${file}.${process.pid}.tmp`;
  const fh = await open(tmp, 'w', 0o644);
  try {
    await fh.writeFile(formatLunRecord(entries));
    await fh.sync();
  } catch (e) {
    await fh.close().catch(() => undefined);
    await unlink(tmp).catch(() => undefined);
    throw e;
  }
  await fh.close();
  try {
    await rename(tmp, file);
  } catch (e) {
    await unlink(tmp).catch(() => undefined);
    throw e;
  }
  const dir = await open(join(file, '..'), 'r');
  try {
    await dir.sync();
  } finally {
    await dir.close();
  }
}
