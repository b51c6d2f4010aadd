// The shared connection flags become connect() options, and are passed on
// unchanged to a helper process (mount's), --fast-path and --busy-poll-us included.
import test from 'ava';
import { connectionArgv, connectOptions } from '../../initiator/cli/target-args.js';
import { resolveOptions } from '../../initiator/options.js';

test('--fast-path off turns the initiator fast path off; absent, it stays on', (t) => {
  const off = connectOptions({ 'connect-timeout': '10s', 'fast-path': 'off' });
  t.is(off.fastPath, false);
  t.is(resolveOptions('rblk://127.0.0.1/vol0', off).fastPath, false);
  t.is(connectOptions({ 'connect-timeout': '10s', 'fast-path': 'on' }).fastPath, true);
  const absent = connectOptions({ 'connect-timeout': '10s' });
  t.false('fastPath' in absent);
  t.is(resolveOptions('rblk://127.0.0.1/vol0', absent).fastPath, true);
});

test('a helper process gets --fast-path as it was given', (t) => {
  t.deepEqual(connectionArgv({ 'connect-timeout': '5s', 'fast-path': 'off' }), ['--connect-timeout', '5s', '--fast-path', 'off']);
  t.deepEqual(connectionArgv({ 'connect-timeout': '5s' }), ['--connect-timeout', '5s']);
});

test('--busy-poll-us becomes busyPollMicros, is checked as a usage error, and reaches a helper process', (t) => {
  t.is(connectOptions({ 'connect-timeout': '10s', 'busy-poll-us': '50' }).busyPollMicros, 50);
  t.is(resolveOptions('rblk://127.0.0.1/vol0', connectOptions({ 'connect-timeout': '10s', 'busy-poll-us': '50' })).busyPollMicros, 50);
  t.false('busyPollMicros' in connectOptions({ 'connect-timeout': '10s' }));
  for (const bad of ['-1', '2.5', 'fast', '']) {
    t.throws(() => connectOptions({ 'connect-timeout': '10s', 'busy-poll-us': bad }), { name: 'UsageError', message: /--busy-poll-us .*whole number of microseconds/ }, bad);
  }
  // Too long a spin is connect()'s RangeError, which the CLI also reports as a usage error (exit 2).
  t.throws(() => resolveOptions('rblk://127.0.0.1/vol0', connectOptions({ 'connect-timeout': '10s', 'busy-poll-us': '10001' })), { instanceOf: RangeError, message: /busyPollMicros 10001 is not an integer in 0\.\.10000/ });
  t.deepEqual(connectionArgv({ 'connect-timeout': '5s', 'busy-poll-us': '50' }), ['--connect-timeout', '5s', '--busy-poll-us', '50']);
});
