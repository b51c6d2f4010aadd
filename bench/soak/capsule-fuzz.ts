// Capsule fuzzing of a live rblkd with a disconnect at every protocol step (docs/protocol.md
// §7 login, §9 commands, §12 data transfer): before login, with garbage before login,
// mid-login, after the challenge, after a forged LOGIN_AUTH, after login, mid-command, with
// RDMA data outstanding, and long streams of fuzzed commands and mutated capsules inside a
// session. Meanwhile a healthy library session writes and reads back its own volume (which
// the fuzzing initiators cannot see, by ACL) and counts every error it meets. The target
// must answer or disconnect, never exit, and give back every descriptor.
import { DataDirection, DataFormat, Opcode, TaskAttribute, TaskFunction, TRAIN_VERSION, capsuleBuffer, type Capsule, type CommandCapsule } from '../../protocol/wire/index.js';
import { librarySession } from './clients.js';
import { SoakDaemon, type SoakProvider } from './daemon.js';
import { blockContent, LEDGER_BLOCK } from './ledger.js';
import { mutate, prng, randomCapsule, randomCdb } from './mutate.js';
import { RawConnection } from './raw-connection.js';
import { sleep, within } from './processes.js';
import { newRow, type SoakRow } from './report.js';
import { eventually } from '../kit/wait.js';
import { countStep, FUZZ_BUDGET_MS, newTally, note, tallyNotes, type FuzzRunOptions, type FuzzTally } from './fuzz-tally.js';

export const FUZZ_STEPS = [
  'before-login',
  'garbage-before-login',
  'mid-login',
  'after-challenge',
  'forged-auth',
  'after-login',
  'mid-command',
  'data-outstanding',
  'stream',
] as const;
export type FuzzStep = (typeof FUZZ_STEPS)[number];

export interface FuzzOptions extends FuzzRunOptions {
  providers: SoakProvider[];
  /** Capsules to send per provider (perConnection: per streaming connection, before it logs out). */
  capsules: number;
}

const FUZZ_INITIATOR = 'iqn.2026-11.io.rblk:soak-fuzz';
const AUTH_INITIATOR = 'iqn.2026-11.io.rblk:soak-fuzz-auth';
const HEALTHY_INITIATOR = 'iqn.2026-11.io.rblk:soak';
/** How long a command may go unanswered before the fuzzer calls it lost; a guard, not a measurement. */
const ANSWER_MS = 15_000;
/** The largest train the stream step sends: the login's 8192-byte capsule bound (RawConnection.open asks for 8240). */
const TRAIN_BYTES = 8192;
/** Each provider's offset to the fuzzers' seeds (tcp and sockets keep the seeds they always had). */
const PROVIDER_SEEDS: readonly SoakProvider[] = ['tcp', 'sockets', 'shm', 'tcp;ofi_rxm'];

interface Tally extends FuzzTally<FuzzStep> {
  capsules: number;
  undecodable: number;
  connectFailures: number;
}

class Fuzzer {
  readonly rand: () => number;
  #tag = 100n;
  constructor(
    seed: number,
    readonly provider: SoakProvider,
    readonly port: number,
    readonly tally: Tally,
    readonly perConnection: number,
  ) {
    this.rand = prng(seed);
  }

  int(n: number): number {
    return Math.floor(this.rand() * n);
  }

  tag(): bigint {
    return this.#tag++;
  }

  command(data: CommandCapsule['data'], direction: DataDirection): CommandCapsule {
    return {
      op: Opcode.CMD,
      tag: this.tag(),
      lun: this.rand() < 0.9 ? 0 : this.int(4),
      taskAttribute: [TaskAttribute.SIMPLE, TaskAttribute.ORDERED, TaskAttribute.HEAD_OF_QUEUE, TaskAttribute.ACA][this.rand() < 0.85 ? 0 : this.int(4)],
      direction,
      cdb: randomCdb(this.rand),
      data,
    };
  }

  /** A well-formed CMD with a fuzzed CDB and a data part of any format, pointing at our own memory. */
  async validCommand(raw: RawConnection, immediateMax: number): Promise<CommandCapsule> {
    const r = this.rand();
    if (r < 0.45) return this.command({ format: DataFormat.NONE }, DataDirection.NONE);
    if (r < 0.6 && immediateMax > 0) {
      const len = 1 + this.int(Math.min(immediateMax, 4096));
      return this.command({ format: DataFormat.IMMEDIATE, data: Buffer.alloc(len, this.int(256)) }, DataDirection.WRITE);
    }
    const io = await raw.allocate(64 * 1024);
    const len = this.rand() < 0.5 ? 512 * (1 + this.int(8)) : 1 + this.int(64 * 1024);
    const [seg] = io.segments(0, Math.min(len, 64 * 1024));
    // The buffer goes back to the pool at once: the target's RDMA may still land in it,
    // which is the initiator's own memory and harmless here.
    io.release();
    const dir = this.rand() < 0.5 ? DataDirection.READ : DataDirection.WRITE;
    if (this.rand() < 0.2) {
      const n = 1 + this.int(4);
      const descriptors = Array.from({ length: n }, (_, i) => ({ address: seg.address + BigInt(i * 512), key: seg.key, length: 512 }));
      return this.command({ format: DataFormat.LIST, descriptors }, dir);
    }
    return this.command({ format: DataFormat.DIRECT, descriptor: seg }, dir);
  }

  garbage(): Buffer {
    const samples: Capsule[] = [
      this.command({ format: DataFormat.NONE }, DataDirection.NONE),
      { op: Opcode.TSK_MGMT, tag: this.tag(), lun: 0, function: TaskFunction.ABORT_TASK, taskTag: 5n },
      { op: Opcode.KEEPALIVE, tag: this.tag() },
      { op: Opcode.I_LOGOUT, tag: this.tag() },
      {
        op: Opcode.LOGIN_REQ,
        tag: 1n,
        authRequired: false,
        maxItCapsule: 8240,
        maxTiCapsule: 1024,
        immediateDataSize: 4096,
        credits: 8,
        initiatorName: FUZZ_INITIATOR,
        targetName: 'iqn.2026-11.io.rblk:target',
      },
    ];
    return this.rand() < 0.25 ? randomCapsule(this.rand) : mutate(this.rand, capsuleBuffer(samples[this.int(samples.length)]));
  }

  async run(step: FuzzStep): Promise<void> {
    let raw: RawConnection;
    try {
      raw = await RawConnection.open(this.provider, this.port, { queueDepth: 32 });
    } catch (e) {
      this.tally.connectFailures++;
      note(this.tally, `connect: ${String(e)}`);
      return;
    }
    countStep(this.tally, step);
    try {
      await this.#step(step, raw);
    } finally {
      this.tally.undecodable += raw.undecodable;
      await raw.close();
    }
  }

  async #send(raw: RawConnection, c: Capsule | Buffer): Promise<boolean> {
    this.tally.capsules++;
    return raw.send(Buffer.isBuffer(c) ? c : capsuleBuffer(c));
  }

  async #step(step: FuzzStep, raw: RawConnection): Promise<void> {
    switch (step) {
      case 'before-login':
        return;
      case 'garbage-before-login':
        for (let i = 1 + this.int(3); i > 0; i--) if (!(await this.#send(raw, this.garbage()))) return;
        await raw.next(50);
        return;
      case 'mid-login':
        this.tally.capsules++;
        void raw.loginRequest(FUZZ_INITIATOR, 8);
        // Close while the LOGIN_REQ is on its way or being answered.
        if (this.rand() < 0.5) await sleep(this.int(3));
        return;
      case 'after-challenge':
      case 'forged-auth': {
        this.tally.capsules++;
        const a = await raw.loginRequest(AUTH_INITIATOR, 8);
        if (a?.op !== Opcode.LOGIN_CHALLENGE) {
          note(this.tally, `expected LOGIN_CHALLENGE, got ${a === null ? 'nothing' : `op 0x${a.op.toString(16)}`}`);
          return;
        }
        if (step === 'after-challenge') return;
        const forged = { op: Opcode.LOGIN_AUTH, tag: 1n, initiatorNonce: Buffer.alloc(32, this.int(256)), initiatorProof: Buffer.alloc(32, this.int(256)) } as const;
        await this.#send(raw, this.rand() < 0.5 ? capsuleBuffer(forged) : mutate(this.rand, capsuleBuffer(forged)));
        await raw.next(2000);
        return;
      }
      default:
        break;
    }
    this.tally.capsules++;
    const grant = await raw.login(FUZZ_INITIATOR, 32);
    if (grant === null) {
      note(this.tally, `login refused or unanswered (${raw.closeReason || 'open'})`);
      return;
    }
    if (step === 'after-login') return;
    const window = Math.max(1, Math.min(grant.credits - 1, 32));
    if (step === 'mid-command' || step === 'data-outstanding') {
      for (let i = 1 + this.int(window); i > 0; i--) {
        const c = step === 'mid-command' ? this.command({ format: DataFormat.NONE }, DataDirection.NONE) : await this.#dataCommand(raw);
        if (!(await this.#send(raw, c))) return;
      }
      return;
    }
    // stream: windows of well-formed commands with fuzzed CDBs, now and then a mutated capsule.
    let sent = 0;
    while (sent < this.perConnection && !raw.closed) {
      // Each command's CDB and task attribute, so a lost one can be named.
      const tags = new Map<bigint, string>();
      let mutated = false;
      // Version 5 (docs/protocol.md §5.1): now and then the window goes as trains, several CMDs to a message.
      const train: Buffer[] | null = raw.conn.version >= TRAIN_VERSION && this.rand() < 0.3 ? [] : null;
      const flush = async (): Promise<boolean> => {
        if (train === null || train.length === 0) return true;
        this.tally.capsules += train.length;
        return raw.send(Buffer.concat(train.splice(0)));
      };
      for (let i = 0; i < window; i++) {
        if (this.rand() < 0.003) {
          mutated = true;
          sent++;
          // In a train, the garbage rides at its end: the whole message is then refused, or framed otherwise.
          if (train !== null) train.push(this.garbage());
          else await this.#send(raw, this.garbage());
          break;
        }
        const c = await this.validCommand(raw, grant.immediateDataSize);
        tags.set(c.tag, `${c.cdb.toString('hex')} attr ${c.taskAttribute} lun ${c.lun}`);
        sent++;
        if (train === null) {
          if (!(await this.#send(raw, c))) break;
          continue;
        }
        const bytes = capsuleBuffer(c);
        if (train.reduce((n, b) => n + b.length, 0) + bytes.length > TRAIN_BYTES && !(await flush())) break;
        train.push(bytes);
      }
      await flush();
      const deadline = Date.now() + ANSWER_MS;
      while (tags.size > 0 && !raw.closed) {
        const a = await raw.next(Math.max(1, deadline - Date.now()));
        if (a === null) break;
        if (a.op === Opcode.RSP || a.op === Opcode.TSK_RSP) tags.delete(a.tag);
        else if (a.op === Opcode.T_LOGOUT) break;
      }
      if (tags.size > 0 && !raw.closed && !mutated) {
        this.tally.unanswered += tags.size;
        note(this.tally, `${tags.size} commands unanswered for ${ANSWER_MS / 1000} s on an open connection (${[...tags.values()].slice(0, 3).join('; ')})`);
        return;
      }
      if (mutated) {
        // Whatever the mutated capsule did, let the connection settle or end before reusing it.
        await raw.next(20);
        if (!raw.closed) return;
      }
    }
    if (!raw.closed) await this.#send(raw, { op: Opcode.I_LOGOUT, tag: this.tag() });
  }

  async #dataCommand(raw: RawConnection): Promise<CommandCapsule> {
    const io = await raw.allocate(128 * 1024);
    const [seg] = io.segments(0, 128 * 1024);
    io.release();
    const write = this.rand() < 0.5;
    const lba = this.int(16 * 2048 - 256);
    const cdb = Buffer.alloc(16);
    cdb[0] = write ? 0x8a : 0x88;
    cdb.writeBigUInt64BE(BigInt(lba), 2);
    cdb.writeUInt32BE(256, 10);
    return { op: Opcode.CMD, tag: this.tag(), lun: 0, taskAttribute: TaskAttribute.SIMPLE, direction: write ? DataDirection.WRITE : DataDirection.READ, cdb, data: { format: DataFormat.DIRECT, descriptor: seg } };
  }
}

/** The healthy session: write a block, read it back, compare; every failure counts. */
function healthySession(url: string): { stop(): Promise<{ ops: number; errors: number; examples: string[] }> } {
  let stop = false;
  let ops = 0;
  let errors = 0;
  const examples: string[] = [];
  const fail = (m: string): void => {
    errors++;
    if (examples.length < 3) examples.push(m);
  };
  const done = (async () => {
    let s: Awaited<ReturnType<typeof librarySession>>;
    try {
      s = await librarySession(url, { lossMs: 30_000 });
    } catch (e) {
      fail(`healthy session could not log in: ${String(e)}`);
      return;
    }
    let serial = 1;
    while (!stop) {
      const block = serial % 1024;
      const data = blockContent(block, serial++);
      try {
        await s.client.write(block * LEDGER_BLOCK, data, true);
        const back = await s.client.read(block * LEDGER_BLOCK, LEDGER_BLOCK);
        ops += 2;
        if (!back.equals(data)) fail(`block ${block} read back different bytes`);
      } catch (e) {
        fail(String(e));
        await sleep(100);
      }
    }
    await s.session.close();
  })();
  return {
    async stop() {
      stop = true;
      await done;
      return { ops, errors, examples };
    },
  };
}

export async function capsuleFuzz(o: FuzzOptions): Promise<SoakRow[]> {
  const log = o.log ?? (() => undefined);
  const daemon = new SoakDaemon({
    // tcp for the healthy session, whatever is fuzzed.
    providers: [...new Set<SoakProvider>(['tcp', ...o.providers])],
    volumes: [
      { name: 'v', path: 'v.img', size: '16MiB', lun: 0 },
      { name: 'h', path: 'h.img', size: '8MiB', lun: 1, acl: [{ initiator: HEALTHY_INITIATOR, access: 'rw' }] },
    ],
    limits: { max_sessions: 256, queue_depth: 32 },
    extra: { auth: { initiators: [{ name: AUTH_INITIATOR, secret: 'soak-fuzz-secret-0123456789' }] } },
  });
  const rows: SoakRow[] = [];
  let healthy: ReturnType<typeof healthySession> | null = null;
  try {
    await daemon.start();
    healthy = healthySession(daemon.url('h', 'tcp'));
    for (const provider of o.providers) {
      const row = newRow(`capsule fuzz over ${provider}, disconnects at every step`);
      const tally: Tally = { ...newTally<FuzzStep>(), capsules: 0, undecodable: 0, connectFailures: 0 };
      const exitsBefore = daemon.unexpectedExits;
      await sleep(300);
      row.fdsBefore = daemon.fds();
      row.rssBeforeKiB = daemon.rss();
      const parallel = o.parallel ?? 4;
      let stepIndex = 0;
      let lastLog = 0;
      const deadline = Date.now() + (o.budgetMs ?? FUZZ_BUDGET_MS);
      await Promise.all(
        Array.from({ length: parallel }, async (_, w) => {
          const f = new Fuzzer((o.seed ?? 0x50a1) + w * 7919 + PROVIDER_SEEDS.indexOf(provider), provider, daemon.port(provider), tally, o.perConnection ?? 2000);
          while (tally.capsules < o.capsules && Date.now() < deadline) {
            if (!daemon.alive) {
              // Count the exit (SoakDaemon does) and go on against a new daemon.
              await daemon.recover();
              continue;
            }
            // Every other connection streams (where the capsules are); the rest walk the steps.
            const n = stepIndex++;
            const step = n % 2 === 1 ? 'stream' : FUZZ_STEPS[(n / 2) % FUZZ_STEPS.length];
            await f.run(step);
            if (tally.capsules - lastLog >= Math.max(10_000, o.capsules / 10)) {
              lastLog = tally.capsules;
              log(`  fuzz ${provider}: ${tally.capsules} capsules, ${tally.connections} connections`);
            }
          }
        }),
      );
      // Every session the fuzzers left must be gone within the login timeout (10 s) and
      // the keep-alive (2 × 500 ms); wait for the fd count to come back, bounded.
      const settled = daemon.alive && (await eventually(() => daemon.fds() <= row.fdsBefore!, 20_000));
      row.fdsAfter = daemon.alive ? daemon.fds() : undefined;
      row.rssAfterKiB = daemon.alive ? daemon.rss() : undefined;
      row.runs = tally.connections;
      row.operations = tally.capsules;
      row.daemonExits = daemon.unexpectedExits - exitsBefore;
      if (row.daemonExits > 0) row.notes.push(...new Set(daemon.exitReports.slice(exitsBefore)));
      if (!settled) {
        row.ok = false;
        row.notes.push(`fds not back to ${row.fdsBefore} within 20 s after the fuzzing`);
      }
      if (tally.unanswered > 0 || tally.undecodable > 0) row.ok = false;
      if (tally.capsules < o.capsules) row.ok = false;
      row.notes.push(...tallyNotes(tally, o, tally.capsules, o.capsules, 'capsules'));
      if (tally.unanswered > 0) row.notes.push(`${tally.unanswered} commands never answered`);
      if (tally.undecodable > 0) row.notes.push(`${tally.undecodable} undecodable capsules from the target`);
      if (tally.connectFailures > 0) row.notes.push(`${tally.connectFailures} connects failed`);
      row.notes.push(...tally.errors.slice(0, 3));
      rows.push(row);
      log(`  fuzz ${provider}: done, ${tally.capsules} capsules`);
    }
    const h = await healthy.stop();
    healthy = null;
    for (const row of rows) {
      row.healthyErrors = h.errors;
      if (h.errors > 0) row.ok = false;
    }
    rows[rows.length - 1]?.notes.push(`healthy session: ${h.ops} operations, ${h.errors} errors${h.examples.length > 0 ? `: ${h.examples.join(' / ')}` : ''}`);
  } catch (e) {
    const row = rows[rows.length - 1] ?? newRow('capsule fuzz');
    if (!rows.includes(row)) rows.push(row);
    row.ok = false;
    row.notes.push(`aborted: ${e instanceof Error ? e.message.split('\n')[0] : String(e)}`);
  } finally {
    if (healthy !== null) await within(healthy.stop(), 30_000, null);
    for (const r of rows) {
      if (r.daemonExits > 0) r.ok = false;
    }
    await daemon.close();
  }
  return rows;
}

