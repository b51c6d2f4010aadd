// The native fast path against the JavaScript path (docs/target.md "Fast
// path"): one seeded, randomised command mix, run once with fast_path on and
// once with it off, over real tcp endpoints to real files, must give the
// same RSP capsules byte for byte (status, sense, residuals, credits), the
// same data read back, and the same bytes on disk. The mix: READ and WRITE
// (10) and (16), FUA, immediate data, misaligned lengths, LBAs past the end,
// zero-block transfers, an unknown LUN, a read-only volume, persistent
// reservations held by another initiator, the unit attentions a LUN RESET and
// a reconnect raise, ABORT TASK, SYNCHRONIZE CACHE, COMPARE AND WRITE, and
// bursts of concurrent commands. It runs on protocol version 1 (every command
// has an RSP) and on version 2, where a GOOD read without residual is
// answered by its data write's remote CQ data instead (docs/protocol.md
// §12.1): the transcript then records that answer, with its 32 bits, in
// place of an RSP, so both paths must choose it for the same commands. On
// version 5 the bursts go as trains (§5.1), several CMDs in one message, which
// the fast path takes capsule by capsule until one is not its own and hands
// the rest to JavaScript: the answers must still be those of the JS path.
import test, { type ExecutionContext } from 'ava';
import { randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as cdb from '../../protocol/scsi/cdb.js';
import { PrOutAction, PrType } from '../../protocol/scsi/opcodes.js';
import { capsuleBuffer, DataDirection, DataFormat, decodeCapsule, Opcode, TaskAttribute, TaskFunction, TRAIN_VERSION, type CommandData } from '../../protocol/wire/index.js';
import { FileBackend } from '../../target/backend/file.js';
import { LogicalUnit } from '../../target/scsi/index.js';
import { TargetServer } from '../../target/server.js';
import { rblkConnections, type RblkConnection } from '../../target/rblk/connection.js';
import { FastPath } from '../../native/fast-path.js';
import { Reactors } from '../../native/reactors.js';
import { FabricInitiatorTransport } from '../../initiator/transport/fabric-transport.js';
import type { InitiatorConnection, IoBuffer } from '../../initiator/transport/transport.js';
import { prng } from '../protocol/fuzz-corpus.js';
import { listenTest, memoryLog, TARGET_NAME, testServerOptions } from '../helpers/target-fixture.js';
import { checkSuiteResources, warmUpFabric } from '../helpers/resources.js';
import { RDM_PROVIDERS } from '../helpers/fabric-pair.js';
import { availableRdmProviders } from '../../native/fabric.js';

checkSuiteResources(test, { warmUp: () => warmUpFabric() });

const BLOCK = 512;
const BLOCKS = 2048; // 1 MiB volumes
const pad16 = (b: Buffer): Buffer => Buffer.concat([b, Buffer.alloc(16 - b.length)]);

/** A command's data: its direction, length, offset in the client's buffer, bytes to write, and whether they go as immediate data. */
interface CommandSpec {
  dir: 'in' | 'out' | 'none';
  length?: number;
  at?: number;
  data?: Buffer;
  immediate?: boolean;
}

/** A command's answer: its RSP capsule, or (version 2) the remote CQ data of its data write. */
type Answer = Buffer | { remoteData: number };

/** One initiator speaking raw capsules, so every field of every RSP can be compared. */
class RawClient {
  // Version 2: tags above 2^32, so the remote CQ data's low 32 bits (§12.1) are really a truncation.
  private tag: bigint;
  private readonly waiters = new Map<bigint, (b: Answer) => void>();
  /** RSP capsules and remote CQ data answers received, CMDs only. */
  rsps = 0;
  byData = 0;
  /** Messages of several CMDs sent (version 5's trains). */
  trainsSent = 0;
  private constructor(
    private readonly conn: InitiatorConnection,
    readonly io: IoBuffer,
  ) {
    this.tag = conn.version >= 2 ? (5n << 32n) + 100n : 100n;
    conn.onCapsule = (b) => {
      const c = decodeCapsule(b, { from: 'target' });
      if (c.op === Opcode.RSP) this.rsps++;
      const w = this.waiters.get(c.tag);
      this.waiters.delete(c.tag);
      w?.(Buffer.from(b));
    };
    conn.onRemoteData = (data) => {
      // §12.1: the data names the outstanding READ whose tag has these low 32 bits; they are kept distinct.
      const tag = [...this.waiters.keys()].find((k) => Number(k & 0xffff_ffffn) === data);
      if (tag === undefined) throw new Error(`remote CQ data ${data} matches no outstanding command`);
      this.byData++;
      const w = this.waiters.get(tag)!;
      this.waiters.delete(tag);
      w({ remoteData: data });
    };
  }

  static async open(port: number, name: string, protocolVersion = 1, provider = 'tcp'): Promise<RawClient> {
    const conn = await new FabricInitiatorTransport().connect({
      address: '127.0.0.1',
      port,
      provider,
      maxCapsule: 8192,
      queueDepth: 16,
      receiveSize: 1024,
      ioPoolSize: 2 << 20,
      ioChunkSize: 2 << 20,
      // Version 1: every command gets an RSP; version 2 answers GOOD reads by remote CQ data (§12.1).
      protocolVersion,
    });
    if (conn.version !== protocolVersion) throw new Error(`asked for version ${protocolVersion}, the connection has ${conn.version}`);
    const io = await conn.allocate(2 << 20);
    const c = new RawClient(conn, io);
    const rsp = c.wait(1n);
    await conn.send(
      capsuleBuffer({
        op: Opcode.LOGIN_REQ,
        tag: 1n,
        authRequired: false,
        maxItCapsule: 8192,
        maxTiCapsule: 1024,
        immediateDataSize: 4096,
        credits: 16,
        initiatorName: name,
        targetName: TARGET_NAME,
      }),
    );
    const answer = await rsp;
    if (!Buffer.isBuffer(answer)) throw new Error('login answered by remote CQ data');
    const login = decodeCapsule(answer, { from: 'target' });
    if (login.op !== Opcode.LOGIN_RSP) throw new Error(`login failed: ${login.op}`);
    return c;
  }

  private wait(tag: bigint): Promise<Answer> {
    return new Promise((resolve) => this.waiters.set(tag, resolve));
  }

  /** One command; resolves with its RSP bytes and, for a read, the data-in bytes. */
  async command(lun: number, c: Buffer, o: CommandSpec): Promise<string> {
    const p = this.prepare(lun, c, o);
    await this.conn.send(p.capsule);
    return p.answer();
  }

  /**
   * Commands at once. From version 5 they go as trains (docs/protocol.md
   * §5.1) of at most the login's 8192 bytes, so the target takes several
   * from one message, fast path and JS alike; before, one message each.
   */
  async burst(cmds: readonly (readonly [number, Buffer, CommandSpec])[]): Promise<string[]> {
    const ps = cmds.map(([lun, c, o]) => this.prepare(lun, c, o));
    const messages: Buffer[][] = [];
    for (const p of ps) {
      const last = messages.at(-1);
      const size = last?.reduce((n, b) => n + b.length, 0) ?? Infinity;
      if (this.conn.version >= TRAIN_VERSION && last !== undefined && size + p.capsule.length <= 8192) last.push(p.capsule);
      else messages.push([p.capsule]);
    }
    for (const m of messages) {
      if (m.length > 1) this.trainsSent++;
      await this.conn.send(Buffer.concat(m));
    }
    return Promise.all(ps.map((p) => p.answer()));
  }

  private prepare(lun: number, c: Buffer, o: CommandSpec): { capsule: Buffer; answer: () => Promise<string> } {
    const tag = this.tag++;
    const at = o.at ?? 0;
    const length = o.length ?? 0;
    if (o.dir === 'out' && o.data) o.data.copy(this.io.buffer, at);
    if (o.dir === 'in') this.io.buffer.fill(0xee, at, at + length);
    const rsp = this.wait(tag);
    const direction = o.dir === 'in' ? DataDirection.READ : o.dir === 'out' ? DataDirection.WRITE : DataDirection.NONE;
    const data: CommandData =
      o.dir === 'none' || length === 0
        ? { format: DataFormat.NONE }
        : o.immediate
          ? { format: DataFormat.IMMEDIATE, data: this.io.buffer.subarray(at, at + length) }
          : { format: DataFormat.DIRECT, descriptor: this.io.segments(at, length)[0] };
    const capsule = capsuleBuffer({ op: Opcode.CMD, tag, lun, taskAttribute: TaskAttribute.SIMPLE, direction: data.format === DataFormat.NONE ? DataDirection.NONE : direction, cdb: pad16(c), data });
    const answer = async (): Promise<string> => {
      const got = await rsp;
      // The tag differs by nothing between runs, but say only what matters: the RSP after its tag.
      const body = Buffer.isBuffer(got) ? got.subarray(16).toString('hex') : `remote-data ${got.remoteData.toString(16)}`;
      return o.dir === 'in' && length > 0 ? `${body} ${this.io.buffer.subarray(at, at + length).toString('hex')}` : body;
    };
    return { capsule, answer };
  }

  async task(lun: number, fn: number, taskTag: bigint): Promise<string> {
    const tag = this.tag++;
    const rsp = this.wait(tag);
    await this.conn.send(capsuleBuffer({ op: Opcode.TSK_MGMT, tag, lun, function: fn as never, taskTag }));
    const got = await rsp;
    if (!Buffer.isBuffer(got)) throw new Error('a TSK_MGMT answered by remote CQ data');
    return got.subarray(16).toString('hex');
  }

  get lastTag(): bigint {
    return this.tag - 1n;
  }

  async close(): Promise<void> {
    await this.conn.close();
  }
}

interface Run {
  transcript: string[];
  disk: Buffer;
  taken: number;
  /** Reads the fast path answered by remote CQ data (version 2). */
  byData: number;
  /** What the initiators received: RSPs and remote CQ data answers. */
  answers: { rsps: number; byData: number };
  /** The rw LU's counters (target/scsi/request/io-stats.ts), read and write: whichever path answered, the same. */
  counters: string;
  /** Connections whose fast path a reactor thread served (stats.reactor ≥ 0). */
  onReactor: number;
  /** Trains the initiators sent (version 5), and those the fast path took whole. */
  trainsSent: number;
  trainsTaken: number;
}

async function run(fastPath: boolean, seed: number, version = 1, reactors = 0, provider = 'tcp'): Promise<Run> {
  const dir = await mkdtemp(join(tmpdir(), 'rblk-fastpath-'));
  const log = memoryLog();
  const pool = reactors > 0 ? Reactors.start(reactors) : null;
  const server = new TargetServer({ ...testServerOptions(log, { fastPath }), reactors: pool }, rblkConnections);
  let onReactor = 0;
  const transcript: string[] = [];
  let taken = 0;
  let byData = 0;
  let trainsSent = 0;
  let trainsTaken = 0;
  const answers = { rsps: 0, byData: 0 };
  let a: RawClient | null = null;
  let b: RawClient | null = null;
  const volumes: FileBackend[] = [];
  let rwLu: LogicalUnit | null = null;
  try {
    const rw = await FileBackend.open({ path: join(dir, 'rw'), size: BLOCKS * BLOCK });
    volumes.push(rw);
    const ro = await FileBackend.open({ path: join(dir, 'ro'), size: BLOCKS * BLOCK });
    volumes.push(ro);
    rwLu = new LogicalUnit({ name: 'rw', backend: rw, identifier: randomUUID() });
    server.addVolume({ name: 'rw', lun: 0, lu: rwLu, access: () => 'rw' });
    server.addVolume({ name: 'ro', lun: 1, lu: new LogicalUnit({ name: 'ro', backend: ro, identifier: randomUUID(), readOnly: true }), access: () => 'rw' });
    const port = (await listenTest(server, provider)).port;
    a = await RawClient.open(port, 'iqn.2026-12.io.rblk:a', version, provider);
    b = await RawClient.open(port, 'iqn.2026-12.io.rblk:b', version, provider);
    const rand = prng(seed);
    const int = (n: number): number => Math.floor(rand() * n);
    const countTaken = (): void => {
      for (const s of server.sessions) {
        if (((s as RblkConnection).fastPathStats?.reactor ?? -1) >= 0) onReactor++;
        taken += (s as RblkConnection).fastPathStats?.taken ?? 0;
        trainsTaken += (s as RblkConnection).fastPathStats?.trains ?? 0;
        byData += (s as RblkConnection).fastPathStats?.answeredByData ?? 0;
      }
    };
    const countAnswers = (c: RawClient): void => {
      answers.rsps += c.rsps;
      answers.byData += c.byData;
      trainsSent += c.trainsSent;
    };
    let reserved = false;
    // slice: a burst's i-th command gets blocks of its own (slice × 256 on), since
    // concurrent commands on the same blocks may run in any order (SAM-5 SIMPLE).
    const rwSpec = (at: number, slice?: number): [number, Buffer, CommandSpec] => {
      const lun = int(10) === 0 ? 1 : int(30) === 0 ? 7 : 0;
      const write = rand() < 0.5;
      const blocks = int(12) === 0 ? 0 : 1 + int(16);
      const lba = slice !== undefined ? slice * 256 + int(256 - 16) : int(10) === 0 ? BLOCKS - int(8) : int(BLOCKS - 16);
      const fua = rand() < 0.3;
      const misaligned = int(12) === 0;
      const length = misaligned ? blocks * BLOCK + [-BLOCK, BLOCK, 100][int(3)] : blocks * BLOCK;
      const sixteen = rand() < 0.5;
      const c16 = write ? cdb.write16(lba, blocks, { fua }) : cdb.read16(lba, blocks, { fua });
      const c10 = write ? cdb.write10(lba, blocks, { fua }) : cdb.read10(lba, blocks, { fua });
      const data = Buffer.alloc(Math.max(0, length), (seed + at + lba) & 0xff);
      for (let i = 0; i < data.length; i += 64) data[i] = int(256);
      const immediate = write && length > 0 && length <= 4096 && rand() < 0.3;
      return [lun, sixteen ? c16 : c10, { dir: write ? 'out' : 'in', length: Math.max(0, length), at, data, immediate }];
    };
    const rwOp = (c: RawClient, at: number): Promise<string> => c.command(...rwSpec(at));
    for (let step = 0; step < 400; step++) {
      const r = int(100);
      if (r < 70) {
        transcript.push(`rw ${await rwOp(a, 0)}`);
      } else if (r < 80) {
        // A burst of concurrent commands on disjoint buffers: from version 5 as trains.
        const n = 2 + int(7);
        const specs = Array.from({ length: n }, (_, i) => rwSpec(i * 16 * BLOCK + BLOCK * 64, i));
        transcript.push(...(await a.burst(specs)).map((x) => `burst ${x}`));
      } else if (r < 83) {
        // Another initiator takes (or gives up) a persistent reservation.
        const key = 0xb0b0n;
        const param = cdb.prOutParameterList(reserved ? { key, serviceActionKey: 0n } : { key, serviceActionKey: key });
        const params = { dir: 'out', length: param.length, data: param, at: 0 } as const;
        if (!reserved) {
          transcript.push(`pr-register ${await b.command(0, cdb.persistentReserveOut(PrOutAction.REGISTER), params)}`);
          const rp = cdb.prOutParameterList({ key });
          transcript.push(`pr-reserve ${await b.command(0, cdb.persistentReserveOut(PrOutAction.RESERVE, PrType.WRITE_EXCLUSIVE), { ...params, data: rp })}`);
        } else {
          const rp = cdb.prOutParameterList({ key });
          transcript.push(`pr-release ${await b.command(0, cdb.persistentReserveOut(PrOutAction.RELEASE, PrType.WRITE_EXCLUSIVE), { ...params, data: rp })}`);
          transcript.push(`pr-unregister ${await b.command(0, cdb.persistentReserveOut(PrOutAction.REGISTER), params)}`);
        }
        reserved = !reserved;
      } else if (r < 86) {
        // LUN RESET from the other initiator: this one sees 29/00 next. Reported
        // here by a command alone: among commands in flight together, which one
        // reports it is the target's timing (a WRITE checks after its data-out),
        // on either path.
        transcript.push(`lun-reset ${await b.task(0, TaskFunction.LUN_RESET, 0n)}`);
        transcript.push(`b-tur ${await b.command(0, cdb.testUnitReady(), { dir: 'none' })}`);
        transcript.push(`a-tur ${await a.command(0, cdb.testUnitReady(), { dir: 'none' })}`);
      } else if (r < 89) {
        transcript.push(`abort ${await a.task(0, TaskFunction.ABORT_TASK, a.lastTag)}`);
      } else if (r < 92) {
        transcript.push(`sync ${await a.command(0, cdb.synchronizeCache10(), { dir: 'none' })}`);
      } else if (r < 95) {
        const lba = int(BLOCKS);
        const data = Buffer.alloc(2 * BLOCK, int(3));
        transcript.push(`caw ${await a.command(0, cdb.compareAndWrite(lba, 1), { dir: 'out', length: data.length, data })}`);
      } else if (r < 97) {
        // A reconnect: a new nexus, which sees POWER ON, RESET first.
        countTaken();
        countAnswers(a);
        await a.close();
        a = await RawClient.open(port, 'iqn.2026-12.io.rblk:a', version, provider);
        transcript.push('reconnect');
        // Its POWER ON, RESET on each LUN, reported by a command alone (as after the LUN RESET above).
        for (const lun of [0, 1]) transcript.push(`a-tur ${lun} ${await a.command(lun, cdb.testUnitReady(), { dir: 'none' })}`);
      } else {
        transcript.push(`tur ${await a.command(0, cdb.testUnitReady(), { dir: 'none' })}`);
      }
    }
    transcript.push(`final ${await a.command(0, cdb.read16(0, BLOCKS), { dir: 'in', length: BLOCKS * BLOCK })}`);
    countTaken();
    countAnswers(a);
    countAnswers(b);
  } catch (e) {
    // A run that failed leaves no volume files behind (the directory goes below on success).
    await rm(dir, { recursive: true, force: true });
    throw e;
  } finally {
    await a?.close();
    await b?.close();
    await server.close();
    pool?.close();
    for (const v of volumes) await v.close();
  }
  const byClass = rwLu!.stats.byClass();
  const counters = JSON.stringify({ read: [byClass.read.ops, byClass.read.bytes], write: [byClass.write.ops, byClass.write.bytes] });
  const disk = await readFile(join(dir, 'rw'));
  await rm(dir, { recursive: true, force: true });
  return { transcript, disk, taken, byData, answers, counters, onReactor, trainsSent, trainsTaken };
}

const enabled = FastPath.available();

/** What any run with the fast path must share with the run without it: answers, disk, counters, answer kinds. */
function assertSameAsOff(t: ExecutionContext, on: Run, off: Run): void {
  t.is(off.taken, 0);
  t.true(on.taken > 100, `the fast path took only ${on.taken} commands`);
  t.is(on.transcript.length, off.transcript.length);
  const firstDiff = on.transcript.findIndex((x, i) => x !== off.transcript[i]);
  t.is(firstDiff, -1, firstDiff >= 0 ? `step ${firstDiff}: on ${on.transcript[firstDiff].slice(0, 200)} / off ${off.transcript[firstDiff].slice(0, 200)}` : '');
  t.true(on.disk.equals(off.disk), 'the files differ');
  // The fast path's answers are counted where the request core counts (rblkd ctl volumes, /metrics).
  t.is(on.counters, off.counters);
  t.notRegex(on.counters, /"read":\[0,/);
  // The same number of RSPs and of remote CQ data answers reached the initiators on either path.
  t.deepEqual(on.answers, off.answers);
}

for (const version of [1, 2, TRAIN_VERSION]) {
  (enabled ? test.serial : test.serial.skip)(`version ${version}: the same command mix gives the same answers, data and disk with fast_path on and off`, async (t) => {
    const on = await run(true, 0x5eed_fa57, version);
    const off = await run(false, 0x5eed_fa57, version);
    assertSameAsOff(t, on, off);
    if (version >= TRAIN_VERSION) {
      // §5.1: the bursts went as trains; the fast path took some whole, and JS the rest of the others.
      t.true(on.trainsSent > 20, `only ${on.trainsSent} trains sent`);
      t.is(off.trainsSent, on.trainsSent);
      t.true(on.trainsTaken > 0 && on.trainsTaken < on.trainsSent, `the fast path took ${on.trainsTaken} of ${on.trainsSent} trains whole`);
    } else {
      t.is(on.trainsSent, 0);
    }
    if (version === 1) {
      t.is(on.answers.byData, 0);
      t.is(on.byData, 0);
    } else {
      // §12.1: the fast path answered its GOOD reads by remote CQ data, with no RSP for them.
      t.true(on.byData > 50, `the fast path answered only ${on.byData} reads by remote CQ data`);
      t.true(on.answers.byData >= on.byData);
      t.true(on.transcript.some((x) => x.includes('remote-data')));
    }
    t.log(`${on.transcript.length} answers compared; the fast path took ${on.taken} commands, answered ${on.byData} reads by remote CQ data, took ${on.trainsTaken} of ${on.trainsSent} trains whole`);
  });

  // Reactor threads (docs/target.md "Reactors"): the same mix with every
  // connection's data path on one of two native threads, against the
  // JavaScript path: same answers, data, disk and counters.
  (enabled ? test.serial : test.serial.skip)(`version ${version}: the same command mix gives the same answers, data and disk with the fast path on 2 reactor threads`, async (t) => {
    const on = await run(true, 0x5eed_fa58, version, 2);
    const off = await run(false, 0x5eed_fa58, version);
    t.true(on.onReactor >= 2, `only ${on.onReactor} connections were served by a reactor`);
    t.is(off.onReactor, 0);
    assertSameAsOff(t, on, off);
    if (version >= TRAIN_VERSION) t.true(on.trainsTaken > 0, 'no train was taken whole on a reactor');
    t.log(`${on.transcript.length} answers compared; ${on.onReactor} connections on reactors took ${on.taken} commands`);
  });
}

// RDM endpoints (docs/transport.md "RDM endpoints"): the same mix over shm and
// tcp;ofi_rxm, fast path on against off, each on its own provider.
const rdmOffered = availableRdmProviders();
for (const provider of RDM_PROVIDERS) {
  for (const version of [1, 2, TRAIN_VERSION]) {
    const title = `${provider}, version ${version}: the same command mix gives the same answers, data and disk with fast_path on and off`;
    const why = !enabled
      ? 'no fast path in this build'
      : !rdmOffered.includes(provider)
        ? `libfabric offers no ${provider} here`
        : null;
    if (why !== null) {
      test.serial.skip(`${title} (skipped: ${why})`, () => undefined);
      continue;
    }
    test.serial(title, async (t) => {
      const on = await run(true, 0x5eed_fa59, version, 0, provider);
      const off = await run(false, 0x5eed_fa59, version, 0, provider);
      assertSameAsOff(t, on, off);
      if (version >= TRAIN_VERSION) t.true(on.trainsTaken > 0 && on.trainsSent > 20, `${on.trainsTaken} of ${on.trainsSent} trains taken whole`);
      t.log(`${on.transcript.length} answers compared; the fast path took ${on.taken} commands over ${provider}, ${on.trainsTaken} of ${on.trainsSent} trains whole`);
    });
  }
}

(enabled ? test.serial : test.serial.skip)('version 2: a fast-path READ is answered by one write with the tag\'s low 32 bits as remote CQ data and no RSP', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'rblk-fastpath-'));
  const server = new TargetServer(
    {
      targetName: TARGET_NAME,
      limits: { queueDepth: 16, maxIo: 1 << 20, inCapsuleData: 4096, maxDescriptors: 16, keepAliveMs: 0, loginTimeoutMs: 10_000, maxSessions: 8, dataBuffers: 16 },
      authRequired: false,
      secrets: new Map(),
      log: memoryLog(),
      fastPath: true,
    },
    rblkConnections,
  );
  const vol = await FileBackend.open({ path: join(dir, 'rw'), size: BLOCKS * BLOCK });
  let c: RawClient | null = null;
  try {
    server.addVolume({ name: 'rw', lun: 0, lu: new LogicalUnit({ name: 'rw', backend: vol, identifier: randomUUID() }), access: () => 'rw' });
    const port = (await listenTest(server, 'tcp')).port;
    c = await RawClient.open(port, 'iqn.2026-12.io.rblk:a', 2);
    const data = Buffer.alloc(8 * BLOCK);
    for (let i = 0; i < data.length; i++) data[i] = (i * 7 + 3) & 0xff;
    // A new nexus sees POWER ON, RESET first (29/00); the TEST UNIT READY takes it.
    t.regex(await c.command(0, cdb.testUnitReady(), { dir: 'none' }), /^0000000102/);
    // Writes are unchanged: an RSP, whose body (§9.3) starts with credit delta 1 and status GOOD (00).
    const w = await c.command(0, cdb.write10(40, 8), { dir: 'out', length: data.length, data });
    t.true(w.startsWith('0000000100'), `the WRITE's RSP: ${w}`);
    const rspsBefore = c.rsps;
    const readTag = (5n << 32n) + 102n;
    const r = await c.command(0, cdb.read10(40, 8), { dir: 'in', length: data.length, at: 4096 });
    t.is(r, `remote-data ${Number(readTag & 0xffff_ffffn).toString(16)} ${data.toString('hex')}`);
    t.is(c.rsps, rspsBefore, 'no RSP for the READ');
    t.is(c.byData, 1);
    const stats = ([...server.sessions][0] as RblkConnection).fastPathStats!;
    t.is(stats.taken, 2, 'both commands ran on the fast path');
    t.is(stats.answeredByData, 1);
    t.is(stats.handedOff, 0);
    // The volume is buffered and the READ's blocks were just written: the page
    // cache held them, so io_uring finished the read inside its submission and
    // the fast path answered it in the same wake-up (fast-backend.h Submit).
    t.true(stats.ioInline >= 1, `reads answered inline: ${stats.ioInline}`);
    // An error is still answered by RSP, from JS (an LBA past the end: the fast path declines it).
    const bad = await c.command(0, cdb.read10(BLOCKS, 1), { dir: 'in', length: BLOCK });
    t.false(bad.startsWith('remote-data'));
    t.is(c.rsps, rspsBefore + 1);
  } finally {
    await c?.close();
    await server.close();
    await vol.close();
    await rm(dir, { recursive: true, force: true });
  }
});
