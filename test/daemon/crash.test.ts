import test from 'ava';
import { closeSync, openSync, readSync } from 'node:fs';
import { join } from 'node:path';
import type { Connection } from '../../initiator/connection.js';
import * as cdb from '../../protocol/scsi/cdb.js';
import { parseUnitSerialNumber } from '../../protocol/scsi/inquiry.js';
import { ScsiStatus } from '../../protocol/scsi/status.js';
import { baseConfig, spawnDaemon, workdir } from './helpers/daemon-process.js';
import { command, login, pattern, read } from './helpers/initiator.js';

const BLOCKS = 8;
const LEN = BLOCKS * 512;
const WRITES = (4 * 2048) / BLOCKS;

async function serial(c: Connection): Promise<string> {
  const buf = await c.allocate(255);
  try {
    const r = await command(c, { lun: 0, cdb: cdb.inquiry(255, 0x80), dataIn: buf });
    if (r.status !== ScsiStatus.GOOD) throw new Error(`INQUIRY VPD 80h: status ${r.status}`);
    return parseUnitSerialNumber(Buffer.from(buf.buffer));
  } finally {
    buf.release();
  }
}

test('kill -9 during FUA writes, then a restart: every write answered GOOD reads back, with the same identity', async (t) => {
  const w = workdir(t);
  w.writeConfig(baseConfig(w, [{ name: 'a', path: 'a.img', size: '4MiB', lun: 0 }]));
  const first = spawnDaemon(t, ['--config', w.configPath]);
  const s = await login(await first.port(), { queueDepth: 4 });
  t.teardown(() => s.close());
  const identity = await serial(s);

  const acked = new Map<number, Buffer>();
  let next = 0;
  let killed = false;
  const writer = async (): Promise<void> => {
    const buf = await s.allocate(LEN);
    for (;;) {
      const i = next++;
      if (i >= WRITES) return;
      const data = pattern(LEN, 1000 + i);
      data.copy(buf.buffer);
      try {
        const r = await command(s, { lun: 0, cdb: cdb.write16(i * BLOCKS, BLOCKS, { fua: true }), dataOut: buf });
        if (r.status !== ScsiStatus.GOOD) throw new Error(`write ${i}: status ${r.status}`);
        acked.set(i, data);
      } catch (e) {
        if (!killed) throw e;
        return;
      }
      if (acked.size === 150 && !killed) {
        killed = true;
        first.kill('SIGKILL');
      }
    }
  };
  await Promise.all(Array.from({ length: 4 }, writer));
  t.deepEqual(await first.exited, { code: null, signal: 'SIGKILL' });
  t.true(acked.size >= 150);

  const second = spawnDaemon(t, ['--config', w.configPath]);
  const s2 = await login(await second.port());
  t.teardown(() => s2.close());
  t.is(await serial(s2), identity, 'the volume kept its serial number (state_dir identity)');
  const fd = openSync(join(w.state, 'a.img'), 'r');
  t.teardown(() => closeSync(fd));
  const viaSession: number[] = [];
  const viaFile: number[] = [];
  for (const [i, data] of acked) {
    const { result, data: got } = await read(s2, 0, i * BLOCKS, BLOCKS);
    if (result.status !== ScsiStatus.GOOD || !got.equals(data)) viaSession.push(i);
    const raw = Buffer.alloc(LEN);
    readSync(fd, raw, 0, LEN, i * LEN);
    if (!raw.equals(data)) viaFile.push(i);
  }
  t.deepEqual(viaSession, [], 'acknowledged writes that did not read back through a session');
  t.deepEqual(viaFile, [], 'acknowledged writes missing from the file');
  await s2.logout();
  second.kill('SIGTERM');
  t.deepEqual(await second.exited, { code: 0, signal: null });
});
