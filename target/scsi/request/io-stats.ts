// Per-volume and per-session I/O counters, kept where every command ends: the
// request core (request.ts) records each command once, when it answers or its
// transfer fails. They cost plain number increments on the data path: fixed
// fields, a latency histogram in a fixed Float64Array, a class looked up by
// opcode in a fixed table, no allocation per command. `rblkd ctl volumes` and
// the Prometheus endpoint read them (docs/operations.md "Metrics").
//
// A fast path that completes READ and WRITE outside the request core (native
// code) must report into the same object, by batch if it likes: one
// `recordBatch` per class with the summed ops, bytes, errors and its own
// bucket counts over LATENCY_BUCKETS_S, so that nothing reads counters from
// two places.

/** How a command is counted, as Linux's diskstats splits them (read, write, discard, flush), and the rest. */
export type IoClass = 'read' | 'write' | 'discard' | 'flush' | 'other';
export const IO_CLASSES: readonly IoClass[] = ['read', 'write', 'discard', 'flush', 'other'];

const READ = 0;
const WRITE = 1;
const DISCARD = 2;
const FLUSH = 3;
const OTHER = 4;

/** Opcode → class index; everything not named here is "other" (INQUIRY, TEST UNIT READY...). */
const CLASS_OF_OPCODE = new Uint8Array(256).fill(OTHER);
for (const op of [0x08, 0x28, 0xa8, 0x88]) CLASS_OF_OPCODE[op] = READ; // READ(6/10/12/16)
// WRITE(6/10/12/16), WRITE AND VERIFY(10/12/16), COMPARE AND WRITE, WRITE SAME(10/16)
for (const op of [0x0a, 0x2a, 0xaa, 0x8a, 0x2e, 0xae, 0x8e, 0x89, 0x41, 0x93, 0x9c]) CLASS_OF_OPCODE[op] = WRITE;
CLASS_OF_OPCODE[0x42] = DISCARD; // UNMAP
for (const op of [0x35, 0x91]) CLASS_OF_OPCODE[op] = FLUSH; // SYNCHRONIZE CACHE(10/16)

export function classOfOpcode(opcode: number): number {
  return CLASS_OF_OPCODE[opcode & 0xff]!;
}

/**
 * Upper bounds of the latency buckets, seconds (Prometheus `le`): 50 µs to
 * 10 s, about three per decade, as node exporters' disk histograms use.
 */
export const LATENCY_BUCKETS_S: readonly number[] = [
  0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
];
const BUCKETS = LATENCY_BUCKETS_S.length;

/** One class's counters. `buckets[i]` counts commands with latency ≤ LATENCY_BUCKETS_S[i] and > the one before; `buckets[BUCKETS]` the rest (+Inf). */
export class ClassCounters {
  ops = 0;
  bytes = 0;
  errors = 0;
  /** Sum of latencies, seconds. */
  seconds = 0;
  readonly buckets = new Float64Array(BUCKETS + 1);

  /** Cumulative counts per bucket, +Inf last: what a Prometheus histogram exposes. */
  cumulative(): number[] {
    const out: number[] = [];
    let n = 0;
    for (let i = 0; i <= BUCKETS; i++) out.push((n += this.buckets[i]!));
    return out;
  }

  toJSON(): { ops: number; bytes: number; errors: number; seconds: number } {
    return { ops: this.ops, bytes: this.bytes, errors: this.errors, seconds: this.seconds };
  }
}

/** A volume's counters, one set per class. */
export class IoStats {
  readonly #classes: readonly ClassCounters[] = IO_CLASSES.map(() => new ClassCounters());
  /** Fast paths that count for themselves, asked for their counts before anyone reads these (recordBatch). */
  readonly #collectors = new Set<() => void>();

  /** The counters by class index, with every fast path's counts added first. */
  get classes(): readonly ClassCounters[] {
    this.collect();
    return this.#classes;
  }

  /** A source of batched counts (a session's native fast path): asked by collect(); the returned call removes it. */
  addCollector(collect: () => void): () => void {
    this.#collectors.add(collect);
    return () => this.#collectors.delete(collect);
  }

  /** Adds what every fast path has counted since it was last asked. */
  collect(): void {
    for (const c of this.#collectors) c();
  }

  /** One command: its class index (classOfOpcode), bytes moved over the wire, whether it failed, its latency in ms. */
  record(cls: number, bytes: number, error: boolean, ms: number): void {
    const c = this.#classes[cls]!;
    c.ops++;
    c.bytes += bytes;
    if (error) c.errors++;
    const s = ms / 1000;
    c.seconds += s;
    let i = 0;
    while (i < BUCKETS && s > LATENCY_BUCKETS_S[i]!) i++;
    c.buckets[i]!++;
  }

  /** Many commands at once, from a fast path that counts for itself (see the top of this file). */
  recordBatch(cls: number, ops: number, bytes: number, errors: number, seconds: number, buckets: ArrayLike<number>): void {
    const c = this.#classes[cls]!;
    c.ops += ops;
    c.bytes += bytes;
    c.errors += errors;
    c.seconds += seconds;
    for (let i = 0; i <= BUCKETS && i < buckets.length; i++) c.buckets[i]! += buckets[i]!;
  }

  byClass(): Record<IoClass, { ops: number; bytes: number; errors: number; seconds: number }> {
    const classes = this.classes;
    return Object.fromEntries(IO_CLASSES.map((k, i) => [k, classes[i]!.toJSON()])) as Record<IoClass, ReturnType<ClassCounters['toJSON']>>;
  }
}

/** A session's counters: commands and bytes each way (`rblkd ctl sessions`). */
export class SessionIo {
  ops = 0;
  readBytes = 0;
  writeBytes = 0;
  errors = 0;

  /** Commands a fast path answered GOOD, counted by batch. */
  recordBatch(ops: number, readBytes: number, writeBytes: number): void {
    this.ops += ops;
    this.readBytes += readBytes;
    this.writeBytes += writeBytes;
  }

  record(cls: number, bytes: number, error: boolean): void {
    this.ops++;
    if (cls === READ) this.readBytes += bytes;
    else if (cls === WRITE) this.writeBytes += bytes;
    if (error) this.errors++;
  }
}
