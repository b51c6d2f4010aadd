// The alua key (docs/operations.md "Several gateways"): this gateway's target
// port group and state, and its peers'.
import test from 'ava';
import { parseConfig } from '../../config/loader.js';
import { planReload } from '../../target/daemon/reload-plan.js';

const parse = (text: string) => parseConfig(`volumes: []\n${text}`, 'rblkd.yaml', { stateDir: '/x' });

test('no alua key: no target port groups', (t) => {
  t.is(parse('').alua, null);
});

test('alua: defaults are active/optimized here, active/non-optimized for peers, relative port = group', (t) => {
  t.deepEqual(parse('alua:\n  group: 2\n  peers:\n    - group: 1\n    - { group: 3, state: standby, relative_port: 30 }\n').alua, {
    local: { group: 2, state: 'active-optimized', relativePort: 2 },
    peers: [
      { group: 1, state: 'active-non-optimized', relativePort: 1 },
      { group: 3, state: 'standby', relativePort: 30 },
    ],
  });
  t.is(parse('alua: { group: 1, state: unavailable }\n').alua?.local.state, 'unavailable');
});

test('alua refuses bad states, group 0, and a group or relative port named twice', (t) => {
  t.regex(t.throws(() => parse('alua: { group: 1, state: sleepy }\n'))?.message ?? '', /alua\.state/);
  t.regex(t.throws(() => parse('alua: { group: 0 }\n'))?.message ?? '', /alua\.group/);
  t.regex(t.throws(() => parse('alua: { state: standby }\n'))?.message ?? '', /group/);
  t.regex(t.throws(() => parse('alua: { group: 1, peers: [ { group: 1 } ] }\n'))?.message ?? '', /target port group 1 is named twice/);
  t.regex(t.throws(() => parse('alua: { group: 1, peers: [ { group: 2, relative_port: 1 } ] }\n'))?.message ?? '', /relative target port 1 is named twice/);
});

test('a reload may change the state but not add or remove alua', (t) => {
  const a = parse('alua: { group: 1 }\n');
  const b = parse('alua: { group: 1, state: standby }\n');
  const none = parse('');
  t.deepEqual(planReload(a, b).refusals, []);
  t.regex(planReload(none, a).refusals.join('\n'), /alua cannot be added/);
  t.regex(planReload(a, none).refusals.join('\n'), /alua cannot be removed/);
});
