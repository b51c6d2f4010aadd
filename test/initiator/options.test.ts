// rblk:// URLs and connect() options: parsing, defaults, and the rule that no
// secret travels in a URL.
import { hostname } from 'node:os';
import { inspect } from 'node:util';
import test from 'ava';
import { DEFAULT_TARGET_NAME, DEFAULTS, parseRblkUrl } from '../../initiator/index.js';
import { resolveOptions } from '../../initiator/options.js';
import { checkSuiteResources, warmUpFabric } from '../helpers/resources.js';

// Every session this file opens gives its fds back (docs/target.md "Resources per connection").
checkSuiteResources(test, { warmUp: () => warmUpFabric() });

test('a URL names host, port, volume, provider and names', (t) => {
  t.deepEqual(parseRblkUrl('rblk://10.0.0.5:7000/db?provider=verbs&initiator=iqn.2026-11.io.rblk:h1&target=iqn.2026-11.io.rblk:t1'), {
    address: '10.0.0.5',
    port: 7000,
    volume: 'db',
    provider: 'verbs',
    initiatorName: 'iqn.2026-11.io.rblk:h1',
    targetName: 'iqn.2026-11.io.rblk:t1',
  });
  t.deepEqual(parseRblkUrl('rblk://storage.example'), { address: 'storage.example', port: 7471 });
  t.deepEqual(parseRblkUrl('rblk://[::1]/my%20vol'), { address: '::1', port: 7471, volume: 'my vol' });
});

test('malformed URLs and URLs with secrets are refused', (t) => {
  const refuse = (url: string, message: string) => t.throws(() => parseRblkUrl(url), { instanceOf: RangeError, message });
  refuse('http://host/vol', '"http://host/vol" is not an rblk:// URL');
  refuse('not a url', '"not a url" is not a valid URL (expected rblk://host[:port]/volume)');
  refuse('rblk://user:pw@host/vol', 'rblk URLs carry no secrets: pass the secret in the options, RBLK_SECRET or a secret file');
  refuse('rblk://host/vol?secret=abc', 'rblk URLs carry no secrets: pass the secret in the options, RBLK_SECRET or a secret file');
  refuse('rblk://host/a/b', '"rblk://host/a/b": the path must be a single volume name');
  refuse('rblk://host/v?colour=red', '"rblk://host/v?colour=red": unknown parameter "colour" (known: provider, initiator, target)');
  refuse('rblk://host/v?provider=', '"rblk://host/v?provider=": parameter "provider" is empty');
});

test('defaults, and explicit options over the URL', (t) => {
  const o = resolveOptions('rblk://h/v?provider=tcp', { port: 9000 }, {});
  t.like(o, {
    address: 'h',
    port: 9000,
    provider: 'tcp',
    volume: 'v',
    initiatorName: `iqn.2026-11.io.rblk:${hostname()}`,
    targetName: DEFAULT_TARGET_NAME,
    secret: undefined,
    queueDepth: DEFAULTS.queueDepth,
    connections: 1,
    maxIo: 1 << 20,
    keepAliveMs: 0,
    commandTimeoutMs: 30_000,
    abortTimeoutMs: 5_000,
    lossTimeoutMs: 30_000,
    reconnectInitialMs: 100,
    reconnectMaxMs: 1_000,
    busyRetries: 5,
  });
  t.is(DEFAULT_TARGET_NAME, 'iqn.2026-11.io.rblk:target');
  const timeouts = resolveOptions({ address: 'h', timeouts: { commandMs: 5 } }, { timeouts: { lossMs: 7 } }, {});
  t.like(timeouts, { commandTimeoutMs: 5, lossTimeoutMs: 7, abortTimeoutMs: 5_000 });
  const fromEnv = resolveOptions({ address: 'h' }, {}, { RBLK_SECRET: 'sixteen bytes ok' });
  t.is(fromEnv.secret?.reveal(), 'sixteen bytes ok');
  t.is(resolveOptions({ address: 'h', secret: 'from the options!' }, {}, { RBLK_SECRET: 'sixteen bytes ok' }).secret?.reveal(), 'from the options!');
  // The secret never shows in logs.
  t.false(inspect(fromEnv).includes('sixteen'));
  t.false(JSON.stringify(fromEnv).includes('sixteen'));
  t.is(`${fromEnv.secret}`, '[secret]');
  t.throws(() => resolveOptions({ address: 'h', secret: 'short' }, {}, {}), { message: 'the secret is 5 bytes; at least 16 are needed' });
  t.throws(() => resolveOptions({ address: 'h', connections: 0 }, {}, {}), { instanceOf: RangeError, message: 'connections 0 is not an integer in 1..64' });
  t.throws(() => resolveOptions({ address: '' }, {}, {}), { instanceOf: RangeError, message: 'an address is required' });
});
