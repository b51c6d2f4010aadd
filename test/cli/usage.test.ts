// Errors that need no target: usage errors exit 2, an unreachable target
// exits 1, each one line on stderr with no stack trace unless --debug.
import test from 'ava';
import { existsSync } from 'node:fs';
import { closedPort, rblk } from './helpers/cli.js';

const usageErrors: Array<[string, string[], RegExp]> = [
  ['no command', [], /^rblk: no command given \(see --help\)\n$/],
  ['an unknown command', ['frobnicate'], /^rblk: unknown command 'frobnicate': the commands are /],
  ['a URL of another scheme', ['info', 'http://127.0.0.1/vol0'], /^rblk: "http:\/\/127\.0\.0\.1\/vol0" is not an rblk:\/\/ URL\n$/],
  ['a secret in the URL', ['info', 'rblk://user:pw@127.0.0.1/vol0'], /^rblk: rblk URLs carry no secrets/],
  ['a URL without a volume', ['info', 'rblk://127.0.0.1'], /^rblk: "rblk:\/\/127\.0\.0\.1" names no volume/],
  ['--secret on the command line', ['info', 'rblk://127.0.0.1/vol0', '--secret=abcdefghijklmnopqrstu'], /^rblk: --secret is not accepted: put the secret in a file/],
  ['bench writes without --yes', ['bench', 'rblk://127.0.0.1/vol0', '--rw', 'write'], /^rblk: bench --rw write overwrites the volume's data: pass --yes/],
  ['verify without --yes or --read-only', ['verify', 'rblk://127.0.0.1/vol0'], /^rblk: verify overwrites the range with its pattern: pass --yes/],
  ['mount --mkfs without --yes', ['mount', 'rblk://127.0.0.1/vol0', '/nonexistent/mnt', '--mkfs', 'ext4'], /^rblk: --mkfs ext4 destroys the data on the volume: pass --yes/],
  ['a bad size', ['read', 'rblk://127.0.0.1/vol0', '--offset', '12 parsecs'], /^rblk: --offset: invalid size '12 parsecs'/],
  ['a bad duration', ['bench', 'rblk://127.0.0.1/vol0', '--runtime', 'soon'], /^rblk: --runtime: invalid duration 'soon'/],
  ['--runtime with --size', ['bench', 'rblk://127.0.0.1/vol0', '--runtime', '1s', '--size', '1m'], /^rblk: give --runtime or --size, not both/],
  ['--fuse with --nbd-port', ['attach', 'rblk://127.0.0.1/vol0', '--fuse', '/tmp/x', '--nbd-port', '1'], /^rblk: Arguments fuse and nbd-port are mutually exclusive/],
  ['a bad bench choice', ['bench', 'rblk://127.0.0.1/vol0', '--pattern', 'zigzag'], /^rblk: --pattern zigzag is not one of rand, seq \(see --help\)\n$/],
  ['a bad --fast-path', ['info', 'rblk://127.0.0.1/vol0', '--fast-path', 'maybe'], /^rblk: --fast-path maybe is not one of on, off \(see --help\)\n$/],
];

for (const [what, args, message] of usageErrors) {
  test(`${what}: exit 2 and one line`, async (t) => {
    const r = await rblk(args);
    t.is(r.code, 2, r.stderr);
    t.regex(r.stderr, message);
    t.is(r.stderr.trimEnd().split('\n').length, 1, 'one line');
    t.is(r.out, '');
  });
}

test('an unreachable target: exit 1, LOGIN_FAILED, no stack trace', async (t) => {
  const port = await closedPort();
  const r = await rblk(['info', `rblk://127.0.0.1:${port}/vol0?provider=tcp`]);
  t.is(r.code, 1);
  t.regex(r.stderr, new RegExp(`^rblk: connection refused at 127\\.0\\.0\\.1:${port}: .* \\(FI_ECONNREFUSED\\) \\[LOGIN_FAILED\\]\\n$`));
  t.notRegex(r.stderr, /\n\s+at /);
});

test('--debug adds the stack trace', async (t) => {
  const port = await closedPort();
  const r = await rblk(['discover', `127.0.0.1:${port}`, '--provider', 'tcp', '--debug']);
  t.is(r.code, 1);
  t.regex(r.stderr, /^rblk: connection refused at/);
  t.regex(r.stderr, /\n\s+at /);
});

// Where the nbd module is loaded there is nothing to check: a skip, not a pass.
(existsSync('/sys/module/nbd') ? test.skip : test)('--nbd-device without the nbd module is a clear error', async (t) => {
  const r = await rblk(['attach', 'rblk://127.0.0.1:1/vol0?provider=tcp', '--nbd-device', '/dev/nbd0']);
  t.is(r.code, 1);
  t.is(r.stderr, 'rblk: the nbd kernel module is not loaded (modprobe nbd), so there is no /dev/nbdN\n');
});
