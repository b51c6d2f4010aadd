// A volume's `qos:` key (docs/operations.md "QoS limits"): what the schema
// cannot check about it. The schema has checked types and ranges; here bps
// sizes are parsed, limits that can never bind or never let a command through
// are reported, and the defaults applied. resolve.ts calls it per volume with
// its own readers, so that a field the schema rejected is not read again.
import { isGlob } from './acl.js';
import { formatSize, parseSize } from './size.js';
import { QOS_BURST_MS_DEFAULT, QOS_MIN_BPS, type QosConfig, type QosInitiatorLimits, type QosLimits } from './schema.js';
import type { PathSegment } from './yaml-positions.js';

type Rec = Record<string, unknown>;

export interface QosReaders {
  /** The field at path, or undefined when the schema rejected it. */
  get(rec: Rec | undefined, path: PathSegment[]): unknown;
  err(path: PathSegment[], message: string): void;
  warn(path: PathSegment[], message: string): void;
  /** Whether an initiator of that exact name can ever log in (auth.initiators when auth is required). */
  canLogIn(initiator: string): boolean;
}

const rec = (v: unknown): Rec | undefined => (typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Rec) : undefined);
const int = (v: unknown): number | undefined => (Number.isSafeInteger(v) ? (v as number) : undefined);

const KEYS = [
  ['iops', 'iops'],
  ['read_iops', 'readIops'],
  ['write_iops', 'writeIops'],
  ['bps', 'bps'],
  ['read_bps', 'readBps'],
  ['write_bps', 'writeBps'],
] as const;

function limits(r: Rec | undefined, at: (k: string) => PathSegment[], inherit: number | undefined, q: QosReaders): QosLimits {
  const out: QosLimits = { burstMs: int(q.get(r, at('burst_ms'))) ?? inherit ?? QOS_BURST_MS_DEFAULT };
  for (const [key, field] of KEYS) {
    const v = q.get(r, at(key));
    if (v === undefined) continue;
    if (key.endsWith('iops')) {
      const n = int(v);
      if (n !== undefined) out[field] = n;
      continue;
    }
    if (typeof v !== 'number' && typeof v !== 'string') continue;
    const parsed = parseSize(v);
    if (!parsed.ok) q.err(at(key), parsed.message);
    else if (parsed.bytes < QOS_MIN_BPS) q.err(at(key), `must be at least ${formatSize(QOS_MIN_BPS)} per second, not ${formatSize(parsed.bytes)}`);
    else out[field] = parsed.bytes;
  }
  // A direction's own limit above the total never binds: say so rather than let the file mislead.
  for (const [total, parts] of [
    ['iops', ['read_iops', 'write_iops']],
    ['bps', ['read_bps', 'write_bps']],
  ] as const) {
    const t = out[total];
    for (const part of parts) {
      const field = KEYS.find(([k]) => k === part)![1];
      const p = out[field];
      if (t !== undefined && p !== undefined && p > t) q.warn(at(part), `is above ${total} (${t}) and can never bind`);
    }
  }
  return out;
}

function hasLimit(l: QosLimits): boolean {
  return KEYS.some(([, f]) => l[f] !== undefined);
}

/** The volume's QoS, or undefined when it has no `qos:` key (or only errors). */
export function resolveQos(volume: Rec | undefined, i: number, q: QosReaders): QosConfig | undefined {
  const base: PathSegment[] = ['volumes', i, 'qos'];
  const r = rec(q.get(volume, base));
  if (r === undefined) return undefined;
  const own = limits(r, (k) => [...base, k], undefined, q);
  const initiators: QosInitiatorLimits[] = [];
  const raw = q.get(r, [...base, 'initiators']);
  const seen = new Map<string, number>();
  for (const [j, item] of (Array.isArray(raw) ? raw : []).entries()) {
    const e = rec(item);
    const at = (k: string): PathSegment[] => [...base, 'initiators', j, k];
    const initiator = q.get(e, at('initiator'));
    if (typeof initiator !== 'string') continue;
    // Entries are tried in order (the first match wins), so a repeated pattern is dead.
    const first = seen.get(initiator);
    if (first !== undefined) q.err(at('initiator'), `'${initiator}' is already qos.initiators[${first}]; only the first entry that matches applies`);
    else seen.set(initiator, j);
    if (!isGlob(initiator) && !q.canLogIn(initiator)) q.warn(at('initiator'), `no initiator named '${initiator}' in auth.initiators: it can never log in`);
    // burst_ms is the volume's unless the entry gives its own.
    const l = limits(e, at, own.burstMs, q);
    if (!hasLimit(l)) q.err([...base, 'initiators', j], 'names no limit: give iops, read_iops, write_iops, bps, read_bps or write_bps');
    initiators.push({ initiator, ...l });
  }
  if (!hasLimit(own) && initiators.length === 0) q.warn(base, 'names no limit: the volume is not limited');
  return { ...own, initiators };
}
