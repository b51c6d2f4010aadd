import test, { type ExecutionContext } from 'ava';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { put, tempDir } from './helpers/tmp.js';

const systemdDir = fileURLToPath(new URL('../../systemd/', import.meta.url));
const unitText = readFileSync(join(systemdDir, 'rblkd.service'), 'utf8');

interface Run {
  status: number | null;
  output: string;
}

function run(cmd: string, args: string[]): Run {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  if (r.error && (r.error as NodeJS.ErrnoException).code === 'ENOENT') {
    throw new Error(`${cmd} is not installed: install systemd (apt-get install systemd) to check the unit`);
  }
  return { status: r.status, output: `${r.stdout ?? ''}${r.stderr ?? ''}` };
}

/**
 * `systemd-analyze verify` fails when ExecStart names a missing binary, and /usr/bin/rblkd is
 * not installed where tests run; so the copy under test points ExecStart at a stand-in
 * executable in the temp directory. Everything else is verified as shipped.
 */
function verify(t: ExecutionContext, text: string): Run {
  const dir = tempDir(t);
  const standIn = put(dir, 'rblkd', '#!/bin/sh\nexit 0\n', 0o755);
  const unit = put(dir, 'rblkd.service', text.replace(/^ExecStart=\/usr\/bin\/rblkd /m, `ExecStart=${standIn} `));
  return run('systemd-analyze', ['verify', unit]);
}

test('rblkd.service passes systemd-analyze verify with no warnings', (t) => {
  t.regex(unitText, /^ExecStart=\/usr\/bin\/rblkd --config \/etc\/rblk\/rblkd\.yaml$/m);
  const r = verify(t, unitText);
  t.is(r.output, '');
  t.is(r.status, 0);
});

test('the verify check catches a mistake (it can fail)', (t) => {
  // verify exits 0 on an unknown key and only prints a warning: the test above relies on the
  // output being empty, and this shows that a typo does produce output.
  const r = verify(t, unitText.replace(/^ProtectHome=yes$/m, 'ProtecHome=yes'));
  t.regex(r.output, /Unknown key name 'ProtecHome'|Unknown key 'ProtecHome'/);
});

test('the unit keeps what RDMA and the daemon need', (t) => {
  const settings = new Map<string, string[]>();
  for (const line of unitText.split('\n')) {
    const m = /^([A-Za-z]+)=(.*)$/.exec(line);
    if (m) settings.set(m[1], [...(settings.get(m[1]) ?? []), m[2]]);
  }
  const one = (k: string): string | undefined => settings.get(k)?.[0];
  t.is(one('Type'), 'notify');
  t.is(one('NotifyAccess'), 'main');
  t.is(one('ExecReload'), '/bin/kill -HUP $MAINPID');
  t.is(one('WatchdogSec'), '30s');
  t.is(one('LimitMEMLOCK'), 'infinity');
  t.is(one('Restart'), 'on-failure');
  t.is(one('RestartPreventExitStatus'), '78');
  t.is(one('StateDirectory'), 'rblk');
  t.is(one('ConfigurationDirectory'), 'rblk');
  // PrivateDevices=yes would hide /dev/infiniband.
  t.false(settings.has('PrivateDevices'));
  // V8's JIT needs writable+executable mappings.
  t.false(settings.has('MemoryDenyWriteExecute'));
  t.deepEqual(settings.get('DeviceAllow'), [
    'char-infiniband_verbs rw',
    '/dev/infiniband/rdma_cm rw',
    'block-* rw',
  ]);
  t.deepEqual(one('RestrictAddressFamilies')?.split(' ').sort(), [
    'AF_IB',
    'AF_INET',
    'AF_INET6',
    'AF_NETLINK',
    'AF_UNIX',
  ]);
  // Stop must outlast the default 10 s drain.
  const stop = Number(/^(\d+)s$/.exec(one('TimeoutStopSec') ?? '')?.[1]);
  t.true(stop > 10, `TimeoutStopSec=${one('TimeoutStopSec')}`);
});

test('rblk.sysusers.conf is accepted by systemd-sysusers', (t) => {
  const root = tempDir(t);
  const r = run('systemd-sysusers', ['--dry-run', `--root=${root}`, join(systemdDir, 'rblk.sysusers.conf')]);
  t.is(r.status, 0, r.output);
  t.regex(r.output, /Creating user '?rblk'? \(rblk target daemon\)/);
});
