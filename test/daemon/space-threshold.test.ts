// Space thresholds (issue 28 §3; docs/operations.md "Space thresholds"), against the real rblkd:
// a thin file volume whose file passes space_threshold.allocated is reported before any write
// fails — a warning in the log, `rblkd ctl volumes`, THIN PROVISIONING SOFT THRESHOLD REACHED
// (38/07) once to a SCSI session, and the SMART/Health available-spare warning to an NVMe host —
// and UNMAP taking it back under clears it.
import test from 'ava';
import { join } from 'node:path';
import * as cdb from '../../protocol/scsi/cdb.js';
import { ScsiStatus } from '../../protocol/scsi/status.js';
import { controlRequest } from '../../target/daemon/control-client.js';
import type { SpaceInfo } from '../../target/daemon/space-watch.js';
import { RawHost } from '../../bench/soak/nvme-raw-host.js';
import { baseConfig, spawnDaemon, workdir } from './helpers/daemon-process.js';
import { command, login, pattern, senseOf, write, MAX_IO, type SenseTriple } from './helpers/initiator.js';
import { until } from '../../bench/kit/wait.js';

const MiB = 1024 * 1024;
const NQN = 'nqn.2026-12.io.rblk:space';

async function spaceOf(socket: string): Promise<SpaceInfo> {
  const [v] = (await controlRequest(socket, 'volumes')) as { space: SpaceInfo | null }[];
  if (!v?.space) throw new Error('no space reading for the file volume');
  return v.space;
}

test('a thin file volume over space_threshold.allocated: a warning, ctl volumes, 38/07 once, the NVMe SMART warning; UNMAP clears it', async (t) => {
  const w = workdir(t);
  w.writeConfig(
    baseConfig(w, [{ name: 't', path: 't.img', size: '8MiB', thin: true, space_threshold: { allocated: 50 } }], {
      nqn: NQN,
      listeners: [
        { provider: 'tcp', address: '127.0.0.1', port: 0 },
        { protocol: 'nvme-tcp', address: '127.0.0.1', port: 0 },
      ],
    }),
  );
  const d = spawnDaemon(t, ['--config', w.configPath]);
  const port = await d.port();
  const nvmePort = Number((await d.waitForLine(/listening nvme-tcp 127\.0\.0\.1:(\d+)/))[1]);
  await d.waitForLine(/rblkd ready/);
  const socket = join(w.dir, 'rblkd.ctl');
  await until(async () => (await controlRequest(socket, 'volumes') as { space: SpaceInfo | null }[])[0]?.space != null, 'a first space reading', { ms: 30_000, everyMs: 100 });
  const before = await spaceOf(socket);
  t.false(before.low);
  t.deepEqual(before.thresholds, { filesystem: 90, allocated: 50 });
  t.true(before.allocatedPercent < 50, JSON.stringify(before));

  const c = await login(port);
  t.teardown(() => c.close());
  const seen: SenseTriple[] = [];
  // 5 MiB of 8 MiB: 62.5% allocated.
  for (let off = 0; off < 5 * MiB; off += MAX_IO) {
    const r = await write(c, 0, off / 512, pattern(MAX_IO, off), {}, seen);
    t.is(r.status, ScsiStatus.GOOD);
  }
  await until(async () => (await spaceOf(socket)).low, 'the crossing', { ms: 30_000, everyMs: 100 });
  const low = await spaceOf(socket);
  t.regex(low.why ?? '', /of its 8\.0 MiB is allocated \(space_threshold\.allocated 50%\)/);
  t.is(low.crossings, 1);
  await d.waitForLine(/warn: volume t: low on space: .*allocated/);

  // The next command hears 38/07 once; the one after it runs.
  const tur = await c.command({ lun: 0, cdb: cdb.testUnitReady() });
  t.is(tur.status, ScsiStatus.CHECK_CONDITION);
  t.deepEqual(senseOf(tur), { key: 6, asc: 0x38, ascq: 0x07 });
  t.is((await c.command({ lun: 0, cdb: cdb.testUnitReady() })).status, ScsiStatus.GOOD);

  // NVMe: SMART / Health Information, Critical Warning bit 0 (available spare below threshold).
  const h = await RawHost.open(nvmePort);
  t.teardown(() => h.close());
  await h.enable(NQN);
  const smart = await h.admin(0x02, { nsid: 0xffffffff, length: 512, cdw: { 10: 0x02 | (127 << 16) } });
  t.is(smart.statusField, 0);
  t.is(smart.data[0]! & 1, 1, 'SMART critical warning: spare below threshold');

  // UNMAP every written block: back under the threshold, and the warning goes.
  const list = cdb.unmapParameterList([{ lba: 0, blocks: (5 * MiB) / 512 }]);
  const buf = await c.allocate(list.length);
  list.copy(buf.buffer);
  const u = await command(c, { lun: 0, cdb: cdb.unmap(list.length), dataOut: buf });
  buf.release();
  t.is(u.status, ScsiStatus.GOOD, JSON.stringify(senseOf(u)));
  await until(async () => !(await spaceOf(socket)).low, 'the space back under', { ms: 30_000, everyMs: 100 });
  await d.waitForLine(/volume t: space back under its thresholds/);
  const smart2 = await h.admin(0x02, { nsid: 0xffffffff, length: 512, cdw: { 10: 0x02 | (127 << 16) } });
  t.is(smart2.data[0]! & 1, 0);
  await c.close();
  d.kill('SIGTERM');
  t.is((await d.exited).code, 0);
});
