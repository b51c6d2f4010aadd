// The checks a JSON Schema cannot express, and the defaults. It runs even when the schema found
// errors, so that one pass reports everything; it reads a field only when the field has the type
// the schema expects and no schema error of its own, so one mistake is reported once.
// Over 600 lines for that reason: every section's resolver is a closure over the one pass's
// issue list and rejected paths; a section that grows goes to a file of its own as acl.ts did.

import { existsSync } from 'node:fs';
import { isIP } from 'node:net';
import { resolve as resolvePath } from 'node:path';
import { parseDhchapSecret } from '../protocol/nvme/auth.js';
import { CONTROL_RECV_BUFFERS, DEFAULT_TARGET_NAME } from '../protocol/wire/constants.js';
import { switchOn, type KindInput } from '../target/backend/kind.js';
import { kindKeys, kindOf } from '../target/backend/registry.js';
import { DEFAULT_FRONT_END, FRONT_ENDS, frontEndOf } from '../target/front-end/registry.js';
import { isGlob } from './acl.js';
import { resolveQos } from './qos.js';
import { listenAddressProblem } from './listen-address.js';
import { formatPath } from './config-error.js';
import type { PathIssue } from './schema-errors.js';
import {
  DEFAULT_ADDRESS,
  DEFAULT_CONTROL_SOCKET,
  DEFAULT_METRICS_PORT,
  DEFAULT_STATE_DIR,
  DEFAULT_VOLUMES_DIR,
  LIMIT_DEFAULTS,
  LIMIT_RANGES,
  MIN_SECRET_LENGTH,
  type AclEntry,
  type AluaConfig,
  type AuthConfig,
  type BlockSize,
  type Config,
  type ControlConfig,
  type InitiatorCredential,
  type IoEngineSetting,
  type LimitsConfig,
  type ListenerConfig,
  type LogFormat,
  type LogLevel,
  type ListenerProtocol,
  type MetricsConfig,
  type PortGroupConfig,
  type Provider,
  type Access,
  type VolumeBacking,
  type VolumeConfig,
} from './schema.js';
import { readSecretFile } from './secret-file.js';
import { stateDirProblem } from './state-dir.js';
import { lunRecordFile, readLunRecord, sameEntries, type LunRecordUpdate } from './lun-record.js';
import { formatSize, parseSize } from './size.js';
import type { PathSegment } from './yaml-positions.js';
import type { AluaState } from '../protocol/scsi/target-port-groups.js';

export interface ResolveContext {
  /** Recorded as Config.source. */
  source: string;
  /** Relative secret_file and state_dir paths are taken from here (the config file's directory). */
  configDir: string;
  /** Replaces state_dir (tests, demos, `rblkd --state-dir`). */
  stateDir?: string;
  /** Required owner of secret files; undefined skips the owner check. */
  uid?: number;
  /** formatPath() of every field the schema already rejected. */
  rejected: ReadonlySet<string>;
}

export interface ResolveResult {
  /** Present only when there were no errors (schema errors included: see loader.ts). */
  config?: Config;
  errors: PathIssue[];
  warnings: PathIssue[];
}

type Rec = Record<string, unknown>;

// RFC 1123 host names: dot-separated labels of up to 63 letters, digits and inner hyphens.
const LABEL = '[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?';
const HOSTNAME_RE = new RegExp(`^(?=.{1,253}$)${LABEL}(?:\\.${LABEL})*$`);
const WILDCARDS = new Set(['0.0.0.0', '::']);
const MAX_LUN = 255;

export function resolveConfig(data: unknown, ctx: ResolveContext): ResolveResult {
  const errors: PathIssue[] = [];
  const warnings: PathIssue[] = [];
  const err = (path: PathSegment[], message: string): void => void errors.push({ path, message });
  const warn = (path: PathSegment[], message: string): void => void warnings.push({ path, message });

  const get = (rec: Rec | undefined, path: PathSegment[]): unknown => {
    if (!rec || ctx.rejected.has(formatPath(path))) return undefined;
    return rec[String(path[path.length - 1])];
  };
  const rec = (v: unknown): Rec | undefined =>
    typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Rec) : undefined;
  const list = (v: unknown): unknown[] | undefined => (Array.isArray(v) ? v : undefined);
  const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
  const int = (v: unknown): number | undefined => (Number.isSafeInteger(v) ? (v as number) : undefined);
  const bool = (v: unknown): boolean | undefined => (typeof v === 'boolean' ? v : undefined);
  const size = (v: unknown, path: PathSegment[]): number | undefined => {
    if (typeof v !== 'number' && typeof v !== 'string') return undefined;
    const r = parseSize(v);
    if (r.ok) return r.bytes;
    err(path, r.message);
    return undefined;
  };

  if (data === null || data === undefined) warn([], 'the file is empty: no volumes are served');
  const root = rec(data);

  const stateDirRaw = str(get(root, ['state_dir']));
  const stateDir =
    ctx.stateDir !== undefined
      ? resolvePath(ctx.stateDir)
      : stateDirRaw !== undefined
        ? resolvePath(ctx.configDir, stateDirRaw)
        : DEFAULT_STATE_DIR;

  const volumesDir = resolvePath(ctx.configDir, str(get(root, ['volumes_dir'])) ?? DEFAULT_VOLUMES_DIR);
  const targetName = str(get(root, ['target_name'])) ?? DEFAULT_TARGET_NAME;
  const nqn = str(get(root, ['nqn']));
  const auth = resolveAuth();
  const listeners = resolveListeners();
  let luns: LunRecordUpdate | undefined;
  const volumes = resolveVolumes();
  // The start makes state_dir before it opens the first volume; without volumes it never does.
  if (volumes.length > 0) {
    const problem = stateDirProblem(stateDir);
    if (problem !== undefined) err(['state_dir'], problem);
  }
  const limits = resolveLimits();
  const logsec = rec(get(root, ['logging']));
  const logging = {
    level: (str(get(logsec, ['logging', 'level'])) ?? 'info') as LogLevel,
    format: (str(get(logsec, ['logging', 'format'])) ?? 'text') as LogFormat,
  };

  const control = resolveControl();
  const metrics = resolveMetrics();

  if (!auth.required) {
    for (const [i, l] of listeners.entries()) {
      if (!isLoopback(l.address)) {
        warn(['listeners', i, 'address'], `serves ${l.address} without authentication (auth.required is false)`);
      }
    }
  }
  if (root && volumes.length === 0) warn(['volumes'], 'no volumes are configured');

  const alua = resolveAlua();
  const fastPathRaw = get(root, ['fast_path']);
  const fastPath = switchOn(fastPathRaw, true);
  const reactorsRaw = get(root, ['reactors']);
  const reactors: number | 'auto' = typeof reactorsRaw === 'number' ? reactorsRaw : 'auto';
  const busyPollRaw = get(root, ['busy_poll_us']);
  const busyPollMicros = typeof busyPollRaw === 'number' ? busyPollRaw : 0;

  if (errors.length > 0 || ctx.rejected.size > 0) return { errors, warnings };
  return {
    errors,
    warnings,
    config: { source: ctx.source, targetName, ...(nqn !== undefined ? { nqn } : {}), listeners, volumes, auth, limits, logging, control, metrics, stateDir, volumesDir, luns: luns ?? { file: lunRecordFile(stateDir), entries: new Map(), changed: false }, fastPath, reactors, busyPollMicros, alua, warnings: [] },
  };

  function resolveListeners(): ListenerConfig[] {
    const raw = list(get(root, ['listeners']));
    if (!raw) return [{ protocol: DEFAULT_FRONT_END, provider: 'auto', address: DEFAULT_ADDRESS, port: frontEndOf(DEFAULT_FRONT_END).defaultPort }];
    const out: ListenerConfig[] = [];
    for (const [i, item] of raw.entries()) {
      const r = rec(item);
      const at = (k: string): PathSegment[] => ['listeners', i, k];
      const address = str(get(r, at('address'))) ?? DEFAULT_ADDRESS;
      if (!isIP(address) && !HOSTNAME_RE.test(address)) {
        err(at('address'), `'${address}' is not an IP address or a host name`);
      } else {
        const problem = listenAddressProblem(address);
        if (problem !== undefined) err(at('address'), problem);
      }
      const protocol = (str(get(r, at('protocol'))) ?? DEFAULT_FRONT_END) as ListenerProtocol;
      const frontEnd = frontEndOf(protocol);
      const givenProvider = str(get(r, at('provider')));
      if (!frontEnd.usesProvider && givenProvider !== undefined) {
        err(at('provider'), `a ${protocol} listener is plain TCP and takes no provider (provider is for listeners over libfabric)`);
      }
      const provider = (!frontEnd.usesProvider ? 'tcp' : (givenProvider ?? 'auto')) as Provider;
      if (provider === 'verbs' && isLoopback(address)) {
        warn(at('address'), 'the verbs provider cannot listen on loopback: use the RDMA interface address');
      }
      const discovery = bool(get(r, at('discovery'))) === true;
      if (discovery && frontEnd.discoveryPort === undefined) err(at('discovery'), `${protocol} listeners have no discovery-only mode (only ${FRONT_ENDS.filter((f) => f.discoveryPort !== undefined).map((f) => f.name).join(', ')} listeners have)`);
      const port = int(get(r, at('port'))) ?? (discovery ? (frontEnd.discoveryPort ?? frontEnd.defaultPort) : frontEnd.defaultPort);
      const l: ListenerConfig = { protocol, provider, address, port, ...(discovery ? { discovery } : {}) };
      const clash = out.findIndex(
        (o) =>
          o.port === l.port &&
          l.port !== 0 &&
          (o.address === l.address || WILDCARDS.has(o.address) || WILDCARDS.has(l.address)),
      );
      if (clash >= 0) {
        err(['listeners', i], `${l.address} port ${l.port} overlaps listeners[${clash}] (${out[clash].address})`);
      }
      out.push(l);
    }
    return out;
  }

  /**
   * Snapshots and clones (docs/operations.md "Snapshots and clones"): a
   * file volume's snapshot NAME is `<path>@NAME` beside its file. clone_of
   * of a file volume: while the clone's file does not exist, it must name a
   * file volume of this file and a snapshot of it that exists, which the
   * first open reflinks. clone_of of an rbd volume: POOL/IMAGE@SNAP (the rbd
   * kind resolves it), or VOLUME@SNAP naming an rbd volume of this file in
   * the same pool, namespace and cluster; the snapshot is looked for at the
   * first open, which finds no image and clones it. A volume that serves a snapshot's file writable
   * would change the snapshot: a warning.
   */
  function resolveSnapshots(partial: ReadonlyArray<{ index: number; volume: { name: string; backing: VolumeBacking; readOnly: boolean } }>): void {
    const raw = list(get(root, ['volumes']));
    const files = new Map<string, string>();
    for (const { volume: v } of partial) if (v.backing.kind === 'file') files.set(v.name, v.backing.path);
    for (const { index, volume: v } of partial) {
      const given = raw ? get(rec(raw[index]) ?? {}, ['volumes', index, 'clone_of']) : undefined;
      const b = v.backing;
      if (given !== undefined && b.kind !== 'file' && b.kind !== 'rbd') err(['volumes', index, 'clone_of'], `applies only to file and rbd volumes; this one is ${kindOf(b).where(b)}`);
      if (b.kind === 'rbd' && b.cloneOf !== undefined && b.cloneParent === undefined && !b.cloneOf.includes('/')) {
        const at = b.cloneOf.lastIndexOf('@');
        const origin = b.cloneOf.slice(0, at);
        const o = partial.find((p) => p.volume.name === origin)?.volume.backing;
        if (o === undefined || o.kind !== 'rbd' || origin === v.name) {
          err(['volumes', index, 'clone_of'], `names no other rbd volume '${origin}' of this file: give VOLUME@SNAP of one, or POOL/IMAGE@SNAP`);
        } else if (o.pool !== b.pool || (o.namespace ?? '') !== (b.namespace ?? '') || o.conf !== b.conf || o.snapshot !== undefined) {
          err(['volumes', index, 'clone_of'], `volume ${origin} is ${kindOf(o).where(o)}: a clone is made beside its parent, in the same pool, namespace and cluster (conf), of an image rather than a snapshot volume`);
        } else {
          v.backing = { ...b, cloneParent: { image: o.image, snapshot: b.cloneOf.slice(at + 1) } };
        }
      }
      if (b.kind !== 'file') continue;
      if (b.cloneOf?.includes('/') === true) {
        err(['volumes', index, 'clone_of'], `POOL/IMAGE@SNAP is for rbd volumes; a file volume's clone_of is VOLUME@SNAP of a file volume of this file`);
        continue;
      }
      if (!v.readOnly) {
        for (const [other, path] of files) {
          if (other !== v.name && b.path.startsWith(`${path}@`)) {
            warn(['volumes', index, 'path'], `is snapshot ${b.path.slice(path.length + 1)} of volume ${other}, served writable: writes change the snapshot (give read_only: true, or serve a clone_of it)`);
          }
        }
      }
      if (b.cloneOf === undefined) continue;
      const at = b.cloneOf.lastIndexOf('@');
      const origin = b.cloneOf.slice(0, at);
      const snapshot = b.cloneOf.slice(at + 1);
      const originPath = files.get(origin);
      if (originPath === undefined || origin === v.name) {
        err(['volumes', index, 'clone_of'], `names no other file volume '${origin}' of this file: the snapshot of a volume this file serves is cloned`);
        continue;
      }
      const from = `${originPath}@${snapshot}`;
      if (!existsSync(from)) {
        err(['volumes', index, 'clone_of'], `volume ${origin} has no snapshot ${snapshot} (${from}); take it with \`rblkd ctl snapshot ${origin} ${snapshot}\``);
        continue;
      }
      v.backing = { ...b, cloneFrom: from };
    }
  }

  function resolveVolumes(): VolumeConfig[] {
    const raw = list(get(root, ['volumes']));
    if (!raw) return [];
    const firstBy = {
      name: new Map<string, number>(),
      storage: new Map<string, number>(),
      serial: new Map<string, number>(),
      uuid: new Map<string, number>(),
      lun: new Map<number, number>(),
    };
    const claim = <K>(map: Map<K, number>, key: K, i: number, path: PathSegment[], what: string): void => {
      const first = map.get(key);
      if (first === undefined) map.set(key, i);
      else err(path, `${what} is already used by volumes[${first}]`);
    };

    const partial: Array<{ index: number; volume: Omit<VolumeConfig, 'lun'> & { lun?: number } }> = [];
    for (const [i, item] of raw.entries()) {
      const r = rec(item);
      if (!r) continue;
      const at = (k: string): PathSegment[] => ['volumes', i, k];
      const here: PathSegment[] = ['volumes', i];

      const name = str(get(r, at('name')));
      if (name !== undefined) claim(firstBy.name, name, i, at('name'), `volume name '${name}'`);
      const blockSize = (int(get(r, at('block_size'))) ?? 512) as BlockSize;
      const physicalBlockSize = int(get(r, at('physical_block_size'))) as BlockSize | undefined;
      if (physicalBlockSize !== undefined && physicalBlockSize < blockSize) err(at('physical_block_size'), `${physicalBlockSize} is smaller than block_size ${blockSize}`);
      const readOnly = bool(get(r, at('read_only'))) ?? false;
      const thin = bool(get(r, at('thin'))) ?? false;
      const spaceRaw = rec(get(r, at('space_threshold')));
      const spaceFs = int(get(spaceRaw, ['volumes', i, 'space_threshold', 'filesystem']));
      const spaceAllocated = int(get(spaceRaw, ['volumes', i, 'space_threshold', 'allocated']));
      const spaceThreshold = spaceFs !== undefined || spaceAllocated !== undefined ? { ...(spaceFs !== undefined ? { filesystem: spaceFs } : {}), ...(spaceAllocated !== undefined ? { allocated: spaceAllocated } : {}) } : undefined;
      const directSetting = bool(get(r, at('direct')));
      const ioEngineSetting = str(get(r, at('io_engine'))) as IoEngineSetting | undefined;

      let sizeBytes = size(get(r, at('size')), at('size'));
      if (sizeBytes !== undefined) {
        if (sizeBytes === 0) {
          err(at('size'), 'must be greater than zero');
          sizeBytes = undefined;
        } else if (sizeBytes % blockSize !== 0) {
          err(at('size'), `${formatSize(sizeBytes)} is not a multiple of block_size ${blockSize}`);
          sizeBytes = undefined;
        }
      }
      const sizeGiven = sizeBytes !== undefined || r.size !== undefined;

      // The kind: the one registered key the volume gives (target/backend/registry.ts).
      const keys = kindKeys();
      const given = keys.filter(({ key, kinds }) => kinds[0].selected(get(r, at(key))));
      let backing: VolumeBacking | undefined;
      if (given.length > 1) {
        err(here, `give either ${given.map((g) => g.kinds[0].keyText).join(' or ')}, not both`);
      } else if (given.length === 1) {
        const { key, kinds } = given[0];
        if (!kinds[0].descriptorOptions) {
          if (directSetting === true) err(at('direct'), 'applies only to volumes with a path');
          if (ioEngineSetting !== undefined) err(at('io_engine'), 'applies only to volumes with a path');
        }
        const input: KindInput = {
          get: (k) => get(r, at(k)),
          error: (k, message) => err(k === undefined ? here : [...here, ...(typeof k === 'string' ? [k] : k)], message),
          warn: (k, message) => warn(k === undefined ? here : [...here, ...(typeof k === 'string' ? [k] : k)], message),
          name,
          size: sizeBytes,
          sizeGiven,
          readOnly,
          blockSize,
          stateDir,
          configDir: ctx.configDir,
        };
        for (const kind of kinds) {
          const found = kind.resolve(input);
          if (found === null) continue;
          if (found !== undefined) {
            backing = found;
            const storage = kind.claim(found);
            if (storage !== undefined) claim(firstBy.storage, storage, i, at(key), storage);
          }
          break;
        }
      } else if (keys.every(({ key }) => !ctx.rejected.has(formatPath(at(key))))) {
        const text = keys.map(({ kinds: [k] }) => (k.describes === '' ? k.keyText : `${k.keyText} (${k.describes})`));
        err(here, `needs ${text.slice(0, -1).join(', ')} or ${text[text.length - 1]}`);
      }

      const serial = str(get(r, at('serial')));
      if (serial !== undefined) claim(firstBy.serial, serial, i, at('serial'), `serial '${serial}'`);
      const uuidRaw = str(get(r, at('uuid')));
      const uuid = uuidRaw?.toLowerCase();
      if (uuid !== undefined) claim(firstBy.uuid, uuid, i, at('uuid'), `uuid ${uuid}`);
      const lun = int(get(r, at('lun')));
      if (lun !== undefined) claim(firstBy.lun, lun, i, at('lun'), `LUN ${lun}`);
      const nsid = int(get(r, at('nsid')));

      const acl = resolveAcl(r, i);
      const qos = resolveQos(r, i, { get, err, warn, canLogIn: (n) => !auth.required || auth.initiators.some((c) => c.name === n) });
      if (name === undefined || backing === undefined) continue;
      partial.push({
        index: i,
        volume: {
          name,
          backing,
          blockSize,
          ...(physicalBlockSize !== undefined ? { physicalBlockSize } : {}),
          readOnly,
          direct: directSetting ?? kindOf(backing).defaultDirect(backing),
          ioEngine: ioEngineSetting ?? 'auto',
          thin,
          ...(spaceThreshold !== undefined ? { spaceThreshold } : {}),
          ...(lun !== undefined ? { lun } : {}),
          ...(nsid !== undefined ? { nsid } : {}),
          ...(serial !== undefined ? { serial } : {}),
          ...(uuid !== undefined ? { uuid } : {}),
          ...(acl ? { acl } : {}),
          ...(qos ? { qos } : {}),
        },
      });
    }

    resolveSnapshots(partial);
    return assignLuns(partial, firstBy.lun);
  }

  /**
   * Every volume's LUN (docs/operations.md "Stable LUNs"): an explicit `lun` wins; else the one
   * state_dir/luns.json remembers for the volume's name; else, in file order, the lowest LUN
   * that is neither taken nor remembered for another name, so that neither removing a volume
   * nor reordering the file moves another, and a removed volume's LUN is not reused silently.
   */
  function assignLuns(
    partial: Array<{ index: number; volume: Omit<VolumeConfig, 'lun'> & { lun?: number } }>,
    explicit: ReadonlyMap<number, number>,
  ): VolumeConfig[] {
    const read = readLunRecord(stateDir);
    if (!read.ok) {
      err(['state_dir'], read.message);
      return [];
    }
    const remembered = read.record.entries;
    const entries = new Map(remembered);
    const holderOf = new Map([...remembered].map(([name, e]) => [e.lun, name]));
    const configured = new Map(partial.map((p) => [p.volume.name, p]));
    const lunOf = new Map<number, number>();
    const used = new Set(explicit.keys());
    for (const { index, volume: v } of partial) {
      if (v.lun === undefined) continue;
      lunOf.set(index, v.lun);
      const holder = holderOf.get(v.lun);
      if (holder === undefined || holder === v.name) continue;
      const other = configured.get(holder);
      if (other === undefined) {
        // A removed volume's LUN, taken back on purpose.
        warn(['volumes', index, 'lun'], `LUN ${v.lun} was volume ${holder}'s, which is no longer configured; ${v.name} takes it (hosts that still have ${holder} cached at LUN ${v.lun} will see other data there)`);
        entries.delete(holder);
      } else if (other.volume.lun === undefined) {
        err(
          ['volumes', index, 'lun'],
          `LUN ${v.lun} is volume ${holder}'s (${read.record.file}), which has no lun of its own and would move: give ${v.name} another lun, or give ${holder} a lun explicitly`,
        );
      }
    }
    // Remembered LUNs first, so that a new volume earlier in the file never takes one.
    for (const { index, volume: v } of partial) {
      const r = remembered.get(v.name)?.lun;
      if (v.lun !== undefined || r === undefined || used.has(r)) continue;
      used.add(r);
      lunOf.set(index, r);
    }
    let next = 0;
    for (const { index, volume: v } of partial) {
      if (lunOf.has(index)) continue;
      while (next <= MAX_LUN && (used.has(next) || (holderOf.has(next) && holderOf.get(next) !== v.name))) next++;
      if (next > MAX_LUN) {
        const removed = [...remembered.keys()].filter((n) => !configured.has(n));
        err(
          ['volumes', index],
          `no free LUN: 0 to ${MAX_LUN} are all taken${removed.length > 0 ? ` or remembered for removed volumes (${removed.join(', ')}) in ${read.record.file}; give lun explicitly to take one of theirs back` : ''}`,
        );
        continue;
      }
      used.add(next);
      lunOf.set(index, next);
    }
    const out: VolumeConfig[] = [];
    for (const { index, volume: v } of partial) {
      const lun = lunOf.get(index);
      if (lun === undefined) continue;
      out.push({ ...v, lun });
      entries.set(v.name, { ...entries.get(v.name), lun });
    }
    luns = { file: read.record.file, entries, changed: !sameEntries(remembered, entries) };
    // Each namespace ID once: a volume's nsid, or its LUN + 1 without one (docs/nvme.md "Configuration").
    // Two volumes without nsid cannot collide unless their LUNs do, which is reported above.
    const nsids = new Map<number, string>();
    for (const v of out) if (v.nsid === undefined && !nsids.has(v.lun + 1)) nsids.set(v.lun + 1, v.name);
    for (const v of out) {
      if (v.nsid === undefined) continue;
      const other = nsids.get(v.nsid);
      const index = partial.find((p) => p.volume.name === v.name)?.index ?? 0;
      if (other !== undefined) err(['volumes', index, 'nsid'], `NVMe namespace ID ${v.nsid} is already volume ${other}'s`);
      else nsids.set(v.nsid, v.name);
    }
    return out;
  }

  function resolveAcl(r: Rec, i: number): AclEntry[] | undefined {
    const raw = list(get(r, ['volumes', i, 'acl']));
    if (!raw) return undefined;
    const out: AclEntry[] = [];
    for (const [j, item] of raw.entries()) {
      const e = rec(item);
      const at = (k: string): PathSegment[] => ['volumes', i, 'acl', j, k];
      const initiator = str(get(e, at('initiator')));
      const access = str(get(e, at('access'))) as Access | undefined;
      if (initiator === undefined || access === undefined) continue;
      if (auth.required && !isGlob(initiator) && !auth.initiators.some((c) => c.name === initiator)) {
        warn(at('initiator'), `no initiator named '${initiator}' in auth.initiators: it can never log in`);
      }
      out.push({ initiator, access });
    }
    return out;
  }

  function resolveAuth(): AuthConfig {
    const a = rec(get(root, ['auth']));
    const required = bool(get(a, ['auth', 'required'])) ?? false;
    const raw = list(get(a, ['auth', 'initiators'])) ?? [];
    const initiators: InitiatorCredential[] = [];
    const firstName = new Map<string, number>();
    for (const [i, item] of raw.entries()) {
      const r = rec(item);
      const at = (k: string): PathSegment[] => ['auth', 'initiators', i, k];
      const name = str(get(r, at('name')));
      if (name !== undefined) {
        const first = firstName.get(name);
        if (first !== undefined) err(at('name'), `initiator '${name}' is already listed at auth.initiators[${first}]`);
        else firstName.set(name, i);
      }
      const inline = str(get(r, at('secret')));
      const fileRaw = str(get(r, at('secret_file')));
      let secret: string | undefined;
      let secretFile: string | undefined;
      if (inline !== undefined && fileRaw !== undefined) {
        err(['auth', 'initiators', i], 'give either secret or secret_file, not both');
      } else if (inline !== undefined) {
        secret = inline;
      } else if (fileRaw !== undefined) {
        secretFile = resolvePath(ctx.configDir, fileRaw);
        const read = readSecretFile(secretFile, ctx.uid);
        if (read.ok) secret = read.secret;
        else err(at('secret_file'), read.message);
      } else if (r && !ctx.rejected.has(formatPath(at('secret'))) && !ctx.rejected.has(formatPath(at('secret_file')))) {
        err(['auth', 'initiators', i], 'needs secret or secret_file');
      }
      if (secret !== undefined && secret.length < MIN_SECRET_LENGTH) {
        const where = secretFile !== undefined ? `the secret in ${secretFile}` : 'the secret';
        const field = secretFile !== undefined ? 'secret_file' : 'secret';
        err(at(field), `${where} must be at least ${MIN_SECRET_LENGTH} characters`);
        secret = undefined;
      }
      if (secret?.startsWith('DHHC-1:') === true) {
        // The NVMe DH-HMAC-CHAP representation (docs/nvme.md "Authentication"): its CRC is checked here, not at a host's Connect.
        try {
          parseDhchapSecret(secret);
        } catch (e) {
          const field = secretFile !== undefined ? 'secret_file' : 'secret';
          err(at(field), `${secretFile !== undefined ? `the secret in ${secretFile}` : 'the secret'} is not a usable DHHC-1 secret: ${e instanceof Error ? e.message : String(e)}`);
          secret = undefined;
        }
      }
      if (name !== undefined && secret !== undefined) {
        initiators.push({ name, secret, ...(secretFile !== undefined ? { secretFile } : {}) });
      }
    }
    if (required && raw.length === 0) {
      err(['auth', 'required'], 'is true but auth.initiators is empty: no initiator could log in');
    }
    return { required, initiators };
  }

  function resolveAlua(): AluaConfig | null {
    const a = rec(get(root, ['alua']));
    if (!a) return null;
    const group = (g: Record<string, unknown> | undefined, path: PathSegment[], defaultState: AluaState): PortGroupConfig | undefined => {
      const n = int(get(g, [...path, 'group']));
      if (n === undefined) return undefined;
      return { group: n, state: (str(get(g, [...path, 'state'])) as AluaState | undefined) ?? defaultState, relativePort: int(get(g, [...path, 'relative_port'])) ?? n };
    };
    const local = group(a, ['alua'], 'active-optimized');
    if (!local) return null;
    const peers: PortGroupConfig[] = [];
    const seenGroups = new Map<number, PathSegment[]>([[local.group, ['alua', 'group']]]);
    const seenPorts = new Map<number, PathSegment[]>([[local.relativePort, ['alua', 'relative_port']]]);
    for (const [i, item] of (list(get(a, ['alua', 'peers'])) ?? []).entries()) {
      const p = group(rec(item), ['alua', 'peers', i], 'active-non-optimized');
      if (!p) continue;
      // One target device: group numbers and relative port identifiers are unique in it (SPC-4 5.15.2.1).
      if (seenGroups.has(p.group)) err(['alua', 'peers', i, 'group'], `target port group ${p.group} is named twice`);
      else if (seenPorts.has(p.relativePort)) err(['alua', 'peers', i, 'relative_port'], `relative target port ${p.relativePort} is named twice`);
      seenGroups.set(p.group, ['alua', 'peers', i, 'group']);
      seenPorts.set(p.relativePort, ['alua', 'peers', i, 'relative_port']);
      peers.push(p);
    }
    return { local, peers };
  }

  function resolveControl(): ControlConfig {
    const c = rec(get(root, ['control']));
    if (bool(get(c, ['control', 'enabled'])) === false) return { socket: null, explicit: true };
    const raw = str(get(c, ['control', 'socket']));
    return raw === undefined ? { socket: DEFAULT_CONTROL_SOCKET, explicit: false } : { socket: resolvePath(ctx.configDir, raw), explicit: true };
  }

  function resolveMetrics(): MetricsConfig | null {
    const m = rec(get(root, ['metrics']));
    if (!m || bool(get(m, ['metrics', 'enabled'])) === false) return null;
    const address = str(get(m, ['metrics', 'address'])) ?? DEFAULT_ADDRESS;
    if (!isIP(address) && !HOSTNAME_RE.test(address)) err(['metrics', 'address'], `'${address}' is not an IP address or a host name`);
    else if (!isLoopback(address)) warn(['metrics', 'address'], `serves the metrics to ${address}: anyone who reaches it sees volume names and initiator addresses`);
    return { address, port: int(get(m, ['metrics', 'port'])) ?? DEFAULT_METRICS_PORT };
  }

  function resolveLimits(): LimitsConfig {
    const l = rec(get(root, ['limits']));
    const at = (k: string): PathSegment[] => ['limits', k];
    const limits: LimitsConfig = {
      queueDepth: int(get(l, at('queue_depth'))) ?? LIMIT_DEFAULTS.queueDepth,
      maxIo: LIMIT_DEFAULTS.maxIo,
      inCapsuleData: LIMIT_DEFAULTS.inCapsuleData,
      maxSessions: int(get(l, at('max_sessions'))) ?? LIMIT_DEFAULTS.maxSessions,
      keepaliveMs: int(get(l, at('keepalive_ms'))) ?? LIMIT_DEFAULTS.keepaliveMs,
      drainTimeoutMs: int(get(l, at('drain_timeout_ms'))) ?? LIMIT_DEFAULTS.drainTimeoutMs,
      loginTimeoutMs: int(get(l, at('login_timeout_ms'))) ?? LIMIT_DEFAULTS.loginTimeoutMs,
      preLoginConnections: int(get(l, at('pre_login_connections'))) ?? LIMIT_DEFAULTS.preLoginConnections,
      preLoginPerSource: 0,
      connectionMemory: LIMIT_DEFAULTS.connectionMemory,
    };
    // One address must not take every pre-login slot (docs/operations.md "Connection limits").
    const perSource = int(get(l, at('pre_login_per_source')));
    limits.preLoginPerSource = perSource ?? Math.ceil(limits.preLoginConnections / LIMIT_DEFAULTS.preLoginPerSourceShare);
    if (perSource !== undefined && perSource >= limits.preLoginConnections) {
      warn(at('pre_login_per_source'), `${perSource} is not below pre_login_connections (${limits.preLoginConnections}): one address can take every pre-login slot and lock every other initiator out`);
    }
    const maxIo = size(get(l, at('max_io')), at('max_io'));
    if (maxIo !== undefined) {
      const [lo, hi] = LIMIT_RANGES.maxIo;
      if (maxIo < lo || maxIo > hi || (maxIo & (maxIo - 1)) !== 0) {
        err(at('max_io'), `must be a power of two from ${formatSize(lo)} to ${formatSize(hi)}, not ${maxIo}`);
      } else {
        limits.maxIo = maxIo;
      }
    }
    const icd = size(get(l, at('in_capsule_data')), at('in_capsule_data'));
    if (icd !== undefined) {
      const [lo, hi] = LIMIT_RANGES.inCapsuleData;
      if (icd < lo || icd > hi) err(at('in_capsule_data'), `must be from ${lo} to ${formatSize(hi)}, not ${icd}`);
      else if (icd > limits.maxIo) err(at('in_capsule_data'), `must not exceed max_io (${formatSize(limits.maxIo)})`);
      else limits.inCapsuleData = icd;
    }
    const mem = size(get(l, at('connection_memory')), at('connection_memory'));
    if (mem !== undefined) {
      const [lo, hi] = LIMIT_RANGES.connectionMemory;
      // One credit and the three control buffers (docs/protocol.md §11) must fit.
      const least = Math.max(lo, (1 + CONTROL_RECV_BUFFERS) * (limits.inCapsuleData + 48));
      if (mem < least || mem > hi) err(at('connection_memory'), `must be from ${formatSize(least)} to ${formatSize(hi)}, not ${mem}`);
      else limits.connectionMemory = mem;
    }
    const fits = Math.floor(limits.connectionMemory / Math.max(8192 + 48, limits.inCapsuleData + 48)) - CONTROL_RECV_BUFFERS;
    if (fits < limits.queueDepth) {
      warn(at('connection_memory'), `${formatSize(limits.connectionMemory)} holds receive buffers for ${fits} credits: sessions get at most ${fits}, not queue_depth ${limits.queueDepth}`);
    }
    return limits;
  }
}

function isLoopback(address: string): boolean {
  return address === 'localhost' || address === '::1' || /^127\./.test(address);
}
