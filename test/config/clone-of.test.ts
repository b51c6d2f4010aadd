// clone_of of an rbd volume (docs/operations.md "Snapshots and clones"):
// POOL/IMAGE@SNAP or VOLUME@SNAP of an rbd volume of the same file, resolved
// to the parent image and snapshot the first open clones; refused, on its
// line, where librbd could not clone into this volume's image (another pool
// or namespace, itself, a snapshot volume, a volume of another kind), and
// POOL/IMAGE@SNAP refused for a file volume. The cluster is asked only at the
// open (test/daemon/rbd-snapshot.test.ts).
import test from 'ava';
import { parseConfig } from '../../config/loader.js';

const parse = (volumes: string) => parseConfig(`volumes:\n${volumes}`, 'rblkd.yaml', { stateDir: '/x' });
const rbdOf = (v: { backing: unknown }) => v.backing as { kind: string; image: string; cloneOf?: string; cloneParent?: { image: string; snapshot: string } };

test('rbd clone_of: POOL/IMAGE@SNAP, POOL/NS/IMAGE@SNAP and VOLUME@SNAP name the parent image and its snapshot', (t) => {
  const c = parse(
    [
      '  - { name: base, rbd: { pool: rbd, image: base } }',
      '  - { name: a, rbd: { pool: rbd, image: a }, clone_of: rbd/base@gold }',
      '  - { name: b, rbd: { pool: rbd, image: b }, clone_of: base@gold }',
      '  - { name: c, rbd: { pool: rbd, namespace: ns1, image: c }, clone_of: rbd/ns1/other@s.1 }',
    ].join('\n'),
  );
  t.deepEqual(
    c.volumes.map((v) => rbdOf(v).cloneParent),
    [undefined, { image: 'base', snapshot: 'gold' }, { image: 'base', snapshot: 'gold' }, { image: 'other', snapshot: 's.1' }],
  );
  t.is(rbdOf(c.volumes[1]!).cloneOf, 'rbd/base@gold');
});

test('rbd clone_of refused where librbd could not clone into this image, each on its line', (t) => {
  const base = '  - { name: base, rbd: { pool: rbd, image: base } }\n';
  for (const [vol, why] of [
    ['{ name: a, rbd: { pool: rbd, image: a }, clone_of: other/base@gold }', /volumes\[1\]\.clone_of: other\/base@gold: a clone is made in its parent's pool, and this volume's image is rbd\/a/],
    ['{ name: a, rbd: { pool: rbd, image: a }, clone_of: rbd/ns/base@gold }', /a clone is made in its parent's pool and namespace/],
    ['{ name: a, rbd: { pool: rbd, image: a }, clone_of: rbd/a@gold }', /volumes\[1\]\.clone_of: rbd\/a@gold: names this volume's own image/],
    ['{ name: a, rbd: { pool: rbd, image: a, snapshot: s }, read_only: true, clone_of: rbd/base@gold }', /volumes\[1\]\.clone_of: a volume that serves a snapshot \(rbd\.snapshot\) is no clone/],
    ['{ name: a, rbd: { pool: rbd, image: a }, clone_of: nosuch@gold }', /volumes\[1\]\.clone_of: names no other rbd volume 'nosuch' of this file/],
    ['{ name: a, rbd: { pool: other, image: a }, clone_of: base@gold }', /volumes\[1\]\.clone_of: volume base is rbd rbd\/base: a clone is made beside its parent, in the same pool/],
    ['{ name: a, path: /x/a.img, clone_of: rbd/base@gold }', /volumes\[1\]\.clone_of: POOL\/IMAGE@SNAP is for rbd volumes/],
    ['{ name: a, memory: true, size: 1MiB, clone_of: base@gold }', /volumes\[1\]\.clone_of: applies only to file and rbd volumes/],
    ['{ name: a, rbd: { pool: rbd, image: a }, clone_of: "rbd/base@"}', /volumes\[1\]\.clone_of: must be VOLUME@SNAPSHOT.*or for an rbd volume POOL\/IMAGE@SNAPSHOT/],
  ] as const) {
    const e = t.throws(() => parse(`${base}  - ${vol}\n`), undefined, vol);
    t.regex(e?.message ?? '', why, vol);
    t.regex(e?.message ?? '', /rblkd\.yaml:3/, vol);
  }
});
