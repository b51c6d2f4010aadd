import test from 'ava';
import { join } from 'node:path';
import * as cdb from '../../protocol/scsi/cdb.js';
import { ScsiStatus } from '../../protocol/scsi/status.js';
import { baseConfig, fileBytes, spawnDaemon, workdir } from './helpers/daemon-process.js';
import { command, login, pattern } from './helpers/initiator.js';

const BLOCKS = 8;
const LEN = BLOCKS * 512;

test('SIGTERM with writes in flight: every write answered GOOD is in the file, and rblkd exits 0', async (t) => {
  const w = workdir(t);
  w.writeConfig(baseConfig(w, [{ name: 'a', path: 'a.img', size: '8MiB', lun: 0 }]));
  const d = spawnDaemon(t, ['--config', w.configPath]);
  const port = await d.port();
  const s = await login(port, { queueDepth: 8 });
  t.teardown(() => s.close());
  let closeReason = '';
  s.onClose = (reason) => (closeReason = reason);

  const acked = new Map<number, Buffer>();
  const refused: number[] = [];
  let next = 0;
  let signalled = false;
  // Eight writers keep the queue full; each write goes to a block range of its own.
  // Each has its own buffer: the initiator's pool does not hand out chunks once its connection closed.
  const writer = async (): Promise<void> => {
    const buf = await s.allocate(LEN);
    for (;;) {
      const i = next++;
      if (i >= (8 * 2048) / BLOCKS) return;
      const data = pattern(LEN, i + 1);
      data.copy(buf.buffer);
      try {
        const r = await command(s, { lun: 0, cdb: cdb.write16(i * BLOCKS, BLOCKS), dataOut: buf });
        if (r.status === ScsiStatus.GOOD) acked.set(i, data);
        else if (r.status === ScsiStatus.BUSY) refused.push(i);
        else throw new Error(`write ${i}: unexpected status ${r.status}`);
      } catch (e) {
        // Only the end of the session may stop a writer, and only after SIGTERM.
        if (!signalled || !s.isClosed) throw e;
        return;
      }
      if (acked.size === 200 && !signalled) {
        signalled = true;
        d.kill('SIGTERM');
      }
    }
  };
  await Promise.all(Array.from({ length: 8 }, writer));

  t.deepEqual(await d.exited, { code: 0, signal: null });
  t.true(signalled);
  t.regex(closeReason, /the target logged this session out: SHUTDOWN/);
  t.true(acked.size >= 200);
  const file = join(w.state, 'a.img');
  const bad = [...acked].filter(([i, data]) => !fileBytes(file, i * LEN, LEN).equals(data)).map(([i]) => i);
  t.deepEqual(bad, [], 'acknowledged writes missing from the file');
  t.true(d.lines.some((l) => /info: stopping: draining 1 session/.test(l)));
  t.true(d.lines.some((l) => /info: stopped: every volume flushed and closed/.test(l)));
});

test('SIGTERM on an idle daemon with a session logs it out and exits 0; a second SIGTERM is harmless', async (t) => {
  const w = workdir(t);
  w.writeConfig(baseConfig(w, [{ name: 'a', memory: true, size: '1MiB' }], { limits: { drain_timeout_ms: 60000 } }));
  const d = spawnDaemon(t, ['--config', w.configPath]);
  const port = await d.port();
  const s = await login(port);
  t.teardown(() => s.close());
  const closed = new Promise<string>((r) => (s.onClose = r));
  d.kill('SIGTERM');
  await d.waitForLine(/stopping: draining 1 session/);
  d.kill('SIGTERM');
  t.regex(await closed, /SHUTDOWN/);
  t.deepEqual(await d.exited, { code: 0, signal: null });
});

// Node leaves a signal at its default action (the process ends at once) until a listener is
// added, and a service manager may stop or reload a unit the moment it is started.
test('a SIGTERM while rblkd is starting stops it once started: it drains and exits 0', async (t) => {
  const w = workdir(t);
  w.writeConfig(baseConfig(w, [{ name: 'a', path: 'a.img', size: '1MiB' }]));
  const d = spawnDaemon(t, ['--config', w.configPath]);
  // Volumes open before any listener binds: the start is not finished at this line.
  await d.waitForLine(/serving volume a/);
  d.kill('SIGTERM');
  t.deepEqual(await d.exited, { code: 0, signal: null }, d.lines.join('\n'));
  t.true(d.lines.some((l) => l.includes('stopped: every volume flushed and closed')), d.lines.join('\n'));
});

test('a SIGHUP while rblkd is starting is a reload once started, not the end of the process', async (t) => {
  const w = workdir(t);
  w.writeConfig(baseConfig(w, [{ name: 'a', path: 'a.img', size: '1MiB' }]));
  const d = spawnDaemon(t, ['--config', w.configPath]);
  await d.waitForLine(/serving volume a/);
  d.kill('SIGHUP');
  await d.waitForLine(/^.*reloaded.*serving 1 volume/);
  d.kill('SIGTERM');
  t.deepEqual(await d.exited, { code: 0, signal: null }, d.lines.join('\n'));
});
