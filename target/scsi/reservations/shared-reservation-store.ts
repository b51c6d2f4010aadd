// A ReservationStore (reservation-store.ts) in a record every gateway of the
// volume shares (target/backend/backend.ts SharedRecord; for rbd, a RADOS
// object next to the image: docs/backends.md "rbd"). docs/architecture.md
// "Reservation stores" has the protocol:
//  - PERSISTENT RESERVE OUT computes the next state from this gateway's copy
//    and writes it by compare-and-swap on the record's version; a writer that
//    lost the race reads the record again and computes again;
//  - the winner publishes (a notify to every watcher) and completes the
//    command only when every live gateway has acknowledged, which each does
//    after it has read the new state: when the command completes, no gateway
//    still checks I/O against the old one;
//  - a gateway whose watch broke may have missed a change: until it has
//    watched and read again, `current` is false and the commands a
//    reservation governs are answered ABORTED COMMAND (scsi-command.ts).
// The unit attentions a change raises (REGISTRATIONS PREEMPTED, ...) travel in
// the record, tagged with the version that raised them, so that the gateway
// serving the preempted nexus raises them even when it skipped a version.
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { SharedRecord } from '../../backend/backend.js';
import { isPrType } from '../../../protocol/scsi/opcodes.js';
import type { ScsiLogger } from '../logger.js';
import type { Outcome } from '../outcome.js';
import { EMPTY_PR_STATE, PR_NOTICE_CODES, type PrChange, type PrNotice, type PrState, type Registrant } from './pr-state.js';
import type { PrListener, ReservationStore } from './reservation-store.js';

/** Format of the record's JSON; a gateway refuses a record of another. */
const FORMAT = 1;
/** Unit attentions of the last this many versions stay in the record. */
const KEEP_EVENTS = 64;
/** Compare-and-swap attempts before PERSISTENT RESERVE OUT gives up with BUSY. */
const MAX_ATTEMPTS = 64;
/** Between attempts to watch and read again after the watch broke. */
const RECOVER_DELAY_MS = 500;

interface PrEvent {
  readonly version: number;
  readonly nexusKey: string;
  readonly code: string;
}

interface Decoded {
  /** Set when the record is created; a new epoch means it was removed and made again. */
  readonly epoch: string;
  readonly version: number;
  readonly state: PrState;
  readonly events: readonly PrEvent[];
}

function encode(epoch: string, s: PrState, events: readonly PrEvent[]): Buffer {
  return Buffer.from(
    JSON.stringify({
      format: FORMAT,
      epoch,
      generation: s.generation,
      aptpl: s.aptpl,
      registrants: s.registrants.map((r) => ({
        nexus: r.nexusKey,
        initiator: r.initiator,
        ...(r.targetPort === undefined ? {} : { port: r.targetPort }),
        key: r.key.toString(16),
      })),
      reservation: s.reservation ? { holder: s.reservation.holder, type: s.reservation.type, scope: s.reservation.scope } : null,
      events: events.map((e) => ({ version: e.version, nexus: e.nexusKey, code: e.code })),
    }),
  );
}

function fail(where: string, why: string): never {
  throw Object.assign(new Error(`${where} is not a reservation record rblk can read: ${why} (docs/operations.md "Persistent reservations")`), { code: 'EINVAL' });
}

function text(v: unknown, where: string, what: string): string {
  if (typeof v !== 'string') fail(where, `${what} is not a string`);
  return v;
}

function decode(where: string, version: string, data: Buffer): Decoded {
  const v = Number(version);
  if (!Number.isSafeInteger(v) || v < 1) fail(where, `version "${version}"`);
  let j: Record<string, unknown>;
  try {
    j = JSON.parse(data.toString('utf8')) as Record<string, unknown>;
  } catch (e) {
    fail(where, e instanceof Error ? e.message : String(e));
  }
  if (j.format !== FORMAT) fail(where, `format ${String(j.format)}, not ${FORMAT}`);
  const generation = j.generation;
  if (typeof generation !== 'number' || !Number.isInteger(generation) || generation < 0 || generation > 0xffffffff) fail(where, 'generation');
  if (!Array.isArray(j.registrants) || !Array.isArray(j.events)) fail(where, 'registrants or events');
  const registrants: Registrant[] = (j.registrants as Record<string, unknown>[]).map((r) => {
    const key = BigInt(`0x${text(r.key, where, 'a key')}`);
    return {
      nexusKey: text(r.nexus, where, 'a nexus'),
      initiator: text(r.initiator, where, 'an initiator'),
      ...(r.port === undefined ? {} : { targetPort: text(r.port, where, 'a port') }),
      key,
    };
  });
  let reservation: PrState['reservation'];
  const res = j.reservation as Record<string, unknown> | null;
  if (res !== null) {
    const type = res.type;
    if (typeof type !== 'number' || !isPrType(type) || res.scope !== 0) fail(where, 'reservation type or scope');
    reservation = { holder: text(res.holder, where, 'the holder'), type, scope: 0 };
  }
  const events = (j.events as Record<string, unknown>[]).map((e) => ({
    version: Number(e.version),
    nexusKey: text(e.nexus, where, 'an event nexus'),
    code: text(e.code, where, 'an event code'),
  }));
  const state: PrState = { generation, registrants, ...(reservation ? { reservation } : {}), aptpl: j.aptpl === true };
  return { epoch: text(j.epoch, where, 'the epoch'), version: v, state, events };
}

function notices(events: readonly PrEvent[], after: number): PrNotice[] {
  const out: PrNotice[] = [];
  for (const e of events) {
    if (e.version <= after) continue;
    const code = PR_NOTICE_CODES.find((c) => c.name === e.code);
    if (code !== undefined) out.push({ nexusKey: e.nexusKey, code });
  }
  return out;
}

export class SharedReservationStore implements ReservationStore {
  readonly #record: SharedRecord;
  readonly #log: ScsiLogger;
  #copy: Decoded | undefined;
  #current = false;
  #listener: PrListener | null = null;
  /** PERSISTENT RESERVE OUTs of this gateway run one at a time (others race by CAS). */
  #updates: Promise<unknown> = Promise.resolve();
  #recovering: Promise<void> | undefined;
  /** Commands waiting for the state to be current again (whenCurrent). */
  readonly #waiters = new Set<(current: boolean) => void>();
  #closed = false;

  private constructor(record: SharedRecord, log: ScsiLogger) {
    this.#record = record;
    this.#log = log;
  }

  /** Watches the record, creating it when there is none, and reads it. */
  static async open(record: SharedRecord, log: ScsiLogger): Promise<SharedReservationStore> {
    const s = new SharedReservationStore(record, log);
    // Watched before it is read, so that no change falls between the two.
    // A record that does not exist yet cannot be watched: make it first.
    await s.#readOrCreate();
    await record.watch({ changed: (ack) => s.#changed(ack), broken: (e) => s.#broken(e) });
    s.#adopt(await s.#readOrCreate());
    s.#current = true;
    return s;
  }

  get state(): PrState {
    return this.#copy?.state ?? EMPTY_PR_STATE;
  }

  get current(): boolean {
    return this.#current;
  }

  /**
   * A command the reservation governs waits for the state to be read again,
   * as long as one operation on the record may take (SharedRecord.timeoutMs,
   * the same bound as the volume's I/O), before it is answered ABORTED COMMAND.
   * librados reports a broken watch up to a few seconds after the cluster is
   * back (its objecter ticks every 5 s), and the re-read then takes a round
   * trip: a command that waits rides out such a blip, where failing at once
   * made an initiator's quick retries all fail too (seen in
   * test/daemon/rbd.test.ts); while the cluster stays away it fails in the time
   * its I/O would have.
   */
  whenCurrent(): Promise<boolean> {
    if (this.#current) return Promise.resolve(true);
    if (this.#closed) return Promise.resolve(false);
    return new Promise((resolve) => {
      const done = (current: boolean): void => {
        clearTimeout(timer);
        this.#waiters.delete(done);
        resolve(current);
      };
      const timer = setTimeout(() => done(false), this.#record.timeoutMs);
      timer.unref();
      this.#waiters.add(done);
    });
  }

  /** Settles every waiting command: true once the state is current, false at close. */
  #wake(current: boolean): void {
    for (const w of [...this.#waiters]) w(current);
  }

  /** The version of the state this gateway holds (for logs and tests). */
  get version(): number {
    return this.#copy?.version ?? 0;
  }

  listen(fn: PrListener | null): void {
    this.#listener = fn;
  }

  update(compute: (s: PrState) => PrChange): Promise<Outcome> {
    const run = this.#updates.then(() => this.#update(compute));
    this.#updates = run.catch(() => undefined);
    return run;
  }

  close(): Promise<void> {
    this.#closed = true;
    this.#listener = null;
    this.#wake(false);
    // The backend's close ends the watch (rbd: rbd-record.cc, with the image).
    return Promise.resolve();
  }

  async #update(compute: (s: PrState) => PrChange): Promise<Outcome> {
    for (let attempt = 1; ; attempt++) {
      // Fenced: compute from what the record holds now (the CAS guards the rest;
      // a cluster that is away fails the command rather than hanging it).
      if (!this.#current && attempt === 1) this.#adopt(await this.#readOrCreate());
      const base = this.#copy;
      if (base === undefined) throw new Error(`${this.#record.where}: not read yet`);
      const change = compute(base.state);
      if (change.next === undefined) return change.outcome;
      const version = base.version + 1;
      const events = [
        ...base.events.filter((e) => e.version > version - KEEP_EVENTS),
        ...change.notices.map((n) => ({ version, nexusKey: n.nexusKey, code: n.code.name })),
      ];
      let won: boolean;
      try {
        won = await this.#record.write(String(base.version), String(version), encode(base.epoch, change.next, events));
      } catch (e) {
        // The write may or may not have landed: read again before anything relies on the copy.
        this.#fence(e);
        throw e;
      }
      if (won) {
        this.#adopt({ epoch: base.epoch, version, state: change.next, events });
        // Completes once every live gateway has read it (each acks after reading).
        if (!(await this.#record.publish())) {
          this.#log.warn('a gateway did not acknowledge a reservation change; it re-reads when its watch reports the break', {
            record: this.#record.where,
            version,
          });
        }
        return change.outcome;
      }
      if (attempt >= MAX_ATTEMPTS) {
        throw Object.assign(new Error(`${this.#record.where}: ${MAX_ATTEMPTS} compare-and-swap attempts lost to other writers`), { code: 'EBUSY' });
      }
      // Another gateway wrote first (or the record is gone): start again from what is there now.
      this.#adopt(await this.#readOrCreate());
    }
  }

  /** The record as it is, made anew (empty) when it does not exist. */
  async #readOrCreate(): Promise<Decoded> {
    for (;;) {
      const r = await this.#record.read();
      if (r !== null) return decode(this.#record.where, r.version, r.data);
      const epoch = randomBytes(8).toString('hex');
      // Losing this race means another gateway made it: read theirs.
      await this.#record.write(null, '1', encode(epoch, EMPTY_PR_STATE, []));
    }
  }

  /** Takes a state read or written; an older version of the same record changes nothing. */
  #adopt(d: Decoded): void {
    const mine = this.#copy;
    if (mine !== undefined && mine.epoch === d.epoch && d.version <= mine.version) return;
    // The first read raises nothing; a record made anew starts counting again.
    const raised = mine !== undefined && mine.epoch === d.epoch ? notices(d.events, mine.version) : [];
    if (mine !== undefined && mine.epoch !== d.epoch) this.#log.warn('the reservation record was made anew; its state replaces this gateway\'s', { record: this.#record.where });
    this.#copy = d;
    this.#listener?.(d.state, raised);
  }

  /** A notify: read the record, then acknowledge, so the notifier knows this gateway has it. */
  #changed(ack: () => void): void {
    this.#readOrCreate().then(
      (d) => {
        this.#adopt(d);
        ack();
      },
      (e: unknown) => {
        // Not acknowledged: the notifier's wait times out and this gateway is fenced until it reads.
        this.#fence(e);
      },
    );
  }

  #broken(e: Error): void {
    this.#fence(e);
  }

  /** Stops trusting the copy and works, in the background, to trust it again. */
  #fence(e: unknown): void {
    if (this.#closed) return;
    if (this.#current) {
      this.#log.warn('reservation state may be stale: fencing the commands it governs until it is read again', {
        record: this.#record.where,
        error: e instanceof Error ? e.message : String(e),
      });
      this.#current = false;
      this.#listener?.(this.state, []);
    }
    this.#recover().catch(() => undefined);
  }

  /** Watches and reads again, retrying while the cluster is away; one recovery at a time. */
  #recover(): Promise<void> {
    this.#recovering ??= (async () => {
      try {
        for (;;) {
          if (this.#closed) throw Object.assign(new Error(`${this.#record.where}: the volume is closing`), { code: 'EBADF' });
          try {
            // A record removed by an operator is made anew (empty) before it can be watched.
            await this.#readOrCreate();
            await this.#record.rewatch();
            this.#adopt(await this.#readOrCreate());
            this.#current = true;
            this.#log.warn('reservation state read again; commands are checked against it again', { record: this.#record.where, version: this.version });
            this.#listener?.(this.state, []);
            this.#wake(true);
            return;
          } catch (e) {
            if (this.#closed) throw e;
            await sleep(RECOVER_DELAY_MS, undefined, { ref: false });
          }
        }
      } finally {
        this.#recovering = undefined;
      }
    })();
    return this.#recovering;
  }
}
