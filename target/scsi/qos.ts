// A volume's QoS limits (docs/operations.md "QoS limits"): one bucket for the
// volume, shared by every initiator, and one per initiator name that an
// `initiators:` entry matches (the first match, as in the ACL, config/acl.ts).
// A READ or WRITE waits for both; it is never failed for want of tokens.
// Every path charges the same buckets: the request core before a command
// takes a buffer (request.ts), NVMe's I/O before it reaches the backend
// (target/nvme/io.ts), and the native fast path from the state the buckets
// share with it (qos-bucket.ts), handing a command it may not start yet to
// JavaScript, which waits here.
import { globMatch } from '../../config/acl.js';
import { monotonicNs, QosBucket, type QosDirection, type QosRates, type QosSlot } from './qos-bucket.js';

export interface QosInitiatorRates extends QosRates {
  /** An initiator name, or a glob with * and ?. */
  readonly initiator: string;
}

/** A volume's QoS as the configuration gives it: the volume's limits and the per-initiator entries. */
export interface QosSettings extends QosRates {
  readonly initiators: readonly QosInitiatorRates[];
}

/** What `rblkd ctl volumes` and the metrics show of a volume's QoS. */
export interface QosReport {
  /** The volume's limits by slot (0: none); absent slots are not reported. */
  limits: Partial<Record<QosSlot, number>>;
  burstMs: number;
  /** Initiator entries, in configuration order. */
  initiators: { initiator: string; limits: Partial<Record<QosSlot, number>> }[];
  /** Commands that had to wait, and the sum of their waits, since the volume was opened. */
  throttledCommands: number;
  throttledSeconds: number;
}

function nonZero(r: Record<QosSlot, number>): Partial<Record<QosSlot, number>> {
  return Object.fromEntries(Object.entries(r).filter(([, v]) => v > 0)) as Partial<Record<QosSlot, number>>;
}

/** The grain of the waits' wake-ups, ms. */
const BATCH_MS = 2;

export class VolumeQos {
  readonly volume = new QosBucket();
  readonly #initiators = new Map<string, QosBucket>();
  #settings: QosSettings | null = null;
  /** Whether any bucket, the volume's or an initiator's, has a limit: without one, admit() costs a property read. */
  #active = false;
  throttledCommands = 0;
  /** Sum of the waits, seconds (rblk_volume_qos_throttled_seconds_total). */
  throttledSeconds = 0;
  /**
   * Commands waiting for their turn, by the end of the BATCH_MS slot their
   * turn falls in (ms on performance.now()'s clock): one timer per slot.
   */
  readonly #slots = new Map<number, { timer: NodeJS.Timeout; resolves: (() => void)[] }>();

  constructor(settings: QosSettings | null = null) {
    this.configure(settings);
  }

  get active(): boolean {
    return this.#active;
  }

  get settings(): QosSettings | null {
    return this.#settings;
  }

  /** New limits, live: the buckets are changed in place, so every session and fast path that holds them sees the change at its next command. */
  configure(settings: QosSettings | null): void {
    this.#settings = settings;
    this.volume.set(settings);
    for (const [name, b] of this.#initiators) b.set(this.#ruleFor(name));
    this.#active = this.volume.limited || (settings?.initiators.length ?? 0) > 0;
  }

  #ruleFor(initiator: string): QosInitiatorRates | null {
    return this.#settings?.initiators.find((e) => globMatch(e.initiator, initiator)) ?? null;
  }

  /** The initiator's own bucket (unlimited when no entry matches it; a reload may give it limits later). */
  initiatorBucket(initiator: string): QosBucket {
    let b = this.#initiators.get(initiator);
    if (b === undefined) {
      b = new QosBucket(this.#ruleFor(initiator));
      this.#initiators.set(initiator, b);
    }
    return b;
  }

  /** The shared state the native fast path charges for this initiator's commands (native/src/core/qos-bucket.h). */
  nativeState(initiator: string): BigInt64Array[] {
    return [this.volume.state, this.initiatorBucket(initiator).state];
  }

  /**
   * Charges a READ or WRITE of `bytes`; null when it may start at once,
   * else a promise that resolves when it may. Never rejects.
   */
  admit(initiator: string, dir: QosDirection, bytes: number): Promise<void> | null {
    if (!this.#active) return null;
    const now = monotonicNs();
    const a = this.volume.reserve(dir, bytes, now);
    const b = this.initiatorBucket(initiator).reserve(dir, bytes, now);
    const wait = a > b ? a : b;
    if (wait <= 0n) return null;
    const ms = Number(wait) / 1e6;
    this.throttledCommands++;
    this.throttledSeconds += ms / 1000;
    // Rounded up to the end of its slot: a timer that fired early would start
    // the command before its turn. Every command whose turn falls in the same
    // slot starts on the same wake-up, as the fast path's parked ones do
    // (native/src/core/fast-path-qos.cc kQosBatchNs): at 1,000 IOPS that is
    // one timer and one loop turn per two commands instead of per command.
    // The rate does not move, since each was charged above, on arrival.
    const due = Math.ceil((performance.now() + ms) / BATCH_MS) * BATCH_MS;
    return new Promise((resolve) => {
      let slot = this.#slots.get(due);
      if (slot === undefined) {
        slot = { timer: setTimeout(() => this.#release(due), Math.ceil(due - performance.now())), resolves: [] };
        this.#slots.set(due, slot);
      }
      slot.resolves.push(resolve);
    });
  }

  /** Commands that waited for their turn elsewhere (parked on the native fast path) and their waits, seconds. */
  recordWaits(commands: number, seconds: number): void {
    this.throttledCommands += commands;
    this.throttledSeconds += seconds;
  }

  #release(due: number): void {
    const slot = this.#slots.get(due);
    if (slot === undefined) return;
    this.#slots.delete(due);
    clearTimeout(slot.timer);
    for (const resolve of slot.resolves) resolve();
  }

  /**
   * The volume is closing: every command still waiting goes on at once (its
   * session has ended or been aborted by now), so that a wait at a low limit,
   * seconds long, never keeps a stopping rblkd up.
   */
  close(): void {
    for (const due of [...this.#slots.keys()]) this.#release(due);
  }

  report(): QosReport {
    const s = this.#settings;
    return {
      limits: nonZero(this.volume.rates()),
      burstMs: s?.burstMs ?? 0,
      initiators: (s?.initiators ?? []).map((e) => ({ initiator: e.initiator, limits: nonZero(new QosBucket(e).rates()) })),
      throttledCommands: this.throttledCommands,
      throttledSeconds: this.throttledSeconds,
    };
  }
}
