import test from 'ava';
import { baseConfig, spawnDaemon, workdir } from './helpers/daemon-process.js';
import { notifyReceiver } from './helpers/notify-receiver.js';

test('sd_notify: READY after listening, WATCHDOG pings, RELOADING with MONOTONIC_USEC then READY, STOPPING', async (t) => {
  const w = workdir(t);
  const config = baseConfig(w, [{ name: 'a', path: 'a.img', size: '1MiB' }]);
  w.writeConfig(config);
  const n = await notifyReceiver(t, w.dir);
  const d = spawnDaemon(t, ['--config', w.configPath], { NOTIFY_SOCKET: n.path, WATCHDOG_USEC: '200000' });

  const ready = await n.waitFor('READY', '1');
  const port = await d.port();
  // READY=1 comes only after the listener is bound: its STATUS names the port.
  t.is(ready.message.fields.STATUS, `serving 1 volume on tcp 127.0.0.1:${port}`);
  t.false(
    n.messages.slice(0, ready.index).some((m) => m.fields.READY !== undefined),
    'nothing claimed readiness earlier',
  );

  // WATCHDOG_USEC=200000: pings every 100 ms; wait for two in a row.
  const first = await n.waitFor('WATCHDOG', '1', ready.index + 1);
  await n.waitFor('WATCHDOG', '1', first.index + 1);

  // SIGHUP: RELOADING=1 and MONOTONIC_USEC in one message, read from CLOCK_MONOTONIC
  // (the same clock as this process's hrtime), then READY=1.
  const before = process.hrtime.bigint() / 1000n;
  const mark = n.messages.length;
  d.kill('SIGHUP');
  const reloading = await n.waitFor('RELOADING', '1', mark);
  const after = reloading.message.at / 1000n;
  const usec = BigInt(reloading.message.fields.MONOTONIC_USEC);
  t.true(usec >= before && usec <= after, `MONOTONIC_USEC ${usec} lies between ${before} and ${after}`);
  const reReady = await n.waitFor('READY', '1', reloading.index + 1);
  t.is(reReady.message.fields.STATUS, `serving 1 volume on tcp 127.0.0.1:${port}`);

  // A broken file: still RELOADING then READY, and the status says the reload failed.
  w.writeConfig('volumes: [\n');
  const mark2 = n.messages.length;
  d.kill('SIGHUP');
  const failed = await n.waitFor('READY', '1', (await n.waitFor('RELOADING', '1', mark2)).index + 1);
  t.regex(failed.message.fields.STATUS, /^reload failed \(the file has 1 error\); serving 1 volume on tcp 127\.0\.0\.1:\d+$/);

  const mark3 = n.messages.length;
  d.kill('SIGTERM');
  await n.waitFor('STOPPING', '1', mark3);
  t.deepEqual(await d.exited, { code: 0, signal: null });
});
