import test from 'ava';
import { ConfigError } from '../../config/config-error.js';
import { parseConfig } from '../../config/loader.js';

test('an iSCSI listener defaults to port 3260 and is keyed apart from rblk listeners', (t) => {
  const c = parseConfig('listeners:\n  - provider: tcp\n  - protocol: iscsi\n    address: 127.0.0.1\nvolumes: []\n', 'rblkd.yaml', { stateDir: '/x' });
  t.is(c.listeners[0].protocol, 'rblk');
  t.is(c.listeners[0].port, 7471);
  t.is(c.listeners[1].protocol, 'iscsi');
  t.is(c.listeners[1].port, 3260);
});

test('an iSCSI listener with a provider is refused on its line', (t) => {
  const e = t.throws(() => parseConfig('listeners:\n  - protocol: iscsi\n    provider: verbs\nvolumes: []\n', 'rblkd.yaml', { stateDir: '/x' }), { instanceOf: ConfigError });
  t.regex(e.message, /rblkd.yaml:3: listeners\[0\].provider: .*takes no provider/);
});

test('an unknown protocol is refused', (t) => {
  t.throws(() => parseConfig('listeners:\n  - protocol: nvme\nvolumes: []\n', 'rblkd.yaml', { stateDir: '/x' }), { instanceOf: ConfigError });
});
