// Data movement through the target: scatter-gather lists, commands waiting
// for the data pool instead of failing, and COMPARE AND WRITE atomicity
// across sessions.
import test from 'ava';
import { capsuleBuffer, decodeCapsule, Opcode } from '../../protocol/wire/index.js';
import * as cdb from '../../protocol/scsi/cdb.js';
import { decodeSense } from '../../protocol/scsi/sense.js';
import { ScsiStatus } from '../../protocol/scsi/status.js';
import { pattern } from '../helpers/fabric-pair.js';
import { untilValue } from '../../bench/kit/wait.js';
import { startTarget, TARGET_NAME } from '../helpers/target-fixture.js';
import { checkSuiteResources, warmUpFabric } from '../helpers/resources.js';

// Every session this file opens gives its fds back (docs/target.md "Resources per connection").
checkSuiteResources(test, { warmUp: () => warmUpFabric() });

for (const kind of ['loop', 'tcp'] as const) {
  test.serial(`${kind}: a scatter-gather list writes and reads the concatenation of its regions`, async (t) => {
    const f = await startTarget(kind);
    t.teardown(() => f.close());
    const conn = await f.initiatorTransport.connect({
      address: f.address,
      port: f.port,
      provider: kind === 'loop' ? undefined : kind,
      maxCapsule: 1024,
      queueDepth: 4,
      receiveSize: 1024,
      ioPoolSize: 1 << 20,
      ioChunkSize: 1 << 20,
    });
    t.teardown(() => conn.close());
    const got: ReturnType<typeof decodeCapsule>[] = [];
    conn.onCapsule = (b) => got.push(decodeCapsule(b, { from: 'target' }));
    // Protocol version 2 answers a GOOD read by its data's remote CQ data, the tag's low 32 bits (docs/protocol.md §12.1).
    conn.onRemoteData = (d) => got.push({ op: Opcode.RSP, tag: BigInt(d), creditDelta: 1, status: ScsiStatus.GOOD, sense: Buffer.alloc(0), dataOutResidual: null, dataInResidual: null });
    const until = (tag: bigint) => untilValue(() => got.find((c) => c.tag === tag), `the answer to tag ${tag}`);
    await conn.send(
      capsuleBuffer({
        op: Opcode.LOGIN_REQ,
        tag: 1n,
        authRequired: false,
        maxItCapsule: 1024,
        maxTiCapsule: 1024,
        immediateDataSize: 0,
        credits: 4,
        initiatorName: 'iqn.2026-11.io.rblk:sg',
        targetName: TARGET_NAME,
      }),
    );
    await until(1n);
    const io = await conn.allocate(64 * 1024);
    const data = pattern(12 * 512, 42);
    // Three regions, out of order in memory: [8K..10K), [0..2K), [30K..32K).
    const regions = [
      { at: 8192, len: 2048 },
      { at: 0, len: 2048 },
      { at: 30 * 1024, len: 2048 },
    ];
    let o = 0;
    for (const r of regions) {
      data.copy(io.buffer, r.at, o, o + r.len);
      o += r.len;
    }
    const descriptors = regions.map((r) => io.segments(r.at, r.len)[0]);
    const pad = (b: Buffer) => Buffer.concat([b, Buffer.alloc(16 - b.length)]);
    // The first command answers the login's unit attention; send TUR first.
    await conn.send(capsuleBuffer({ op: Opcode.CMD, tag: 2n, lun: 0, taskAttribute: 0, direction: 0, cdb: pad(cdb.testUnitReady()), data: { format: 0 } }));
    await until(2n);
    await conn.send(capsuleBuffer({ op: Opcode.CMD, tag: 3n, lun: 0, taskAttribute: 0, direction: 1, cdb: cdb.write16(10, 12), data: { format: 2, descriptors } }));
    const w = await until(3n);
    t.is(w && 'status' in w ? w.status : -1, ScsiStatus.GOOD);
    // The medium holds the regions in list order.
    const onDisk = Buffer.alloc(12 * 512);
    await f.server.volume('vol0')!.lu.backend.read(onDisk, 10 * 512);
    t.true(onDisk.equals(data));
    // And a list read scatters them back.
    io.buffer.fill(0);
    await conn.send(capsuleBuffer({ op: Opcode.CMD, tag: 4n, lun: 0, taskAttribute: 0, direction: 2, cdb: cdb.read16(10, 12), data: { format: 2, descriptors } }));
    const r = await until(4n);
    t.is(r && 'status' in r ? r.status : -1, ScsiStatus.GOOD);
    o = 0;
    for (const reg of regions) {
      t.true(io.buffer.subarray(reg.at, reg.at + reg.len).equals(data.subarray(o, o + reg.len)));
      o += reg.len;
    }
  });

  test.serial(`${kind}: more large commands than data buffers wait their turn and all succeed`, async (t) => {
    // The fixture's pool has 16 chunks of 1 MiB; three sessions put 48 1-MiB writes in flight.
    const f = await startTarget(kind, [{ name: 'vol0', lun: 0, size: 64 << 20 }], { queueDepth: 32 });
    t.teardown(() => f.close());
    const sessions = await Promise.all([0, 1, 2].map((i) => f.connect({ initiatorName: `iqn.2026-11.io.rblk:p${i}`, queueDepth: 17 })));
    for (const s of sessions) await s.command({ lun: 0, cdb: cdb.testUnitReady() });
    const writes = sessions.flatMap((s, si) =>
      Array.from({ length: 16 }, async (_, i) => {
        const n = si * 16 + i;
        const buf = await s.allocate(1 << 20);
        pattern(1 << 20, n + 1).copy(buf.buffer);
        const r = await s.command({ lun: 0, cdb: cdb.write16(n * 2048, 2048), dataOut: buf });
        buf.release();
        return r.status;
      }),
    );
    const statuses = await Promise.all(writes);
    t.deepEqual(statuses, new Array(48).fill(ScsiStatus.GOOD));
    const check = await sessions[0].allocate(1 << 20);
    for (const n of [0, 17, 47]) {
      const r = await sessions[0].command({ lun: 0, cdb: cdb.read16(n * 2048, 2048), dataIn: check });
      t.is(r.status, ScsiStatus.GOOD);
      t.true(check.buffer.equals(pattern(1 << 20, n + 1)), `write ${n} intact`);
    }
  });

  test.serial(`${kind}: COMPARE AND WRITE from racing sessions: exactly one wins, nothing torn`, async (t) => {
    const f = await startTarget(kind);
    t.teardown(() => f.close());
    const sessions = await Promise.all([0, 1, 2, 3].map((i) => f.connect({ initiatorName: `iqn.2026-11.io.rblk:c${i}` })));
    for (const s of sessions) await s.command({ lun: 0, cdb: cdb.testUnitReady() });
    const old = Buffer.alloc(512, 0x11);
    await f.server.volume('vol0')!.lu.backend.write(old, 5 * 512);
    const results = await Promise.all(
      sessions.map(async (s, i) => {
        const buf = await s.allocate(1024);
        old.copy(buf.buffer, 0);
        buf.buffer.fill(0x20 + i, 512, 1024);
        return s.command({ lun: 0, cdb: cdb.compareAndWrite(5, 1), dataOut: buf });
      }),
    );
    const winners = results.filter((r) => r.status === ScsiStatus.GOOD);
    t.is(winners.length, 1);
    for (const r of results.filter((x) => x.status !== ScsiStatus.GOOD)) {
      const s = decodeSense(r.sense);
      t.deepEqual([s?.key, s?.asc, s?.ascq], [0x0e, 0x1d, 0], 'the others miscompare');
    }
    const after = Buffer.alloc(512);
    await f.server.volume('vol0')!.lu.backend.read(after, 5 * 512);
    const winner = results.findIndex((r) => r.status === ScsiStatus.GOOD);
    t.true(after.equals(Buffer.alloc(512, 0x20 + winner)), 'the block is the winner’s, whole');
  });
}
