// Corked bursts (docs/transport.md "Corked bursts"): over libfabric's tcp
// provider the target's fast path corks the connection's socket for a burst
// of answers, and the initiator's native queue for a submit of several
// messages; every burst is uncorked at its end. QD32 writes and reads of a
// file volume from the library, every read compared with what was written;
// then the counters say the corks were taken and each was undone. Over
// sockets nothing is corked (no socket of the connection's own to find).
import test from 'ava';
import { randomBytes, randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { connect } from '../../initiator/index.js';
import { FastPath } from '../../native/fast-path.js';
import { FileBackend } from '../../target/backend/file.js';
import { rblkConnections, type RblkConnection } from '../../target/rblk/connection.js';
import { LogicalUnit } from '../../target/scsi/index.js';
import { TargetServer } from '../../target/server.js';
import { tempDir } from '../fuse/helpers/fuse-fixture.js';
import { checkSuiteResources, warmUpFabric } from '../helpers/resources.js';
import { listenTest, memoryLog, TARGET_NAME, testServerOptions } from '../helpers/target-fixture.js';

checkSuiteResources(test, { warmUp: () => warmUpFabric(['tcp', 'sockets']) });

const BLOCKS = 2048; // 4 KiB blocks: an 8 MiB volume
const QD = 32;
const reason = FastPath.available() ? null : 'no native fast path on this host (rblk_uring.node)';

for (const provider of ['tcp', 'sockets'] as const) {
  (reason === null ? test.serial : test.serial.skip)(
    `${provider}: QD${QD} writes and verified reads through both fast paths; ${provider === 'tcp' ? 'bursts are corked, and every cork is undone' : 'nothing is corked'}${reason === null ? '' : ` (skipped: ${reason})`}`,
    async (t) => {
      const dir = await tempDir(t, 'cork');
      const backend = await FileBackend.open({ path: join(dir, 'vol'), size: BLOCKS * 4096 });
      const server = new TargetServer(testServerOptions(memoryLog(), { fastPath: true, limits: { queueDepth: QD * 2, dataBuffers: QD * 2 } }), rblkConnections);
      server.addVolume({ name: 'vol', lun: 0, lu: new LogicalUnit({ name: 'vol', backend, identifier: randomUUID() }), access: () => 'rw' });
      const port = (await listenTest(server, provider)).port;
      const s = await connect({ address: '127.0.0.1', port, provider, initiatorName: `iqn.2026-12.io.rblk:cork-${provider}`, targetName: TARGET_NAME, queueDepth: QD * 2 });
      t.teardown(async () => {
        await s.close();
        await server.close();
        await backend.close();
      });
      const vol = await s.open('vol');
      // What each block holds: the byte every one of its 4096 is (0: never written, the file's zeros).
      const model = new Uint8Array(BLOCKS);
      const busy = new Uint8Array(BLOCKS);
      let writes = 0;
      let reads = 0;
      const end = performance.now() + 2000;
      const worker = async (): Promise<void> => {
        const buf = s.allocate(4096);
        try {
          while (performance.now() < end) {
            const block = randomBytes(2).readUInt16LE(0) % BLOCKS;
            if (busy[block] === 1) continue;
            busy[block] = 1;
            if ((writes + reads) % 2 === 0) {
              const v = 1 + (randomBytes(1)[0]! % 255);
              buf.buffer.fill(v);
              await vol.write(block * 4096, buf);
              model[block] = v;
              writes++;
            } else {
              await vol.read(block * 4096, buf);
              if (!buf.buffer.every((b) => b === model[block])) throw new Error(`block ${block}: read back ${buf.buffer[0]}, wrote ${model[block]}`);
              reads++;
            }
            busy[block] = 0;
          }
        } finally {
          buf.release();
        }
      };
      await Promise.all(Array.from({ length: QD }, worker));
      const stats = ([...server.sessions][0] as RblkConnection).fastPathStats!;
      t.log(`${writes} writes, ${reads} reads; target: ${stats.taken} taken natively, ${stats.corked} bursts corked, ${stats.uncorked} uncorked; initiator: ${s.fastPathCommands} commands native, ${s.fastPathCorkedSubmits} submits corked`);
      t.true(stats.taken > (writes + reads) / 2, 'the target served them natively');
      t.true(s.fastPathCommands > (writes + reads) / 2, 'the initiator sent them natively');
      t.is(stats.uncorked, stats.corked, 'every corked burst was uncorked');
      if (provider === 'tcp') {
        t.true(stats.corked > 0, 'the target corked bursts of answers');
        t.true(s.fastPathCorkedSubmits > 0, 'the initiator corked submits of several messages');
      } else {
        t.is(stats.corked, 0);
        t.is(s.fastPathCorkedSubmits, 0);
      }
    },
  );
}
