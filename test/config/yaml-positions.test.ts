import test from 'ava';
import { parseYamlWithPositions } from '../../config/yaml-positions.js';

const text = [
  '# leading comment', // 1
  'name: limits', // 2: a value equal to a later key
  'limits:', // 3
  '  # a comment before the first key', // 4
  '  queue_depth:', // 5
  '    128', // 6
  'volumes:', // 7
  '- name: a', // 8: sequence at the parent's indentation
  '  acl:', // 9
  '    - {initiator: "x*", access: ro}', // 10
  '    - initiator: y', // 11
  '      access: rw', // 12
  '- {name: b, size: 1MiB}', // 13
  'ports: [1, 2,', // 14
  '  3]', // 15
].join('\n');

test('keys map to the line they are written on', (t) => {
  const doc = parseYamlWithPositions(text, 'x.yaml');
  t.is(doc.lineOf(['limits']), 3);
  t.is(doc.lineOf(['limits', 'queue_depth']), 5);
  t.is(doc.lineOf(['volumes', 0, 'name']), 8);
  t.is(doc.lineOf(['volumes', 0, 'acl', 0, 'access']), 10);
  t.is(doc.lineOf(['volumes', 0, 'acl', 1, 'access']), 12);
  t.is(doc.lineOf(['volumes', 1, 'size']), 13);
});

test('collections and sequence items map to where their content starts', (t) => {
  const doc = parseYamlWithPositions(text, 'x.yaml');
  t.is(doc.lineOf([]), 2);
  t.is(doc.lineOf(['volumes', 0]), 8);
  t.is(doc.lineOf(['volumes', 1]), 13);
  t.is(doc.lineOf(['volumes', 0, 'acl', 1]), 11);
  t.is(doc.lineOf(['ports', 2]), 15);
});

test('a path that goes beyond the source stops at the deepest part found', (t) => {
  const doc = parseYamlWithPositions(text, 'x.yaml');
  t.is(doc.lineOf(['volumes', 1, 'missing']), 13);
  t.is(doc.lineOf(['volumes', 7]), 7);
  t.is(doc.lineOf(['nothing', 'here']), 2);
});

test('the data is what js-yaml returns', (t) => {
  const doc = parseYamlWithPositions(text, 'x.yaml');
  t.deepEqual(doc.data, {
    name: 'limits',
    limits: { queue_depth: 128 },
    volumes: [
      {
        name: 'a',
        acl: [
          { initiator: 'x*', access: 'ro' },
          { initiator: 'y', access: 'rw' },
        ],
      },
      { name: 'b', size: '1MiB' },
    ],
    ports: [1, 2, 3],
  });
});
