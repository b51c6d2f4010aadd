// The options every command that talks to a target shares, and the one way
// the CLI logs in: a URL names the target and volume, flags refine it, and
// the secret comes from --secret-file or RBLK_SECRET, never from argv.
import { isAbsolute, resolve } from 'node:path';
import type { NvmeSession } from '../nvme/session.js';
import type { NvmeVolume } from '../nvme/volume.js';
import type { ConnectOptions } from '../options.js';
import type { Session } from '../session.js';
import { DEFAULT_PORT, parseRblkUrl, type RblkUrl } from '../url.js';
import type { Volume } from '../volume.js';
import { describeSense } from '../../protocol/scsi/sense.js';
import { UsageError } from './cli-error.js';
import { explainConnectFailure, resolveHost } from './connect-failure.js';
import { CliLogger } from './logger.js';
import { parseDuration } from './size.js';

export const connectionOptions = {
  provider: { type: 'string', requiresArg: true, describe: 'libfabric provider (verbs, tcp, sockets, ...); overrides ?provider= in the URL' },
  'initiator-name': { type: 'string', requiresArg: true, describe: 'this initiator\'s name (default iqn.2026-11.io.rblk:<hostname>)' },
  'target-name': { type: 'string', requiresArg: true, describe: 'the target\'s name (default iqn.2026-11.io.rblk:target)' },
  'secret-file': { type: 'string', requiresArg: true, describe: 'file holding this initiator\'s secret (mode 0600); else $RBLK_SECRET' },
  connections: { type: 'number', requiresArg: true, describe: 'connections in the session (default 1)' },
  'connect-timeout': { type: 'string', requiresArg: true, default: '10s', describe: 'give up a connection attempt after this long' },
  'fast-path': { type: 'string', choices: ['on', 'off'], requiresArg: true, describe: 'READ and WRITE through the native queue (default on; docs/initiator.md "Fast path")' },
  'busy-poll-us': { type: 'string', requiresArg: true, describe: 'spin up to this many µs (0 to 10000) before sleeping with I/O outstanding; costs a core (default 0; docs/initiator.md "Busy polling")' },
} as const;

export interface ConnectionArgs {
  provider?: string;
  'initiator-name'?: string;
  'target-name'?: string;
  'secret-file'?: string;
  connections?: number;
  'connect-timeout': string;
  'fast-path'?: string;
  'busy-poll-us'?: string;
  /** The global --debug: the session's life on stderr (traceSession). */
  debug?: boolean;
}

/** Parses an rblk:// URL; a malformed one is a usage error. */
export function parseUrl(text: string): RblkUrl {
  try {
    return parseRblkUrl(text);
  } catch (e) {
    throw new UsageError(e instanceof Error ? e.message : String(e));
  }
}

/** The volume the URL names; a URL without one is a usage error for volume commands. */
export function volumeOf(text: string): string {
  const v = parseUrl(text).volume;
  if (v === undefined) throw new UsageError(`"${text}" names no volume (expected rblk://host[:port]/VOLUME)`);
  return v;
}

/**
 * `discover` takes HOST, HOST:PORT, [V6ADDR]:PORT, a bare IPv6 address, or an
 * rblk:// URL without a volume, and makes it a URL.
 */
export function hostToUrl(text: string): string {
  if (text.startsWith('rblk://')) return text;
  if (text === '' || /[/?#@\s]/.test(text)) throw new UsageError(`"${text}" is not HOST[:PORT]`);
  const colons = text.split(':').length - 1;
  // Two or more colons without brackets: an IPv6 address on its own.
  if (colons >= 2 && !text.startsWith('[')) return `rblk://[${text}]`;
  return `rblk://${text}`;
}

/** Connection options from the flags; only those given, so the URL's own values stay. */
export function connectOptions(a: ConnectionArgs): Partial<ConnectOptions> {
  const o: Partial<ConnectOptions> = { timeouts: { connectMs: parseDuration(a['connect-timeout'], '--connect-timeout') } };
  if (a.provider !== undefined) o.provider = a.provider;
  if (a['initiator-name'] !== undefined) o.initiatorName = a['initiator-name'];
  if (a['target-name'] !== undefined) o.targetName = a['target-name'];
  if (a['secret-file'] !== undefined) o.secretFile = a['secret-file'];
  if (a.connections !== undefined) o.connections = a.connections;
  if (a['fast-path'] !== undefined) o.fastPath = a['fast-path'] === 'on';
  if (a['busy-poll-us'] !== undefined) o.busyPollMicros = busyPollArg(a['busy-poll-us']);
  return o;
}

// The range is connect()'s to check (initiator/options.ts; its RangeError is a
// usage error too): the CLI does not load native/ to learn it (test/cli/lazy-load).
function busyPollArg(text: string): number {
  if (!/^\d{1,9}$/.test(text)) throw new UsageError(`--busy-poll-us ${text}: expected a whole number of microseconds`);
  return Number(text);
}

/** The flags again, for a helper process (mount); paths made absolute, the secret still only in a file or the environment. */
export function connectionArgv(a: ConnectionArgs): string[] {
  const out: string[] = ['--connect-timeout', a['connect-timeout']];
  if (a.provider !== undefined) out.push('--provider', a.provider);
  if (a['initiator-name'] !== undefined) out.push('--initiator-name', a['initiator-name']);
  if (a['target-name'] !== undefined) out.push('--target-name', a['target-name']);
  if (a['secret-file'] !== undefined) out.push('--secret-file', isAbsolute(a['secret-file']) ? a['secret-file'] : resolve(a['secret-file']));
  if (a.connections !== undefined) out.push('--connections', String(a.connections));
  if (a['fast-path'] !== undefined) out.push('--fast-path', a['fast-path']);
  if (a['busy-poll-us'] !== undefined) out.push('--busy-poll-us', a['busy-poll-us']);
  return out;
}

/**
 * Logs in to the target the URL names. The host is resolved here, once, so a
 * DNS failure is reported as one; a refused or unreachable connection is said
 * in words (connect-failure.ts).
 */
export async function openSession(url: string, a: ConnectionArgs, extra: Partial<ConnectOptions> = {}): Promise<Session> {
  const parsed = parseUrl(url);
  const options = { ...connectOptions(a), ...extra };
  const address = await resolveHost(parsed.address, parsed.port);
  // Several gateways (rblk://h1,h2/vol): each host is resolved the same way (docs/initiator.md "Multipath").
  const paths = parsed.paths && (await Promise.all(parsed.paths.map(async (p) => ({ address: await resolveHost(p.address, p.port), port: p.port }))));
  // Loaded on first use: the session brings the native addon, which --help and usage errors do without.
  const { connect } = await import('../index.js');
  let session: Session;
  try {
    session = await connect({ ...parsed, address, ...(paths ? { paths } : {}) }, options);
  } catch (e) {
    throw explainConnectFailure(e, parsed.address, address, parsed.port);
  }
  if (a.debug === true) traceSession(session, new CliLogger('debug'), `${parsed.address}:${parsed.port}${address === parsed.address ? '' : ` (${address})`}`);
  return session;
}

/**
 * --debug for every command that logs in (docs/cli.md): the login, and then
 * what the library reports as events, one stderr line each: state changes,
 * recovery steps, unit attentions absorbed, path changes.
 */
function traceSession(session: Session, log: CliLogger, at: string): void {
  const up = session.connections.filter((c) => c.up);
  log.debug(`logged in at ${at}: ${up.length} of ${session.connections.length} connection(s) up, provider ${up[0]?.provider ?? 'none'}, max transfer ${session.maxTransfer} bytes`);
  session.on('state', (state, previous) => log.debug(`session ${previous} -> ${state}`));
  session.on('recovery', (e) => log.debug(`recovery: ${e.action} on connection ${e.connection}${e.lun !== undefined ? `, LUN ${e.lun}` : ''}${e.tag !== undefined ? `, tag ${e.tag}` : ''}: ${e.reason}`));
  session.on('unitAttention', (lun, sense) => log.debug(`unit attention on LUN ${lun}: ${describeSense(sense)} (absorbed)`));
  session.on('path', (p) => log.debug(`path ${p.index} ${p.address}:${p.port}: ${p.state}, ALUA ${p.alua}${p.reason !== undefined ? ` (${p.reason})` : ''}`));
}

/** The session and the URL's volume, closed (logged out) after fn, whether it succeeds or not. */
export async function withVolume<T>(url: string, a: ConnectionArgs, fn: (vol: Volume, session: Session) => Promise<T>, extra: Partial<ConnectOptions> = {}): Promise<T> {
  volumeOf(url);
  const session = await openSession(url, a, extra);
  try {
    const vol = await session.open();
    try {
      return await fn(vol, session);
    } finally {
      vol.close();
      // Reconnects are ridden out, commands reissued (docs/initiator.md "Reconnecting and the loss timeout"); say how many there were.
      if (session.reconnects > 0) process.stderr.write(`rblk: the session reconnected ${session.reconnects} time(s) and reissued what was in flight\n`);
    }
  } finally {
    await session.close();
  }
}

/** `host:port` as a URL would show it. */
export function hostPort(u: RblkUrl): string {
  const host = u.address.includes(':') ? `[${u.address}]` : u.address;
  return u.port === DEFAULT_PORT ? host : `${host}:${u.port}`;
}

/** `nvme+tcp://...`, told apart without loading the NVMe host (docs/performance.md "Command start-up"). */
export function isNvmeTarget(url: string): boolean {
  return /^nvme\+tcp:\/\//i.test(url);
}

/** A volume of either protocol, with its session: what info, read, write and bench run on. */
export type VolumeAt = { protocol: 'rblk'; vol: Volume; session: Session } | { protocol: 'nvme'; vol: NvmeVolume; session: NvmeSession };

/** The rblk flags an NVMe/TCP session has no use for: refused rather than ignored. */
const RBLK_ONLY = ['provider', 'initiator-name', 'target-name', 'secret-file', 'fast-path', 'busy-poll-us'] as const;

/**
 * An NVMe/TCP session for `nvme+tcp://host[:port]/<NQN>[?nsid=N&...]`
 * (docs/nvme.md "The rblk library as an NVMe/TCP host"): --connections is
 * its I/O queues, --connect-timeout its connect timeout, `queueDepth` each
 * queue's entries; the host NQN comes from the URL's hostnqn= or the
 * machine. A malformed URL or an rblk-only flag is a usage error.
 */
export async function openNvmeSession(url: string, a: ConnectionArgs, extra: { queueDepth?: number } = {}): Promise<NvmeSession> {
  const given = RBLK_ONLY.filter((k) => a[k] !== undefined);
  if (given.length > 0) throw new UsageError(`${given.map((k) => `--${k}`).join(', ')}: not for an nvme+tcp:// URL (the host NQN goes in the URL as ?hostnqn=)`);
  const { parseNvmeUrl } = await import('../nvme/url.js');
  let parsed;
  try {
    parsed = parseNvmeUrl(url);
  } catch (e) {
    throw new UsageError(e instanceof Error ? e.message : String(e));
  }
  const { DISCOVERY_NQN } = await import('../../protocol/nvme/command.js');
  if (parsed.subnqn === DISCOVERY_NQN) throw new UsageError(`"${url}" names no subsystem (expected nvme+tcp://host[:port]/<subsystem NQN>[?nsid=N]; rblk discover lists them)`);
  const { NvmeSession } = await import('../nvme/session.js');
  const session = await NvmeSession.open(parsed, {
    timeouts: { connectMs: parseDuration(a['connect-timeout'], '--connect-timeout') },
    ...(a.connections !== undefined ? { queues: a.connections } : {}),
    ...(extra.queueDepth !== undefined ? { queueDepth: extra.queueDepth } : {}),
  });
  if (a.debug === true) {
    const log = new CliLogger('debug');
    log.debug(`connected to ${session.subnqn} as ${session.hostnqn}: ${session.paths.map((p) => `${p.address}:${p.port} ${p.state}, controller ${p.cntlid}, ${p.ioQueues} I/O queue(s)`).join('; ')}; max transfer ${session.maxTransfer} bytes`);
    session.on('pathDown', (p, why) => log.debug(`path ${p.address}:${p.port} down: ${why}`));
    session.on('reconnect', (p) => log.debug(`path ${p.address}:${p.port} reconnected, controller ${p.cntlid}`));
  }
  return session;
}

/**
 * withVolume for an rblk:// or an nvme+tcp:// URL: the namespace of an NVMe
 * URL is its nsid= (1 without one). Closed after fn, as withVolume does.
 */
export async function withAnyVolume<T>(url: string, a: ConnectionArgs, fn: (v: VolumeAt) => Promise<T>, extra: { queueDepth?: number } = {}): Promise<T> {
  if (!isNvmeTarget(url)) return withVolume(url, a, (vol, session) => fn({ protocol: 'rblk', vol, session }), extra);
  const session = await openNvmeSession(url, a, extra);
  try {
    const vol = await session.open();
    try {
      return await fn({ protocol: 'nvme', vol, session });
    } finally {
      vol.close();
      if (session.reconnects > 0) process.stderr.write(`rblk: the session reconnected ${session.reconnects} time(s) and reissued what was in flight\n`);
    }
  } finally {
    await session.close();
  }
}
