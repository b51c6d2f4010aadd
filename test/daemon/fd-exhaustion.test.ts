// rblkd out of file descriptors (EMFILE): new connections are refused at once
// with a logged reason, and the sessions it already has carry on
// (docs/target.md "Resources per connection"). Before, the accept failed
// silently and the initiator got FI_EINPROGRESS after its timeout.
import test from 'ava';
import type { Connection } from '../../initiator/connection.js';
import { ScsiStatus } from '../../protocol/scsi/status.js';
import { assertReturned, baseline } from '../helpers/resources.js';
import { baseConfig, spawnDaemon, workdir } from './helpers/daemon-process.js';
import { login, pattern, read, write } from './helpers/initiator.js';

/** Low enough to reach in a few dozen logins (rblkd idles at about 35 fds), high enough to start. */
const FD_LIMIT = 128;
/** More sessions than FD_LIMIT fds can hold (about seven fds each on tcp). */
const MAX_TRIES = 40;

test('at the fd limit rblkd refuses new connections with a logged error and keeps serving its sessions', async (t) => {
  const w = workdir(t);
  w.writeConfig(baseConfig(w, [{ name: 'a', path: 'a.img', size: '1MiB', lun: 0 }], { limits: { max_sessions: 100 } }));
  const d = spawnDaemon(t, ['--config', w.configPath], {}, { fdLimit: FD_LIMIT });
  const port = await d.port();
  const pid = d.child.pid;
  if (pid === undefined) return t.fail('rblkd has no pid');
  // Warm-up: the first I/O starts worker threads (libuv's pool, io_uring's) that stay.
  const first = await login(port);
  await write(first, 0, 8, pattern(4096, 1));
  await read(first, 0, 8, 8);
  await first.logout();
  const base = await baseline(pid);

  const held: Connection[] = [];
  t.teardown(async () => {
    for (const c of held) await c.close();
  });
  let refused: Error | null = null;
  for (let i = 0; i < MAX_TRIES && refused === null; i++) {
    try {
      held.push(await login(port, { initiatorName: `iqn.2026-11.io.rblk:c${i}`, connectTimeoutMs: 5000 }));
    } catch (e) {
      refused = e as Error;
    }
  }
  if (refused === null) return t.fail(`${MAX_TRIES} sessions fit under ${FD_LIMIT} fds: the limit was not reached`);
  t.true(held.length > 0, 'no session fit at all');
  // Refused outright (connect REJECT), not left to time out.
  t.regex(refused.message, /refused|no resources/i, d.lines.filter((l) => !/logged in|session ended/.test(l)).join('\n'));
  await d.waitForLine(/error: cannot accept a connection on tcp:127\.0\.0\.1:\d+, refused it \(.*FI_EMFILE.*\): out of file descriptors, raise LimitNOFILE/);

  // The sessions it has still move data, bytes compared.
  const data = pattern(4096, 9);
  t.is((await write(held[0], 0, 0, data)).status, ScsiStatus.GOOD);
  const r = await read(held[held.length - 1], 0, 0, 8);
  t.is(r.result.status, ScsiStatus.GOOD);
  t.true(r.data.equals(data));

  // Once they log out, everything comes back and logins work again.
  for (const c of held.splice(0)) await c.logout();
  await assertReturned(t, base, { what: 'rblkd' });
  const again = await login(port);
  t.is((await read(again, 0, 0, 1)).result.status, ScsiStatus.GOOD);
  await again.logout();
  d.kill('SIGTERM');
  t.deepEqual(await d.exited, { code: 0, signal: null });
});
