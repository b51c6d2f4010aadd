// One set of QoS limits (docs/operations.md "QoS limits") as the state every
// path that admits a command shares: the JavaScript request core (request.ts,
// target/nvme/io.ts) and the native fast path, which reads and charges the
// same memory from the JS thread or a reactor thread without calling into
// JavaScript (native/src/core/qos-bucket.h; docs/architecture.md "QoS buckets").
//
// Each limit is a generic cell rate algorithm (GCRA, the virtual-scheduling
// form of a token bucket): one "theoretical arrival time" (TAT) per limit, in
// CLOCK_MONOTONIC nanoseconds (process.hrtime.bigint() is that clock on Linux,
// as the native side's clock_gettime). A command costing `units` moves the TAT
// by units * 1e9 / rate ns; it may start when TAT - burst <= now, so an idle
// limit lets `burst` worth of commands through at once and the rate after
// that. One 64-bit word per limit, changed by compare-and-swap, is all the
// two languages need to agree on.
//
// Layout: SLOTS limits of three int64 each: [rate per second (0: none),
// burst ns, TAT ns]. The native side reads it by this layout; keep them equal.

export type QosDirection = 'read' | 'write';

/** The limits, in the order of their slots. */
export const QOS_SLOTS = ['read_iops', 'write_iops', 'iops', 'read_bps', 'write_bps', 'bps'] as const;
export type QosSlot = (typeof QOS_SLOTS)[number];
const WORDS = 3;
const RATE = 0;
const BURST = 1;
const TAT = 2;

/** Which slots a read and a write are charged to. */
const APPLIES: Record<QosDirection, readonly number[]> = { read: [0, 2, 3, 5], write: [1, 2, 4, 5] };
/** Slots counted in commands (the rest in bytes). */
const IOPS_SLOTS = 3;

/** Limits as the configuration gives them (config/schema.ts QosLimits): absent is no limit. */
export interface QosRates {
  readonly iops?: number | undefined;
  readonly readIops?: number | undefined;
  readonly writeIops?: number | undefined;
  readonly bps?: number | undefined;
  readonly readBps?: number | undefined;
  readonly writeBps?: number | undefined;
  /** How long, at each limit's rate, an idle bucket lets through at once. */
  readonly burstMs: number;
}

export function monotonicNs(): bigint {
  return process.hrtime.bigint();
}

function rateOf(r: QosRates | null, slot: QosSlot): number {
  if (r === null) return 0;
  switch (slot) {
    case 'read_iops':
      return r.readIops ?? 0;
    case 'write_iops':
      return r.writeIops ?? 0;
    case 'iops':
      return r.iops ?? 0;
    case 'read_bps':
      return r.readBps ?? 0;
    case 'write_bps':
      return r.writeBps ?? 0;
    case 'bps':
      return r.bps ?? 0;
  }
}

export class QosBucket {
  /** The shared state (layout at the top); never replaced, so a fast path that holds it sees every reload. */
  readonly state = new BigInt64Array(QOS_SLOTS.length * WORDS);
  #limited = false;

  constructor(rates: QosRates | null = null) {
    this.set(rates);
  }

  /** Whether any limit is set. */
  get limited(): boolean {
    return this.#limited;
  }

  /** New limits, live (a reload): a limit newly set starts with its burst available; the TATs of the others stay. */
  set(rates: QosRates | null): void {
    let limited = false;
    for (const [i, slot] of QOS_SLOTS.entries()) {
      const rate = Math.floor(rateOf(rates, slot));
      limited ||= rate > 0;
      Atomics.store(this.state, i * WORDS + BURST, BigInt(Math.round((rates?.burstMs ?? 0) * 1e6)));
      Atomics.store(this.state, i * WORDS + RATE, BigInt(rate));
    }
    this.#limited = limited;
  }

  /** The limits now in force, by slot (0: none). */
  rates(): Record<QosSlot, number> {
    return Object.fromEntries(QOS_SLOTS.map((s, i) => [s, Number(Atomics.load(this.state, i * WORDS + RATE))])) as Record<QosSlot, number>;
  }

  /**
   * Charges one command now and returns how many ns it must wait before it
   * starts (0: at once). Charging ahead of the wait keeps the order of
   * waiting commands and the rate exact: each takes the next free time.
   */
  reserve(dir: QosDirection, bytes: number, now: bigint): bigint {
    if (!this.#limited) return 0n;
    const s = this.state;
    let wait = 0n;
    for (const k of APPLIES[dir]) {
      const rate = Atomics.load(s, k * WORDS + RATE);
      if (rate <= 0n) continue;
      const units = k < IOPS_SLOTS ? 1n : BigInt(bytes);
      const cost = (units * 1_000_000_000n) / rate;
      const burst = Atomics.load(s, k * WORDS + BURST);
      const at = k * WORDS + TAT;
      // A reactor thread may charge the same word between the load and the swap: retry then.
      for (;;) {
        const tat = Atomics.load(s, at);
        const start = tat > now ? tat : now;
        if (Atomics.compareExchange(s, at, tat, start + cost) !== tat) continue;
        const w = start - burst - now;
        if (w > wait) wait = w;
        break;
      }
    }
    return wait;
  }
}
