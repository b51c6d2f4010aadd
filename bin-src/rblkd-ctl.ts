// `rblkd ctl`: the administrator's view of a running rblkd over its control
// socket (docs/operations.md "rblkd ctl"). Each verb prints a table, or the
// daemon's answer as JSON with --json. Exit 0; 1 when rblkd could not be
// reached, refused the request, or refused the reload; 64 for a bad command line.
import { readFileSync } from 'node:fs';
import { dirname, resolve as resolvePath } from 'node:path';
import { load } from 'js-yaml';
import yargs from 'yargs';
import { formatSize } from '../config/size.js';
import { explainUnknown } from '../initiator/cli/suggest.js';
import { DEFAULT_CONFIG_PATH, DEFAULT_CONTROL_SOCKET } from '../config/paths.js';
import { ControlError, controlRequest } from '../target/daemon/control-client.js';
import type { ControlCommand } from '../target/daemon/control-server.js';
import type { ReloadResult } from '../target/daemon/reload-result.js';
import type { SessionInfo } from '../target/connection/environment.js';
import type { NewVolume, VolumeEdit } from '../config/volume-files.js';

const EX_USAGE = 64;
/** How long `--copy` waits for its answer: a day, as long as copying a volume may take. */
const COPY_ANSWER_MS = 24 * 3600 * 1000;

interface CtlArgs {
  verb: ControlCommand;
  session?: string;
  /** The verb's positional arguments and flags, as the control socket takes them. */
  args?: string[];
  socket?: string;
  config: string;
  json: boolean;
  /** reload --force: remove volumes that sessions can still see. */
  force: boolean;
  /** create, resize, delete: the drop-in file change, then a reload (config/volume-files.ts, loaded only for these). */
  edit?: (vf: typeof import('../config/volume-files.js')) => VolumeEdit;
  /** delete: the command that removes it under its sessions, for a refusal to name (the reload's own would do nothing once the file is back). */
  forceCommand?: string;
}

/** --socket, else control.socket from the config file (if it can be read), else the default path. */
function socketPath(a: CtlArgs): string {
  if (a.socket !== undefined) return a.socket;
  try {
    const doc = load(readFileSync(a.config, 'utf8')) as { control?: { socket?: unknown } } | null;
    const p = doc?.control?.socket;
    if (typeof p === 'string' && p !== '') return resolvePath(dirname(a.config), p);
  } catch {
    // No readable config: the default path.
  }
  return DEFAULT_CONTROL_SOCKET;
}

function table(rows: string[][]): string {
  if (rows.length === 0) return '';
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return `${rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  ')).join('\n')}\n`;
}

function bytes(n: number): string {
  return n === 0 ? '0' : formatSize(n);
}

/** How a snapshot or clone was made (target/daemon/snapshots.ts methodText). */
function methodName(m: string): string {
  return m === 'reflink' ? 'reflink' : m === 'rbd' ? 'rbd snapshot' : 'full copy';
}

type Counters = Record<string, { ops: number; bytes: number; errors: number; seconds: number }>;

function text(verb: ControlCommand, result: unknown): string {
  switch (verb) {
    case 'status': {
      const r = result as Record<string, unknown> & { listeners: { name: string; sessions: number; connections: number }[]; metrics: { address: string; port: number } | null; alua?: { group: number; state: string; peers: { group: number; state: string }[] } | null };
      const lines = [
        `rblkd ${String(r.version)}, pid ${String(r.pid)}, ${String(r.state)} since ${String(r.since)} (${String(r.uptimeSeconds)} s)`,
        `config:    ${String(r.config)}`,
        `target:    ${String(r.targetName)}`,
        `volumes:   ${String(r.volumes)}`,
        `sessions:  ${String(r.sessions)}`,
        ...r.listeners.map((l) => `listener:  ${l.name} (${l.sessions} sessions, ${l.connections} connections)`),
        `metrics:   ${r.metrics ? `http://${r.metrics.address}:${r.metrics.port}/metrics` : 'off'}`,
        ...(r.alua ? [`alua:      group ${r.alua.group} ${r.alua.state}${r.alua.peers.map((p) => `; peer group ${p.group} ${p.state}`).join('')}`] : []),
      ];
      return `${lines.join('\n')}\n`;
    }
    case 'sessions': {
      const sessions = result as SessionInfo[];
      const rows = sessions.map((s) => [
        s.id,
        s.initiator ?? '-',
        s.peer,
        s.provider,
        String(s.credits),
        String(s.inFlight),
        String(s.ops),
        bytes(s.readBytes),
        bytes(s.writeBytes),
        s.native.active ? (s.native.reactor !== null ? `yes (reactor ${s.native.reactor})` : 'yes') : 'no',
        String(s.native.commands),
        s.loggedInAt ?? s.since,
      ]);
      if (rows.length === 0) return 'no sessions\n';
      // Why a session (or one of its LUNs) is not served natively, under the table.
      const why = sessions.filter((s) => s.native.reason !== null).map((s) => `${s.id}: not native: ${s.native.reason}`);
      return table([['ID', 'INITIATOR', 'PEER', 'PROVIDER', 'CREDITS', 'IN-FLIGHT', 'COMMANDS', 'READ', 'WRITTEN', 'NATIVE', 'NATIVE-CMDS', 'SINCE'], ...rows]) + why.map((l) => `${l}\n`).join('');
    }
    case 'volumes': {
      const vols = result as { name: string; lun: number; size: number; backend: string; path: string | null; engine: string | null; readOnly: boolean; counters: Counters; qos?: QosInfo }[];
      if (vols.length === 0) return 'no volumes\n';
      const rows = vols.map((v) => {
        const c = v.counters;
        const errors = Object.values(c).reduce((n, x) => n + x.errors, 0);
        return [
          v.name,
          String(v.lun),
          bytes(v.size),
          `${v.backend}${v.path ? ` ${v.path}` : ''}${v.readOnly ? ' (ro)' : ''}`,
          v.engine ?? '-',
          String(c.read?.ops ?? 0),
          bytes(c.read?.bytes ?? 0),
          String(c.write?.ops ?? 0),
          bytes(c.write?.bytes ?? 0),
          String(c.flush?.ops ?? 0),
          String(errors),
        ];
      });
      // QoS (docs/operations.md "QoS limits"), under the table, for the volumes that have limits.
      const qos = vols.flatMap((v) => (v.qos !== undefined && (Object.keys(v.qos.limits).length > 0 || v.qos.initiators.length > 0) ? [qosLine(v.name, v.qos)] : []));
      return table([['NAME', 'LUN', 'SIZE', 'BACKEND', 'ENGINE', 'READS', 'READ', 'WRITES', 'WRITTEN', 'FLUSHES', 'ERRORS'], ...rows]) + qos.map((l) => `${l}\n`).join('');
    }
    case 'kick': {
      const r = result as { kicked: string; initiator: string | null; peer: string };
      return `session ${r.kicked} (${r.initiator ?? 'not logged in'}, ${r.peer}) logged out\n`;
    }
    case 'reload': {
      const r = result as ReloadResult;
      if (!r.applied) return `reload refused, still serving the previous configuration:\n${r.errors.map((e) => `  ${e}`).join('\n')}\n`;
      const parts = [
        ['added', r.added],
        ['removed', r.removed],
        ['changed', r.changed],
        ['resized', r.resized],
        ['listeners added', r.listenersAdded],
        ['listeners removed', r.listenersRemoved],
      ] as const;
      const said = parts.filter(([, v]) => v.length > 0).map(([k, v]) => `${k}: ${v.join(', ')}`);
      // What --force removed under sessions (docs/operations.md "Removing a volume in use").
      for (const u of r.inUse ?? []) said.push(`removed under ${u.sessions.length} session(s): ${u.volume} (LUN ${u.lun}): ${u.sessions.map((s) => `${s.id} ${s.initiator ?? '-'} ${s.peer}`).join(', ')}`);
      const errors = r.errors.map((e) => `error: ${e}`);
      return `${['reloaded', ...said, ...errors].join('\n')}\n`;
    }
    case 'snapshot': {
      const r = result as { volume: string; name: string; path: string; size: number; method: string; pausedMs: number };
      return `snapshot ${r.volume}@${r.name} taken: ${r.path} (${methodName(r.method)}, ${bytes(r.size)}, I/O paused ${r.pausedMs} ms)\n`;
    }
    case 'snapshots': {
      const r = result as { volume: string; snapshots: { name: string; path: string; size: number; created: string }[] };
      if (r.snapshots.length === 0) return `volume ${r.volume} has no snapshots\n`;
      return table([['NAME', 'SIZE', 'CREATED', 'PATH'], ...r.snapshots.map((s) => [s.name, bytes(s.size), s.created, s.path])]);
    }
    case 'delete-snapshot': {
      const r = result as { volume: string; name: string; path: string };
      return `snapshot ${r.volume}@${r.name} deleted (${r.path})\n`;
    }
    case 'clone': {
      const r = result as { volume: string; snapshot: string; path: string; method: string; size: number };
      return `${r.volume}@${r.snapshot} cloned to ${r.path} (${methodName(r.method)}, ${bytes(r.size)}); serve it as a volume of its own (${r.method === 'rbd' ? 'rbd: with that image' : 'path: that file'})\n`;
    }
    case 'flatten': {
      const r = result as { volume: string; path: string };
      return `volume ${r.volume} flattened: ${r.path} no longer depends on its parent snapshot\n`;
    }
  }
}

interface QosInfo {
  limits: Record<string, number>;
  burstMs: number;
  initiators: { initiator: string; limits: Record<string, number> }[];
  throttledCommands: number;
  throttledSeconds: number;
  rates: { seconds: number; iops: number; readIops: number; writeIops: number; bps: number; readBps: number; writeBps: number };
}

/** One volume's limits, what it runs at now and what waited: `NAME: qos iops 1000, burst 100 ms; now 998 IOPS ...`. */
function qosLine(name: string, q: QosInfo): string {
  const limit = (l: Record<string, number>): string =>
    Object.entries(l)
      .map(([k, v]) => (k.endsWith('bps') ? `${k} ${bytes(v)}/s` : `${k} ${v}`))
      .join(', ') || 'none';
  const per = q.initiators.map((e) => `; initiator ${e.initiator}: ${limit(e.limits)}`).join('');
  const r = q.rates;
  // A rate is rarely a whole number of KiB: one decimal of the largest unit that fits.
  const perSecond = (n: number): string => {
    const units = ['bytes', 'KiB', 'MiB', 'GiB'];
    let i = 0;
    while (i < units.length - 1 && n >= 1024 ** (i + 1)) i++;
    return `${i === 0 ? n : (n / 1024 ** i).toFixed(1)} ${units[i]}/s`;
  };
  return (
    `${name}: qos ${limit(q.limits)}, burst ${q.burstMs} ms${per}; now ${r.iops} IOPS (${r.readIops} read, ${r.writeIops} write), ${perSecond(r.bps)} over ${r.seconds} s; ` +
    `throttled ${q.throttledCommands} commands, ${q.throttledSeconds.toFixed(1)} s waited`
  );
}

export const VERBS = ['status', 'sessions', 'volumes', 'kick', 'reload', 'snapshot', 'snapshots', 'delete-snapshot', 'clone', 'flatten', 'create', 'resize', 'delete', 'qos'] as const;
const OPTIONS = ['json', 'socket', 'config', 'force', 'copy', 'size', 'path', 'memory', 'rbd', 'read-only', 'lun', 'thin', 'iops', 'read-iops', 'write-iops', 'bps', 'read-bps', 'write-bps', 'burst-ms', 'clear', 'help'] as const;
const VALUED = ['--socket', '--config', '--size', '--path', '--rbd', '--lun', '--iops', '--read-iops', '--write-iops', '--bps', '--read-bps', '--write-bps', '--burst-ms'];

/**
 * yargs' usage errors said as `rblk` says them (docs/cli.md "Errors say what
 * happened"): a mistyped verb or option gets the nearest one, a missing
 * session id says where ids come from. Anything else comes back unchanged.
 */
export function explainUsage(msg: string, argv: readonly string[]): string {
  const first = argv.find((a, i) => !a.startsWith('-') && !VALUED.includes(argv[i - 1] ?? ''));
  if (/^Not enough non-option arguments/.test(msg)) {
    if (first === 'kick') return 'kick needs a SESSION id (rblkd ctl sessions lists them)';
    if (first === 'snapshot' || first === 'delete-snapshot') return `${first} needs VOLUME NAME (rblkd ctl volumes lists the volumes)`;
    if (first === 'snapshots') return 'snapshots needs a VOLUME (rblkd ctl volumes lists them)';
    if (first === 'flatten') return 'flatten needs a VOLUME, an rbd clone (rblkd ctl volumes lists them)';
    if (first === 'clone') return 'clone needs VOLUME@SNAP NEW (rblkd ctl snapshots VOLUME lists the snapshots)';
    if (first === 'create') return 'create needs a NAME, and --path, --rbd or --memory';
    if (first === 'resize') return 'resize needs VOLUME SIZE (rblkd ctl volumes lists the volumes)';
    if (first === 'delete') return 'delete needs a VOLUME (rblkd ctl volumes lists them)';
    if (first === 'qos') return 'qos needs a VOLUME and a limit (--iops N, --bps SIZE, ...) or --clear';
  }
  return explainUnknown(msg, argv, VERBS, OPTIONS, VALUED) ?? msg;
}

/** create's options as the YAML's keys. */
function newVolume(a: { name?: unknown; size?: unknown; path?: unknown; rbd?: unknown; memory?: unknown; 'read-only'?: unknown; thin?: unknown; lun?: unknown }, VolumeEditError: new (m: string, usage?: boolean) => Error): NewVolume {
  const sources = [a.path, a.rbd, a.memory === true ? true : undefined].filter((x) => x !== undefined).length;
  if (sources !== 1) throw new VolumeEditError('create needs exactly one of --path, --rbd POOL/IMAGE and --memory', true);
  let rbd: NewVolume['rbd'];
  if (typeof a.rbd === 'string') {
    const m = /^([^/\s]+)\/([^/\s]+)$/.exec(a.rbd);
    if (!m) throw new VolumeEditError(`--rbd ${a.rbd}: expected POOL/IMAGE`, true);
    rbd = { pool: m[1]!, image: m[2]! };
  }
  return {
    name: String(a.name),
    ...(typeof a.size === 'string' ? { size: a.size } : {}),
    ...(typeof a.path === 'string' ? { path: resolvePath(a.path) } : {}),
    ...(rbd ? { rbd } : {}),
    ...(a.memory === true ? { memory: true } : {}),
    ...(a['read-only'] === true ? { read_only: true } : {}),
    ...(a.thin === true ? { thin: true } : {}),
    ...(typeof a.lun === 'number' ? { lun: a.lun } : {}),
  };
}

function parse(argv: string[]): CtlArgs {
  let verb: ControlCommand | undefined;
  let args: string[] = [];
  let edit: CtlArgs['edit'];
  let forceCommand: string | undefined;
  const p = yargs(argv)
    .scriptName('rblkd ctl')
    .usage('$0 <status|sessions|volumes|kick SESSION|reload [--force]|snapshot VOLUME NAME|snapshots VOLUME|delete-snapshot VOLUME NAME|clone VOLUME@SNAP NEW|flatten VOLUME|create NAME ...|resize VOLUME SIZE|qos VOLUME --iops N ...|delete VOLUME [--force]> [--json] [--socket PATH]\n\nTalks to a running rblkd over its control socket; create, resize and delete write volumes_dir, then reload.')
    .command('status', 'the daemon: version, uptime, listeners, counts', {}, () => {
      verb = 'status';
    })
    .command('sessions', 'every session: initiator, peer address, provider, credits, in-flight, bytes, since when', {}, () => {
      verb = 'sessions';
    })
    .command('volumes', 'every volume: size, backend, engine, counters', {}, () => {
      verb = 'volumes';
    })
    .command('kick <session>', 'log a session out (the initiator sees a lost connection)', (y) => y.positional('session', { type: 'string', describe: 'the ID that sessions lists', demandOption: true }), () => {
      verb = 'kick';
    })
    .command(
      'reload',
      'what SIGHUP does; prints what changed, or why it was refused',
      (y) => y.option('force', { type: 'boolean', default: false, describe: 'remove volumes even while logged-in sessions can see them (they get LOGICAL UNIT NOT SUPPORTED)' }),
      () => {
        verb = 'reload';
      },
    )
    .command(
      'snapshot <volume> <name>',
      "a crash-consistent snapshot: <file>@<name> beside a file volume's file (a reflink; refused where the filesystem has none unless --copy), or an rbd volume's pool/image@<name>",
      (y) => y.positional('volume', { type: 'string', demandOption: true }).positional('name', { type: 'string', demandOption: true }),
      (a) => {
        verb = 'snapshot';
        args = [String(a.volume), String(a.name), ...(a.copy === true ? ['--copy'] : [])];
      },
    )
    .command('snapshots <volume>', "a volume's snapshots: name, size, creation time, file", (y) => y.positional('volume', { type: 'string', demandOption: true }), (a) => {
      verb = 'snapshots';
      args = [String(a.volume)];
    })
    .command(
      'delete-snapshot <volume> <name>',
      "remove a snapshot's file (refused while a volume serves it)",
      (y) => y.positional('volume', { type: 'string', demandOption: true }).positional('name', { type: 'string', demandOption: true }),
      (a) => {
        verb = 'delete-snapshot';
        args = [String(a.volume), String(a.name)];
      },
    )
    .command(
      'clone <snapshot> <new>',
      'a writable copy of VOLUME@SNAP: NEW is a path (a bare name goes beside the volume\'s file; a reflink unless --copy is needed), or for rbd a new image in the pool',
      (y) => y.positional('snapshot', { type: 'string', demandOption: true, describe: 'VOLUME@SNAP' }).positional('new', { type: 'string', demandOption: true }),
      (a) => {
        verb = 'clone';
        args = [String(a.snapshot), String(a.new), ...(a.copy === true ? ['--copy'] : [])];
      },
    )
    .command('flatten <volume>', "an rbd clone made independent of its parent snapshot (librbd's flatten), while it keeps serving", (y) => y.positional('volume', { type: 'string', demandOption: true }), (a) => {
      verb = 'flatten';
      args = [String(a.volume)];
    })
    .command(
      'create <name>',
      'a new volume in its own file of volumes_dir (volumes.d beside the config), then a reload; undone if refused',
      (y) =>
        y
          .positional('name', { type: 'string', demandOption: true })
          .option('size', { type: 'string', requiresArg: true, describe: 'the size, e.g. 10GiB (a new file is made that large)' })
          .option('path', { type: 'string', requiresArg: true, describe: 'a file or block device' })
          .option('rbd', { type: 'string', requiresArg: true, describe: 'POOL/IMAGE of the Ceph cluster' })
          .option('memory', { type: 'boolean', describe: 'a volume in memory (tests and demos)' })
          .option('read-only', { type: 'boolean', describe: 'serve it read-only' })
          .option('thin', { type: 'boolean', describe: 'thin provisioned (UNMAP deallocates)' })
          .option('lun', { type: 'number', requiresArg: true, describe: 'its LUN (default: the lowest free one, remembered)' }),
      (a) => {
        verb = 'reload';
        edit = (vf) => vf.planCreate(String(a.config), newVolume(a, vf.VolumeEditError));
      },
    )
    .command('resize <volume> <size>', "a volume's new size in its volumes_dir file, then a reload; undone if refused", (y) => y.positional('volume', { type: 'string', demandOption: true }).positional('size', { type: 'string', demandOption: true }), (a) => {
      verb = 'reload';
      edit = (vf) => vf.planResize(String(a.config), String(a.volume), String(a.size));
    })
    .command(
      'qos <volume>',
      "set a volume's QoS limits in its volumes_dir file (--iops, --read-iops, --write-iops, --bps, --read-bps, --write-bps, --burst-ms; --clear removes them), then a reload",
      (y) =>
        y
          .positional('volume', { type: 'string', demandOption: true })
          .option('iops', { type: 'number', requiresArg: true })
          .option('read-iops', { type: 'number', requiresArg: true })
          .option('write-iops', { type: 'number', requiresArg: true })
          .option('bps', { type: 'string', requiresArg: true, describe: 'bytes per second, e.g. 100MiB' })
          .option('read-bps', { type: 'string', requiresArg: true })
          .option('write-bps', { type: 'string', requiresArg: true })
          .option('burst-ms', { type: 'number', requiresArg: true })
          .option('clear', { type: 'boolean', describe: 'remove the qos key' })
          // yargs reads `--iops abc` as NaN: a bad command line (exit 64), not a config the reload refuses.
          .check((a) => {
            for (const k of ['iops', 'read-iops', 'write-iops', 'burst-ms'] as const) {
              if (a[k] !== undefined && !Number.isFinite(a[k])) throw new Error(`--${k} needs a number`);
            }
            return true;
          }),
      (a) => {
        verb = 'reload';
        const change: Record<string, number | string> = {};
        for (const k of ['iops', 'read-iops', 'write-iops', 'bps', 'read-bps', 'write-bps', 'burst-ms'] as const) {
          const val = a[k];
          if (val !== undefined) change[k.replace(/-/g, '_')] = val;
        }
        edit = (vf) => vf.planQos(String(a.config), String(a.volume), a.clear === true ? null : change);
      },
    )
    .command('delete <volume>', 'remove a volume from volumes_dir, then a reload (--force: even while sessions see it); undone if refused', (y) => y.positional('volume', { type: 'string', demandOption: true }).option('force', { type: 'boolean', default: false, describe: 'remove it even while logged-in sessions can see it' }), (a) => {
      verb = 'reload';
      edit = (vf) => vf.planDelete(String(a.config), String(a.volume));
      forceCommand = `rblkd ctl delete ${String(a.volume)} --force`;
    })
    .option('copy', { type: 'boolean', default: false, describe: 'snapshot, clone: a full copy where the filesystem cannot reflink' })
    .option('json', { type: 'boolean', default: false, describe: "print the daemon's answer as JSON" })
    .option('socket', { type: 'string', requiresArg: true, describe: `the control socket (default: control.socket from --config, else ${DEFAULT_CONTROL_SOCKET})` })
    .option('config', { type: 'string', default: DEFAULT_CONFIG_PATH, requiresArg: true, describe: 'the config: where control.socket and volumes_dir are read from' })
    .demandCommand(1, 1, 'name one of status, sessions, volumes, kick, reload, snapshot, snapshots, delete-snapshot, clone, flatten, create, resize, delete, qos')
    .strict()
    .help()
    .alias('help', 'h')
    .version(false)
    .fail((msg, err) => {
      process.stderr.write(`rblkd ctl: ${explainUsage(msg ?? err?.message ?? 'invalid command line', argv)} (see rblkd ctl --help)\n`);
      process.exit(EX_USAGE);
    });
  const parsed = p.parseSync();
  return {
    verb: verb!,
    ...(typeof parsed.session === 'string' ? { session: parsed.session } : {}),
    args,
    ...(parsed.socket !== undefined ? { socket: parsed.socket } : {}),
    config: parsed.config,
    json: parsed.json,
    force: parsed.force === true,
    ...(edit ? { edit } : {}),
    ...(forceCommand !== undefined ? { forceCommand } : {}),
  };
}

/**
 * create, resize, delete: change the drop-in file, check the whole config as rblkd would,
 * then reload; a refused check or reload puts the file back. With no daemon to reach,
 * the change stays and applies at rblkd's next start or reload.
 */
async function runEdit(a: CtlArgs, path: string, plan: NonNullable<CtlArgs['edit']>): Promise<number> {
  const vf = await import('../config/volume-files.js');
  const { loadConfig } = await import('../config/loader.js');
  const { ConfigError } = await import('../config/config-error.js');
  const { FORCE_RELOAD } = await import('../target/daemon/reload-result.js');
  let undo: () => void;
  let change: VolumeEdit;
  try {
    change = plan(vf);
    undo = vf.applyEdit(change);
  } catch (e) {
    process.stderr.write(`rblkd ctl: ${e instanceof Error ? e.message : String(e)}\n`);
    return e instanceof vf.VolumeEditError && e.usage ? EX_USAGE : 1;
  }
  try {
    loadConfig(a.config);
  } catch (e) {
    undo();
    process.stderr.write(`rblkd ctl: not changed, the config would be refused:\n${e instanceof ConfigError ? e.message : String(e)}\n`);
    return 1;
  }
  let result: ReloadResult;
  try {
    result = (await controlRequest(path, 'reload', a.force ? ['force'] : [])) as ReloadResult;
  } catch (e) {
    process.stdout.write(`${change.summary}; rblkd did not answer (${e instanceof ControlError ? e.message : String(e)}): it applies at rblkd's next start or reload\n`);
    return 0;
  }
  if (!result.applied) undo();
  let said = text('reload', result);
  if (!result.applied && a.forceCommand !== undefined) said = said.replaceAll(FORCE_RELOAD, a.forceCommand);
  process.stdout.write(a.json ? `${JSON.stringify({ change: result.applied ? change.summary : null, reload: result }, null, 2)}\n` : `${result.applied ? `${change.summary}\n` : 'not changed:\n'}${said}`);
  return result.applied ? 0 : 1;
}

export async function runCtl(argv: string[]): Promise<number> {
  const a = parse(argv);
  const path = socketPath(a);
  if (a.edit) return runEdit(a, path, a.edit);
  let result: unknown;
  try {
    const args = a.session !== undefined ? [a.session] : a.verb === 'reload' && a.force ? ['force'] : (a.args ?? []);
    // A full copy (snapshot or clone --copy) runs as long as the volume is large: no answer timeout to speak of.
    // So does a flatten: it copies whatever of the parent the clone has not written.
    result = await controlRequest(path, a.verb, args, args.includes('--copy') || a.verb === 'flatten' ? COPY_ANSWER_MS : undefined);
  } catch (e) {
    process.stderr.write(`rblkd ctl: ${e instanceof ControlError ? e.message : String(e)}\n`);
    return 1;
  }
  process.stdout.write(a.json ? `${JSON.stringify(result, null, 2)}\n` : text(a.verb, result));
  if (a.verb === 'reload' && !(result as ReloadResult).applied) return 1;
  return 0;
}
