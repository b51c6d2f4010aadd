// WRITE ATOMIC(16) and EXTENDED COPY over rblk's capsules and real libfabric
// endpoints (docs/target.md "WRITE ATOMIC(16)", "EXTENDED COPY"): the bytes
// land, the refusals come back as sense with nothing written, and RECEIVE
// COPY RESULTS reports the copy to the session that made it.
import test from 'ava';
import * as cdb from '../../protocol/scsi/cdb.js';
import { DesignatorType, parseDeviceIdentification } from '../../protocol/scsi/inquiry.js';
import { VpdPage } from '../../protocol/scsi/opcodes.js';
import { decodeSense } from '../../protocol/scsi/sense.js';
import { ScsiStatus } from '../../protocol/scsi/status.js';
import { pattern } from '../helpers/fabric-pair.js';
import { checkSuiteResources, warmUpFabric } from '../helpers/resources.js';
import { startTarget, TRANSPORTS } from '../helpers/target-fixture.js';

checkSuiteResources(test, { warmUp: () => warmUpFabric() });

const BLOCK = 512;

for (const kind of TRANSPORTS) {
  test.serial(`${kind}: WRITE ATOMIC lands whole physical blocks, refuses a misaligned one; EXTENDED COPY copies them and reports it`, async (t) => {
    const f = await startTarget(kind, [{ name: 'vol0', lun: 0, size: 8 << 20, blockSize: BLOCK }]);
    t.teardown(() => f.close());
    const c = await f.connect();
    const sense = (s: Buffer | undefined): [number, number, number] | undefined => {
      const d = s === undefined ? undefined : decodeSense(s);
      return d ? [d.key, d.asc, d.ascq] : undefined;
    };
    // The login's unit attention (29/00) first.
    await c.command({ lun: 0, cdb: cdb.testUnitReady() });

    const data = pattern(8 * BLOCK, 9);
    const out = await c.allocate(8 * BLOCK);
    data.copy(out.buffer);
    const w = await c.command({ lun: 0, cdb: cdb.writeAtomic16(8, 8), dataOut: out });
    t.is(w.status, ScsiStatus.GOOD, 'an aligned atomic write of one physical block');
    const bad = await c.command({ lun: 0, cdb: cdb.writeAtomic16(9, 8), dataOut: out });
    t.deepEqual(sense(bad.sense), [5, 0x24, 0], 'misaligned: INVALID FIELD IN CDB');
    out.release();

    const vpd = await c.allocate(255);
    t.is((await c.command({ lun: 0, cdb: cdb.inquiry(255, VpdPage.DEVICE_IDENTIFICATION), dataIn: vpd })).status, ScsiStatus.GOOD);
    const naa = parseDeviceIdentification(vpd.buffer).find((d) => d.type === DesignatorType.NAA && d.association === 0);
    vpd.release();
    t.truthy(naa, 'the LU has an NAA designator');
    const list = cdb.extendedCopyList({ listId: 3, targets: [naa!.value], blockSize: BLOCK, segments: [{ blocks: 8, srcLba: 8, dstLba: 100 }] });
    const listBuf = await c.allocate(list.length);
    list.copy(listBuf.buffer);
    t.is((await c.command({ lun: 0, cdb: cdb.extendedCopy(list.length), dataOut: listBuf })).status, ScsiStatus.GOOD, 'EXTENDED COPY');
    listBuf.release();

    const back = await c.allocate(16 * BLOCK);
    t.is((await c.command({ lun: 0, cdb: cdb.read16(8, 16), dataIn: back })).status, ScsiStatus.GOOD);
    t.true(back.buffer.subarray(0, 8 * BLOCK).equals(data), 'the atomic write');
    t.true(back.buffer.subarray(8 * BLOCK).equals(Buffer.alloc(8 * BLOCK)), 'the refused write left LBA 16 on untouched');
    t.is((await c.command({ lun: 0, cdb: cdb.read16(100, 8), dataIn: back, length: 8 * BLOCK })).status, ScsiStatus.GOOD);
    t.true(back.buffer.subarray(0, 8 * BLOCK).equals(data), 'the copy');
    back.release();

    const st = await c.allocate(64);
    const r = await c.command({ lun: 0, cdb: cdb.receiveCopyResults(0, 3, 64), dataIn: st });
    t.is(r.status, ScsiStatus.GOOD);
    t.deepEqual([...st.buffer.subarray(0, 12)], [0, 0, 0, 8, 0x01, 0, 1, 0, 0, 0, (8 * BLOCK) >> 8, 0], 'COPY STATUS: completed, 1 segment, 4 KiB');
    st.release();
  });
}
