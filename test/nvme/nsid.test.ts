// A volume's `nsid:` (docs/nvme.md "Configuration"): its namespace takes that
// ID instead of LUN + 1, in the active namespace list and for I/O, and the
// ID LUN + 1 would have been is not a namespace.
import test from 'ava';
import { randomBytes } from 'node:crypto';
import { startNvme } from './fixture.js';
import { RawHost, rwSqe } from '../../bench/soak/nvme-raw-host.js';

test('a volume with nsid 7 is namespace 7; the others keep LUN + 1', async (t) => {
  const f = await startNvme([
    { name: 'a', lun: 0, size: 1 << 20, nsid: 7 },
    { name: 'b', lun: 1, size: 1 << 20 },
  ]);
  t.teardown(() => f.close());
  const admin = await RawHost.open(f.port);
  t.teardown(() => admin.close());
  const cntlid = await admin.enable(f.nqn);
  const list = (await admin.admin(0x06, { length: 4096, cdw: { 10: 0x02 } })).data;
  t.deepEqual([list.readUInt32LE(0), list.readUInt32LE(4), list.readUInt32LE(8)], [2, 7, 0]);
  const io = await RawHost.open(f.port);
  t.teardown(() => io.close());
  await io.initialize();
  t.is((await io.connect({ qid: 1, sqsize: 16, subnqn: f.nqn, cntlid })).statusField, 0);
  const data = randomBytes(4096);
  t.is((await io.command(rwSqe(0x01, io.nextCid(), 7, 0, 8, 4096), { data })).statusField, 0);
  const back = Buffer.alloc(4096);
  await f.volumes[0]!.backend.read(back, 0);
  t.true(back.equals(data), "namespace 7 is volume a's backend");
  t.is((await io.command(rwSqe(0x02, io.nextCid(), 1, 0, 1, 512))).sc, 0x0b, 'NSID 1 is no namespace');
});
