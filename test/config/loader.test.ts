import test from 'ava';
import { accessSync, constants, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ConfigError } from '../../config/config-error.js';
import { loadConfig, parseConfig } from '../../config/loader.js';
import { DEFAULT_STATE_DIR, type Config, type VolumeConfig } from '../../config/schema.js';
import { put, tempDir } from './helpers/tmp.js';

const configDir = fileURLToPath(new URL('../../config/', import.meta.url));
/**
 * A state_dir that does not exist: a test whose volumes get their LUNs by the rules must not
 * read this machine's /var/lib/rblk/luns.json (which `npm run demo` or any rblkd writes).
 */
const NO_STATE = { stateDir: '/nonexistent/rblk-test-state' };

/** Parses and expects failure; returns the ConfigError. */
function reject(text: string, options: Parameters<typeof parseConfig>[2] = {}): ConfigError {
  const error = (() => {
    try {
      parseConfig(text, 'rblkd.yaml', options);
    } catch (e) {
      return e;
    }
    return undefined;
  })();
  if (!(error instanceof ConfigError)) throw new Error(`expected a ConfigError, got ${String(error)}`);
  return error;
}

test('the example config loads, with every key as written', (t) => {
  const dir = tempDir(t);
  // The example names secrets/host-a.key relative to its own directory; give it one there.
  put(dir, 'secrets/host-a.key', 'a-long-enough-secret-for-host-a\n', 0o600);
  const config = loadConfig(join(configDir, 'rblkd.example.yaml'), { baseDir: dir, stateDir: join(dir, 'state') });

  t.deepEqual(config.warnings, []);
  t.deepEqual(config.listeners, [{ protocol: 'rblk', provider: 'auto', address: '127.0.0.1', port: 7471, line: 29 }]);
  t.is(config.volumes.length, 2);
  const [db0, scratch] = config.volumes;
  t.deepEqual(db0, {
    name: 'db0',
    backing: { kind: 'file', path: join(dir, 'state', 'db0.img'), size: 8 * 1024 ** 3 },
    blockSize: 4096,
    physicalBlockSize: 4096,
    readOnly: false,
    direct: false,
    ioEngine: 'io_uring',
    thin: true,
    lun: 0,
    serial: 'DB0-0001',
    uuid: '6f1c2b1e-8d7a-4c1f-9b2e-3a4d5e6f7a8b',
    acl: [
      { initiator: 'host-a.example.com', access: 'rw' },
      { initiator: 'backup-*', access: 'ro' },
    ],
  });
  t.deepEqual(scratch, {
    name: 'scratch',
    backing: { kind: 'memory', size: 512 * 1024 ** 2 },
    blockSize: 512,
    readOnly: false,
    direct: false,
    ioEngine: 'auto',
    thin: false,
    lun: 1,
  });
  t.deepEqual(config.auth, {
    required: true,
    initiators: [
      {
        name: 'host-a.example.com',
        secret: 'a-long-enough-secret-for-host-a',
        secretFile: join(dir, 'secrets/host-a.key'),
      },
      { name: 'backup-01', secret: 'correct-horse-battery-staple-42' },
    ],
  });
  t.deepEqual(config.limits, {
    queueDepth: 128,
    maxIo: 1048576,
    inCapsuleData: 8192,
    maxSessions: 64,
    keepaliveMs: 5000,
    drainTimeoutMs: 10000,
    loginTimeoutMs: 10000,
    preLoginConnections: 64,
    preLoginPerSource: 16,
    connectionMemory: 4 * 1024 * 1024,
  });
  t.deepEqual(config.logging, { level: 'info', format: 'text' });
  t.is(config.stateDir, join(dir, 'state'));
});

test('the default config serves one 256 MiB thin file on 127.0.0.1 over tcp', (t) => {
  const dir = tempDir(t);
  const config = loadConfig(join(configDir, 'rblkd.default.yaml'), { stateDir: dir });
  t.deepEqual(config.listeners, [{ protocol: 'rblk', provider: 'tcp', address: '127.0.0.1', port: 7471, line: 7 }]);
  t.deepEqual(config.volumes, [
    {
      name: 'demo',
      backing: { kind: 'file', path: join(dir, 'demo.img'), size: 256 * 1024 * 1024 },
      blockSize: 512,
      readOnly: false,
      direct: false,
      ioEngine: 'auto',
      thin: true,
      lun: 0,
    },
  ]);
  t.false(config.auth.required);
  t.deepEqual(config.warnings, []);
});

test('an empty file gets every default and a warning', (t) => {
  const config: Config = parseConfig('', 'rblkd.yaml');
  t.deepEqual(config.listeners, [{ protocol: 'rblk', provider: 'auto', address: '127.0.0.1', port: 7471 }]);
  t.deepEqual(config.volumes, []);
  t.is(config.stateDir, DEFAULT_STATE_DIR);
  t.deepEqual(config.auth, { required: false, initiators: [] });
  t.deepEqual(config.warnings, [{ path: '', message: 'the file is empty: no volumes are served' }]);
});

test('a YAML syntax error reports js-yaml line and column', (t) => {
  const e = reject('listeners:\n  - provider: tcp\n    port: [7471\nvolumes: []\n');
  t.is(e.errors.length, 1);
  t.is(e.errors[0].path, '');
  t.is(e.errors[0].line, 4);
  t.is(typeof e.errors[0].column, 'number');
  t.regex(e.message, /^rblkd\.yaml:4:\d+: YAML syntax error: /);
});

test('a duplicated key is a YAML error on its line', (t) => {
  const e = reject('state_dir: /a\nlogging:\n  level: info\n  level: debug\n');
  t.is(e.errors[0].line, 4);
  t.regex(e.errors[0].message, /duplicated mapping key/);
});

test('an unknown key is named, placed, and gets a suggestion', (t) => {
  const e = reject('logging:\n  level: info\nvoulmes: []\n');
  t.deepEqual(e.errors, [{ path: 'voulmes', line: 3, message: "unknown key 'voulmes' (did you mean 'volumes'?)" }]);
  t.is(e.message, "rblkd.yaml:3: voulmes: unknown key 'voulmes' (did you mean 'volumes'?)");
});

test('an unknown key with nothing close gets no suggestion', (t) => {
  const e = reject('volumes:\n  - name: a\n    memory: true\n    size: 1MiB\n    colour: blue\n');
  t.deepEqual(e.errors, [{ path: 'volumes[0].colour', line: 5, message: "unknown key 'colour'" }]);
});

test('wrong types are reported with what was found', (t) => {
  const e = reject(
    [
      'listeners:',
      '  - port: "7471"', // 2
      'volumes:',
      '  - name: a', // 4
      '    memory: yes', // 5: YAML 1.2 reads yes as a string
      '    size: 1MiB',
      '    serial: 12345', // 7
      'auth: []', // 8
    ].join('\n'),
  );
  t.deepEqual(e.errors, [
    { path: 'listeners[0].port', line: 2, message: "must be an integer, not the string '7471'" },
    { path: 'volumes[0].memory', line: 5, message: "must be a boolean (true or false), not the string 'yes'" },
    { path: 'volumes[0].serial', line: 7, message: "must be a string, not the number 12345 (quote it: '12345')" },
    { path: 'auth', line: 8, message: 'must be a mapping, not a list' },
  ]);
});

test('enum and range errors name the allowed values', (t) => {
  const e = reject(
    [
      'listeners:',
      '  - provider: tpc',
      'limits:',
      '  queue_depth: 0',
      '  keepalive_ms: 999999999',
      'logging: {level: loud}',
    ].join('\n'),
  );
  t.deepEqual(
    e.message.split('\n'),
    [
      "rblkd.yaml:2: listeners[0].provider: must be 'tcp', 'sockets', 'verbs', 'shm', 'tcp;ofi_rxm', 'verbs;ofi_rxm', 'efa' or 'auto', not 'tpc' (did you mean 'tcp'?)",
      'rblkd.yaml:4: limits.queue_depth: must be at least 1, not 0',
      'rblkd.yaml:5: limits.keepalive_ms: must be at most 600000, not 999999999',
      "rblkd.yaml:6: logging.level: must be 'error', 'warn', 'info' or 'debug', not 'loud'",
    ],
  );
});

test('duplicate volume names, LUNs, paths and uuids are each reported at the second use', (t) => {
  const dir = tempDir(t);
  const e = reject(
    [
      'volumes:',
      '  - name: a', // 2
      '    path: one.img',
      '    size: 1MiB',
      '    lun: 3',
      '    uuid: 6f1c2b1e-8d7a-4c1f-9b2e-3a4d5e6f7a8b',
      '  - name: a', // 7
      '    path: one.img', // 8
      '    size: 1MiB',
      '    lun: 3', // 10
      '    uuid: 6F1C2B1E-8D7A-4C1F-9B2E-3A4D5E6F7A8B', // 11
    ].join('\n'),
    { stateDir: dir },
  );
  t.deepEqual(e.errors, [
    { path: 'volumes[1].name', line: 7, message: "volume name 'a' is already used by volumes[0]" },
    { path: 'volumes[1].path', line: 8, message: `backing path ${join(dir, 'one.img')} is already used by volumes[0]` },
    { path: 'volumes[1].lun', line: 10, message: 'LUN 3 is already used by volumes[0]' },
    {
      path: 'volumes[1].uuid',
      line: 11,
      message: 'uuid 6f1c2b1e-8d7a-4c1f-9b2e-3a4d5e6f7a8b is already used by volumes[0]',
    },
  ]);
});

test('LUNs are assigned lowest-free, in file order, around fixed ones', (t) => {
  const config = parseConfig(
    [
      'volumes:',
      '  - {name: a, memory: true, size: 1MiB}',
      '  - {name: b, memory: true, size: 1MiB, lun: 0}',
      '  - {name: c, memory: true, size: 1MiB}',
      '  - {name: d, memory: true, size: 1MiB, lun: 2}',
      '  - {name: e, memory: true, size: 1MiB}',
    ].join('\n'),
    'rblkd.yaml',
    NO_STATE,
  );
  t.deepEqual(
    config.volumes.map((v) => [v.name, v.lun]),
    [
      ['a', 1],
      ['b', 0],
      ['c', 3],
      ['d', 2],
      ['e', 4],
    ],
  );
});

test('bad size strings and sizes that do not fit the block size', (t) => {
  const e = reject(
    [
      'volumes:',
      '  - {name: a, memory: true, size: 12XB}', // 2
      '  - {name: b, memory: true, size: 1000}', // 3
      '  - {name: c, memory: true, size: 0}', // 4
      '  - {name: d, memory: true, size: 6KiB, block_size: 4096}', // 5
      'limits:',
      '  max_io: 1000000', // 7
      '  in_capsule_data: 1MiB', // 8
    ].join('\n'),
  );
  t.deepEqual(e.errors, [
    {
      path: 'volumes[0].size',
      line: 2,
      message: "invalid size '12XB' (write bytes, or a number with a unit such as 512MiB, 1GiB, 10GB)",
    },
    { path: 'volumes[1].size', line: 3, message: '1000 bytes is not a multiple of block_size 512' },
    { path: 'volumes[2].size', line: 4, message: 'must be greater than zero' },
    { path: 'volumes[3].size', line: 5, message: '6 KiB is not a multiple of block_size 4096' },
    { path: 'limits.max_io', line: 7, message: 'must be a power of two from 4 KiB to 16 MiB, not 1000000' },
    { path: 'limits.in_capsule_data', line: 8, message: 'must be from 0 to 64 KiB, not 1048576' },
  ]);
});

test('a bad block size', (t) => {
  const e = reject('volumes:\n  - name: a\n    memory: true\n    size: 1MiB\n    block_size: 1024\n');
  t.is(e.message, 'rblkd.yaml:5: volumes[0].block_size: must be 512 or 4096, not 1024');
});

test('physical_block_size: absent, 512 at 512-byte blocks, and smaller than block_size', (t) => {
  const volume = (extra: string): VolumeConfig => parseConfig(`volumes:\n  - name: a\n    memory: true\n    size: 1MiB\n${extra}`, 'rblkd.yaml', NO_STATE).volumes[0];
  t.is(volume('').physicalBlockSize, undefined);
  t.is(volume('    physical_block_size: 512\n').physicalBlockSize, 512);
  const e = reject('volumes:\n  - name: a\n    memory: true\n    size: 1MiB\n    block_size: 4096\n    physical_block_size: 512\n');
  t.is(e.message, 'rblkd.yaml:6: volumes[0].physical_block_size: 512 is smaller than block_size 4096');
});

test('io_engine: an unknown engine, and one on a memory volume', (t) => {
  const bad = reject('volumes:\n  - name: a\n    memory: true\n    size: 1MiB\n    io_engine: aio\n');
  t.is(bad.message, "rblkd.yaml:5: volumes[0].io_engine: must be 'auto', 'io_uring' or 'threads', not 'aio'");
  const mem = reject('volumes:\n  - name: a\n    memory: true\n    size: 1MiB\n    io_engine: threads\n');
  t.is(mem.message, 'rblkd.yaml:5: volumes[0].io_engine: applies only to volumes with a path');
});

test('a missing backing file without size, and one with size', (t) => {
  const dir = tempDir(t);
  const e = reject(
    ['volumes:', '  - name: a', `    path: ${dir}/missing.img`, '  - name: b', '    path: nodir/x.img', '    size: 1MiB'].join(
      '\n',
    ),
    { stateDir: dir },
  );
  t.deepEqual(e.errors, [
    {
      path: 'volumes[0].path',
      line: 3,
      message: `${dir}/missing.img does not exist (give size to have rblkd create it)`,
    },
    {
      path: 'volumes[1].path',
      line: 5,
      message: `cannot create ${dir}/nodir/x.img: directory ${dir}/nodir does not exist`,
    },
  ]);

  const ok = parseConfig(`volumes:\n  - {name: a, path: ${dir}/new.img, size: 4MiB}\n`, 'rblkd.yaml', NO_STATE);
  t.deepEqual(ok.volumes[0].backing, { kind: 'file', path: `${dir}/new.img`, size: 4 * 1024 * 1024 });
});

test('existing files: used at their size, grown, never shrunk', (t) => {
  const dir = tempDir(t);
  const img = put(dir, 'a.img', Buffer.alloc(8192));
  const config = parseConfig(`volumes:\n  - {name: a, path: ${img}}\n  - {name: b, path: ${img}x, size: 1MiB}\n`, 'x', NO_STATE);
  t.deepEqual(config.volumes[0].backing, { kind: 'file', path: img });

  const grown = parseConfig(`volumes:\n  - {name: a, path: ${img}, size: 16KiB}\n`, 'x', NO_STATE);
  t.deepEqual(grown.volumes[0].backing, { kind: 'file', path: img, size: 16384 });

  const e = reject(`volumes:\n  - name: a\n    path: ${img}\n    size: 4KiB\n`);
  t.deepEqual(e.errors, [
    {
      path: 'volumes[0].size',
      line: 4,
      message: `size 4 KiB is smaller than the existing file ${img} (8 KiB); rblkd never shrinks a backing file`,
    },
  ]);

  put(dir, 'empty.img', '');
  t.is(
    reject(`volumes:\n  - {name: a, path: ${dir}/empty.img}\n`).errors[0].message,
    `${dir}/empty.img is empty (give size to have rblkd grow it)`,
  );
  t.is(
    reject(`volumes:\n  - {name: a, path: ${dir}}\n`).errors[0].message,
    `${dir} is not a regular file or a block device`,
  );
});

test('path and memory: exactly one of them', (t) => {
  const e = reject(
    ['volumes:', '  - {name: a, memory: true, path: /x, size: 1MiB}', '  - {name: b}', '  - {name: c, memory: true}'].join(
      '\n',
    ),
  );
  t.deepEqual(e.errors, [
    { path: 'volumes[0]', line: 2, message: "give either path or 'memory: true', not both" },
    { path: 'volumes[1]', line: 3, message: "needs path (a file or block device), 'memory: true' or rbd (a Ceph RBD image)" },
    { path: 'volumes[2]', line: 4, message: "'memory: true' needs size" },
  ]);
});

test('a block device takes no size and defaults to O_DIRECT', (t) => {
  const dev = readdirSync('/dev')
    .map((n) => `/dev/${n}`)
    .find((p) => statSync(p).isBlockDevice());
  if (dev === undefined) return t.fail('no block device in /dev to test with (loop devices will do)');
  const e = reject(`volumes:\n  - {name: a, path: ${dev}, size: 1GiB}\n`);
  t.is(e.errors[0].message, `size applies only to files; ${dev} is a block device`);
  try {
    accessSync(dev, constants.R_OK | constants.W_OK);
  } catch {
    // Not root: the device is there but this user may not open it, which is reported as such.
    t.is(
      reject(`volumes:\n  - {name: a, path: ${dev}}\n`).errors[0].message,
      `${dev} cannot be opened for reading and writing (permission denied)`,
    );
    return;
  }
  const config = parseConfig(`volumes:\n  - {name: a, path: ${dev}}\n`, 'x', NO_STATE);
  t.deepEqual(config.volumes[0].backing, { kind: 'blockdev', path: dev });
  t.true(config.volumes[0].direct);
});

test('a secret file readable by others is refused with its mode', (t) => {
  const dir = tempDir(t);
  const key = put(dir, 'k', 'a-long-enough-secret-value\n', 0o644);
  const text = `auth:\n  required: true\n  initiators:\n    - name: host-a\n      secret_file: ${key}\n`;
  const e = reject(text);
  t.is(
    e.message,
    `rblkd.yaml:5: auth.initiators[0].secret_file: secret_file ${key} must not be readable by group or others (mode 0644)`,
  );

  put(dir, 'k', 'a-long-enough-secret-value\n', 0o620);
  t.is(
    reject(text).errors[0].message,
    `secret_file ${key} must not be writable or executable by group or others (mode 0620)`,
  );

  put(dir, 'k', 'a-long-enough-secret-value\n', 0o600);
  t.is(parseConfig(text, 'x').auth.initiators[0].secret, 'a-long-enough-secret-value');
  t.is(parseConfig(text, 'x', { secretOwner: process.geteuid?.() ?? 0 }).auth.initiators[0].secretFile, key);
});

test('a secret file owned by someone else, missing, or too short', (t) => {
  const dir = tempDir(t);
  const key = put(dir, 'k', 'a-long-enough-secret-value', 0o600);
  const euid = process.geteuid?.() ?? 0;
  const other = euid + 4242;
  const text = (file: string): string => `auth:\n  initiators:\n    - name: h\n      secret_file: ${file}\n`;
  t.is(
    reject(text(key), { secretOwner: other }).errors[0].message,
    `secret_file ${key} must be owned by the daemon's user (uid ${other}), not uid ${euid}`,
  );
  t.is(reject(text(`${dir}/nope`)).errors[0].message, `secret_file ${dir}/nope does not exist`);
  const short = put(dir, 'short', 'tiny\n', 0o400);
  t.is(reject(text(short)).errors[0].message, `the secret in ${short} must be at least 16 characters`);
});

test('auth: secret and secret_file, duplicates, and required with nobody listed', (t) => {
  const e = reject(
    [
      'auth:',
      '  required: true', // 2
      '  initiators:',
      '    - name: h1', // 4
      '      secret: short', // 5
      '    - name: h1', // 6
      '      secret: a-long-enough-secret-value',
      '      secret_file: /x', // 8? the issue is on the item
      '    - name: h2', // 9
    ].join('\n'),
  );
  t.deepEqual(e.errors, [
    { path: 'auth.initiators[0].secret', line: 5, message: 'the secret must be at least 16 characters' },
    { path: 'auth.initiators[1].name', line: 6, message: "initiator 'h1' is already listed at auth.initiators[0]" },
    { path: 'auth.initiators[1]', line: 6, message: 'give either secret or secret_file, not both' },
    { path: 'auth.initiators[2]', line: 9, message: 'needs secret or secret_file' },
  ]);
  t.is(
    reject('auth:\n  required: true\n').message,
    'rblkd.yaml:2: auth.required: is true but auth.initiators is empty: no initiator could log in',
  );
});

test('several errors at once, sorted by line, one per line of the message', (t) => {
  const dir = tempDir(t);
  const key = put(dir, 'k', 'a-long-enough-secret-value', 0o640);
  const text = [
    '# rblkd test', // 1
    'listeners:', // 2
    '  - provider: tcp', // 3
    '    address: 127.0.0.1', // 4
    '    port: 70000', // 5
    'volumes:', // 6
    '  - name: data', // 7
    '    memory: true', // 8
    '    size: 1GiB', // 9
    '  - name: data', // 10
    '    memory: true', // 11
    '    size: 2 GiB', // 12
    '    block_size: 520', // 13
    'auth:', // 14
    '  initiators:', // 15
    '    - name: host-a', // 16
    `      secret_file: ${key}`, // 17
    'limits:', // 18
    '  max_sesions: 4', // 19
  ].join('\n');
  const e = reject(text);
  t.deepEqual(
    e.errors.map((x) => [x.line, x.path]),
    [
      [5, 'listeners[0].port'],
      [10, 'volumes[1].name'],
      [13, 'volumes[1].block_size'],
      [17, 'auth.initiators[0].secret_file'],
      [19, 'limits.max_sesions'],
    ],
  );
  t.is(
    e.message,
    [
      'rblkd.yaml:5: listeners[0].port: must be at most 65535, not 70000',
      "rblkd.yaml:10: volumes[1].name: volume name 'data' is already used by volumes[0]",
      'rblkd.yaml:13: volumes[1].block_size: must be 512 or 4096, not 520',
      `rblkd.yaml:17: auth.initiators[0].secret_file: secret_file ${key} must not be readable by group or others (mode 0640)`,
      "rblkd.yaml:19: limits.max_sesions: unknown key 'max_sesions' (did you mean 'max_sessions'?)",
    ].join('\n'),
  );
});

test('listeners: bad addresses and overlapping ports', (t) => {
  const e = reject(
    [
      'listeners:',
      '  - {address: 0.0.0.0, port: 7471}', // 2
      '  - {address: 127.0.0.1, port: 7471}', // 3
      '  - {address: "not an address", port: 7472}', // 4
    ].join('\n'),
  );
  t.deepEqual(e.errors, [
    { path: 'listeners[1]', line: 3, message: '127.0.0.1 port 7471 overlaps listeners[0] (0.0.0.0)' },
    { path: 'listeners[2].address', line: 4, message: "'not an address' is not an IP address or a host name" },
  ]);
});

test('warnings: open network without auth, verbs on loopback, ACL name nobody has', (t) => {
  const config = parseConfig(
    [
      'listeners:',
      '  - {provider: verbs, address: 127.0.0.1}', // 2
      '  - {provider: tcp, address: 0.0.0.0, port: 7472}', // 3
      'volumes:',
      '  - {name: a, memory: true, size: 1MiB}',
    ].join('\n'),
    'rblkd.yaml',
    NO_STATE,
  );
  t.deepEqual(config.warnings, [
    {
      path: 'listeners[0].address',
      line: 2,
      message: 'the verbs provider cannot listen on loopback: use the RDMA interface address',
    },
    { path: 'listeners[1].address', line: 3, message: 'serves 0.0.0.0 without authentication (auth.required is false)' },
  ]);

  const acl = parseConfig(
    [
      'volumes:',
      '  - name: a',
      '    memory: true',
      '    size: 1MiB',
      '    acl:',
      '      - {initiator: "h*", access: rw}',
      '      - {initiator: ghost, access: ro}', // 7
      'auth:',
      '  required: true',
      '  initiators: [{name: h1, secret: a-long-enough-secret-value}]',
    ].join('\n'),
    'rblkd.yaml',
    NO_STATE,
  );
  t.deepEqual(acl.warnings, [
    {
      path: 'volumes[0].acl[1].initiator',
      line: 7,
      message: "no initiator named 'ghost' in auth.initiators: it can never log in",
    },
  ]);
});

test('pattern errors print a sentence, not the regular expression', (t) => {
  const e = reject(
    [
      'volumes:',
      '  - name: "has space"',
      '    memory: true',
      '    size: 1MiB',
      '    uuid: not-a-uuid',
      '    serial: "this serial is far too long"',
    ].join('\n'),
  );
  t.deepEqual(
    e.errors.map((x) => x.message),
    [
      "must be 1 to 64 characters of letters, digits and . _ -, not 'has space'",
      "must be an RFC 4122 UUID such as 6f1c2b1e-8d7a-4c1f-9b2e-3a4d5e6f7a8b, not 'not-a-uuid'",
      "must be 1 to 20 printable ASCII characters without spaces, not 'this serial is far too long'",
    ],
  );
});

test('a missing config file is a ConfigError naming the file', (t) => {
  const dir = tempDir(t);
  const e = t.throws(() => loadConfig(join(dir, 'nope.yaml')), { instanceOf: ConfigError });
  t.is(e?.message, `${join(dir, 'nope.yaml')}: does not exist`);
});

test('relative paths: volumes from state_dir, state_dir and secret files from the config directory', (t) => {
  const dir = tempDir(t);
  put(dir, 'etc/keys/h', 'a-long-enough-secret-value', 0o600);
  const file = put(
    dir,
    'etc/rblkd.yaml',
    [
      'state_dir: ../state',
      'volumes: [{name: v, path: v.img, size: 1MiB}]',
      'auth: {initiators: [{name: h, secret_file: keys/h}]}',
    ].join('\n'),
  );
  const config = loadConfig(file);
  t.is(config.stateDir, join(dir, 'state'));
  t.deepEqual(config.volumes[0].backing, { kind: 'file', path: join(dir, 'state', 'v.img'), size: 1048576 });
  t.is(config.auth.initiators[0].secretFile, join(dir, 'etc/keys/h'));
});

test('rbd volumes: pool and image, files relative to the config, and the size is the image\'s', (t) => {
  const dir = tempDir(t);
  put(dir, 'ceph/ceph.conf', '[global]\n');
  put(dir, 'ceph/rblk.keyring', '[client.rblk]\n', 0o600);
  const config = parseConfig(
    ['volumes:', '  - name: db', '    rbd: {pool: rbd, image: db0, namespace: ns, conf: ceph/ceph.conf, client_id: rblk, keyring: ceph/rblk.keyring}'].join('\n'),
    'rblkd.yaml',
    { baseDir: dir, stateDir: join(dir, 'state') },
  );
  t.deepEqual(config.volumes[0].backing, {
    kind: 'rbd',
    pool: 'rbd',
    image: 'db0',
    namespace: 'ns',
    conf: join(dir, 'ceph/ceph.conf'),
    clientId: 'rblk',
    keyring: join(dir, 'ceph/rblk.keyring'),
    timeoutSeconds: 30,
    fastPath: true,
  });
  t.false(config.volumes[0].direct);

  const e = reject(
    [
      'volumes:',
      '  - {name: a, size: 1MiB, rbd: {pool: rbd, image: a}}',
      '  - {name: b, rbd: {pool: rbd, image: b, conf: /nonexistent/ceph.conf}}',
      '  - {name: c, path: /x, rbd: {pool: rbd, image: c}}',
      '  - {name: d, io_engine: threads, rbd: {pool: rbd, image: d}}',
      '  - {name: e, rbd: {pool: rbd, image: d}}',
      '  - {name: f, rbd: {image: f, timeout_s: 0}}',
    ].join('\n'),
    { baseDir: dir, stateDir: join(dir, 'state') },
  );
  t.deepEqual(
    e.errors.map((i) => `${i.path}: ${i.message}`),
    [
      "volumes[0].size: an rbd volume's size is its image's: grow the image with `rbd resize`, and rblkd follows",
      'volumes[1].rbd.conf: /nonexistent/ceph.conf does not exist',
      "volumes[2]: give either path or rbd, not both",
      'volumes[3].io_engine: applies only to volumes with a path',
      'volumes[4].rbd: rbd image rbd/d (of the default ceph.conf) is already used by volumes[3]',
      "volumes[5].rbd: missing required key 'pool'",
      'volumes[5].rbd.timeout_s: must be at least 1, not 0',
    ],
  );
});
