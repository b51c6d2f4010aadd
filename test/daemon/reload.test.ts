import test from 'ava';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { LoginError } from '../../initiator/connection.js';
import * as cdb from '../../protocol/scsi/cdb.js';
import { ScsiStatus } from '../../protocol/scsi/status.js';
import { controlRequest } from '../../target/daemon/control-client.js';
import type { ReloadResult } from '../../target/daemon/reload-result.js';
import { baseConfig, spawnDaemon, workdir } from './helpers/daemon-process.js';
import { command, login, pattern, read, readCapacity, reportLuns, senseOf, write, type SenseTriple } from './helpers/initiator.js';
import { until } from '../../bench/kit/wait.js';

const MiB = 1024 * 1024;
const GUARD_MS = 20_000;

test('a reload adds, removes (forced) and grows volumes under a running session; a bad file changes nothing', async (t) => {
  const w = workdir(t);
  const volumes = [
    { name: 'a', path: 'a.img', size: '4MiB', lun: 0 },
    { name: 'c', path: 'c.img', size: '1MiB', lun: 2 },
    { name: 'd', memory: true, size: '4MiB', lun: 3 },
  ];
  w.writeConfig(baseConfig(w, volumes));
  const d = spawnDaemon(t, ['--config', w.configPath]);
  const port = await d.port();
  await d.waitForLine(/rblkd ready/);

  const s1 = await login(port, { initiatorName: 'iqn.2026-11.io.rblk:busy' });
  t.teardown(() => s1.close());
  t.deepEqual(await reportLuns(s1), [0, 2, 3]);

  // Writes and reads on volume a, each read compared, until told to stop.
  const attentions: SenseTriple[] = [];
  const failures: string[] = [];
  let ops = 0;
  let running = true;
  const loop = (async () => {
    for (let i = 0; running; i++) {
      const lba = (i * 8) % (4 * 2048 - 8);
      const data = pattern(4096, i + 1);
      const wr = await write(s1, 0, lba, data, {}, attentions);
      if (wr.status !== ScsiStatus.GOOD) failures.push(`write ${i}: status ${wr.status} ${JSON.stringify(senseOf(wr))}`);
      const rd = await read(s1, 0, lba, 8, attentions);
      if (rd.result.status !== ScsiStatus.GOOD) failures.push(`read ${i}: status ${rd.result.status}`);
      else if (!rd.data.equals(data)) failures.push(`read ${i}: data differs`);
      ops++;
    }
  })().catch((e: Error) => void failures.push(`the session failed: ${e.message}`));
  t.teardown(() => (running = false));
  await until(() => ops >= 20, 'the first I/O');

  // Four writers on c, the volume about to be removed: each write is GOOD until the LUN is gone.
  const s3 = await login(port, { initiatorName: 'iqn.2026-11.io.rblk:on-c', queueDepth: 4 });
  t.teardown(() => s3.close());
  const onC = new Map<number, Buffer>();
  let nextC = 0;
  const cWriter = async (): Promise<void> => {
    const buf = await s3.allocate(4096);
    try {
      for (;;) {
        const i = nextC++ % 256;
        const data = pattern(4096, 5000 + nextC);
        data.copy(buf.buffer);
        const r = await command(s3, { lun: 2, cdb: cdb.write16(i * 8, 8), dataOut: buf });
        if (r.status === ScsiStatus.GOOD) onC.set(i, data);
        else if (JSON.stringify(senseOf(r)) === JSON.stringify({ key: 5, asc: 0x25, ascq: 0 })) return;
        else failures.push(`write to c: status ${r.status} ${JSON.stringify(senseOf(r))}`);
      }
    } finally {
      buf.release();
    }
  };
  const cWriters = Promise.all(Array.from({ length: 4 }, cWriter)).catch((e: Error) => void failures.push(`writing c: ${e.message}`));
  await until(() => onC.size >= 16, 'writes to c');

  const mark = d.lines.length;
  w.writeConfig(
    baseConfig(w, [
      { name: 'a', path: 'a.img', size: '8MiB', lun: 0 },
      { name: 'b', path: 'b.img', size: '2MiB', lun: 1 },
      { name: 'd', memory: true, size: '8MiB', lun: 3 },
    ]),
  );
  // c is removed under sessions that can see it: SIGHUP would refuse that (test/daemon/volume-changes.test.ts), ctl reload --force does it.
  const forced = (await controlRequest(join(w.dir, 'rblkd.ctl'), 'reload', ['force'])) as ReloadResult;
  t.deepEqual(forced.inUse.map((u) => [u.volume, u.sessions.map((s) => s.initiator).sort()]), [['c', ['iqn.2026-11.io.rblk:busy', 'iqn.2026-11.io.rblk:on-c']]]);
  await d.waitForLine(/info: reloaded \(added b; removed c\): serving 3 volumes/, mark);
  await d.waitForLine(/info: volume c closed/, mark);
  const seen = (asc: number, ascq: number) => attentions.some((s) => s.asc === asc && s.ascq === ascq);
  await until(() => seen(0x3f, 0x0e) && seen(0x2a, 0x09), 'both unit attentions');
  const opsAtAttention = ops;
  await until(() => ops >= opsAtAttention + 10, 'more I/O after the reload');
  running = false;
  await loop;
  await cWriters;
  const cFile = readFileSync(join(w.state, 'c.img'));
  t.deepEqual(
    [...onC].filter(([i, data]) => !cFile.subarray(i * 4096, (i + 1) * 4096).equals(data)).map(([i]) => i),
    [],
    'writes to c acknowledged before its removal are in its file',
  );

  t.deepEqual(failures, [], 'every command of the running session succeeded');
  t.true(attentions.every((s) => s.key === 6 && ((s.asc === 0x3f && s.ascq === 0x0e) || (s.asc === 0x2a && s.ascq === 0x09) || (s.asc === 0x29 && s.ascq === 0))), JSON.stringify(attentions));
  t.deepEqual(await reportLuns(s1), [0, 1, 3], 'the running session sees the new inventory');

  const s2 = await login(port, { initiatorName: 'iqn.2026-11.io.rblk:fresh' });
  t.teardown(() => s2.close());
  t.deepEqual(await reportLuns(s2), [0, 1, 3], 'b appears, c is gone');
  t.is((await readCapacity(s2, 0)).blocks, BigInt((8 * MiB) / 512), 'a grew to 8 MiB');
  t.is((await readCapacity(s2, 3)).blocks, BigInt((8 * MiB) / 512), 'the RAM volume d grew to 8 MiB');
  t.is((await readCapacity(s2, 1)).blocks, BigInt((2 * MiB) / 512));
  t.is(statSync(join(w.state, 'a.img')).size, 8 * MiB, 'the backing file was lengthened');
  const onB = pattern(8192, 99);
  t.is((await write(s2, 1, 100, onB)).status, ScsiStatus.GOOD);
  t.true((await read(s2, 1, 100, 16)).data.equals(onB));
  const gone = await read(s2, 2, 0, 1);
  t.deepEqual(senseOf(gone.result), { key: 5, asc: 0x25, ascq: 0 }, 'LUN 2 is not supported any more');
  // The tail that growing added is addressable.
  const tail = pattern(4096, 7);
  t.is((await write(s2, 0, 16 * 1024 - 8, tail)).status, ScsiStatus.GOOD);

  // A file that does not parse: refused, logged with its line, nothing changes.
  const mark2 = d.lines.length;
  w.writeConfig('volumes:\n  - name: a\n  bad: [\n');
  d.kill('SIGHUP');
  await d.waitForLine(/error: reload refused, still serving the previous configuration: the file has 1 error/, mark2);
  await d.waitForLine(new RegExp(`error: ${w.configPath.replace(/[.]/g, '\\.')}:3:\\d+: YAML syntax error`), mark2);
  t.deepEqual(await reportLuns(s2), [0, 1, 3]);
  t.true((await read(s2, 1, 100, 16)).data.equals(onB), 'still serving b');

  // A change that cannot apply to a served volume refuses the whole reload.
  const mark3 = d.lines.length;
  w.writeConfig(
    baseConfig(w, [
      { name: 'a', path: 'a.img', size: '8MiB', lun: 0, block_size: 4096 },
      { name: 'b', path: 'b.img', size: '2MiB', lun: 1 },
      { name: 'd', memory: true, size: '8MiB', lun: 3 },
      { name: 'e', memory: true, size: '1MiB', lun: 4 },
    ]),
  );
  d.kill('SIGHUP');
  await d.waitForLine(/error: reload refused, still serving the previous configuration: 1 change cannot apply/, mark3);
  await d.waitForLine(/error: volume a: block_size cannot change from 512 to 4096 while it is served \(remove it in one reload and add it back in the next\)/, mark3);
  t.deepEqual(await reportLuns(s2), [0, 1, 3], 'e was not added either');
  t.is((await readCapacity(s2, 0)).blockSize, 512);

  await s1.logout();
  await s2.logout();
  d.kill('SIGTERM');
  t.deepEqual(await d.exited, { code: 0, signal: null });
});

test('SIGHUP adds and removes listeners: the new one serves, the old one refuses new connections, its sessions stay', async (t) => {
  const w = workdir(t);
  const volumes = [{ name: 'a', memory: true, size: '1MiB', lun: 0 }];
  w.writeConfig(baseConfig(w, volumes));
  const d = spawnDaemon(t, ['--config', w.configPath]);
  const oldPort = await d.port();
  const before = await login(oldPort);
  t.teardown(() => before.close());

  const mark = d.lines.length;
  // Another loopback address: a listener is its provider, address and port as configured.
  w.writeConfig(baseConfig(w, volumes, { listeners: [{ provider: 'tcp', address: '127.0.0.2', port: 0 }] }));
  d.kill('SIGHUP');
  const [, newPort] = await d.waitForLine(/info: listening tcp 127\.0\.0\.2:(\d+)/, mark);
  await d.waitForLine(/info: stopped listening on tcp 127\.0\.0\.1:0/, mark);
  await d.waitForLine(/info: reloaded: serving 1 volume on tcp 127\.0\.0\.2:\d+$/, mark);

  const after = await login(Number(newPort), { address: '127.0.0.2' });
  t.teardown(() => after.close());
  const data = pattern(512, 5);
  t.is((await write(after, 0, 1, data)).status, ScsiStatus.GOOD);
  t.true((await read(before, 0, 1, 1)).data.equals(data), 'the session on the removed listener still works');
  const refused = await login(oldPort, { connectTimeoutMs: 3000 }).then(
    async (c) => {
      await c.close();
      return null;
    },
    (e: unknown) => e,
  );
  t.true(refused instanceof LoginError && refused.code === 'CONNECT_FAILED', `no new connection on the removed listener: ${String(refused)}`);
  await before.logout();
  await after.logout();
  d.kill('SIGTERM');
  t.deepEqual(await d.exited, { code: 0, signal: null });
});
