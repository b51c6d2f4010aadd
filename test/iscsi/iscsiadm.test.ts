// open-iscsi's SendTargets discovery against the portal. iscsiadm refuses
// to run without the iscsi_tcp kernel module (it loads the transport before
// any discovery), which containers and CI machines without module loading do
// not have; there the test is skipped, saying so.
import test from 'ava';
import { existsSync } from 'node:fs';
import { IQN, run, startIscsi } from './portal-fixture.js';

const why = !existsSync('/usr/sbin/iscsiadm')
  ? 'iscsiadm is not installed (open-iscsi)'
  : !existsSync('/sys/module/iscsi_tcp')
    ? 'the iscsi_tcp kernel module is not loaded, and iscsiadm needs it even for discovery'
    : null;

if (why !== null) test.skip(`iscsiadm -m discovery -t st finds the target (skipped: ${why})`, () => undefined);
else
  test('iscsiadm -m discovery -t st finds the target', async (t) => {
    const f = await startIscsi();
    t.teardown(() => f.close());
    const r = await run('iscsiadm', ['-m', 'discovery', '-t', 'st', '-p', `127.0.0.1:${f.port}`, '-o', 'nonpersistent'], 30_000);
    t.is(r.code, 0, r.stderr);
    t.regex(r.stdout, new RegExp(`127\\.0\\.0\\.1:${f.port},1 ${IQN.replace(/\./g, '\\.')}`));
  });
