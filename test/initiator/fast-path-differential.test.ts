// The initiator's native queue against its JavaScript path (docs/initiator.md
// "Fast path"): one seeded, randomised mix of READ and WRITE (10 and 16 as
// the LBA needs), FUA, LBAs past the end, a read-only volume, an unknown LUN,
// transfers whose buffer is longer than the CDB (residuals), registered
// memory and ordinary Buffers (the I/O pool, immediate data; registered
// writes up to 4 KiB go as immediate data from the native queue), and bursts of
// concurrent commands, sent through the session with fastPath on and then
// off, over real tcp endpoints to real files. Each command's status, sense
// bytes and data-in count, the bytes read, and the file's bytes at the end
// must be the same both ways; and the native queue must have carried the
// commands in the first run and none in the second.
import test from 'ava';
import { randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as cdb from '../../protocol/scsi/cdb.js';
import { FileBackend } from '../../target/backend/file.js';
import { LogicalUnit } from '../../target/scsi/index.js';
import { TargetServer } from '../../target/server.js';
import { rblkConnections } from '../../target/rblk/connection.js';
import { connect, type RblkError, type RecoveryEvent, type Session } from '../../initiator/index.js';
import type { RegisteredBuffer } from '../../initiator/registered-buffer.js';
import type { ScsiRequest, ScsiResponse } from '../../initiator/scsi-request.js';
import { prng } from '../protocol/fuzz-corpus.js';
import { GatedBackend } from './helpers/gated-backend.js';
import { gated, startServer, until, type TestTarget } from './helpers/target.js';
import { listenTest, memoryLog, TARGET_NAME } from '../helpers/target-fixture.js';
import { checkSuiteResources, warmUpFabric } from '../helpers/resources.js';

checkSuiteResources(test, { warmUp: () => warmUpFabric(['tcp']) });

const BLOCK = 512;
const BLOCKS = 2048; // 1 MiB volumes
const SLOT = 32 * BLOCK; // each concurrent command has its own part of the buffer
const BURST_SPAN = Math.floor((BLOCKS - 16) / 14); // each command of a burst (up to 13) has its own blocks, clear of the last 16

interface Run {
  transcript: string[];
  disk: Buffer;
  fast: number;
  immediate: number;
}

/** One try of one command, no retries: Session.execute is what Volume's commands are built on. */
function execute(s: Session, req: ScsiRequest): Promise<ScsiResponse> {
  return (s as unknown as { execute(r: ScsiRequest): Promise<ScsiResponse> }).execute(req);
}

async function run(fastPath: boolean, seed: number): Promise<Run> {
  const dir = await mkdtemp(join(tmpdir(), 'rblk-init-fast-'));
  const server = new TargetServer(
    {
      targetName: TARGET_NAME,
      limits: { queueDepth: 32, maxIo: 1 << 20, inCapsuleData: 4096, maxDescriptors: 16, keepAliveMs: 0, loginTimeoutMs: 10_000, maxSessions: 8, dataBuffers: 16 },
      authRequired: false,
      secrets: new Map(),
      log: memoryLog(),
    },
    rblkConnections,
  );
  const transcript: string[] = [];
  const volumes: FileBackend[] = [];
  let session: Session | null = null;
  let buf: RegisteredBuffer | null = null;
  try {
    const rw = await FileBackend.open({ path: join(dir, 'rw'), size: BLOCKS * BLOCK });
    volumes.push(rw);
    const ro = await FileBackend.open({ path: join(dir, 'ro'), size: BLOCKS * BLOCK });
    volumes.push(ro);
    server.addVolume({ name: 'rw', lun: 0, lu: new LogicalUnit({ name: 'rw', backend: rw, identifier: randomUUID() }), access: () => 'rw' });
    server.addVolume({ name: 'ro', lun: 1, lu: new LogicalUnit({ name: 'ro', backend: ro, identifier: randomUUID(), readOnly: true }), access: () => 'rw' });
    const port = (await listenTest(server, 'tcp')).port;
    session = await connect({ address: '127.0.0.1', port, provider: 'tcp', initiatorName: 'iqn.2026-12.io.rblk:diff', targetName: TARGET_NAME, queueDepth: 16, fastPath });
    const s = session;
    const b = s.allocate(16 * SLOT);
    buf = b;
    const rand = prng(seed);
    const int = (n: number): number => Math.floor(rand() * n);

    const op = async (slot: number, burst = false): Promise<string> => {
      const lun = int(10) === 0 ? 1 : int(30) === 0 ? 7 : 0;
      const write = rand() < 0.5;
      const fua = write && rand() < 0.3;
      const blocks = 1 + int(16);
      // Past the end now and then (LBA OUT OF RANGE), and beyond 2^32 blocks (the 16-byte CDBs).
      // In a burst each command has blocks of its own (and past the end, none): commands in flight
      // together are unordered (SAM-5 SIMPLE), so overlapping ones could end either way, differently
      // on each path.
      const end = burst ? BLOCKS + int(8) : BLOCKS - int(8);
      const lba = int(10) === 0 ? end : int(40) === 0 ? 2 ** 32 + int(4) : burst ? slot * BURST_SPAN + int(BURST_SPAN - 16) : int(BLOCKS - 16);
      // A buffer longer than the CDB transfers: the target moves the CDB's bytes and reports the rest (§9.3).
      const length = int(12) === 0 ? (blocks + 1) * BLOCK : blocks * BLOCK;
      const at = slot * SLOT;
      // Registered memory, or an ordinary Buffer (copied through the I/O pool, or sent as immediate data).
      const plain = rand() < 0.3;
      const mem = plain ? Buffer.alloc(length) : b.buffer.subarray(at, at + length);
      if (write) {
        for (let i = 0; i < length; i++) mem[i] = (seed + lba + i * 7 + int(3)) & 0xff;
      } else {
        mem.fill(0xee);
      }
      const registered = { kind: 'registered' as const, buffer: b, offset: at, length };
      const req: ScsiRequest = {
        lun,
        cdb: write ? cdb.write(lba, blocks, { fua }) : cdb.read(lba, blocks),
        rw: { write, fua, lba, blocks },
        ...(write ? { dataOut: plain ? { kind: 'bytes' as const, data: mem } : registered } : { dataIn: plain ? { kind: 'bytes' as const, into: mem } : registered }),
        idempotent: true,
        what: `${write ? 'write' : 'read'} lun ${lun} lba ${lba} blocks ${blocks}${plain ? ' (Buffer)' : ''}`,
      };
      const r = await execute(s, req);
      const head = `${req.what} len ${length}${fua ? ' fua' : ''}: status ${r.status} sense ${r.sense.toString('hex')} dataIn ${r.dataIn}`;
      return write ? head : `${head} ${mem.subarray(0, r.dataIn).toString('hex')}`;
    };

    for (let step = 0; step < 300; step++) {
      if (int(5) === 0) {
        const n = 2 + int(12);
        const got = await Promise.all(Array.from({ length: n }, (_, i) => op(i, true)));
        transcript.push(...got.map((x) => `burst ${x}`));
      } else {
        transcript.push(await op(0));
      }
    }
    const fast = s.fastPathCommands;
    const immediate = s.fastPathImmediateWrites;
    b.release();
    buf = null;
    await s.close();
    session = null;
    return { transcript, disk: await readFile(join(dir, 'rw')), fast, immediate };
  } finally {
    buf?.release();
    await session?.close();
    await server.close();
    for (const v of volumes) await v.close();
    await rm(dir, { recursive: true, force: true });
  }
}

test('the native queue and the JavaScript path give the same answers, data and disk', async (t) => {
  t.timeout(180_000);
  const seed = 20261202;
  const on = await run(true, seed);
  const off = await run(false, seed);
  t.log(`native queue: ${on.fast} commands, ${on.transcript.filter((l) => / status 0 /.test(l)).length} of ${on.transcript.length} answers GOOD`);
  t.true(on.fast > 0, 'the native queue carried commands with fastPath on');
  t.is(off.fast, 0, 'and none with it off');
  // Registered writes up to the login's immediate data size (4 KiB here) carried their data in the CMD; longer ones named their buffer.
  t.true(on.immediate > 0 && on.immediate < on.fast, `immediate-data writes: ${on.immediate} of ${on.fast}`);
  t.is(on.transcript.length, off.transcript.length);
  for (let i = 0; i < on.transcript.length; i++) {
    if (on.transcript[i] !== off.transcript[i]) {
      t.fail(`command ${i} differs:\n  on:  ${on.transcript[i].slice(0, 400)}\n  off: ${off.transcript[i].slice(0, 400)}`);
      return;
    }
  }
  // The mix did reach every kind of answer.
  const all = on.transcript.join('\n');
  t.regex(all, /status 0 sense  dataIn [1-9]/, 'GOOD reads');
  t.regex(all, /status 2 sense 70/, 'CHECK CONDITION with sense');
  t.true(on.disk.equals(off.disk), 'the same bytes on disk');
  t.false(on.disk.equals(Buffer.alloc(on.disk.length)), 'writes landed');
});

test('tcp: a native-queue read that times out is aborted with ABORT TASK by its tag and fails TIMEOUT; the session goes on', async (t) => {
  t.timeout(60_000);
  const target = await startServer('tcp', [{ name: 'vol0', lun: 0 }]);
  // Long enough that the read is in the backend, where ABORT TASK finds it, before it times out.
  const s = await connect(target.options({ timeouts: { commandMs: 1500, abortMs: 10_000 } }));
  t.teardown(async () => {
    await s.close();
    await target.close();
  });
  const vol = await s.open('vol0');
  const buf = s.allocate(4096);
  t.teardown(() => buf.release());
  const events: RecoveryEvent[] = [];
  s.on('recovery', (e) => events.push(e));
  const gate = gated(target, 'vol0').hold('read');
  const before = s.fastPathCommands;
  const read = vol.read(0, buf);
  read.catch(() => undefined);
  await gate.reached;
  // The read goes on only once the target has the ABORT TASK, so that it ends TASK ABORTED.
  await until(() => target.log.some((l) => l.message.startsWith('TSK_MGMT ABORT_TASK')), 'the ABORT TASK at the target', 30_000);
  gate.release();
  const e = await t.throwsAsync(read);
  t.is((e as RblkError).code, 'TIMEOUT');
  t.is(s.fastPathCommands, before + 1, 'the read went through the native queue');
  t.is(events.length, 1);
  t.is(events[0].action, 'abort-task');
  // The queue's tags have bit 31 of the low word set (native/src/core/initiator-queue.h).
  t.is((events[0].tag ?? 0n) & 0x80000000n, 0x80000000n);
  t.true(target.log.some((l) => l.message.startsWith(`TSK_MGMT ABORT_TASK on LUN 0 for tag ${events[0].tag} `)), 'the target was asked to abort that tag');
  t.is(s.state, 'connected');
  buf.buffer.fill(9);
  await vol.write(0, buf);
  buf.buffer.fill(0);
  await vol.read(0, buf);
  t.true(buf.buffer.equals(Buffer.alloc(4096, 9)));
});

test('tcp: native-queue writes in flight on registered memory when the target goes away are reissued on the next connection, as pooled I/O is; acknowledged writes stay', async (t) => {
  t.timeout(60_000);
  const backend = new GatedBackend(4 << 20, { name: 'vol0' });
  const identifier = randomUUID();
  const first = await startServer('tcp', [{ name: 'vol0', lun: 0, backend, identifier }]);
  let second: TestTarget | null = null;
  const s = await connect(first.options({ timeouts: { lossMs: 20_000 }, reconnect: { initialDelayMs: 20, maxDelayMs: 200 } }));
  t.teardown(async () => {
    await s.close();
    await second?.close();
  });
  const vol = await s.open('vol0');
  const buf = s.allocate(5 * 4096);
  buf.buffer.fill(0x5a, 0, 4096);
  await vol.write(0, buf.buffer.subarray(0, 4096));
  const acknowledged = s.fastPathCommands;
  t.true(acknowledged >= 1, 'the acknowledged write went through the native queue');
  const writes = backend.hold('write');
  const settled: string[] = [];
  const inFlight = [1, 2, 3, 4].map((i) => {
    buf.buffer.fill(i, i * 4096, (i + 1) * 4096);
    return vol.write(i * 4096, buf.buffer.subarray(i * 4096, (i + 1) * 4096), { fua: i % 2 === 0 }).then(
      () => settled.push(`${i} ok`),
      (e: unknown) => settled.push(`${i} ${(e as RblkError).code}`),
    );
  });
  await writes.reached;
  t.is(s.fastPathCommands, acknowledged + 4, 'all four went through the native queue');
  const closing = first.close();
  writes.release();
  await closing;
  t.deepEqual(settled, [], 'nothing settled while no target was up');
  t.true(buf.valid, 'the registered buffer is the session\'s: it outlived its connection');
  t.is(buf.buffer.length, 5 * 4096, 'and its memory was not detached');
  second = await startServer('tcp', [{ name: 'vol0', lun: 0, backend, identifier }], { port: first.port });
  await Promise.all(inFlight);
  t.deepEqual(settled.sort(), ['1 ok', '2 ok', '3 ok', '4 ok']);
  t.true((await vol.read(0, 4096)).equals(Buffer.alloc(4096, 0x5a)), 'the acknowledged write is on the volume');
  for (const i of [1, 2, 3, 4]) t.true((await vol.read(i * 4096, 4096)).equals(Buffer.alloc(4096, i)), `write ${i} is on the volume`);
  buf.buffer.fill(0x77, 0, 4096);
  await vol.write(4096, buf.buffer.subarray(0, 4096));
  t.true((await vol.read(4096, 4096)).equals(Buffer.alloc(4096, 0x77)), 'the same registered buffer works on the new connection');
});
