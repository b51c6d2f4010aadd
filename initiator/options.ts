// What connect() accepts, its defaults, and where the secret comes from.
import { hostname } from 'node:os';
import { inspect } from 'node:util';
import { MAX_BUSY_POLL_US } from '../native/busy-poll.js';
import { DEFAULT_TARGET_NAME, MIN_SECRET_LENGTH } from '../protocol/wire/index.js';
import { RblkError } from './errors.js';
import { readSecretFile } from './secret-file.js';
import type { InitiatorTransport } from './transport/transport.js';
import { DEFAULT_PORT, parseRblkUrl } from './url.js';

/** Timeouts, in milliseconds (docs/initiator.md "Timeouts and recovery"). */
export interface TimeoutOptions {
  /** A command without a response this long after it was sent is aborted. Default 30 000; 0 disables. */
  commandMs?: number;
  /** How long each recovery step (ABORT TASK, then LOGICAL UNIT RESET) may take. Default 5 000. */
  abortMs?: number;
  /** How long commands wait for a lost session to come back before failing CONNECTION_LOST. Default 30 000. */
  lossMs?: number;
  /** One connect attempt (reconnect attempts overlap rather than wait for each other). Default 10 000. */
  connectMs?: number;
}

/**
 * Reconnect backoff, with full jitter: the delay before attempt n is drawn
 * uniformly from [0, min(maxDelayMs, initialDelayMs × 2^n)] (docs/initiator.md
 * "Reconnecting and the loss timeout").
 */
export interface ReconnectOptions {
  /** The first window. Default 100. */
  initialDelayMs?: number;
  /** The largest window, so the longest gap between two attempts. Default 1 000. */
  maxDelayMs?: number;
}

/** One gateway of a volume: where a path goes (docs/initiator.md "Multipath"). */
export interface PathAddress {
  address: string;
  port: number;
}

/** Options of {@link connect}. Only `address` (or `paths`) is required. */
export interface ConnectOptions {
  /** Host name or address of the target; the first path when `paths` is given. */
  address?: string;
  /** Default 7471. */
  port?: number;
  /** libfabric provider (`tcp`, `sockets`, `verbs`, ...); default: the first that works. */
  provider?: string;
  /** Default `iqn.2026-11.io.rblk:<hostname>`. */
  initiatorName?: string;
  /** Default DEFAULT_TARGET_NAME, `iqn.2026-11.io.rblk:target`, which rblkd also uses. */
  targetName?: string;
  /**
   * The initiator's HMAC secret (at least 16 bytes). When absent, `secretFile`
   * is read, then the environment variable RBLK_SECRET; with none of them the
   * login is unauthenticated.
   */
  secret?: string;
  /** A file holding the secret; its mode must be 0600 or stricter. */
  secretFile?: string;
  /** The volume `session.open()` opens when given no name (the URL's path). */
  volume?: string;
  /** Commands outstanding per connection (credits asked for). Default 32. */
  queueDepth?: number;
  /** Connections in the session; commands are spread over them. Default 1. */
  connections?: number;
  /** Largest transfer of one command, and the size of each I/O pool chunk. Default 1 MiB. */
  maxIo?: number;
  /**
   * Probe each idle connection with TEST UNIT READY this often, and drop it when
   * the probe gets no answer within the same time. 0 (the default) relies on the
   * target's keep-alive (protocol.md §13) and the fabric's own errors.
   */
  keepAliveMs?: number;
  timeouts?: TimeoutOptions;
  reconnect?: ReconnectOptions;
  /** Retries of a command that got BUSY or TASK SET FULL before it fails BUSY. Default 5. */
  busyRetries?: number;
  /**
   * READ and WRITE on memory from `session.allocate()` go through the native
   * queue: capsule, tag, credits and completion matching in the addon, one
   * call into JavaScript per batch of completions (docs/initiator.md "Fast
   * path"). Default true; false sends every command from JavaScript. Either
   * way the outcome of every command is the same. Transports without a native
   * endpoint (the loop transport) always take the JavaScript path.
   */
  fastPath?: boolean;
  /**
   * Busy polling (docs/initiator.md "Busy polling"): before the event loop
   * sleeps with commands outstanding, spin on each connection's completion
   * queue for up to this many microseconds (0 to 10 000), as SO_BUSY_POLL
   * does for sockets. It trades a core's time for the wake-up of the answer,
   * and pays only when the host has a core to spare for it. Default 0: wait
   * on the fd alone.
   */
  busyPollMicros?: number;
  /** The fabric to use; default libfabric. Tests pass the in-process loop transport. */
  transport?: InitiatorTransport;
  /**
   * Several gateways serving one volume (multipath, docs/initiator.md
   * "Multipath"): every address, in order of preference, as `host[:port]`
   * or `{ address, port }`. Given, it replaces `address` and `port`.
   */
  paths?: readonly (string | { address: string; port?: number })[];
  /** How often each path's identity and ALUA state is checked again, and a returning path taken back. Default 2 000. */
  pathCheckMs?: number;
}

/** A secret that does not show itself in logs, JSON or util.inspect. */
export class SecretValue {
  readonly #value: string;

  constructor(value: string) {
    this.#value = value;
  }

  reveal(): string {
    return this.#value;
  }

  toString(): string {
    return '[secret]';
  }

  toJSON(): string {
    return '[secret]';
  }

  [inspect.custom](): string {
    return '[secret]';
  }
}

/** ConnectOptions with every default applied and the secret looked up. */
export interface ResolvedOptions {
  /** The first path's. */
  address: string;
  port: number;
  /** Every path, first = address:port; one unless several gateways were named. */
  paths: readonly PathAddress[];
  pathCheckMs: number;
  provider: string | undefined;
  initiatorName: string;
  targetName: string;
  secret: SecretValue | undefined;
  volume: string | undefined;
  queueDepth: number;
  connections: number;
  maxIo: number;
  keepAliveMs: number;
  commandTimeoutMs: number;
  abortTimeoutMs: number;
  lossTimeoutMs: number;
  connectTimeoutMs: number;
  reconnectInitialMs: number;
  reconnectMaxMs: number;
  busyRetries: number;
  fastPath: boolean;
  busyPollMicros: number;
  transport: InitiatorTransport | undefined;
}

export const DEFAULTS = {
  port: DEFAULT_PORT,
  queueDepth: 32,
  connections: 1,
  maxIo: 1 << 20,
  commandTimeoutMs: 30_000,
  abortTimeoutMs: 5_000,
  lossTimeoutMs: 30_000,
  connectTimeoutMs: 10_000,
  reconnectInitialMs: 100,
  reconnectMaxMs: 1_000,
  busyRetries: 5,
  pathCheckMs: 2_000,
} as const;

export function defaultInitiatorName(): string {
  return `iqn.2026-11.io.rblk:${hostname()}`;
}

function count(name: string, v: number | undefined, fallback: number, min: number, max: number): number {
  const n = v ?? fallback;
  if (!Number.isSafeInteger(n) || n < min || n > max) throw new RangeError(`${name} ${n} is not an integer in ${min}..${max}`);
  return n;
}

function findSecret(o: ConnectOptions, env: NodeJS.ProcessEnv): SecretValue | undefined {
  const secret = o.secret ?? (o.secretFile !== undefined ? readSecretFile(o.secretFile) : env.RBLK_SECRET);
  if (secret === undefined) return undefined;
  if (Buffer.byteLength(secret) < MIN_SECRET_LENGTH) {
    throw new RblkError('INVALID', `the secret is ${Buffer.byteLength(secret)} bytes; at least ${MIN_SECRET_LENGTH} are needed`);
  }
  return new SecretValue(secret);
}

/**
 * Merges a URL (or options) with overrides and applies the defaults. The URL's
 * fields yield to the explicit options.
 */
export function resolveOptions(target: string | ConnectOptions, overrides: Partial<ConnectOptions> = {}, env: NodeJS.ProcessEnv = process.env): ResolvedOptions {
  const base: ConnectOptions = typeof target === 'string' ? parseRblkUrl(target) : target;
  const o: ConnectOptions = { ...base, ...overrides, timeouts: { ...base.timeouts, ...overrides.timeouts }, reconnect: { ...base.reconnect, ...overrides.reconnect } };
  const paths = resolvePaths(o);
  const t = o.timeouts ?? {};
  const r = o.reconnect ?? {};
  const day = 86_400_000;
  return {
    address: paths[0].address,
    port: paths[0].port,
    paths,
    pathCheckMs: count('pathCheckMs', o.pathCheckMs, DEFAULTS.pathCheckMs, 10, day),
    provider: o.provider,
    initiatorName: o.initiatorName ?? defaultInitiatorName(),
    targetName: o.targetName ?? DEFAULT_TARGET_NAME,
    secret: findSecret(o, env),
    volume: o.volume,
    queueDepth: count('queueDepth', o.queueDepth, DEFAULTS.queueDepth, 2, 4096),
    connections: count('connections', o.connections, DEFAULTS.connections, 1, 64),
    maxIo: count('maxIo', o.maxIo, DEFAULTS.maxIo, 4096, 1 << 30),
    keepAliveMs: count('keepAliveMs', o.keepAliveMs, 0, 0, day),
    commandTimeoutMs: count('timeouts.commandMs', t.commandMs, DEFAULTS.commandTimeoutMs, 0, day),
    abortTimeoutMs: count('timeouts.abortMs', t.abortMs, DEFAULTS.abortTimeoutMs, 1, day),
    lossTimeoutMs: count('timeouts.lossMs', t.lossMs, DEFAULTS.lossTimeoutMs, 0, day),
    connectTimeoutMs: count('timeouts.connectMs', t.connectMs, DEFAULTS.connectTimeoutMs, 1, day),
    reconnectInitialMs: count('reconnect.initialDelayMs', r.initialDelayMs, DEFAULTS.reconnectInitialMs, 1, day),
    reconnectMaxMs: count('reconnect.maxDelayMs', r.maxDelayMs, DEFAULTS.reconnectMaxMs, 1, day),
    busyRetries: count('busyRetries', o.busyRetries, DEFAULTS.busyRetries, 0, 1000),
    fastPath: o.fastPath ?? true,
    busyPollMicros: count('busyPollMicros', o.busyPollMicros, 0, 0, MAX_BUSY_POLL_US),
    transport: o.transport,
  };
}

/** `paths` when given (each `host[:port]`, `[v6]:port` or an object), else `address` and `port`. */
function resolvePaths(o: ConnectOptions): PathAddress[] {
  if (o.paths === undefined || o.paths.length === 0) {
    if (typeof o.address !== 'string' || o.address === '') throw new RangeError('an address is required');
    return [{ address: o.address, port: count('port', o.port, DEFAULTS.port, 0, 65535) }];
  }
  const out = o.paths.map((p, i): PathAddress => {
    if (typeof p === 'string') {
      const u = parseRblkUrl(`rblk://${p}`);
      if (u.paths !== undefined || u.volume !== undefined) throw new RangeError(`paths[${i}] "${p}" is not one host[:port]`);
      return { address: u.address, port: u.port };
    }
    if (typeof p.address !== 'string' || p.address === '') throw new RangeError(`paths[${i}] has no address`);
    return { address: p.address, port: count(`paths[${i}].port`, p.port, DEFAULTS.port, 0, 65535) };
  });
  const seen = new Set<string>();
  for (const p of out) {
    const key = `${p.address}:${p.port}`;
    if (seen.has(key)) throw new RangeError(`paths: ${key} is named twice`);
    seen.add(key);
  }
  return out;
}
