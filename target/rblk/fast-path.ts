// An rblk connection's native fast path (docs/target.md "Fast path"): started
// at login where the transport has one and fast_path is on, each mapped LUN
// bound to its LU's gate (target/scsi/fast-path-gate.ts), its counts moved into
// the LU's and the connection's, and what `rblkd ctl sessions` shows of it.
// The connection keeps the protocol: credits and tags it shares with the fast
// path (sync), and the answer to a command the fast path gave back (failed).
import { getSystemErrorName } from 'node:util';
import { errorText } from '../error-text.js';
import { initiatorNameOf, IO_CLASSES, LATENCY_BUCKETS_S, nexusKey, type LogicalUnit, type Nexus, type SessionIo } from '../scsi/index.js';
import type { ConnectionFastPath, DataBuffer, FastPathStats, TargetConnection } from '../transport/transport.js';
import { noNative, type ConnectionEnvironment, type MappedLun, type NativeInfo, type TargetLogger } from '../connection/environment.js';

const IO_CLASS_READ = IO_CLASSES.indexOf('read');
const IO_CLASS_WRITE = IO_CLASSES.indexOf('write');

/** What the fast path needs of its connection. */
export interface FastPathOwner {
  readonly conn: TargetConnection<DataBuffer>;
  readonly env: ConnectionEnvironment;
  /** The connection's log as it is now. */
  readonly log: TargetLogger;
  meta(): Record<string, unknown>;
  readonly luns: ReadonlyMap<number, MappedLun>;
  readonly nexus: Nexus | null;
  readonly io: SessionIo;
  /** Draining, closing or closed: no LUN runs natively any more. */
  readonly ending: boolean;
  /** A command the fast path gave back: a backend error to answer, or a failed transfer. */
  failed(tag: bigint, lun: number, kind: 'read' | 'write' | 'transfer', errno: number, length: number): void;
}

/** What the fast path is started with: the login's limits. */
export interface FastPathLimits {
  readonly credits: number;
  readonly maxCapsule: number;
  readonly maxTransfer: number;
  readonly maxImmediate: number;
  readonly remoteData: boolean;
}

export class RblkFastPath {
  /** The connection's native fast path, when it has one and fast_path is on. */
  private fast: ConnectionFastPath | null = null;
  /** Per mapped LUN: leaves the LU's fast-path gate. */
  private readonly bindings = new Map<number, () => void>();
  /** Why this connection has no fast path at all (null while it has one, or before login). */
  private off: string | null = null;
  /** What the fast path answered GOOD on this connection, for `rblkd ctl sessions`. */
  private readonly nativeIo = { commands: 0, readBytes: 0, writeBytes: 0 };
  /** Per LUN the fast path has served: its last collect, and the collector's removal. */
  private readonly collectors = new Map<number, () => void>();
  /** takeCounts' scratch: six totals, two histograms, and the commands that waited natively for QoS and their waits. */
  private readonly counts = new Float64Array(8 + 2 * (LATENCY_BUCKETS_S.length + 1));

  constructor(private readonly owner: FastPathOwner) {}

  /** Whether there is a fast path. */
  get running(): boolean {
    return this.fast !== null;
  }

  /** What it has done, or null without one. */
  get stats(): FastPathStats | null {
    return this.fast?.stats ?? null;
  }

  /** At login: starts the fast path, if fast_path is on and the transport has one; without it everything runs in JavaScript. */
  start(limits: FastPathLimits): void {
    const o = this.owner;
    if (o.env.fastPath === false) {
      this.off = 'fast_path is off in the configuration';
      return;
    }
    if (o.conn.startFastPath === undefined) {
      this.off = `the ${o.conn.provider} transport has no fast path`;
      return;
    }
    try {
      this.fast = o.conn.startFastPath({
        credits: limits.credits,
        maxCapsule: limits.maxCapsule,
        maxTransfer: limits.maxTransfer,
        maxImmediate: limits.maxImmediate,
        // §12.1 on the fast path as on the JS path (command.ts): the same condition.
        remoteData: limits.remoteData,
        latencyBuckets: LATENCY_BUCKETS_S,
      });
    } catch (e) {
      // Everything still works without it, through JavaScript.
      o.log.warn(`no native fast path for this session: ${errorText(e)}`);
      this.off = `the fast path could not start: ${errorText(e)}`;
      this.fast = null;
    }
    if (this.fast === null) return;
    this.fast.onFailed = (tag, lun, kind, errno, length) => o.failed(tag, lun, kind, errno, length);
    // Native requests that outlive the connection (a slow device, a cluster away): their blocks are not known here,
    // so each volume the fast path served waits for them whole (docs/target.md "A lost connection's commands").
    this.fast.onOrphans = (settled) => {
      const lus = new Set([...o.luns.values()].filter(({ lu }) => lu.backend.fastPathTarget !== undefined).map(({ lu }) => lu));
      for (const lu of lus) lu.fenceUntil(settled);
      if (lus.size > 0) o.log.info(`connection lost with native requests still in the backend: ${[...lus].map((lu) => lu.name).join(', ')} wait for them`, o.meta());
    };
  }

  /** The fast path's view of the connection's share of the credits: it takes nothing while JS holds a command. */
  sync(heldByJs: number, credits: number): void {
    this.fast?.setCounters(heldByJs, credits);
  }

  /** Commands running on the fast path own their tags too. */
  hasTag(tag: bigint): boolean {
    return this.fast?.hasTag(tag) ?? false;
  }

  /** Commands running on the fast path, which count against the credits. */
  inFlight(): number {
    return this.fast?.inFlight() ?? 0;
  }

  /** Binds each mapped LUN whose backend the fast path can reach to its LU's gate (target/scsi/fast-path-gate.ts). */
  bind(): void {
    this.unbind();
    const fast = this.fast;
    const o = this.owner;
    if (fast === null || o.nexus === null) return;
    const nexus = o.nexus;
    const key = nexusKey(nexus);
    for (const [lun, { lu, access }] of o.luns) {
      if (lu.backend.fastPathTarget === undefined) continue;
      const allow = (): void => {
        const target = lu.backend.fastPathTarget ?? null;
        if (target === null || o.ending) return fast.revoke(lun);
        fast.setLun(lun, {
          fd: target.fd,
          align: target.align,
          blockSize: lu.blockSize,
          blocks: lu.blocks,
          maxBlocks: Math.min(lu.limits.maxTransferBlocks, Math.floor(o.env.limits.maxIo / lu.blockSize)),
          readable: true,
          // SWP is set only by MODE SELECT, which holds the gate: allow() runs again after it.
          writable: access === 'rw' && !lu.readOnly && !lu.modes.swp,
          writeThrough: !lu.modes.wce,
          // Always both buckets, limited or not: a reload changes them in place (target/scsi/qos.ts).
          qos: lu.qos.nativeState(initiatorNameOf(nexus)),
          ...(target.rbd !== undefined ? { rbdApi: target.rbd.api, rbdImage: target.rbd.image } : {}),
        });
      };
      this.bindings.set(lun, lu.fastPath.bind({ nexusKey: key, allow, revoke: () => fast.revoke(lun), idle: () => fast.idle(lun) }));
      // The fast path's GOOD answers count where the request core counts
      // (target/scsi/request/io-stats.ts). Kept until the connection has ended,
      // so that commands answered after the LUN was revoked are counted too.
      if (!this.collectors.has(lun)) {
        const collect = (): void => this.collect(fast, lun, lu);
        const remove = lu.stats.addCollector(collect);
        this.collectors.set(lun, () => {
          collect();
          remove();
        });
      }
    }
  }

  /**
   * The connection is closing: commands parked natively for their QoS turn end
   * unrun (the initiator reissues them on its next connection), before unbind's
   * revoke would start them on a connection that is going away.
   */
  dropParked(): void {
    const n = this.fast?.dropParked() ?? 0;
    if (n > 0) this.owner.log.info(`connection closing: ${n} command${n === 1 ? '' : 's'} waiting natively for QoS dropped unrun`, this.owner.meta());
  }

  /** Every LUN leaves its gate. */
  unbind(): void {
    for (const unbind of this.bindings.values()) unbind();
    this.bindings.clear();
  }

  /** Moves what the fast path counted so far into the counters (before they are read). */
  collectAll(): void {
    for (const lun of this.collectors.keys()) {
      const m = this.owner.luns.get(lun);
      if (this.fast !== null && m !== undefined) this.collect(this.fast, lun, m.lu);
    }
  }

  /** The connection has ended and nothing of it runs natively any more: the last counts, then no collectors. */
  finishCounts(): void {
    for (const done of this.collectors.values()) done();
    this.collectors.clear();
  }

  /** Moves what the fast path counted on one LUN into the LU's and the connection's counters. */
  private collect(fast: ConnectionFastPath, lun: number, lu: LogicalUnit): void {
    const out = this.counts;
    const taken = fast.takeCounts(lun, out);
    const nb = LATENCY_BUCKETS_S.length + 1;
    // Parked for their QoS turn on the fast path: counted as the request core counts its waits (target/scsi/qos.ts).
    if (out[2 * nb + 6]! > 0) lu.qos.recordWaits(out[2 * nb + 6]!, out[2 * nb + 7]!);
    if (taken === 0) return;
    for (const d of [0, 1]) {
      const ops = out[3 * d]!;
      if (ops === 0) continue;
      lu.stats.recordBatch(d === 0 ? IO_CLASS_READ : IO_CLASS_WRITE, ops, out[3 * d + 1]!, 0, out[3 * d + 2]!, out.subarray(6 + d * nb, 6 + (d + 1) * nb));
    }
    this.owner.io.recordBatch(out[0]! + out[3]!, out[1]!, out[4]!);
    this.nativeIo.commands += out[0]! + out[3]!;
    this.nativeIo.readBytes += out[1]!;
    this.nativeIo.writeBytes += out[4]!;
  }

  /**
   * The commands the fast path answered GOOD, as collected into the counters
   * (finishCounts collects the last of them): still there once the native
   * fast path has closed with its connection, when its own stats read zero.
   */
  get servedCommands(): number {
    return this.nativeIo.commands;
  }

  /** Waits for every fast-path command of this connection (each LUN revoked first). */
  idle(): Promise<void> {
    const fast = this.fast;
    if (fast === null) return Promise.resolve();
    return Promise.all([...this.owner.luns.keys()].map((lun) => (fast.revoke(lun), fast.idle(lun)))).then(() => undefined);
  }

  /** Revokes one LUN and waits for its fast-path commands; null without a fast path. */
  settled(lun: number): Promise<void> | null {
    if (!this.fast) return null;
    this.fast.revoke(lun);
    return this.fast.idle(lun);
  }

  /** Whether the fast path serves this connection, why not where it does not, and what it did. */
  info(): NativeInfo {
    const fast = this.fast;
    const o = this.owner;
    if (fast === null) return noNative(this.off ?? (o.nexus === null ? 'not logged in' : 'no fast path'));
    const stats = fast.stats;
    const why: string[] = [];
    let served = 0;
    for (const [lun, { lu }] of o.luns) {
      const reason = this.blocker(lu);
      if (reason === null) served++;
      else why.push(`LUN ${lun} (${lu.name}): ${reason}`);
    }
    if (o.luns.size === 0) why.push('no LUN mapped');
    return {
      active: served > 0,
      reason: why.length > 0 ? why.join('; ') : null,
      reactor: stats.reactor >= 0 ? stats.reactor : null,
      commands: stats.taken,
      readBytes: this.nativeIo.readBytes,
      qosDeferred: stats.qosDeferred,
      qosParked: stats.qosParked,
      qosReleased: stats.qosReleased,
      writeBytes: this.nativeIo.writeBytes,
    };
  }

  /** Why this LUN's READs and WRITEs go to JavaScript now, or null when they run natively (the conditions of bind's allow and the LU's gate). */
  private blocker(lu: LogicalUnit): string | null {
    const target = lu.backend.fastPathTarget;
    if (target === undefined) return 'its backend has no native path';
    if (target === null) return 'its backend cannot take native I/O now (fenced, or being reopened)';
    if (this.owner.ending) return 'the connection is ending';
    const nexus = this.owner.nexus;
    return nexus === null ? 'not logged in' : lu.fastPath.blocker(nexusKey(nexus));
  }
}

/** An errno's name (EIO) for a log line or a sense mapping (target/scsi/sense-map.ts). */
export function errnoName(errno: number): string {
  try {
    return getSystemErrorName(-errno);
  } catch {
    return `errno ${errno}`;
  }
}
