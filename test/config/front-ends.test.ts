// Front ends by name (target/front-end/registry.ts, docs/architecture.md "Front ends by
// name"): the config takes its protocols and default ports from the registry, and the
// daemon, the config and the reload plan never branch on a protocol's name, so a new
// front end is its own folder and one registry line.
import test from 'ava';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { configSchema } from '../../config/schema.js';
import { FRONT_END_NAMES, FRONT_ENDS, frontEndOf, listenerName } from '../../target/front-end/registry.js';
import { parseConfig } from '../../config/loader.js';

const ROOT = new URL('../../', import.meta.url).pathname;

test('the schema accepts exactly the registered front ends', (t) => {
  const listeners = (configSchema.properties as Record<string, { items: { properties: { protocol: { enum: string[] } } } }>).listeners!;
  t.deepEqual(listeners.items.properties.protocol.enum, [...FRONT_END_NAMES]);
  t.deepEqual([...FRONT_END_NAMES], ['rblk', 'iscsi', 'nvme-tcp']);
});

test('each front end brings its default port and its listeners\' names', (t) => {
  for (const f of FRONT_ENDS) {
    const c = parseConfig(`listeners:\n  - protocol: ${f.name}\n    address: 127.0.0.1\nvolumes: []\n`, 'rblkd.yaml', { stateDir: '/x' });
    t.is(c.listeners[0]!.port, f.defaultPort, `${f.name}'s listener takes its default port`);
    t.is(c.listeners[0]!.protocol, f.name);
  }
  t.is(frontEndOf('rblk').defaultPort, 7471);
  t.is(frontEndOf('iscsi').defaultPort, 3260);
  t.is(frontEndOf('nvme-tcp').defaultPort, 4420);
  t.is(listenerName({ protocol: 'rblk', provider: 'sockets', address: '10.0.0.1', port: 7471 }), 'sockets 10.0.0.1:7471');
  t.is(listenerName({ protocol: 'iscsi', provider: 'tcp', address: '10.0.0.1', port: 3260 }, ':'), 'iscsi:10.0.0.1:3260');
  t.is(listenerName({ protocol: 'nvme-tcp', provider: 'tcp', address: '10.0.0.1', port: 4420 }), 'nvme-tcp 10.0.0.1:4420');
});

test('no file of the daemon or the config names a front end\'s protocol', (t) => {
  const names = FRONT_END_NAMES.filter((n) => n !== 'rblk');
  const files = [...readdirSync(join(ROOT, 'config')).map((f) => join('config', f)), ...readdirSync(join(ROOT, 'target/daemon')).map((f) => join('target/daemon', f))].filter((f) => f.endsWith('.ts'));
  t.true(files.length > 10);
  const found: string[] = [];
  for (const f of files) {
    const text = readFileSync(join(ROOT, f), 'utf8');
    for (const n of names) if (new RegExp(`['"\`]${n}['"\`]`).test(text)) found.push(`${f} names '${n}'`);
  }
  t.deepEqual(found, []);
});
