import { symlinkSync } from 'node:fs';
import { join } from 'node:path';
import test from 'ava';
import { checkConfig, runCheckConfig, type TextSink } from '../../config/check.js';
import { EX_CONFIG } from '../../config/schema.js';
import { put, tempDir } from './helpers/tmp.js';

function sink(): TextSink & { text: string } {
  return {
    text: '',
    write(s: string) {
      this.text += s;
      return true;
    },
  };
}

test('a valid file prints OK and exits 0', (t) => {
  const dir = tempDir(t);
  const file = put(dir, 'rblkd.yaml', 'volumes:\n  - {name: a, memory: true, size: 1MiB}\n');
  const out = sink();
  const err = sink();
  t.is(runCheckConfig(file, out, err), 0);
  t.is(out.text, 'OK\n');
  t.is(err.text, '');
  const result = checkConfig(file);
  t.true(result.ok);
  if (result.ok) t.is(result.config.volumes[0].name, 'a');
});

test('warnings go to stderr and do not fail the check', (t) => {
  const dir = tempDir(t);
  const file = put(dir, 'rblkd.yaml', 'listeners:\n  - address: 0.0.0.0\n');
  const out = sink();
  const err = sink();
  t.is(runCheckConfig(file, out, err), 0);
  t.is(out.text, 'OK\n');
  t.is(
    err.text,
    `${file}:1: warning: volumes: no volumes are configured\n` +
      `${file}:2: warning: listeners[0].address: serves 0.0.0.0 without authentication (auth.required is false)\n`,
  );
});

test('an invalid file prints every error and exits 78 (EX_CONFIG)', (t) => {
  const dir = tempDir(t);
  const file = put(dir, 'rblkd.yaml', 'volumes:\n  - name: a\n    block_size: 1000\nlogging: {level: loud}\n');
  const out = sink();
  const err = sink();
  t.is(EX_CONFIG, 78);
  t.is(runCheckConfig(file, out, err), 78);
  t.is(out.text, '');
  t.is(
    err.text,
    [
      `${file}:2: volumes[0]: needs path (a file or block device), 'memory: true' or rbd (a Ceph RBD image)`,
      `${file}:3: volumes[0].block_size: must be 512 or 4096, not 1000`,
      `${file}:4: logging.level: must be 'error', 'warn', 'info' or 'debug', not 'loud'`,
      '',
    ].join('\n'),
  );
  const result = checkConfig(file);
  t.false(result.ok);
  if (!result.ok) t.is(result.errors.length, 3);
});

test('a missing file exits 78 too', (t) => {
  const dir = tempDir(t);
  const err = sink();
  t.is(runCheckConfig(`${dir}/absent.yaml`, sink(), err), EX_CONFIG);
  t.is(err.text, `${dir}/absent.yaml: does not exist\n`);
});

/** The exit status of --check-config for a file, and the error lines it prints, without the file name. */
function check(file: string): { code: number; errors: string[] } {
  const err = sink();
  const code = runCheckConfig(file, sink(), err);
  const errors = err.text
    .split('\n')
    .filter((l) => l !== '' && !l.includes(': warning: '))
    .map((l) => l.slice(file.length + 1));
  return { code, errors };
}

test('a volume path under /proc, /sys or /dev that is not a block device is refused, with its line', (t) => {
  const dir = tempDir(t);
  symlinkSync('/dev/null', join(dir, 'looks-harmless.img'));
  const file = put(
    dir,
    'rblkd.yaml',
    [
      'volumes:', // 1
      '  - {name: a, path: /proc/self/mem, size: 1MiB}', // 2
      '  - {name: b, path: /proc/self/environ}', // 3
      `  - {name: c, path: ${join(dir, 'looks-harmless.img')}, size: 1MiB}`, // 4
      '  - {name: d, path: /sys/kernel/new-volume.img, size: 1MiB}', // 5
      '  - {name: e, path: /dev/zero}', // 6
    ].join('\n'),
  );
  const { code, errors } = check(file);
  t.is(code, EX_CONFIG);
  t.deepEqual(errors, [
    '2: volumes[0].path: /proc/self/mem is in /proc, a kernel interface, not storage: a volume path must be a regular file or a block device',
    '3: volumes[1].path: /proc/self/environ is in /proc, a kernel interface, not storage: a volume path must be a regular file or a block device',
    `4: volumes[2].path: ${join(dir, 'looks-harmless.img')} (/dev/null) is in /dev, a kernel interface, not storage: a volume path must be a regular file or a block device`,
    '5: volumes[3].path: /sys/kernel/new-volume.img is in /sys, a kernel interface, not storage: a volume path must be a regular file or a block device',
    '6: volumes[4].path: /dev/zero is in /dev, a kernel interface, not storage: a volume path must be a regular file or a block device',
  ]);
});

test('a memory volume larger than this host\'s memory is refused, with its line', (t) => {
  const dir = tempDir(t);
  const file = put(dir, 'rblkd.yaml', 'volumes:\n  - name: big\n    memory: true\n    size: 64TiB\n  - {name: small, memory: true, size: 1MiB}\n');
  const { code, errors } = check(file);
  t.is(code, EX_CONFIG);
  t.is(errors.length, 1, errors.join('\n'));
  t.regex(errors[0] ?? '', /^4: volumes\[0\]\.size: a memory volume of 64 TiB does not fit in this host's memory \([0-9.]+ GiB\)$/);
});

test('listener addresses must resolve to an address of this host, reported on their line', (t) => {
  const dir = tempDir(t);
  const file = put(
    dir,
    'rblkd.yaml',
    [
      'volumes: [{name: a, memory: true, size: 1MiB}]', // 1
      'listeners:', // 2
      '  - {provider: tcp, address: 192.0.2.1, port: 7471}', // 3
      '  - {provider: tcp, address: no-such-host.invalid, port: 7471}', // 4
      '  - {provider: tcp, address: localhost, port: 7472}', // 5
      '  - {provider: tcp, address: 127.0.0.2, port: 7473}', // 6
      '  - {provider: tcp, address: 0.0.0.0, port: 7474}', // 7
    ].join('\n'),
  );
  const { code, errors } = check(file);
  t.is(code, EX_CONFIG);
  t.is(errors.length, 2, errors.join('\n'));
  t.regex(errors[0] ?? '', /^3: listeners\[0\]\.address: 192\.0\.2\.1 is not an address of this host \(it has .*127\.0\.0\.1.*\)$/);
  t.is(errors[1], '4: listeners[1].address: the host name no-such-host.invalid does not resolve');
});

test('what a start would refuse is refused by the check: a missing or short read-only file, a state_dir or volume directory under a regular file', (t) => {
  const dir = tempDir(t);
  const blocker = put(dir, 'a-file', '');
  put(dir, 'short.img', Buffer.alloc(4096));
  const file = put(
    dir,
    'rblkd.yaml',
    [
      `state_dir: ${join(blocker, 'state')}`, // 1
      'volumes:', // 2
      `  - {name: ro-sized, path: ${join(dir, 'absent.img')}, size: 1MiB, read_only: true}`, // 3
      `  - {name: ro, path: ${join(dir, 'absent2.img')}, read_only: true}`, // 4
      `  - {name: ro-short, path: ${join(dir, 'short.img')}, size: 1MiB, read_only: true}`, // 5
      `  - {name: under-a-file, path: ${join(blocker, 'v.img')}, size: 1MiB}`, // 6
      '  - {name: m, memory: true, size: 1MiB}', // 7
    ].join('\n'),
  );
  const { code, errors } = check(file);
  t.is(code, EX_CONFIG);
  t.deepEqual(errors, [
    `1: state_dir: cannot create ${join(blocker, 'state')}: ${blocker} is not a directory (set state_dir in the file, or run with --state-dir DIR)`,
    `3: volumes[0].path: ${join(dir, 'absent.img')} does not exist, and a read_only volume is never created (create it, or drop read_only)`,
    `4: volumes[1].path: ${join(dir, 'absent2.img')} does not exist, and a read_only volume is never created (create it, or drop read_only)`,
    `5: volumes[2].size: ${join(dir, 'short.img')} is 4 KiB, smaller than size 1 MiB, and a read_only volume is never grown`,
    `6: volumes[3].path: ${join(blocker, 'v.img')} does not exist (a parent is not a directory)`,
  ]);
});

test('a state_dir that exists as a regular file is refused; one that can be made passes', (t) => {
  const dir = tempDir(t);
  const blocker = put(dir, 'state', '');
  const volumes = 'volumes: [{name: m, memory: true, size: 1MiB}]\n';
  const bad = check(put(dir, 'bad.yaml', `state_dir: ${blocker}\n${volumes}`));
  t.is(bad.code, EX_CONFIG);
  t.deepEqual(bad.errors, [`1: state_dir: ${blocker} is not a directory (set state_dir in the file, or run with --state-dir DIR)`]);
  const good = check(put(dir, 'good.yaml', `state_dir: ${join(dir, 'new', 'state')}\n${volumes}`));
  t.deepEqual(good, { code: 0, errors: [] });
});
