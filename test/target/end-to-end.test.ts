import test from 'ava';
import * as cdb from '../../protocol/scsi/cdb.js';
import { parseReadCapacity16 } from '../../protocol/scsi/read-capacity.js';
import { decodeSense } from '../../protocol/scsi/sense.js';
import { ScsiStatus } from '../../protocol/scsi/status.js';
import { pattern } from '../helpers/fabric-pair.js';
import { startTarget, ALL_TRANSPORTS as TRANSPORTS } from '../helpers/target-fixture.js';
import { checkSuiteResources, warmUpFabric } from '../helpers/resources.js';

// Every session this file opens gives its fds back (docs/target.md "Resources per connection").
checkSuiteResources(test, { warmUp: () => warmUpFabric() });

for (const kind of TRANSPORTS) {
  test.serial(`${kind}: login, READ CAPACITY, write then read back across block sizes`, async (t) => {
    const f = await startTarget(kind, [
      { name: 'small', lun: 0, size: 8 << 20, blockSize: 512 },
      { name: 'big', lun: 1, size: 16 << 20, blockSize: 4096 },
    ]);
    t.teardown(() => f.close());
    const c = await f.connect();
    t.true(c.sessionId > 0n);
    for (const [lun, bs, size] of [
      [0, 512, 8 << 20],
      [1, 4096, 16 << 20],
    ] as const) {
      // The first command sees the unit attention of the login (29/00), then capacity.
      const cap = await c.allocate(32);
      let r = await c.command({ lun, cdb: cdb.readCapacity16(32), dataIn: cap });
      if (r.status === ScsiStatus.CHECK_CONDITION) {
        const s = decodeSense(r.sense);
        t.is(s?.key, 6, 'unit attention after login');
        t.is(s?.asc, 0x29);
        r = await c.command({ lun, cdb: cdb.readCapacity16(32), dataIn: cap });
      }
      t.is(r.status, ScsiStatus.GOOD);
      const capacity = parseReadCapacity16(cap.buffer);
      t.is(capacity.blockSize, bs);
      t.is(Number(capacity.lastLba) + 1, size / bs);
      cap.release();

      for (const blocks of [1, 8, 64]) {
        const len = blocks * bs;
        const data = pattern(len, lun * 1000 + blocks);
        const out = await c.allocate(len);
        data.copy(out.buffer);
        const lba = 3 * blocks;
        const w = await c.command({ lun, cdb: cdb.write16(lba, blocks, { fua: blocks === 8 }), dataOut: out });
        t.is(w.status, ScsiStatus.GOOD, `write ${blocks} blocks`);
        out.release();
        const into = await c.allocate(len);
        into.buffer.fill(0);
        const rd = await c.command({ lun, cdb: cdb.read16(lba, blocks), dataIn: into });
        t.is(rd.status, ScsiStatus.GOOD);
        t.is(rd.dataIn, len);
        t.true(into.buffer.equals(data), `read back ${blocks} blocks of ${bs}`);
        into.release();
      }
    }
    // Immediate (in-capsule) write data.
    const small = pattern(512, 7);
    const w = await c.command({ lun: 0, cdb: cdb.write10(100, 1), dataOut: small });
    t.is(w.status, ScsiStatus.GOOD);
    const into = await c.allocate(512);
    await c.command({ lun: 0, cdb: cdb.read10(100, 1), dataIn: into });
    t.true(into.buffer.equals(small), 'immediate data landed');
    into.release();
    await c.logout();
  });

  test.serial(`${kind}: errors come back as sense, and the session carries on`, async (t) => {
    const f = await startTarget(kind, [
      { name: 'rw', lun: 0, size: 1 << 20 },
      { name: 'ro', lun: 1, size: 1 << 20, readOnly: true },
    ]);
    t.teardown(() => f.close());
    const c = await f.connect();
    const buf = await c.allocate(4096);
    const once = async (lun: number, b: Buffer, opts: { in?: boolean } = {}) => {
      let r = await c.command({ lun, cdb: b, ...(opts.in ? { dataIn: buf } : { dataOut: buf }), length: 512 });
      if (r.status === ScsiStatus.CHECK_CONDITION && decodeSense(r.sense)?.key === 6) r = await c.command({ lun, cdb: b, ...(opts.in ? { dataIn: buf } : { dataOut: buf }), length: 512 });
      return r;
    };
    const past = await once(0, cdb.read16(2048, 1), { in: true });
    t.is(past.status, ScsiStatus.CHECK_CONDITION);
    t.deepEqual(pick(decodeSense(past.sense)), { key: 5, asc: 0x21, ascq: 0 }, 'LBA out of range');
    const ro = await once(1, cdb.write16(0, 1));
    t.deepEqual(pick(decodeSense(ro.sense)), { key: 7, asc: 0x27, ascq: 0 }, 'write protected');
    const badOp = await c.command({ lun: 0, cdb: Buffer.from([0xff]) });
    t.deepEqual(pick(decodeSense(badOp.sense)), { key: 5, asc: 0x20, ascq: 0 }, 'invalid opcode');
    const noLun = await c.command({ lun: 7, cdb: cdb.testUnitReady() });
    t.deepEqual(pick(decodeSense(noLun.sense)), { key: 5, asc: 0x25, ascq: 0 }, 'LUN not supported');
    const ok = await once(0, cdb.read16(0, 1), { in: true });
    t.is(ok.status, ScsiStatus.GOOD, 'the session still works');
  });
}

function pick(s: { key: number; asc: number; ascq: number } | undefined) {
  return s && { key: s.key, asc: s.asc, ascq: s.ascq };
}
