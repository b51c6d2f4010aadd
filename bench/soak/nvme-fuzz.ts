// NVMe/TCP fuzzing of a live rblkd (docs/nvme.md "Bad input"): hostile hosts at every step of
// a queue's life — before ICReq, after ICReq, on an admin queue, on an I/O queue — send mutated
// PDUs and streams of well-framed commands with fuzzed fields (opcodes, namespace IDs, LBAs,
// lengths, SGL kinds, fused bits, reservation actions), while a healthy host on its own
// namespace (which the fuzzing hosts cannot see, by ACL) writes and reads back, counting every
// error. The target must answer every command it keeps the queue open for, end only the
// connection that sent garbage (with a TermReq or a close), never exit, and give its fds back.
import { randomBytes } from 'node:crypto';
import { buildSqe } from '../../protocol/nvme/command.js';
import { SoakDaemon } from './daemon.js';
import { prng } from './mutate.js';
import { RawHost, rwSqe } from './nvme-raw-host.js';
import { sleep, within } from './processes.js';
import { newRow, type SoakRow } from './report.js';
import { eventually } from '../kit/wait.js';
import { countStep, FUZZ_BUDGET_MS, newTally, note, tallyNotes, type FuzzRunOptions, type FuzzTally } from './fuzz-tally.js';

export const NVME_FUZZ_STEPS = ['before-icreq', 'after-icreq', 'admin', 'io-hostile', 'data-outstanding', 'stream'] as const;
export type NvmeFuzzStep = (typeof NVME_FUZZ_STEPS)[number];

export interface NvmeFuzzOptions extends FuzzRunOptions {
  /** PDUs the fuzzing hosts send, all steps together (perConnection: commands per streaming connection). */
  pdus: number;
}

const NQN = 'nqn.2026-12.io.rblk:soak';
const FUZZ_HOST = 'nqn.2014-08.org.nvmexpress:uuid:00000000-0000-4000-8000-00000000f022';
const HEALTHY_HOST = 'nqn.2014-08.org.nvmexpress:uuid:00000000-0000-4000-8000-0000000000a1';
const BLOCKS = (16 << 20) / 512;
/** How long a command may go unanswered on an open queue before it counts as lost; a guard, not a measurement. */
const ANSWER_MS = 10_000;

interface Tally extends FuzzTally<NvmeFuzzStep> {
  pdus: number;
  hostile: number;
  commands: number;
  /** Queues the target ended (TermReq or close) during a stream of well-framed commands. */
  streamEnds: number;
}

/** A mutated PDU: a valid one of some kind with a few bytes changed, or random bytes. */
export function hostilePdu(h: RawHost, rand: () => number = Math.random): Buffer {
  const int = (n: number): number => Math.floor(rand() * n);
  const capsule = (sqe: Buffer, data: Buffer | null): Buffer => {
    const hdr = Buffer.alloc(72);
    hdr[0] = 0x04;
    sqe.copy(hdr, 8);
    return h.frame(hdr, data);
  };
  const kinds = [
    () => capsule(rwSqe(0x01, int(65536), 1, int(4096), 8, 4096), null),
    () => capsule(rwSqe(0x01, int(65536), 1, int(4096), 1, 512, { inCapsule: true }), randomBytes(512)),
    () => capsule(buildSqe({ opcode: int(256), cid: int(65536), nsid: int(3), sgl: { id: 0x5a, length: int(8192) } }), null),
    () => {
      const d = Buffer.alloc(24);
      d[0] = 0x06;
      d.writeUInt16LE(int(65536), 10);
      d.writeUInt32LE(4096, 16);
      return h.frame(d, randomBytes(4096));
    },
    () => randomBytes(1 + int(300)),
  ];
  const pdu = kinds[int(kinds.length)]!();
  for (let i = int(4); i > 0; i--) pdu[int(Math.min(pdu.length, 80))] = int(256);
  return pdu;
}

class NvmeFuzzer {
  readonly rand: () => number;
  constructor(
    seed: number,
    readonly port: number,
    readonly tally: Tally,
    readonly perConnection: number,
  ) {
    this.rand = prng(seed);
  }

  int(n: number): number {
    return Math.floor(this.rand() * n);
  }

  /** A well-framed I/O command with fuzzed fields, and the data it carries (a write's). */
  fuzzedCommand(h: RawHost): { sqe: Buffer; data?: Buffer; inCapsule?: boolean } {
    const ops = [0x00, 0x01, 0x01, 0x02, 0x02, 0x05, 0x08, 0x09, 0x0c, 0x0d, 0x0e, 0x11, 0x15, this.int(256)];
    const opcode = ops[this.int(ops.length)]!;
    const nsid = this.rand() < 0.85 ? 1 : [0, 2, 3, 0xffffffff, this.int(2 ** 32)][this.int(5)]!;
    const blocks = 1 + (this.rand() < 0.9 ? this.int(64) : this.int(65536));
    const lba = this.rand() < 0.9 ? this.int(BLOCKS - 64) : [BLOCKS - 1, BLOCKS, 2 ** 40, this.int(2 ** 32)][this.int(4)]!;
    let bytes = this.rand() < 0.85 ? blocks * 512 : this.int(64 * 1024);
    bytes = Math.min(bytes, 128 * 1024);
    const write = opcode === 0x01 || opcode === 0x05 || opcode === 0x09 || opcode === 0x0d || opcode === 0x11 || opcode === 0x15 || (opcode & 3) === 1;
    const inCapsule = write && bytes <= 4096 && this.rand() < 0.7;
    const sqe = buildSqe({
      opcode,
      cid: h.nextCid(),
      nsid,
      sgl: { id: inCapsule ? 0x01 : 0x5a, length: bytes },
      cdw: {
        10: lba % 2 ** 32,
        11: Math.floor(lba / 2 ** 32),
        12: ((blocks - 1) & 0xffff) | (this.rand() < 0.2 ? 1 << 30 : 0),
        ...(this.rand() < 0.2 ? { 13: this.int(2 ** 32), 14: this.int(2 ** 32), 15: this.int(2 ** 32) } : {}),
      },
    });
    // Now and then a fused half (FUSE bits, Base 2.0 §4.2 CDW0 bits 9:8) whose partner never comes.
    if (this.rand() < 0.02) sqe[1] = (sqe[1]! & ~3) | (1 + this.int(2));
    return write ? { sqe, data: randomBytes(bytes), inCapsule } : { sqe };
  }

  async run(step: NvmeFuzzStep, cntlid: number): Promise<void> {
    let h: RawHost;
    try {
      h = await RawHost.open(this.port);
    } catch (e) {
      note(this.tally, `connect: ${String(e)}`);
      return;
    }
    countStep(this.tally, step);
    try {
      await this.#step(step, h, cntlid);
    } catch {
      // The target may end a hostile connection at any point: that is the point.
    } finally {
      h.close();
    }
  }

  #hostile(h: RawHost, n: number): void {
    for (; n > 0 && !h.closed; n--) {
      h.write(hostilePdu(h, this.rand));
      this.tally.pdus++;
      this.tally.hostile++;
    }
  }

  async #step(step: NvmeFuzzStep, h: RawHost, cntlid: number): Promise<void> {
    if (step === 'before-icreq') {
      this.#hostile(h, 1 + this.int(3));
      await h.waitClosed(50);
      return;
    }
    this.tally.pdus++;
    await h.initialize({ hdgst: this.rand() < 0.3, ddgst: this.rand() < 0.3 });
    if (step === 'after-icreq') {
      this.#hostile(h, 1 + this.int(6));
      await h.waitClosed(50);
      return;
    }
    if (step === 'admin') {
      this.tally.pdus += 2;
      await h.connect({ qid: 0, sqsize: 32, subnqn: NQN, hostnqn: FUZZ_HOST });
      // Admin opcodes with fuzzed fields, answered one by one, then garbage.
      for (let i = 1 + this.int(8); i > 0 && !h.closed; i--) {
        this.tally.pdus++;
        this.tally.commands++;
        const r = await within(h.admin(this.int(256), { nsid: this.int(4), length: this.int(8192), cdw: { 10: this.int(2 ** 32), 11: this.int(2 ** 32) } }).catch(() => null), ANSWER_MS + 1000, 'lost');
        if (r === 'lost' && !h.closed) this.#lost('admin command');
      }
      this.#hostile(h, 1 + this.int(3));
      await h.waitClosed(50);
      return;
    }
    this.tally.pdus++;
    const c = await h.connect({ qid: 1 + this.int(4), sqsize: 32, subnqn: NQN, cntlid, hostnqn: FUZZ_HOST });
    if (c.statusField !== 0) {
      note(this.tally, `I/O Connect refused: status 0x${c.statusField.toString(16)}`);
      return;
    }
    if (step === 'io-hostile') {
      this.#hostile(h, 1 + this.int(6));
      await h.waitClosed(50);
      return;
    }
    if (step === 'data-outstanding') {
      // A write that earns an R2T, then the host goes away without its data.
      h.sendCapsule(rwSqe(0x01, h.nextCid(), 1, this.int(BLOCKS - 256), 256, 128 * 1024));
      this.tally.pdus++;
      this.tally.commands++;
      if (this.rand() < 0.5) await sleep(this.int(5));
      return;
    }
    for (let i = 0; i < this.perConnection && !h.closed; i++) {
      const cmd = this.fuzzedCommand(h);
      this.tally.pdus++;
      this.tally.commands++;
      let lost = false;
      const r = await within(
        h.command(cmd.sqe, { ...(cmd.data !== undefined ? { data: cmd.data } : {}), ...(cmd.inCapsule === true ? { inCapsule: true } : {}) }).catch((e: unknown) => {
          if (String(e).includes('timed out') && !h.closed) lost = true;
          return null;
        }),
        ANSWER_MS + 1000,
        'lost',
      );
      if ((lost || r === 'lost') && !h.closed) {
        this.#lost(`${cmd.sqe.subarray(0, 4).toString('hex')} nsid ${cmd.sqe.readUInt32LE(4)} cdw10-12 ${cmd.sqe.subarray(40, 52).toString('hex')} sgl ${cmd.sqe.subarray(24, 40).toString('hex')}`);
        return;
      }
      if (r === null) {
        this.tally.streamEnds++;
        return;
      }
    }
  }

  #lost(what: string): void {
    this.tally.unanswered++;
    note(this.tally, `unanswered for ${ANSWER_MS / 1000} s on an open queue: ${what}`);
  }
}

/** The healthy host: admin and one I/O queue on its own namespace; write, read back, compare. */
async function healthyHost(port: number, nsid: number): Promise<{ stop(): Promise<{ ops: number; errors: number; examples: string[] }> }> {
  const admin = await RawHost.open(port);
  const cntlid = await admin.enable(NQN, { hostnqn: HEALTHY_HOST });
  const io = await RawHost.open(port);
  await io.initialize();
  const c = await io.connect({ qid: 1, sqsize: 32, subnqn: NQN, cntlid, hostnqn: HEALTHY_HOST });
  if (c.statusField !== 0) throw new Error(`the healthy host's I/O Connect failed: 0x${c.statusField.toString(16)}`);
  let stop = false;
  let ops = 0;
  let errors = 0;
  const examples: string[] = [];
  const done = (async () => {
    let n = 0;
    while (!stop) {
      const lba = (n++ % 1024) * 16;
      const data = randomBytes(8192);
      try {
        const w = await io.command(rwSqe(0x01, io.nextCid(), nsid, lba, 16, 8192), { data });
        const r = await io.command(rwSqe(0x02, io.nextCid(), nsid, lba, 16, 8192));
        ops += 2;
        if (w.statusField !== 0 || r.statusField !== 0 || !r.data.equals(data)) {
          errors++;
          if (examples.length < 3) examples.push(`LBA ${lba}: write 0x${w.statusField.toString(16)}, read 0x${r.statusField.toString(16)}, ${r.data.equals(data) ? 'same' : 'different'} bytes`);
        }
      } catch (e) {
        errors++;
        if (examples.length < 3) examples.push(String(e));
        return;
      }
    }
  })();
  return {
    async stop() {
      stop = true;
      await done;
      io.close();
      admin.close();
      return { ops, errors, examples };
    },
  };
}

export async function nvmeFuzz(o: NvmeFuzzOptions): Promise<SoakRow[]> {
  const log = o.log ?? (() => undefined);
  const daemon = new SoakDaemon({
    nvme: true,
    volumes: [
      { name: 'v', path: 'v.img', size: '16MiB', lun: 0 },
      { name: 'h', path: 'h.img', size: '8MiB', lun: 1, acl: [{ initiator: HEALTHY_HOST, access: 'rw' }] },
    ],
    limits: { max_sessions: 256, queue_depth: 32 },
    extra: { nqn: NQN },
  });
  const row = newRow('NVMe/TCP PDU fuzz, every queue step');
  const tally: Tally = { ...newTally<NvmeFuzzStep>(), pdus: 0, hostile: 0, commands: 0, streamEnds: 0 };
  let healthy: Awaited<ReturnType<typeof healthyHost>> | null = null;
  const admins: RawHost[] = [];
  try {
    await daemon.start();
    const port = daemon.nvmePort!;
    await sleep(300);
    row.fdsBefore = daemon.fds();
    row.rssBeforeKiB = daemon.rss();
    healthy = await healthyHost(port, 2);
    const deadline = Date.now() + (o.budgetMs ?? FUZZ_BUDGET_MS);
    let next = 0;
    let lastLog = 0;
    await Promise.all(
      Array.from({ length: o.parallel ?? 4 }, async (_, w) => {
        const f = new NvmeFuzzer((o.seed ?? 0x4e56) + w * 7919, port, tally, o.perConnection ?? 50);
        // Each worker's I/O queues join one admin queue of the fuzzing host.
        const admin = await RawHost.open(port);
        admins.push(admin);
        const cntlid = await admin.enable(NQN, { hostnqn: FUZZ_HOST });
        while (tally.pdus < o.pdus && Date.now() < deadline && daemon.alive) {
          const n = next++;
          // One connection in four streams fuzzed commands (where most PDUs are); the rest walk the hostile steps.
          const step = n % 4 === 3 ? 'stream' : NVME_FUZZ_STEPS[(n - Math.floor(n / 4)) % (NVME_FUZZ_STEPS.length - 1)]!;
          await f.run(step, cntlid);
          if (tally.pdus - lastLog >= Math.max(10_000, o.pdus / 10)) {
            lastLog = tally.pdus;
            log(`  nvme fuzz: ${tally.pdus} PDUs, ${tally.connections} connections`);
          }
        }
      }),
    );
    const h = await healthy.stop();
    healthy = null;
    for (const a of admins.splice(0)) a.close();
    // Every queue the fuzzers left ends within the login timeout; wait for the fds, bounded.
    const settled = daemon.alive && (await eventually(() => daemon.fds() <= row.fdsBefore!, 20_000));
    row.fdsAfter = daemon.alive ? daemon.fds() : undefined;
    row.rssAfterKiB = daemon.alive ? daemon.rss() : undefined;
    row.runs = tally.connections;
    row.operations = tally.pdus;
    row.daemonExits = daemon.unexpectedExits;
    row.healthyErrors = h.errors;
    if (row.daemonExits > 0) row.notes.push(...new Set(daemon.exitReports));
    if (!settled) row.notes.push(`fds not back to ${row.fdsBefore} within 20 s after the fuzzing`);
    row.ok = settled && tally.unanswered === 0 && tally.pdus >= o.pdus && h.errors === 0 && row.daemonExits === 0 && h.ops > 0;
    row.notes.push(...tallyNotes(tally, o, tally.pdus, o.pdus, 'PDUs'));
    row.notes.push(`${tally.pdus} PDUs (${tally.hostile} mutated, ${tally.commands} fuzzed commands); ${tally.streamEnds} command streams ended by the target`);
    if (tally.unanswered > 0) row.notes.push(`${tally.unanswered} commands never answered`);
    row.notes.push(...tally.errors.slice(0, 3));
    row.notes.push(`healthy host: ${h.ops} commands, ${h.errors} errors${h.examples.length > 0 ? `: ${h.examples.join(' / ')}` : ''}`);
  } catch (e) {
    row.ok = false;
    row.notes.push(`aborted: ${e instanceof Error ? e.message.split('\n')[0] : String(e)}`);
  } finally {
    if (healthy !== null) await within(healthy.stop(), 30_000, null);
    for (const a of admins) a.close();
    if (daemon.unexpectedExits > 0) row.ok = false;
    await daemon.close();
  }
  return [row];
}
