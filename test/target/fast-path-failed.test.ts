// A fast-path READ or WRITE that fails tells its backend the errno before the
// command is answered (Backend.fastPathFailed, target/rblk/connection.ts):
// what an error proves is the store's to act on (rbd: EBLOCKLISTED fences the
// volume, docs/backends.md "A fenced gateway learns of it"), whichever path
// ran the command. Here the store is a file whose fast-path descriptor is
// opened read-only, so the kernel refuses every native write with EBADF.
import test from 'ava';
import { randomUUID } from 'node:crypto';
import { closeSync, openSync } from 'node:fs';
import { join } from 'node:path';
import { connect, RblkError } from '../../initiator/index.js';
import { FastPath } from '../../native/fast-path.js';
import type { Backend } from '../../target/backend/backend.js';
import { FileBackend } from '../../target/backend/file.js';
import { LogicalUnit } from '../../target/scsi/index.js';
import { TargetServer } from '../../target/server.js';
import { rblkConnections, type RblkConnection } from '../../target/rblk/connection.js';
import { tempDir } from '../fuse/helpers/fuse-fixture.js';
import { listenTest, memoryLog, TARGET_NAME, testServerOptions } from '../helpers/target-fixture.js';

const reason = FastPath.available() ? null : 'no native fast path on this host (rblk_uring.node)';
if (reason !== null) test.skip(`fast-path failure tests: ${reason}`, () => undefined);
const fastTest = reason === null ? test.serial : test.skip;

fastTest('a fast-path write that fails tells the backend its errno before the initiator hears of the failure', async (t) => {
  const dir = await tempDir(t, 'fastfail');
  const path = join(dir, 'vol');
  const file = await FileBackend.open({ path, size: 1 << 20 });
  const readOnly = openSync(path, 'r');
  const told: string[] = [];
  // The file backend as it is, but for the descriptor the fast path gets and the errno it is told of.
  const backend = new Proxy(file, {
    get(target, prop) {
      if (prop === 'fastPathTarget') return { fd: readOnly, align: 1 };
      if (prop === 'fastPathFailed') return (code: string) => void told.push(code);
      const v: unknown = Reflect.get(target, prop, target);
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  }) as Backend;
  const log = memoryLog();
  const server = new TargetServer(testServerOptions(log, { fastPath: true }), rblkConnections);
  server.addVolume({ name: 'vol', lun: 0, lu: new LogicalUnit({ name: 'vol', backend, identifier: randomUUID() }), access: () => 'rw' });
  const port = (await listenTest(server, 'tcp')).port;
  t.teardown(async () => {
    await server.close();
    await file.close();
    closeSync(readOnly);
  });
  const taken = (): number => [...server.sessions].reduce((a, s) => a + ((s as RblkConnection).fastPathStats?.taken ?? 0), 0);
  const s = await connect({ address: '127.0.0.1', port, provider: 'tcp', initiatorName: 'iqn.2026-12.io.rblk:fastfail', targetName: TARGET_NAME, busyRetries: 0 });
  t.teardown(() => s.close());
  const v = await s.open('vol');
  await v.read(0, 4096); // the login's unit attention, through JavaScript
  const before = taken();
  t.is((await v.read(0, 4096)).length, 4096, 'a read through the read-only descriptor works');
  t.is(taken() - before, 1, 'natively');
  t.deepEqual(told, [], 'nothing failed yet');

  await t.throwsAsync(v.write(0, Buffer.alloc(4096, 1)), { instanceOf: RblkError }, 'the kernel refuses the native write');
  t.is(taken() - before, 2, 'the write was taken natively');
  t.deepEqual(told, ['EBADF'], 'the backend was told of the errno, once, by the time the initiator saw the failure');
});
