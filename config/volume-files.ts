// The drop-in volume files `rblkd ctl create`, `resize` and `delete` write (docs/operations.md
// "Volumes from rblkd ctl"): one file per volume in volumes_dir, so the YAML stays the one
// source of truth, `--check-config` sees every volume, and the main file — the operator's, with
// its comments — is never rewritten. An edit is planned, applied atomically, checked as a
// whole config, and undone when the check or the daemon's reload refuses it.
import { existsSync, mkdirSync, readFileSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve as resolvePath } from 'node:path';
import { dump, load } from 'js-yaml';
import { readDropIns, volumesDirOf } from './loader.js';

/** What `rblkd ctl create` takes, in the YAML's own keys. */
export interface NewVolume {
  name: string;
  size?: string;
  path?: string;
  memory?: boolean;
  rbd?: { pool: string; image: string };
  read_only?: boolean;
  lun?: number;
  thin?: boolean;
}

/** One file's change: its new text, or null to remove it. */
export interface VolumeEdit {
  file: string;
  text: string | null;
  /** What it does, for the operator: `created /etc/rblk/volumes.d/db.yaml`. */
  summary: string;
}

export class VolumeEditError extends Error {
  override name = 'VolumeEditError';
  /** usage: the command line asked for something that cannot be (rblkd ctl exits 64 for it, docs/operations.md "rblkd ctl"). */
  constructor(
    message: string,
    readonly usage = false,
  ) {
    super(message);
  }
}

const HEADER = '# Written by rblkd ctl (docs/operations.md "Volumes from rblkd ctl"); rblkd ctl resize and delete edit it.\n';

interface Found {
  file: string;
  /** True for the main config file, which rblkd ctl never rewrites. */
  main: boolean;
  volumes: Record<string, unknown>[];
  index: number;
}

function volumesOf(text: string, file: string): Record<string, unknown>[] {
  let doc: unknown;
  try {
    doc = load(text);
  } catch (e) {
    throw new VolumeEditError(`${file}: ${e instanceof Error ? e.message.split('\n')[0] : String(e)}: fix it (rblkd --check-config) before rblkd ctl edits volumes`);
  }
  const list = doc !== null && typeof doc === 'object' ? (doc as { volumes?: unknown }).volumes : undefined;
  return Array.isArray(list) ? list.filter((v): v is Record<string, unknown> => v !== null && typeof v === 'object') : [];
}

/** Where a volume of that name is defined: the main file or one drop-in. */
function find(configPath: string, name: string): { found: Found | undefined; dir: string } {
  let main: string;
  try {
    main = readFileSync(configPath, 'utf8');
  } catch (e) {
    throw new VolumeEditError(`cannot read ${configPath}: ${(e as Error).message}`);
  }
  const dir = volumesDirOf(load(main), dirname(resolvePath(configPath)));
  const files = [{ file: configPath, text: main, main: true }, ...readDropIns(dir).map((d) => ({ ...d, main: false }))];
  for (const f of files) {
    const volumes = volumesOf(f.text, f.file);
    const index = volumes.findIndex((v) => v.name === name);
    if (index >= 0) return { found: { file: f.file, main: f.main, volumes, index }, dir };
  }
  return { found: undefined, dir };
}

function text(volumes: Record<string, unknown>[]): string {
  return HEADER + dump({ volumes }, { lineWidth: -1 });
}

/** A new file volumes_dir/NAME.yaml holding the volume; refused when the name is taken. */
export function planCreate(configPath: string, v: NewVolume): VolumeEdit {
  if (!/^[A-Za-z0-9._-]{1,64}$/.test(v.name) || v.name.startsWith('.')) {
    throw new VolumeEditError(`"${v.name}" cannot name a volume file: use 1 to 64 letters, digits and . _ - (not starting with .)`, true);
  }
  const { found, dir } = find(configPath, v.name);
  if (found) throw new VolumeEditError(`a volume named ${v.name} is already defined in ${found.file}`);
  const file = join(dir, `${v.name}.yaml`);
  if (existsSync(file)) throw new VolumeEditError(`${file} exists already: remove it or choose another name`);
  const entry: Record<string, unknown> = { name: v.name };
  for (const k of ['path', 'memory', 'rbd', 'size', 'read_only', 'thin', 'lun'] as const) if (v[k] !== undefined) entry[k] = v[k];
  return { file, text: text([entry]), summary: `created ${file}` };
}

function mustBeDropIn(found: Found | undefined, name: string, verb: string): Found {
  if (!found) throw new VolumeEditError(`no volume named ${name} in the config or its volumes directory`);
  if (found.main) {
    throw new VolumeEditError(`volume ${name} is defined in ${found.file}, which rblkd ctl does not rewrite (it keeps your comments): ${verb} there, then rblkd ctl reload`);
  }
  return found;
}

/** The drop-in with the volume's size changed (grow or shrink: the reload decides what it allows). */
export function planResize(configPath: string, name: string, size: string): VolumeEdit {
  const f = mustBeDropIn(find(configPath, name).found, name, 'resize it');
  const volumes = f.volumes.map((v, i) => (i === f.index ? { ...v, size } : v));
  return { file: f.file, text: text(volumes), summary: `set the size of ${name} to ${size} in ${f.file}` };
}

/** QoS keys `rblkd ctl qos` sets, as the YAML writes them (docs/operations.md "QoS limits"). */
export const QOS_KEYS = ['iops', 'read_iops', 'write_iops', 'bps', 'read_bps', 'write_bps', 'burst_ms'] as const;
export type QosChange = Partial<Record<(typeof QOS_KEYS)[number], number | string>>;

/**
 * The drop-in with the volume's `qos:` limits changed: the keys given replace those keys (its
 * per-initiator entries stay), or, with null, the whole `qos:` key goes.
 */
export function planQos(configPath: string, name: string, change: QosChange | null): VolumeEdit {
  const f = mustBeDropIn(find(configPath, name).found, name, 'set its qos');
  const v = f.volumes[f.index]!;
  const old = v.qos !== null && typeof v.qos === 'object' ? (v.qos as Record<string, unknown>) : {};
  let next: Record<string, unknown> | undefined;
  if (change !== null) {
    next = { ...old, ...change };
    if (Object.keys(change).length === 0) throw new VolumeEditError('qos needs a limit to set (--iops, --bps, ...) or --clear', true);
  }
  const volumes = f.volumes.map((x, i) => {
    if (i !== f.index) return x;
    const { qos: _dropped, ...rest } = x;
    return next === undefined ? rest : { ...rest, qos: next };
  });
  const what = change === null ? 'removed the qos limits of' : `set ${Object.entries(change).map(([k, val]) => `${k} ${String(val)}`).join(', ')} on`;
  return { file: f.file, text: text(volumes), summary: `${what} ${name} in ${f.file}` };
}

/** The drop-in without the volume: the file removed when it was its only one. */
export function planDelete(configPath: string, name: string): VolumeEdit {
  const f = mustBeDropIn(find(configPath, name).found, name, 'remove it');
  const rest = f.volumes.filter((_, i) => i !== f.index);
  return rest.length === 0 ? { file: f.file, text: null, summary: `removed ${f.file}` } : { file: f.file, text: text(rest), summary: `removed ${name} from ${f.file}` };
}

/**
 * Applies an edit (a new text through a temporary file and rename, so a reader never sees half
 * of it) and returns what puts the file back as it was.
 */
export function applyEdit(e: VolumeEdit): () => void {
  const before = existsSync(e.file) ? readFileSync(e.file, 'utf8') : null;
  const put = (t: string | null): void => {
    if (t === null) {
      if (existsSync(e.file)) unlinkSync(e.file);
      return;
    }
    mkdirSync(dirname(e.file), { recursive: true, mode: 0o755 });
    const tmp = join(dirname(e.file), `.${basename(e.file)}.${process.pid}.tmp`);
    writeFileSync(tmp, t, { mode: 0o644 });
    renameSync(tmp, e.file);
  };
  put(e.text);
  return () => put(before);
}
